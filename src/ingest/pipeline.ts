import type { Receipt } from '../core/types.js';
import type { SpanRecord } from '../otlp/types.js';
import { CallerResolver, type AgentSpan, type CallerResolverOptions, type HandoffSpan } from './callers.js';
import { DIALECTS, type Dialect } from './dialects.js';
import { explicitReceiptsOf, type ExtractResult } from './extract.js';

/** One trace's spans of one batch, as logged while the trace holds pending work (content-free span records). */
export interface PendingTraceLog {
  traceId: string;
  spans: SpanRecord[];
}

export interface PipelineOptions extends CallerResolverOptions {
  dialects?: Dialect[];
}

/** spans -> receipts, for one server. Keeps the caller-resolution buffer between batches. */
export class SpanPipeline {
  readonly callers: CallerResolver;
  private readonly dialects: Dialect[];

  constructor(opts: PipelineOptions) {
    this.callers = new CallerResolver(opts);
    this.dialects = opts.dialects ?? DIALECTS;
  }

  process(spans: SpanRecord[], now: number): ExtractResult & { pendingLog: PendingTraceLog[] } {
    const out: ExtractResult & { pendingLog: PendingTraceLog[] } = { receipts: [], rejected: [], dropped: 0, pendingLog: [] };
    const mappedSpans = new Set<SpanRecord>();
    const agentSpans: AgentSpan[] = [];
    const handoffs: HandoffSpan[] = [];
    const relays: SpanRecord[] = [];
    for (const span of spans) {
      if (explicitReceiptsOf(span, out)) continue;
      let mapped = false;
      for (const d of this.dialects) {
        const r = d(span);
        if (!r) continue;
        mapped = true;
        mappedSpans.add(span);
        for (const x of r.receipts) out.receipts.push(x);
        if (r.agentSpan) agentSpans.push(r.agentSpan);
        if (r.handoff) handoffs.push(r.handoff);
        if (r.relay) relays.push(span);
        break;
      }
      if (!mapped) out.dropped++;
    }
    if (agentSpans.length > 0 || spans.length > 0) for (const r of this.callers.addBatch(agentSpans, spans, now, { handoffs, relays })) out.receipts.push(r);
    // Traces that still wait for a caller or target: log this batch's spans of them (names only where a dialect
    // read them; attributes are the decoder's allow-list already), so the wait survives a crash.
    if (this.callers.stats().pending > 0) {
      const pendingTraces = this.callers.pendingTraceIds();
      const byTrace = new Map<string, SpanRecord[]>();
      for (const span of spans) {
        if (!pendingTraces.has(span.traceId)) continue;
        const kept = mappedSpans.has(span) ? span : { ...span, name: '' };
        const list = byTrace.get(span.traceId);
        if (list) list.push(kept);
        else byTrace.set(span.traceId, [kept]);
      }
      for (const [traceId, list] of byTrace) out.pendingLog.push({ traceId, spans: list });
    }
    return out;
  }

  /** Gap receipts for agent spans whose caller never arrived, and handoffs whose end never showed. */
  expire(now: number): Receipt[] {
    return this.callers.expire(now);
  }
}
