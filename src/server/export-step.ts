/**
 * The export step every OTLP receiver shares (the Collector's otlpreceiver: one `Export` behind each transport):
 * authenticated -> not saturated -> read -> admit -> decode (an undecodable message named once) -> consume ->
 * counted -> the partial-success answer, or the refusal mapped once (src/server/refusal.ts) and counted.
 * A transport reads its own bytes and speaks its own wire: it hands the step who sent the request and how to read
 * and decode its message, and maps the transport-neutral outcome to an HTTP status and body or a gRPC status and
 * trailers. OTLP/HTTP (otlp-http.ts), OTLP/gRPC on node:http2 (otlp-grpc-h2.ts) and on @grpc/grpc-js (otlp-grpc.ts).
 */
import type { AuditMetrics, IngestTransport } from '../metrics/index.js';
import { OtlpDecodeError, type DecodedExport } from '../otlp/index.js';
import { ConsumeError, type Consumer, type IngestSource } from '../audit/consumer.js';
import type { Refused } from './refusal.js';

/** A request's message once read: decoded once, its memory given back by `release` (idempotent; early by `decode` if it may). */
export interface ExportMessage {
  /**
   * Decodes the message (at once, or a promise: inflated first, or in a worker). The decoders copy what they keep:
   * nothing refers to the message's memory once the decode settled (or once `release` was called by a decode that
   * copied it before returning).
   */
  decode(): DecodedExport | Promise<DecodedExport>;
  release(): void;
}

/** One export request as a transport hands it over. */
export interface ExportCall {
  /**
   * Who sent it (the transport's authentication, after its own checks of the request's headers, which throw their
   * refusal); null: not authenticated. Refused here, nothing is read.
   */
  from(): IngestSource | null;
  /** Reads the request's message (the transport's framing and limits; refusals as ConsumeError). */
  read(): Promise<ExportMessage>;
  /** The request is refused before its message is read (by `from`, or saturation): the transport drains it. */
  discard(): void;
  /** What the message is, in the undecodable refusal's message ('protobuf body', 'JSON body', 'protobuf'). */
  what: string;
}

/** The partial-success part of an ExportTraceServiceResponse (undefined: every span accepted). */
export interface PartialSuccess {
  rejectedSpans: number;
  errorMessage?: string;
}

/** What came of an export: committed (with any partial success), or refused as the transport's mapping says. */
export type ExportOutcome<R> = { ok: true; partial: PartialSuccess | undefined } | { ok: false; refused: R };

/** How one transport counts and maps (its status labels are its own: an HTTP status, a gRPC status name). */
export interface ExportStepOptions<R extends Refused & { status: number | string }> {
  transport: Extract<IngestTransport, 'http' | 'grpc'>;
  /** The status a committed export is counted under in topology_ingest_requests_total (200, 'OK'). */
  okStatus: number | string;
  /** Maps anything a request's handling threw to the transport's refusal (httpRefusal, grpcRefusal). */
  refusal(e: unknown): R;
  /** An export was refused (in whole or in part) by a live-state cap. */
  onLiveLimit?: (limit: 'runs' | 'receipts') => void;
}

/** The undecodable refusal of a message the OTLP decoder could not walk (the same words on every transport). */
export function undecodable(what: string, e: OtlpDecodeError): ConsumeError {
  return new ConsumeError('undecodable', `undecodable ${what}: ${e.message}`);
}

export class ExportStep<R extends Refused & { status: number | string }> {
  constructor(
    private readonly consumer: Consumer,
    private readonly metrics: AuditMetrics,
    private readonly opts: ExportStepOptions<R>,
  ) {}

  /**
   * A refusal (thrown by the step, or by a transport's own check before it), mapped and counted: the live-limit
   * counter, topology_ingest_rejected_requests_total by reason, topology_ingest_requests_total by status.
   */
  refuse(e: unknown): R {
    const r = this.opts.refusal(e);
    if (r.limit) this.opts.onLiveLimit?.(r.limit);
    if (r.reason) this.metrics.ingestRejected(this.opts.transport, r.reason);
    this.metrics.ingestRequest(this.opts.transport, r.status);
    return r;
  }

  /**
   * One export. The admission slot is taken only once the message is complete (docs/operations.md): a slow message
   * holds its connection or stream, never an ingest slot; saturation refuses before a byte is read. The slot is
   * given back once the consumer answered (committed or refused).
   */
  async export(call: ExportCall): Promise<ExportOutcome<R>> {
    let release: (() => void) | undefined;
    try {
      const from = this.admissible(call);
      const msg = await call.read();
      try {
        release = this.consumer.admit();
      } catch (e) {
        msg.release();
        throw e;
      }
      let decoded: DecodedExport | undefined = await this.decode(msg, call.what);
      const ingesting = this.consumer.consumeSpans(decoded, this.opts.transport, from);
      decoded = undefined; // not held while the commit waits (see Ingestor.consumeSpans)
      const result = await ingesting;
      this.metrics.ingestRequest(this.opts.transport, this.opts.okStatus);
      if (result.liveLimit) this.opts.onLiveLimit?.(result.liveLimit);
      return { ok: true, partial: result.rejectedSpans ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage } : undefined };
    } catch (e) {
      return { ok: false, refused: this.refuse(e) };
    } finally {
      release?.();
    }
  }

  /** Who sent the request, authenticated and not refused by saturation; else its refusal, the request drained. */
  private admissible(call: ExportCall): IngestSource {
    try {
      const from = call.from();
      if (!from) throw new ConsumeError('unauthenticated', 'missing or invalid bearer token');
      if (this.consumer.saturated) throw ConsumeError.saturated();
      return from;
    } catch (e) {
      call.discard();
      throw e;
    }
  }

  /** Decodes a message; its memory goes back once decoded (or failed). */
  private async decode(msg: ExportMessage, what: string): Promise<DecodedExport> {
    try {
      return await msg.decode();
    } catch (e) {
      throw e instanceof OtlpDecodeError ? undecodable(what, e) : e;
    } finally {
      msg.release();
    }
  }
}
