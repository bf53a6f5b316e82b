/**
 * `serve --workers N`: a bounded pool of worker threads (src/server/decode-worker.ts) that inflate and decode
 * compressed OTLP export bodies (gzip, deflate: what exporters send), the per-request work that shares no state.
 * Uncompressed bodies are decoded on the main thread: the decoder reads ~4 GB/s there, less than copying the body to
 * a worker and taking the records back costs (measured: docs/internals/performance.md, "Worker pool on current
 * main"). The transports still read bodies (with their size
 * limits) and answer on the main thread; the single writer — caller resolution, the trust rules, dedup, the
 * engine, the store's group commit and the acknowledgement after COMMIT — stays where it was, in arrival order
 * of decoded requests (a request is handed to Consumer.consumeSpans as soon as its decode is back).
 *
 * The worker inflates into one output chunk of the right size (inflateOptions, src/server/inflate.ts) held in
 * memory it reuses job after job (decode-worker.ts inflateInto): ~17-20 ms of process CPU per 8.6 MB agentic body
 * through the pool, against ~45 ms into fresh memory (page faults). Each worker has up to IN_FLIGHT (2) jobs: it
 * inflates the next body on libuv's thread pool while its own thread decodes the previous one, and answers them in
 * the order they were posted. The store's group commit waits for the bodies being decoded (decoding(),
 * ReceiptStore.setFlushGate).
 *
 * Bounded: a job waits in a queue of at most `maxQueued` jobs and `maxQueuedBytes` bytes (a first job is always
 * taken); past it the request is refused as saturated (ConsumeError 'saturated': 429 / UNAVAILABLE with
 * Retry-After, as when admission refuses). A worker that dies (an uncaught error, out of memory under
 * `resourceLimits`) fails only the requests it had in flight (at most IN_FLIGHT; ConsumeError 'worker_lost':
 * retryable, 503 / UNAVAILABLE) and is replaced at once; the queued ones go to the replacement.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import type { DecodedExport } from '../otlp/index.js';
import { ConsumeError } from '../audit/consumer.js';

export type BodyFormat = 'protobuf' | 'json';
import type { BodyEncoding } from './body.js';
export type { BodyEncoding };

/**
 * A job as posted to a worker. The body is the first `length` bytes of a shared buffer the pool reuses (warm
 * memory: a fresh multi-megabyte allocation per request costs the main thread more than the copy into it).
 */
export interface DecodeRequest {
  id: number;
  format: BodyFormat;
  encoding: BodyEncoding;
  body: SharedArrayBuffer;
  length: number;
  /** Largest inflated body (the transport's body or message limit). */
  limit: number;
}

export type DecodeFailureKind = 'too_large' | 'bad_encoding' | 'undecodable' | 'internal';
/** A decoded export comes back as JSON text when that is exact (see decode-worker.ts), else as a structured clone. */
export type DecodeReply =
  | { id: number; json: string; decoded?: undefined; failure?: undefined }
  | { id: number; decoded: DecodedExport; json?: undefined; failure?: undefined }
  | { id: number; failure: { kind: DecodeFailureKind; message: string }; decoded?: undefined; json?: undefined };

/** The body could not be inflated or decoded: `kind` says why, `message` is the decoder's (for `undecodable`). */
export class DecodeFailure extends Error {
  constructor(readonly kind: DecodeFailureKind, message: string) {
    super(message);
  }
}

/** The worker decoding this request died (or the pool is stopping): nothing of it was stored; the client should retry. */
const workerLost = (message: string) => new ConsumeError('worker_lost', message);

export interface DecodePoolOptions {
  /** Jobs waiting for a worker, beyond which requests are refused as saturated (default 4 per worker, at least 16). */
  maxQueued?: number;
  /** Bytes of bodies waiting for a worker, beyond which requests are refused as saturated (default 64 MiB). */
  maxQueuedBytes?: number;
  /** Heap limits of each worker (a worker past them dies; its request fails and it is replaced). */
  resourceLimits?: ResourceLimits;
  /** A worker died and was replaced (`failed`: whether a request was lost with it). */
  onWorkerLost?: (info: { exitCode: number; failed: boolean }) => void;
}

