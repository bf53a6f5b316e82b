/**
 * A decode worker of `serve --workers N` (src/server/worker-pool.ts): the per-request work that needs no shared
 * state — inflating a gzip/deflate body (with the same limit on its inflated size as on the main thread) and
 * decoding the OTLP export into span records (content skipped, as ever). Everything stateful (caller resolution,
 * the trust rules, dedup, the engine, the store and the acknowledgement after COMMIT) stays on the main thread.
 *
 * Up to two jobs in flight (the pool's IN_FLIGHT): { id, format, encoding, body (a shared buffer), length, limit } in;
 * { id, decoded | json } or { id, failure } out, answered in the order the jobs came. A body is inflated
 * asynchronously on libuv's thread pool (inflateInto) as soon as its job arrives, so the next body inflates while
 * this thread decodes the previous one: inflate was ~71% of a worker's time when it did both in turn, one body at a
 * time (docs/internals/performance.md, "Worker pool, third round"). A failure carries a kind and the decoder's
 * message; the transport turns it into its own status and text, exactly as when it decodes on its own thread.
 */
import { parentPort } from 'node:worker_threads';
import { createGunzip, createInflate, gunzipSync, inflateSync } from 'node:zlib';
import { OtlpDecodeError, decodeExportTraceJson, decodeExportTraceRequest } from '../otlp/index.js';
import type { AttrValue, DecodedExport } from '../otlp/types.js';
import { inflateOptions } from './inflate.js';
import type { DecodeReply, DecodeRequest } from './worker-pool.js';

/** The zlib stream internals inflateInto uses (stable since Node 0.x; checked before use, else gunzipSync/inflateSync). */
interface ZlibEngine {
  _outBuffer: Buffer;
  _chunkSize: number;
  _outOffset: number;
  on(ev: 'data', f: (chunk: Buffer) => void): void;
  on(ev: 'error', f: (e: Error) => void): void;
  on(ev: 'end', f: () => void): void;
  end(chunk: Buffer): void;
  destroy(): void;
}

/**
 * This worker's inflate outputs, reused job after job: one per body being inflated or decoded (at most IN_FLIGHT),
 * each kept up to KEEP_OUTPUT bytes.
 */
const freeOutputs: Buffer[] = [];
const KEEP_OUTPUT = 32 * 1024 * 1024;
const KEEP_OUTPUTS = 2;

function takeOutput(need: number): Buffer {
  let best = -1;
  for (let i = 0; i < freeOutputs.length; i++) if (freeOutputs[i].length >= need && (best < 0 || freeOutputs[i].length < freeOutputs[best].length)) best = i;
  if (best >= 0) return freeOutputs.splice(best, 1)[0];
  // None large enough: a new one (the smallest free one gives way if the list is full).
  if (freeOutputs.length >= KEEP_OUTPUTS) {
    let j = 0;
    for (let i = 1; i < freeOutputs.length; i++) if (freeOutputs[i].length < freeOutputs[j].length) j = i;
    freeOutputs.splice(j, 1);
  }
  return Buffer.allocUnsafeSlow(need);
}

function giveOutput(b: Buffer): void {
  if (b.length <= KEEP_OUTPUT && freeOutputs.length < KEEP_OUTPUTS) freeOutputs.push(b);
}

const tooLarge = (): Error => Object.assign(new RangeError('inflated body exceeds the limit'), { code: 'ERR_BUFFER_TOO_LARGE' });

/**
 * `input` inflated asynchronously (libuv's thread pool) into ONE output chunk of the right size (inflateOptions),
 * and that chunk is one of this worker's reused outputs rather than a fresh allocation: on this VM the first touch
 * of a fresh 9 MB allocation costs ~40 ms of page faults, three times the inflate itself (12-15 ms;
 * docs/internals/performance.md, "Worker pool on current main"). zlib has no public API to inflate into a caller's
 * buffer; its stream (lib/zlib.js processChunk / processCallback) writes into the engine's `_outBuffer` of
 * `_chunkSize` bytes and pushes a view (`slice`) of it when the output fits, so those are set to the reused memory.
 * `done` gets a view of `out`, the memory to give back (giveOutput) once the view is read (decoded); the decoder
 * copies what it keeps. A larger output (a lying trailer) spills into fresh chunks, as zlib does, and past `limit`
 * bytes the engine is destroyed in its data callback (no further write is issued: processCallback checks
 * `destroyed`) and the job fails as too large, as `maxOutputLength` does for zlib's own buffer API. Not valid
 * gzip/deflate: zlib's error, as ever. Without those internals: gunzipSync / inflateSync, on this thread.
 */
