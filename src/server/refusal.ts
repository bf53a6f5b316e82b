/**
 * The one place a refused ingest request becomes a status: `httpRefusal` for the HTTP listeners (OTLP/HTTP and
 * POST /v1/receipts: status, headers, and the gRPC code of an OTLP/HTTP Status body), `grpcRefusal` for both gRPC
 * receivers (status and metadata). Input: anything a request's handling threw, classified by src/audit/consumer.ts.
 */
import { classify, type ConsumeError, type ConsumeErrorKind, type GrpcStatusName } from '../audit/consumer.js';
import type { IngestRejectReason } from '../metrics/index.js';
import { GrpcStatusCode } from '../otlp/index.js';

/** gRPC status codes by name (the OTLP module's, and UNAUTHENTICATED). */
export const GRPC_CODE: Record<GrpcStatusName, number> = { ...GrpcStatusCode, UNAUTHENTICATED: 16 };

const HTTP_STATUS: Record<ConsumeErrorKind, number> = {
  saturated: 429,
  store_unavailable: 503,
  worker_lost: 503,
  body_budget: 503,
  live_limit: 503,
  unauthenticated: 401,
  too_large: 413,
  bad_content_type: 415,
  undecodable: 400,
  bad_request: 400,
};

/** The gRPC status of each kind, on a gRPC receiver and in the Status body of an OTLP/HTTP answer. */
const GRPC_STATUS: Record<ConsumeErrorKind, GrpcStatusName> = {
  saturated: 'UNAVAILABLE',
  store_unavailable: 'UNAVAILABLE',
  worker_lost: 'UNAVAILABLE',
  body_budget: 'UNAVAILABLE',
  live_limit: 'UNAVAILABLE',
  unauthenticated: 'UNAUTHENTICATED',
  too_large: 'RESOURCE_EXHAUSTED',
  bad_content_type: 'INVALID_ARGUMENT',
  undecodable: 'INVALID_ARGUMENT',
  bad_request: 'INVALID_ARGUMENT',
};

/**
 * The `reason` label of topology_ingest_rejected_requests_total (a malformed request is not counted, nor a request
 * whose decode worker died: the worker is logged, decode_worker_lost).
 */
const reasonOf = (e: ConsumeError): IngestRejectReason | undefined => (e.kind === 'bad_request' || e.kind === 'worker_lost' ? undefined : e.kind);

export interface Refused {
  message: string;
  /** The label of topology_ingest_rejected_requests_total; undefined: not counted there. */
  reason?: IngestRejectReason;
  /** A live limit (counted in topology_live_limit_refusals_total). */
  limit?: 'runs' | 'receipts';
}

export interface HttpRefused extends Refused {
  status: number;
  /** The gRPC code of the OTLP/HTTP Status body. */
  grpcCode: number;
  headers: Record<string, string>;
}

export interface GrpcRefused extends Refused {
  status: GrpcStatusName;
  code: number;
  /** Metadata of the answer (a live limit's retry-after). */
  metadata: Record<string, string>;
}

/**
 * HTTP: saturated 429, store cannot commit or decode worker lost 503 (both with Retry-After `retryAfterSeconds`), live limit 503 with the
 * limit's own Retry-After, unauthenticated 401 with WWW-Authenticate, too large 413, bad content type 415, undecodable
 * or malformed 400; anything else 500.
 */
export function httpRefusal(e: unknown, retryAfterSeconds: number): HttpRefused {
  const c = classify(e);
  if (!c) return { status: 500, grpcCode: GrpcStatusCode.INTERNAL, message: 'internal error', headers: {} };
  const headers: Record<string, string> = {};
  if (c.kind === 'unauthenticated') headers['www-authenticate'] = 'Bearer';
  else if (c.retryable) headers['retry-after'] = String(c.retryAfterSeconds ?? retryAfterSeconds);
  return { status: HTTP_STATUS[c.kind], grpcCode: GRPC_CODE[GRPC_STATUS[c.kind]], message: c.message, reason: reasonOf(c), limit: c.limit, headers };
}

/**
 * gRPC: saturated, store cannot commit and live limit UNAVAILABLE (a live limit with `retry-after` metadata),
 * unauthenticated UNAUTHENTICATED, too large RESOURCE_EXHAUSTED, undecodable INVALID_ARGUMENT (or the framing's own
 * status); anything else INTERNAL.
 */
export function grpcRefusal(e: unknown): GrpcRefused {
  const c = classify(e);
  if (!c) return { status: 'INTERNAL', code: GRPC_CODE.INTERNAL, message: 'internal error', metadata: {} };
  const status = c.grpcStatus ?? GRPC_STATUS[c.kind];
  const metadata: Record<string, string> = c.kind === 'live_limit' ? { 'retry-after': String(c.retryAfterSeconds) } : {};
  return { status, code: GRPC_CODE[status], message: c.message, reason: reasonOf(c), limit: c.limit, metadata };
}
