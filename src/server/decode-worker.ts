/**
 * A decode worker of `serve --workers N` (src/server/worker-pool.ts): the per-request work that needs no shared
 * state — inflating a gzip/deflate body (with the same limit on its inflated size as on the main thread) and
 * decoding the OTLP export into span records (content skipped, as ever). Everything stateful (caller resolution,
 * the trust rules, dedup, the engine, the store and the acknowledgement after COMMIT) stays on the main thread.
 *
 * One job at a time: { id, format, encoding, body (a shared buffer), length, limit } in; { id, decoded } or { id, failure } out. A failure
 * carries a kind and the decoder's message; the transport turns it into its own status and text, exactly as
 * when it decodes on its own thread.
 */
import { parentPort } from 'node:worker_threads';
import { createGunzip, createInflate, gunzipSync, inflateSync } from 'node:zlib';
import { OtlpDecodeError, decodeExportTraceJson, decodeExportTraceRequest } from '../otlp/index.js';
import type { AttrValue, DecodedExport } from '../otlp/types.js';
import { inflateOptions } from './inflate.js';
import type { DecodeReply, DecodeRequest } from './worker-pool.js';

/** The zlib internals inflateInto uses (stable since Node 0.x; checked before use, else gunzipSync/inflateSync). */
interface ZlibEngine {
  _processChunk(chunk: Buffer, flushFlag: number): Buffer;
  _outBuffer: Buffer;
  _chunkSize: number;
  _finishFlushFlag: number;
}

/** This worker's inflate output, reused job after job (kept up to KEEP_OUTPUT bytes). */
let output: Buffer | null = null;
const KEEP_OUTPUT = 32 * 1024 * 1024;

/**
 * `input` inflated synchronously into ONE output chunk of the right size (inflateOptions), and that chunk is this
 * worker's reused `output` memory rather than a fresh allocation: on this VM the first touch of a fresh 9 MB
 * allocation costs ~40 ms of page faults, three times the inflate itself (12-15 ms; docs/internals/performance.md,
 * "Worker pool on current main"). zlib has no public API to inflate into a caller's buffer; its synchronous path
 * (`_processChunk`) writes into the engine's `_outBuffer` of `_chunkSize` bytes and returns a view of it when the
 * output fits, so those are set to the reused memory. The result is a view of `output`: it is read (decoded) before
 * the next job, and the decoder copies what it keeps. A larger output (a lying trailer) spills into fresh chunks,
 * as zlib does; `maxOutputLength` bounds it as ever. Without those internals: gunzipSync / inflateSync.
 */
function inflateInto(input: Buffer, encoding: 'gzip' | 'deflate', limit: number): Buffer {
  const opts = inflateOptions(input, encoding, limit);
  const engine = (encoding === 'gzip' ? createGunzip : createInflate)({ maxOutputLength: limit, chunkSize: 64 }) as unknown as ZlibEngine;
  if (typeof engine._processChunk !== 'function' || !Buffer.isBuffer(engine._outBuffer) || typeof engine._chunkSize !== 'number') {
    return encoding === 'gzip' ? gunzipSync(input, opts) : inflateSync(input, opts);
  }
  const need = opts.chunkSize!;
  if (output === null || output.length < need) output = Buffer.allocUnsafeSlow(need);
  const into = output;
  if (output.length > KEEP_OUTPUT) output = null;
  engine._outBuffer = into;
  engine._chunkSize = into.length;
  return engine._processChunk(input, engine._finishFlushFlag);
}

function run(job: DecodeRequest): DecodeReply {
  let body: Uint8Array = new Uint8Array(job.body, 0, job.length);
  if (job.encoding !== 'identity') {
    try {
      const input = Buffer.from(job.body, 0, job.length);
      body = inflateInto(input, job.encoding, job.limit);
    } catch (e) {
      if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError) return { id: job.id, failure: { kind: 'too_large', message: '' } };
      return { id: job.id, failure: { kind: 'bad_encoding', message: '' } };
    }
  }
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

parentPort!.on('message', (job: DecodeRequest) => parentPort!.postMessage(run(job)));
