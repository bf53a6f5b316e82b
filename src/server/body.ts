import type { IncomingMessage } from 'node:http';
import { gunzip, inflate } from 'node:zlib';
import { inflateOptions } from './inflate.js';
import { promisify } from 'node:util';
import { ConsumeError } from '../audit/consumer.js';

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);

// inflateOptions lives in inflate.ts, which imports nothing else, so the decode workers (decode-worker.ts) load only it.
export { inflateOptions } from './inflate.js';

/** A body's content-encoding as the readers accept it. */
export type BodyEncoding = 'identity' | 'gzip' | 'deflate';

/** Where a body with a declared length is read into: a buffer of exactly `size` bytes and the function that hands it back. */
export interface BodyLeases {
  take(size: number): { buf: Buffer; release: () => void };
}

/**
 * Reusable receive buffers for bodies that are read, decoded at once and dropped (OTLP export requests): a
 * multi-megabyte body is then copied chunk by chunk into memory that is already mapped and warm, instead of
 * collecting the chunks and concatenating them into a fresh allocation per request (a second pass over the
 * bytes, page faults on the new pages, and garbage the collector must chase). Bounded: at most `maxPooled`
 * buffers of at most `maxPooledBytes` each are kept; larger or excess bodies get their own allocation.
 */
export class BodyBuffers implements BodyLeases {
  private readonly free: Buffer[] = [];

  constructor(
    private readonly maxPooled = 8,
    private readonly maxPooledBytes = 8 * 1024 * 1024,
  ) {}

  /** A buffer of exactly `size` bytes (uninitialised) and the function that hands its memory back. */
  take(size: number): { buf: Buffer; release: () => void } {
    if (size > this.maxPooledBytes) return { buf: Buffer.allocUnsafeSlow(size), release: () => {} };
    let i = this.free.findIndex((b) => b.length >= size);
    if (i < 0 && this.free.length > 0) i = 0; // too small: replaced by a larger one below
    let backing = i >= 0 ? this.free.splice(i, 1)[0] : undefined;
    if (backing === undefined || backing.length < size) {
      backing = Buffer.allocUnsafeSlow(Math.min(this.maxPooledBytes, Math.max(size, 1 << 20)));
    }
    const kept = backing;
    let released = false;
    return {
      buf: kept.subarray(0, size),
      release: () => {
        if (released) return;
        released = true;
        if (this.free.length < this.maxPooled) this.free.push(kept);
      },
    };
  }
}

/**
 * The bytes of request bodies being read at once, across every HTTP listener (--max-body-total): a body takes its
 * declared length (a body without one, the per-request limit) before a byte of it is read, and gives it back once it
 * is read (or failed). Past the budget a request is refused at once, 503 + Retry-After, so connections that each
 * send most of a large body and stall cannot grow memory by their sum.
 */
export class BodyBudget {
  private used = 0;

  constructor(readonly capacity: number) {}

  /** Bytes taken by bodies being read now. */
  get inUse(): number {
    return this.used;
  }

  /**
   * Takes what `req`'s body may need (its declared length, else `limit`); throws ConsumeError 'body_budget' when
   * that is not free (the body is left unread: the caller drains or closes it). Returns the release, idempotent.
   */
  take(req: IncomingMessage, limit: number): () => void {
    const declared = Number(req.headers['content-length'] ?? NaN);
    // A declared length past the limit is refused by the reader (413) without reading: it takes nothing here.
    const size = Number.isInteger(declared) && declared >= 0 ? (declared > limit ? 0 : declared) : limit;
    if (size > 0 && this.used + size > this.capacity) {
      throw new ConsumeError('body_budget', `request bodies being read hold ${this.used} of ${this.capacity} bytes (--max-body-total); retry later`);
    }
    this.used += size;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= size;
    };
  }
}

/** Reads a body with its share of `budget` taken first (refused, unread, when it is not free) and given back after. */
export async function withinBodyBudget<T>(req: IncomingMessage, budget: BodyBudget | undefined, limit: number, read: () => Promise<T>): Promise<T> {
  let giveBack: () => void;
  try {
    giveBack = budget ? budget.take(req, limit) : () => {};
  } catch (e) {
    req.resume(); // drained, never kept
    throw e;
  }
  try {
    return await read();
  } finally {
    giveBack();
  }
}

