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
import { gunzipSync, inflateSync } from 'node:zlib';
import { OtlpDecodeError, decodeExportTraceJson, decodeExportTraceRequest } from '../otlp/index.js';
import type { AttrValue, DecodedExport } from '../otlp/types.js';
import { inflateOptions } from './inflate.js';
import type { DecodeReply, DecodeRequest } from './worker-pool.js';

function run(job: DecodeRequest): DecodeReply {
  let body: Uint8Array = new Uint8Array(job.body, 0, job.length);
  if (job.encoding !== 'identity') {
    try {
      const input = Buffer.from(job.body, 0, job.length);
      // Synchronously, into one output chunk sized from the gzip trailer (a hint, bounded: see inflateOptions).
      const opts = inflateOptions(input, job.encoding, job.limit);
      body = job.encoding === 'gzip' ? gunzipSync(input, opts) : inflateSync(input, opts);
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
