/** OTLP/HTTP receiver: POST /v1/traces, protobuf or JSON, optionally gzip, with the OTLP specification's statuses. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditMetrics } from '../metrics/index.js';
import {
  OtlpDecodeError,
  decodeExportTraceJson,
  decodeExportTraceRequest,
  encodeExportTraceResponseJson,
  encodeExportTraceResponseProtobuf,
  encodeRpcStatusJson,
  encodeRpcStatusProtobuf,
  GrpcStatusCode,
  type DecodedExport,
} from '../otlp/index.js';
import { ConsumeError, type Consumer, type IngestSource } from '../audit/consumer.js';
import { BodyBuffers, readBodyInto, withinBodyBudget, type BodyBudget } from './body.js';
import { httpRefusal } from './refusal.js';
import { decodeHttpBody, type DecodePool } from './worker-pool.js';

export interface OtlpHttpOptions {
  maxBodyBytes: number;
  /** The bytes of bodies being read at once across listeners (--max-body-total); past it 503 + Retry-After before reading. */
  bodyBudget?: BodyBudget;
  retryAfterSeconds: number;
  /** The API port, named in the 404 hint when a receipt POST or API call reaches the OTLP port. */
  apiPort?: () => number;
  /** An export was refused by a live-state cap. */
  onLiveLimit?: (limit: 'runs' | 'receipts') => void;
  /** `serve --workers N`: bodies are inflated and decoded in this pool (src/server/worker-pool.ts). */
  decodePool?: DecodePool | null;
}

export type Authenticate = (req: IncomingMessage) => IngestSource | null;

type Format = 'protobuf' | 'json';

function formatOf(contentType: string | undefined): Format | null {
  const ct = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (ct === 'application/x-protobuf' || ct === 'application/protobuf') return 'protobuf';
  if (ct === 'application/json') return 'json';
  return null;
}

function send(res: ServerResponse, status: number, format: Format | null, body: Uint8Array | string, headers: Record<string, string> = {}): void {
  const ct = format === 'protobuf' ? 'application/x-protobuf' : 'application/json';
  res.writeHead(status, { 'content-type': ct, 'x-topology-audit': 'otlp-http', ...headers });
  res.end(body);
}

function sendStatus(res: ServerResponse, status: number, format: Format | null, grpcCode: number, message: string, headers: Record<string, string> = {}): void {
  send(res, status, format, format === 'protobuf' ? encodeRpcStatusProtobuf(grpcCode, message) : encodeRpcStatusJson(grpcCode, message), headers);
}

export function otlpHttpHandler(consumer: Consumer, metrics: AuditMetrics, opts: OtlpHttpOptions, authenticate: Authenticate) {
  // Export bodies are decoded as soon as they are read and never kept: their memory is reused.
  const bodies = new BodyBuffers();
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const format = formatOf(req.headers['content-type']);
    const path = (req.url ?? '/').split('?')[0];
    const answer = (status: number, grpcCode: number, message: string, reason?: Parameters<AuditMetrics['ingestRejected']>[1], headers: Record<string, string> = {}) => {
      if (reason) metrics.ingestRejected('http', reason);
      metrics.ingestRequest('http', status);
      sendStatus(res, status, format, grpcCode, message, headers);
    };
    if (path !== '/v1/traces') {
      req.resume();
      // A receipt POST or an API call sent to the OTLP port: name the port it belongs on.
      const wrongPort = /^\/(v1\/receipts|api\/|healthz|readyz|metrics)/.test(path) && opts.apiPort?.() ? `; receipts, the API and /metrics are on the auditor's API port ${opts.apiPort!()}, not this OTLP/HTTP port` : '';
      return answer(404, GrpcStatusCode.UNIMPLEMENTED, `no such endpoint ${path.slice(0, 80)}; OTLP traces go to POST /v1/traces${wrongPort}`);
    }
    if (req.method !== 'POST') {
      req.resume();
      return answer(405, GrpcStatusCode.UNIMPLEMENTED, 'use POST for /v1/traces', undefined, { allow: 'POST' });
    }
    let release: (() => void) | undefined;
    try {
      const auth = authenticate(req);
      if (!auth) {
        req.resume();
        throw new ConsumeError('unauthenticated', 'missing or invalid bearer token');
      }
      if (!format) {
        req.resume();
        throw new ConsumeError('bad_content_type', 'unsupported content type; use application/x-protobuf or application/json');
      }
      // Refuse early when saturated, but take the admission slot only once the body is complete: a slow body
      // holds its connection (bounded by --max-connections and --request-timeout), never a slot.
      if (consumer.saturated) {
        req.resume();
        throw ConsumeError.saturated();
      }
      const pool = opts.decodePool;
      const { body, release: releaseBody, encoding } = await withinBodyBudget(req, opts.bodyBudget, opts.maxBodyBytes, () =>
        pool ? readBodyInto(req, opts.maxBodyBytes, bodies, false, pool) : readBodyInto(req, opts.maxBodyBytes, bodies).then((r) => ({ ...r, encoding: 'identity' as const })),
      );
      try {
        release = consumer.admit();
      } catch (e) {
        releaseBody();
        throw e;
      }
      let decoded: DecodedExport | undefined;
      if (pool && encoding !== 'identity') {
        // Compressed: inflated and decoded in a worker. An uncompressed body is decoded here: the decoder reads ~4 GB/s,
        // less than handing the body over and the records back would cost (docs/internals/performance.md).
        // A compressed body was read into one of the pool's shared buffers (pool.take): the worker reads it there and
        // the pool takes it back once the worker answered; any other body is copied before decode returns. Either
        // way releaseBody may be called at once.
        const decoding = decodeHttpBody(pool, format, encoding, body, opts.maxBodyBytes);
        releaseBody();
        decoded = await decoding;
      } else try {
        // The decoders copy what they keep (ids, kept attribute values) into strings: nothing refers to `body` after.
        decoded = format === 'protobuf' ? decodeExportTraceRequest(body) : decodeExportTraceJson(body);
      } catch (e) {
        if (e instanceof OtlpDecodeError) throw new ConsumeError('undecodable', `undecodable ${format === 'protobuf' ? 'protobuf' : 'JSON'} body: ${e.message}`);
        throw e;
      } finally {
        releaseBody();
      }
      const ingesting = consumer.consumeSpans(decoded, 'http', auth);
      decoded = undefined; // not held while the commit waits (see Ingestor.consumeSpans)
      const result = await ingesting;
      metrics.ingestRequest('http', 200);
      if (result.liveLimit) opts.onLiveLimit?.(result.liveLimit);
      const partial = result.rejectedSpans ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage } : undefined;
      send(res, 200, format, format === 'protobuf' ? encodeExportTraceResponseProtobuf(partial) : encodeExportTraceResponseJson(partial));
    } catch (e) {
      const r = httpRefusal(e, opts.retryAfterSeconds);
      if (r.limit) opts.onLiveLimit?.(r.limit);
      return answer(r.status, r.grpcCode, r.message, r.reason, r.headers);
    } finally {
      release?.();
    }
  };
}