/**
 * Shared buffers for bodies on their way to a worker, reused: a fresh multi-megabyte buffer costs the main thread its
 * page faults on first touch (~12 ms for a 2.6 MB body on this VM, more than the copy). Every admitted request holds
 * one until its decode is answered, so as many can be in use as requests are in flight: free ones are kept up to
 * `maxFreeBytes` in all (buffers of at most `maxPooledBytes`). New ones get 25% headroom, so that the next, slightly
 * larger body of the same traffic fits one already mapped.
 */
class SharedBuffers {
  private readonly free: SharedArrayBuffer[] = [];
  private freeBytes = 0;
  constructor(
    private readonly maxFreeBytes = 64 * 1024 * 1024,
    private readonly maxPooledBytes = 8 * 1024 * 1024,
  ) {}
  take(size: number): SharedArrayBuffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const n = this.free[i].byteLength;
      if (n >= size && (best < 0 || n < this.free[best].byteLength)) best = i;
    }
    if (best >= 0) {
      const b = this.free.splice(best, 1)[0];
      this.freeBytes -= b.byteLength;
      return b;
    }
    if (size > this.maxPooledBytes) return new SharedArrayBuffer(size);
    return new SharedArrayBuffer(Math.min(this.maxPooledBytes, Math.max(1 << 20, Math.ceil((size * 1.25) / 65536) * 65536)));
  }
  give(b: SharedArrayBuffer): void {
    if (b.byteLength > this.maxPooledBytes) return;
    // Past the bound: the smallest free ones give way to a larger one, else it is dropped.
    while (this.freeBytes + b.byteLength > this.maxFreeBytes && this.free.length > 0) {
      let j = 0;
      for (let i = 1; i < this.free.length; i++) if (this.free[i].byteLength < this.free[j].byteLength) j = i;
      if (this.free[j].byteLength >= b.byteLength) return;
      this.freeBytes -= this.free[j].byteLength;
      this.free.splice(j, 1);
    }
    if (this.freeBytes + b.byteLength > this.maxFreeBytes) return;
    this.free.push(b);
    this.freeBytes += b.byteLength;
  }
}

interface Job {
  req: DecodeRequest;
  resolve: (d: DecodedExport) => void;
  reject: (e: Error) => void;
  /** Settles once the job is answered (after its caller's resolve or reject). */
  answered?: Promise<void>;
}

/**
 * Jobs a worker holds at once: the one it decodes and the next, inflating meanwhile on libuv's thread pool (the
 * third-round measurement: docs/internals/performance.md, "Worker pool, third round").
 */
export const IN_FLIGHT = 2;

interface Slot {
  worker: Worker;
  /** Posted to the worker and not yet answered, in the order posted (the worker answers in that order). */
  jobs: Job[];
  /** The worker is gone and no replacement could start yet: no jobs go to it. */
  dead: boolean;
}

