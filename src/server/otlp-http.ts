/** OTLP/HTTP receiver: POST /v1/traces, protobuf or JSON, optionally gzip, with the OTLP specification's statuses. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditMetrics } from '../metrics/index.js';
import {
  decodeExportTraceJson,
  decodeExportTraceRequest,
  encodeExportTraceResponseJson,
  encodeExportTraceResponseProtobuf,
  encodeRpcStatusJson,
  encodeRpcStatusProtobuf,
  GrpcStatusCode,
} from '../otlp/index.js';
import { ConsumeError, type Consumer, type IngestSource } from '../audit/consumer.js';
import { BodyBuffers, readBodyInto, withinBodyBudget, type BodyBudget } from './body.js';
import { ExportStep, type ExportMessage } from './export-step.js';
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
  const step = new ExportStep(consumer, metrics, { transport: 'http', okStatus: 200, refusal: (e) => httpRefusal(e, opts.retryAfterSeconds), onLiveLimit: opts.onLiveLimit });
  const pool = opts.decodePool;
  /** Reads the body within the body budget; a compressed body is inflated and decoded in the pool (with --workers). */
  const read = async (req: IncomingMessage, format: Format): Promise<ExportMessage> => {
    const { body, release, encoding } = await withinBodyBudget(req, opts.bodyBudget, opts.maxBodyBytes, () =>
      pool ? readBodyInto(req, opts.maxBodyBytes, bodies, false, pool) : readBodyInto(req, opts.maxBodyBytes, bodies).then((r) => ({ ...r, encoding: 'identity' as const })),
    );
    return {
      release,
      decode: () => {
        if (pool && encoding !== 'identity') {
          // Compressed: inflated and decoded in a worker. An uncompressed body is decoded here: the decoder reads ~4 GB/s,
          // less than handing the body over and the records back would cost (docs/internals/performance.md).
          // A compressed body was read into one of the pool's shared buffers (pool.take): the worker reads it there and
          // the pool takes it back once the worker answered; any other body is copied before decode returns. Either
          // way the body may be released at once.
          const decoding = decodeHttpBody(pool, format, encoding, body, opts.maxBodyBytes);
          release();
          return decoding;
        }
        // The decoders copy what they keep (ids, kept attribute values) into strings: nothing refers to `body` after.
        return format === 'protobuf' ? decodeExportTraceRequest(body) : decodeExportTraceJson(body);
      },
    };
  };
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const format = formatOf(req.headers['content-type']);
    const path = (req.url ?? '/').split('?')[0];
    const answer = (r: { status: number; grpcCode: number; message: string; headers?: Record<string, string> }) => sendStatus(res, r.status, format, r.grpcCode, r.message, r.headers);
    const unimplemented = (status: number, message: string, headers: Record<string, string> = {}) => {
      metrics.ingestRequest('http', status);
      answer({ status, grpcCode: GrpcStatusCode.UNIMPLEMENTED, message, headers });
    };
    if (path !== '/v1/traces') {
      req.resume();
      // A receipt POST or an API call sent to the OTLP port: name the port it belongs on.
      const wrongPort = /^\/(v1\/receipts|api\/|healthz|readyz|metrics)/.test(path) && opts.apiPort?.() ? `; receipts, the API and /metrics are on the auditor's API port ${opts.apiPort!()}, not this OTLP/HTTP port` : '';
      return unimplemented(404, `no such endpoint ${path.slice(0, 80)}; OTLP traces go to POST /v1/traces${wrongPort}`);
    }
    if (req.method !== 'POST') {
      req.resume();
      return unimplemented(405, 'use POST for /v1/traces', { allow: 'POST' });
    }
    const from = () => {
      const who = authenticate(req);
      // Authenticated (an unauthenticated request is refused as such first), in a format this receiver does not read.
      if (who && !format) throw new ConsumeError('bad_content_type', 'unsupported content type; use application/x-protobuf or application/json');
      return who;
    };
    const out = await step.export({ from, read: () => read(req, format!), discard: () => req.resume(), what: format === 'protobuf' ? 'protobuf body' : 'JSON body' });
    if (!out.ok) return answer(out.refused);
    send(res, 200, format, format === 'protobuf' ? encodeExportTraceResponseProtobuf(out.partial) : encodeExportTraceResponseJson(out.partial));
  };
}
