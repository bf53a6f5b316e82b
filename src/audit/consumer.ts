/**
 * What every transport hands its decoded data to (the OTel Collector's `consumer.Traces.ConsumeTraces(ctx, td)
 * error`): one consumer interface, and ONE classified error for every way an ingest request is refused. Each
 * transport maps a refusal to its own status once (src/server/refusal.ts: HTTP status + headers, gRPC status +
 * metadata); none of them looks at the engine's or the store's error classes.
 */
import type { Receipt } from '../core/types.js';
import type { DecodedExport } from '../otlp/types.js';
import { LiveLimitError } from './engine.js';

/** Checks a receipt's claimed agent against the agents the delivering source may speak for (null: allowed). */
export type SourceBinding = (r: Receipt) => string | null;

/** Who delivered a batch: the source name of its token, the agents it is bound to, and the transport. */
export interface IngestSource {
  source: string;
  bind?: SourceBinding;
}

/** A receipt refused by the trust rules: its index in the batch and a content-free reason. */
export interface Refusal {
  index: number;
  reason: string;
}

/** An OTLP export that was committed: spans that could not become valid receipts are a partial success. */
export interface SpanIngestResult {
  rejectedSpans: number;
  errorMessage?: string;
  /** Runs were refused by a live cap (their spans are among the rejected: the partial-success answer). */
  liveLimit?: 'runs' | 'receipts';
}

/** NDJSON receipts that were committed, and the ones the trust rules refused (indexes into the batch). */
export interface ReceiptIngestResult {
  accepted: number;
  duplicates: number;
  conflicts: number;
  refused: Refusal[];
  /** Runs were refused by a live cap (their receipts are among the refused). */
  liveLimit?: 'runs' | 'receipts';
}

/**
 * The ingest use case as the transports see it. Admission first (`saturated` before reading a body, `admit` once it
 * is complete), then one consume call per request; a refusal is always a ConsumeError.
 */
export interface Consumer {
  /** True while new requests are refused (in-flight requests or pending receipts at their caps). */
  readonly saturated: boolean;
  /** Takes an admission slot (throws ConsumeError 'saturated'); the returned release must be called once answered. */
  admit(): () => void;
  /** OTLP spans; resolves once every receipt they yield is durably committed. */
  consumeSpans(batch: DecodedExport, transport: 'http' | 'grpc', from: IngestSource): Promise<SpanIngestResult>;
  /** Receipts posted directly (NDJSON), after the source binding and trust rules; resolves after the commit. */
  consumeReceipts(receipts: Receipt[], from: IngestSource): Promise<ReceiptIngestResult>;
}

/**
 * Why a request was refused. Each kind has one class:
 * - retryable: `saturated` (admission), `store_unavailable` (the store cannot commit or be read: nothing acknowledged),
 *   `worker_lost` (serve --workers: the decode worker of this request died, or the pool is stopping; nothing stored),
 *   `body_budget` (the bodies being read on every listener hold --max-body-total: refused before reading);
 * - limit: `live_limit` (a live-state cap, --max-live-runs / --max-live-receipts), retry after `retryAfterSeconds`;
 * - permanent: `unauthenticated`, `too_large`, `bad_content_type`, `undecodable`, and `bad_request` (a malformed
 *   request that is not counted as a refused ingest request).
 */
export const CONSUME_ERROR_CLASS = {
  saturated: 'retryable',
  store_unavailable: 'retryable',
  worker_lost: 'retryable',
  body_budget: 'retryable',
  live_limit: 'limit',
  unauthenticated: 'permanent',
  too_large: 'permanent',
  bad_content_type: 'permanent',
  undecodable: 'permanent',
  bad_request: 'permanent',
} as const;
export type ConsumeErrorKind = keyof typeof CONSUME_ERROR_CLASS;
export type ConsumeErrorClass = (typeof CONSUME_ERROR_CLASS)[ConsumeErrorKind];

/** gRPC status names a protocol error may ask for instead of its kind's default (framing errors of a unary call). */
export type GrpcStatusName = 'INVALID_ARGUMENT' | 'RESOURCE_EXHAUSTED' | 'UNAVAILABLE' | 'UNIMPLEMENTED' | 'INTERNAL' | 'UNAUTHENTICATED';

export class ConsumeError extends Error {
  /** A live limit: which cap refused. */
  readonly limit?: 'runs' | 'receipts';
  /** A live limit: when to retry (Retry-After); other kinds use the transport's configured value. */
  readonly retryAfterSeconds?: number;
  /** The gRPC status the protocol asks for where it differs from the kind's (e.g. a unary call with two messages). */
  readonly grpcStatus?: GrpcStatusName;

  constructor(
    readonly kind: ConsumeErrorKind,
    message: string,
    extra: { limit?: 'runs' | 'receipts'; retryAfterSeconds?: number; grpcStatus?: GrpcStatusName } = {},
  ) {
    super(message);
    this.name = 'ConsumeError';
    if (extra.limit !== undefined) this.limit = extra.limit;
    if (extra.retryAfterSeconds !== undefined) this.retryAfterSeconds = extra.retryAfterSeconds;
    if (extra.grpcStatus !== undefined) this.grpcStatus = extra.grpcStatus;
  }

  get errorClass(): ConsumeErrorClass {
    return CONSUME_ERROR_CLASS[this.kind];
  }

  /** The same request may succeed later (saturation, a store that cannot commit, a live limit). */
  get retryable(): boolean {
    return this.errorClass !== 'permanent';
  }

  static saturated(): ConsumeError {
    return new ConsumeError('saturated', 'the auditor is saturated; retry later');
  }
}

/**
 * The classified form of any failure of an ingest request: a ConsumeError as it is, the engine's live-limit refusal
 * as `live_limit`; anything else is not a refusal (null: an internal error, answered 500 / INTERNAL).
 */
export function classify(e: unknown): ConsumeError | null {
  if (e instanceof ConsumeError) return e;
  if (e instanceof LiveLimitError) return new ConsumeError('live_limit', e.message, { limit: e.limit, retryAfterSeconds: e.retryAfterSeconds });
  return null;
}