/** The worker's script: beside this module once built (dist/server); from the sources (tests), the built one. */
function workerScript(): URL {
  const here = new URL('./decode-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  return new URL('../../dist/server/decode-worker.js', import.meta.url);
}

/** `--workers` when not given: every core but one (the main thread's), at least one. */
export function defaultWorkers(cores: number): number {
  return Math.max(1, cores - 1);
}

/** A shared buffer the pool lent for a body to be read into (DecodePool.take): being read, or with a decode job. */
interface Lease {
  shared: SharedArrayBuffer;
  state: 'reading' | 'job' | 'back';
}

export class DecodePool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private queuedBytes = 0;
  private nextId = 1;
  private closed = false;
  private readonly script = workerScript();
  private readonly maxQueued: number;
  private readonly maxQueuedBytes: number;
  private readonly buffers: SharedBuffers;
  /** The shared buffers lent by take(), by their memory (a body read into one is decoded there, not copied). */
  private readonly leases = new WeakMap<ArrayBufferLike, Lease>();
  /** Workers replaced after dying, since start. */
  replaced = 0;

  constructor(readonly size: number, private readonly opts: DecodePoolOptions = {}) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`a decode pool needs at least one worker: ${size}`);
    this.maxQueued = opts.maxQueued ?? Math.max(16, 4 * size);
    this.maxQueuedBytes = opts.maxQueuedBytes ?? 64 * 1024 * 1024;
    this.buffers = new SharedBuffers();
    for (let i = 0; i < size; i++) this.slots.push(this.spawn());
  }

  /** Thread ids of the live workers (for measurement). */
  get threadIds(): number[] {
    return this.slots.map((s) => s.worker.threadId);
  }

  get queueDepth(): number {
    return this.queue.length;
  }

  /**
   * A body of `size` bytes read straight into one of the pool's reused shared buffers (readBodyInto's `compressed`
   * leases): decode() of it then hands that memory to the worker without copying it, and takes it back once the
   * worker has answered. `release` gives it back unless decode() took it (then it does nothing), so the caller may
   * call it as soon as decode() returned, whether it took the body or refused it.
   */
  take(size: number): { buf: Buffer; release: () => void } {
    const shared = this.buffers.take(size);
    const lease: Lease = { shared, state: 'reading' };
    const buf = Buffer.from(shared, 0, size);
    this.leases.set(shared, lease);
    return {
      buf,
      release: () => {
        if (lease.state !== 'reading') return;
        lease.state = 'back';
        this.leases.delete(shared);
        this.buffers.give(shared);
      },
    };
  }

  /**
   * Inflate (unless `identity`) and decode `body` in a worker. A body in memory lent by take() is decoded where it
   * is; any other is copied (into a reused shared buffer) before this returns: the caller may reuse its memory at
   * once. Rejects with ConsumeError 'saturated' when the queue is full, DecodeFailure when the body
   * cannot be inflated or decoded, ConsumeError 'worker_lost' when the worker died.
   */
  decode(format: BodyFormat, encoding: BodyEncoding, body: Uint8Array, limit: number): Promise<DecodedExport> {
    if (this.closed) return Promise.reject(workerLost('the decode workers are stopping; retry later'));
    const idle = this.slots.some((s) => !s.dead && s.jobs.length < IN_FLIGHT);
    if (!idle && this.queue.length > 0 && (this.queue.length >= this.maxQueued || this.queuedBytes + body.byteLength > this.maxQueuedBytes)) {
      return Promise.reject(ConsumeError.saturated());
    }
    const lease = this.leases.get(body.buffer);
    let shared: SharedArrayBuffer;
    if (lease !== undefined && lease.state === 'reading' && body.byteOffset === 0) {
      lease.state = 'job';
      this.leases.delete(lease.shared);
      shared = lease.shared;
    } else {
      shared = this.buffers.take(body.byteLength);
      new Uint8Array(shared, 0, body.byteLength).set(body);
    }
    return new Promise<DecodedExport>((resolve, reject) => {
      let answer!: () => void;
      const answered = new Promise<void>((r) => (answer = r));
      const done = () => {
        this.buffers.give(shared);
        answer();
      };
      this.queue.push({
        req: { id: this.nextId++, format, encoding, body: shared, length: body.byteLength, limit },
        resolve: (d) => (resolve(d), done()),
        reject: (e) => (reject(e), done()),
        answered,
      });
      this.queuedBytes += body.byteLength;
      this.pump();
    });
  }

  /**
   * The bodies being decoded right now (not the queued ones): a promise that settles once each of them is answered,
   * or null when no worker is busy. The store's group commit waits for it (ReceiptStore.setFlushGate), so the
   * requests whose decodes finish one by one share a commit instead of each taking one: a wait of at most the
   * IN_FLIGHT decodes a worker holds (the second inflated while the first is decoded).
   */
  decoding(): Promise<void> | null {
    const busy: Promise<void>[] = [];
    for (const s of this.slots) for (const j of s.jobs) if (j.answered) busy.push(j.answered);
    return busy.length === 0 ? null : Promise.all(busy).then(() => {});
  }

  /** Queued jobs to workers: every idle worker gets one before any gets a second. */
  private pump(): void {
    for (let depth = 0; depth < IN_FLIGHT; depth++) {
      for (const slot of this.slots) {
        if (this.queue.length === 0) return;
        if (slot.dead || slot.jobs.length !== depth) continue;
        const job = this.queue.shift()!;
        this.queuedBytes -= job.req.length;
        slot.jobs.push(job);
        slot.worker.postMessage(job.req);
      }
    }
  }

  private spawn(): Slot {
    const worker = new Worker(this.script, { resourceLimits: this.opts.resourceLimits });
    const slot: Slot = { worker, jobs: [], dead: false };
    worker.on('message', (reply: DecodeReply) => {
      const i = slot.jobs.findIndex((j) => j.req.id === reply.id);
      if (i < 0) return;
      const job = slot.jobs.splice(i, 1)[0];
      if (reply.failure) job.reject(new DecodeFailure(reply.failure.kind, reply.failure.message));
      else job.resolve(reply.json !== undefined ? (JSON.parse(reply.json) as DecodedExport) : reply.decoded!);
      this.pump();
    });
    // An uncaught error in the worker: its 'exit' follows, which fails its jobs and replaces the worker.
    worker.on('error', () => {});
    worker.on('exit', (exitCode) => {
      const jobs = slot.jobs.splice(0);
      slot.dead = true;
      if (this.closed) {
        for (const job of jobs) job.reject(workerLost('the decode workers are stopping; retry later'));
        return;
      }
      for (const job of jobs) job.reject(workerLost('the worker decoding this request stopped; retry'));
      this.replaced++;
      this.opts.onWorkerLost?.({ exitCode, failed: jobs.length > 0 });
      this.replace(slot);
    });
    return slot;
  }

  /** A new worker in the dead one's place; if one cannot start now (threads exhausted), again a second later. */
  private replace(dead: Slot): void {
    if (this.closed) return;
    const i = this.slots.indexOf(dead);
    if (i < 0) return;
    try {
      this.slots[i] = this.spawn();
    } catch {
      // The dead slot (marked dead on exit) stays out of pump() meanwhile.
      setTimeout(() => this.replace(dead), 1000).unref();
      return;
    }
    this.pump();
  }

  /** Refuse new jobs, fail the waiting ones and stop the workers (the jobs in flight fail as lost). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(workerLost('the decode workers are stopping; retry later'));
    this.queuedBytes = 0;
    await Promise.all(this.slots.map((s) => s.worker.terminate().catch(() => 0)));
  }
}

/**
 * OTLP/HTTP: decode in the pool with exactly the refusals of the single-threaded path (src/server/body.ts and
 * src/server/otlp-http.ts): too large (413) past the inflated limit, undecodable (400) for a body that is not valid
 * gzip/deflate or not decodable; anything else is an internal error (500).
 */