/**
 * Read a request body, refusing more than `limit` bytes on the wire and, after decompression, more than `limit`
 * bytes of content (a gzip bomb stops at the limit: zlib's maxOutputLength, never an unbounded buffer).
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const { body } = await readBodyInto(req, limit, null);
  return body;
}

/**
 * readBody for a body used once, synchronously, and then dropped: with a declared length and no content
 * encoding it is read into a buffer from `pool`. The caller must call `release` once it no longer reads `body`
 * (and must keep no view of it: the memory is reused for a later request).
 */
export async function readBodyInto(req: IncomingMessage, limit: number, pool: BodyLeases | null): Promise<{ body: Buffer; release: () => void }>;
/**
 * With `inflate` false (`serve --workers`: a decode worker inflates it, with the same limit), a gzip or deflate body
 * is returned as received, with its encoding; an unsupported encoding is refused (415) all the same. `compressed`:
 * where such a body is read (the decode pool's shared buffers, DecodePool.take: the worker reads it there, no second
 * copy); `pool` otherwise.
 */
export async function readBodyInto(req: IncomingMessage, limit: number, pool: BodyLeases | null, inflate: false, compressed?: BodyLeases): Promise<{ body: Buffer; release: () => void; encoding: BodyEncoding }>;
export async function readBodyInto(req: IncomingMessage, limit: number, pool: BodyLeases | null, inflate = true, compressed?: BodyLeases): Promise<{ body: Buffer; release: () => void; encoding?: BodyEncoding }> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new ConsumeError('too_large', `request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
  }
  const enc = String(req.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  const identity = enc === 'identity' || enc === '';
  if (!identity && enc !== 'gzip' && enc !== 'deflate') {
    req.resume();
    throw new ConsumeError('bad_content_type', `unsupported content-encoding "${enc.slice(0, 40)}" (gzip, deflate or identity)`);
  }
  let raw: Buffer;
  let release = () => {};
  const into = !identity && !inflate && compressed ? compressed : pool;
  if (into !== null && Number.isInteger(declared) && declared > 0) {
    // The HTTP parser delivers exactly the declared length (or the request fails), so the chunks fill the buffer.
    const lease = into.take(declared);
    let size = 0;
    try {
      for await (const chunk of req) {
        const c = chunk as Buffer;
        if (size + c.length > declared) throw new ConsumeError('bad_request', 'request body longer than its content-length');
        c.copy(lease.buf, size);
        size += c.length;
      }
    } catch (e) {
      lease.release();
      throw e;
    }
    if (size !== declared) {
      lease.release();
      throw new ConsumeError('bad_request', `request body of ${size} bytes, content-length ${declared}`);
    }
    if (identity) return { body: lease.buf, release: lease.release, encoding: 'identity' };
    if (!inflate) return { body: lease.buf, release: lease.release, encoding: enc as 'gzip' | 'deflate' };
    // Compressed: the pooled copy is needed only until it is inflated (into a buffer of its own).
    try {
      return { body: await inflated(lease.buf, enc as 'gzip' | 'deflate', limit), release };
    } finally {
      lease.release();
    }
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw new ConsumeError('too_large', `request body exceeds the limit of ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  raw = Buffer.concat(chunks, size);
  if (identity) return { body: raw, release, encoding: 'identity' };
  if (!inflate) return { body: raw, release, encoding: enc as 'gzip' | 'deflate' };
  return { body: await inflated(raw, enc as 'gzip' | 'deflate', limit), release };
}

/** `raw` inflated (gzip or deflate) into at most `limit` bytes; 413 past it, 400 when it is not valid `enc`. */
async function inflated(raw: Buffer, enc: 'gzip' | 'deflate', limit: number): Promise<Buffer> {
  try {
    const opts = inflateOptions(raw, enc, limit);
    return enc === 'gzip' ? await gunzipAsync(raw, opts) : await inflateAsync(raw, opts);
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError) {
      throw new ConsumeError('too_large', `decompressed body exceeds the limit of ${limit} bytes`);
    }
    throw new ConsumeError('undecodable', `body is not valid ${enc}`);
  }
}