function inflateInto(input: Buffer, encoding: 'gzip' | 'deflate', limit: number, done: (e: Error | null, body: Buffer | null, out: Buffer | null) => void): void {
  const opts = inflateOptions(input, encoding, limit);
  const engine = (encoding === 'gzip' ? createGunzip : createInflate)({ chunkSize: 64 }) as unknown as ZlibEngine;
  if (!Buffer.isBuffer(engine._outBuffer) || typeof engine._chunkSize !== 'number' || engine._outOffset !== 0) {
    engine.destroy();
    let body: Buffer;
    try {
      body = encoding === 'gzip' ? gunzipSync(input, opts) : inflateSync(input, opts);
    } catch (e) {
      done(e as Error, null, null);
      return;
    }
    done(null, body, null);
    return;
  }
  const out = takeOutput(opts.chunkSize!);
  engine._outBuffer = out;
  engine._chunkSize = out.length;
  const chunks: Buffer[] = [];
  let n = 0;
  let settled = false;
  const settle = (e: Error | null) => {
    if (settled) return;
    settled = true;
    if (e) done(e, null, out);
    else done(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, n), out);
  };
  engine.on('data', (chunk) => {
    n += chunk.length;
    if (n > limit) {
      engine.destroy();
      settle(tooLarge());
      return;
    }
    chunks.push(chunk);
  });
  engine.on('error', (e) => settle(e));
  engine.on('end', () => settle(null));
  engine.end(input);
}

/** A job of this worker, in arrival order: its body once inflated (or the failure), then decoded and answered. */
interface InFlight {
  job: DecodeRequest;
  ready: boolean;
  body: Uint8Array | null;
  out: Buffer | null;
  failure: DecodeReply | null;
}
const inFlight: InFlight[] = [];

function failureOf(id: number, e: unknown): DecodeReply {
  if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError) return { id, failure: { kind: 'too_large', message: '' } };
  return { id, failure: { kind: 'bad_encoding', message: '' } };
}

function accept(job: DecodeRequest): void {
  const f: InFlight = { job, ready: false, body: null, out: null, failure: null };
  inFlight.push(f);
  if (job.encoding === 'identity') {
    f.body = new Uint8Array(job.body, 0, job.length);
    f.ready = true;
  } else {
    inflateInto(Buffer.from(job.body, 0, job.length), job.encoding, job.limit, (e, body, out) => {
      f.out = out;
      if (e) f.failure = failureOf(job.id, e);
      else f.body = body;
      f.ready = true;
      answerReady();
    });
  }
  answerReady();
}

/** Decode and answer the jobs at the head whose bodies are in, in order. */
function answerReady(): void {
  while (inFlight.length > 0 && inFlight[0].ready) {
    const f = inFlight.shift()!;
    const reply = f.failure ?? decode(f.job, f.body!);
    // Decoded: the output's memory is free again (the records hold no view of it).
    if (f.out !== null) giveOutput(f.out);
    parentPort!.postMessage(reply);
  }
}

function decode(job: DecodeRequest, body: Uint8Array): DecodeReply {
  try {
    const decoded = job.format === 'protobuf' ? decodeExportTraceRequest(body) : decodeExportTraceJson(body);
    // As JSON text when that is exact (no NaN or infinite number among the values): the main thread parses text in
    // about half the time it takes to deserialize the same records from a structured clone.
    return exactAsJson(decoded) ? { id: job.id, json: JSON.stringify(decoded) } : { id: job.id, decoded };
  } catch (e) {
    if (e instanceof OtlpDecodeError) return { id: job.id, failure: { kind: 'undecodable', message: e.message } };
    return { id: job.id, failure: { kind: 'internal', message: '' } };
  }
}

const finite = (attrs: Record<string, AttrValue>): boolean => {
  for (const k in attrs) {
    const v = attrs[k];
    if (typeof v === 'number' && !Number.isFinite(v)) return false;
  }
  return true;
};

/** Whether JSON.parse(JSON.stringify(d)) gives back the same values (numbers: no NaN, no infinity). */
function exactAsJson(d: DecodedExport): boolean {
  for (const sp of d.spans) {
    if (!Number.isFinite(sp.startMs) || !Number.isFinite(sp.endMs) || !finite(sp.attrs)) return false;
    for (const ev of sp.events) if (!Number.isFinite(ev.timeMs) || !finite(ev.attrs)) return false;
  }
  return true;
}

parentPort!.on('message', accept);