export async function decodeHttpBody(pool: DecodePool, format: BodyFormat, encoding: BodyEncoding, body: Uint8Array, limit: number): Promise<DecodedExport> {
  try {
    return await pool.decode(format, encoding, body, limit);
  } catch (e) {
    if (!(e instanceof DecodeFailure)) throw e;
    if (e.kind === 'too_large') throw new ConsumeError('too_large', `decompressed body exceeds the limit of ${limit} bytes`);
    if (e.kind === 'bad_encoding') throw new ConsumeError('undecodable', `body is not valid ${encoding}`);
    if (e.kind === 'undecodable') throw new ConsumeError('undecodable', `undecodable ${format === 'protobuf' ? 'protobuf' : 'JSON'} body: ${e.message}`);
    throw new Error('decode failed');
  }
}

/**
 * OTLP/gRPC (node:http2 receiver): the refusals of the single-threaded path (src/server/otlp-grpc-h2.ts): past the
 * inflated limit RESOURCE_EXHAUSTED, not valid gzip/deflate INTERNAL, undecodable INVALID_ARGUMENT.
 */
export async function decodeGrpcMessage(pool: DecodePool, encoding: BodyEncoding, body: Uint8Array, limit: number): Promise<DecodedExport> {
  try {
    return await pool.decode('protobuf', encoding, body, limit);
  } catch (e) {
    if (!(e instanceof DecodeFailure)) throw e;
    if (e.kind === 'too_large') throw new ConsumeError('too_large', `inflated message exceeds the limit of ${limit} bytes`, { grpcStatus: 'RESOURCE_EXHAUSTED' });
    if (e.kind === 'bad_encoding') throw new ConsumeError('undecodable', `message is not valid ${encoding}`, { grpcStatus: 'INTERNAL' });
    if (e.kind === 'undecodable') throw new ConsumeError('undecodable', `undecodable protobuf: ${e.message}`);
    throw new Error('decode failed');
  }
}
