import type { Receipt } from '../core/types.js';
import type { SpanRecord } from '../otlp/types.js';
import { CallerResolver, type AgentSpan, type CallerResolverOptions, type HandoffSpan } from './callers.js';
import { DIALECTS, type Dialect } from './dialects.js';
import { explicitReceiptsOf, type ExtractResult } from './extract.js';

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

  process(spans: SpanRecord[], now: number): ExtractResult {
    const out: ExtractResult = { receipts: [], rejected: [], dropped: 0 };
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
        for (const x of r.receipts) out.receipts.push(x);
        if (r.agentSpan) agentSpans.push(r.agentSpan);
        if (r.handoff) handoffs.push(r.handoff);
        if (r.relay) relays.push(span);
        break;
      }
      if (!mapped) out.dropped++;
    }
    if (agentSpans.length > 0 || spans.length > 0) for (const r of this.callers.addBatch(agentSpans, spans, now, { handoffs, relays })) out.receipts.push(r);
    return out;
  }

  /** Gap receipts for agent spans whose caller never arrived, and handoffs whose end never showed. */
  expire(now: number): Receipt[] {
    return this.callers.expire(now);
  }
}
