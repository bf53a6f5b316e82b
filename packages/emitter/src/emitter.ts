/**
 * Emitting receipts from TypeScript agent code: one span per receipt, carrying the `topology.*` attributes the
 * auditor reads (src/ingest/extract.ts), created through `@opentelemetry/api` on a tracer of the emitter's own
 * TracerProvider.
 *
 * Sampling guarantee: that provider samples with AlwaysOn, is never registered as the global provider, and
 * exports through its own processor and OTLP exporter to the auditor. The application's provider, sampler,
 * processors and exporters never see receipt spans, so no application sampling decision (ratio, parent-based,
 * tail sampling in the app) can drop a receipt; receipt spans are roots, so no parent's sampled flag applies.
 * Export failures are not silent: `flush()` rejects with the number of receipts that could not be delivered.
 *
 * Content-free by construction: every parameter is a branded id (src/ids.ts), an enum, a boolean or
 * a Date; each receipt is validated against the receipt schema before its span starts.
 */
import { SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { validateReceipt } from '@topology-audit/receipt';
import type { EdgeKind, Receipt, RunResult } from '@topology-audit/receipt';
import { receiptSpanAttributes } from './attributes.js';
import type { AgentId, ContractId, ContractVersion, PhaseId, RunId } from './ids.js';
import { ReceiptSpanProcessor } from './processor.js';

export const DEFAULT_OTLP_ENDPOINT = 'http://127.0.0.1:4318';
const SCOPE = 'topology-audit-emitter';

export interface ReceiptEmitterOptions {
  /** The auditor's OTLP/HTTP base URL; receipts go to `{endpoint}/v1/traces` as protobuf. Default http://127.0.0.1:4318. */
  endpoint?: string;
  /** Headers for the export requests (e.g. `authorization: Bearer <ingest token>`). */
  headers?: Record<string, string>;
  /** Per export request (ms); default 10 000. */
  timeoutMillis?: number;
  /** The contract version this code acts under: stamped on every receipt unless a call gives one. */
  version?: ContractVersion;
  /** `service.name` of the receipt spans; default `topology-audit-emitter`. */
  serviceName?: string;
  /** Export through this exporter instead of OTLP/HTTP (another transport; tests). */
  exporter?: SpanExporter;
}

/** Fields every receipt may carry. */
export interface ReceiptOptions {
  /** Observation time; default now. */
  at?: Date;
  /** Overrides the emitter's version for this receipt. */
  version?: ContractVersion;
  /** Local status; default ok. */
  status?: 'ok' | 'error';
}

/** An edge named by its ends and kind (for waits). */
export interface EdgeRef {
  from: AgentId;
  to: AgentId;
  kind: EdgeKind;
}

export const edgeRef = (from: AgentId, to: AgentId, kind: EdgeKind): EdgeRef => ({ from, to, kind });

export class ReceiptExportError extends Error {
  constructor(
    readonly receipts: number,
    readonly lastError: string | null,
  ) {
    super(`${receipts} receipt(s) could not be exported${lastError ? `: ${lastError}` : ''}`);
    this.name = 'ReceiptExportError';
  }
}

export class ReceiptEmitter {
  private readonly provider: BasicTracerProvider;
  private readonly processor: ReceiptSpanProcessor;
  private readonly tracer: Tracer;
  private readonly version?: ContractVersion;

  constructor(opts: ReceiptEmitterOptions = {}) {
    const endpoint = (opts.endpoint ?? DEFAULT_OTLP_ENDPOINT).replace(/\/+$/, '');
    const exporter = opts.exporter ?? new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, headers: opts.headers, timeoutMillis: opts.timeoutMillis });
    this.processor = new ReceiptSpanProcessor(exporter);
    this.provider = new BasicTracerProvider({
      sampler: new AlwaysOnSampler(),
      resource: resourceFromAttributes({ 'service.name': opts.serviceName ?? SCOPE }),
      spanProcessors: [this.processor],
    });
    this.tracer = this.provider.getTracer(SCOPE);
    this.version = opts.version;
  }

  /** The run starts, pinned to a contract (and phase, and version). Returns the receipt's event id. */
  runStart(run: RunId, o: ReceiptOptions & { contract: ContractId; phase?: PhaseId; from?: AgentId }): string {
    return this.emit({ run, type: 'run.start', contract: o.contract, phase: o.phase, from: o.from }, o);
  }

  /** One agent interaction `from -> to : kind`. */
  edge(run: RunId, from: AgentId, to: AgentId, kind: EdgeKind, o: ReceiptOptions = {}): string {
    return this.emit({ run, type: 'edge', from, to, kind }, o);
  }

  /** A declared wait: `from` waits on `on` for `edge` until `deadline`. */
  wait(run: RunId, o: ReceiptOptions & { on: AgentId; edge: EdgeRef; deadline: Date; from?: AgentId }): string {
    return this.emit({ run, type: 'wait', on: o.on, edge: `${o.edge.from} -> ${o.edge.to} : ${o.edge.kind}`, deadline: isoOf(o.deadline, 'deadline'), from: o.from }, o);
  }

  /** The run's final outcome; `verified: true` for a verified one. */
  outcome(run: RunId, o: ReceiptOptions & { verified: boolean; from?: AgentId }): string {
    return this.emit({ run, type: 'outcome', verified: o.verified, from: o.from }, o);
  }

  /** A hole in the evidence (`reason` a short code such as `agent_id_invalid`): the run is uncertain. */
  gap(run: RunId, o: ReceiptOptions & { reason: string; from?: AgentId; to?: AgentId }): string {
    return this.emit({ run, type: 'gap', reason: o.reason, from: o.from, to: o.to }, o);
  }

  /** The run ends. */
  runEnd(run: RunId, o: ReceiptOptions & { result: RunResult; from?: AgentId }): string {
    return this.emit({ run, type: 'run.end', result: o.result, from: o.from }, o);
  }

  /** Waits until every receipt emitted so far is exported; rejects with ReceiptExportError if any could not be. */
  async flush(): Promise<void> {
    await this.processor.forceFlush();
    const f = this.processor.takeFailures();
    if (f.receipts > 0) throw new ReceiptExportError(f.receipts, f.lastError);
  }

  /** Flushes (rejecting as `flush` does) and releases the exporter. */
  async shutdown(): Promise<void> {
    try {
      await this.flush();
    } finally {
      await this.provider.shutdown();
    }
  }

  private emit(fields: ReceiptFields, o: ReceiptOptions): string {
    const at = o.at ?? new Date();
    const receipt: Receipt = { ...dropUndefined(fields), event: 'pending', at: isoOf(at, 'at') } as Receipt;
    const version = o.version ?? this.version;
    if (version !== undefined) receipt.version = version;
    if (o.status === 'error') receipt.status = 'error';
    const checked = validateReceipt(receipt);
    if (!checked.ok) throw new TypeError(`${fields.type} receipt refused: ${checked.error}`);
    const span = this.tracer.startSpan(`topology ${fields.type}`, { kind: SpanKind.INTERNAL, root: true, startTime: at, attributes: receiptSpanAttributes(checked.receipt) });
    span.setStatus({ code: o.status === 'error' ? SpanStatusCode.ERROR : SpanStatusCode.OK });
    span.end(at);
    return span.spanContext().spanId;
  }
}

/** A receipt of one type without its event id and time (Omit on each member of the Receipt union). */
type ReceiptFields = Receipt extends infer R ? (R extends unknown ? Omit<R, 'event' | 'at'> : never) : never;

function isoOf(d: Date, what: string): string {
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new TypeError(`${what}: not a valid Date`);
  return d.toISOString();
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
