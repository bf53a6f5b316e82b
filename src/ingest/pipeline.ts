import type { Receipt } from '../core/types.js';
import type { SpanRecord } from '../otlp/types.js';
import { CallerResolver, type AgentSpan, type CallerResolverOptions, type HandoffSpan } from './callers.js';
import { DIALECTS, type Dialect } from './dialects.js';
import { explicitReceiptsOf, type ExtractResult } from './extract.js';
import { LangGraphAssembler, LANGGRAPH_DIALECT } from './dialects/langgraph.js';
import { DEFAULT_RUN_KEY, withRun, type RunKeyPart } from './runkey.js';
import { UnmappedTracker } from './unmapped.js';

/** What became of one span, for `explain`: the dialect that claimed it (or 'explicit'), or none. */
export interface SpanObservation {
  span: SpanRecord;
  /** 'explicit', a dialect name, or null when nothing read it. */
  claimedBy: string | null;
  /** Receipts derived from this span alone (more may come once its caller or root arrives). */
  receipts: Receipt[];
  agent: boolean;
}

/** One trace's spans of one batch, as logged while the trace holds pending work (content-free span records). */
export interface PendingTraceLog {
  traceId: string;
  spans: SpanRecord[];
}

export interface PipelineOptions extends CallerResolverOptions {
  dialects?: Dialect[];
  /** The order in which a span's run id is taken (`serve --run-key`); default explicit,invocation,trace. */
  runKey?: readonly RunKeyPart[];
  /** How long a trace must be quiet before it is judged unmapped (ms); default twice `waitMs`. */
  unmappedQuietMs?: number;
}

/** spans -> receipts, for one server. Keeps the caller-resolution buffer between batches. */
export class SpanPipeline {
  readonly callers: CallerResolver;
  readonly langgraph: LangGraphAssembler;
  readonly unmapped: UnmappedTracker;
  private readonly dialects: Dialect[];
  private readonly runKey: readonly RunKeyPart[];

  constructor(opts: PipelineOptions) {
    this.callers = new CallerResolver(opts);
    this.langgraph = new LangGraphAssembler({ waitMs: opts.waitMs });
    this.unmapped = new UnmappedTracker({ quietMs: opts.unmappedQuietMs ?? opts.waitMs * 2 });
    this.dialects = opts.dialects ?? DIALECTS;
    this.runKey = opts.runKey ?? DEFAULT_RUN_KEY;
  }

  process(input: SpanRecord[], now: number, observe?: (o: SpanObservation) => void): ExtractResult & { pendingLog: PendingTraceLog[] } {
    const out: ExtractResult & { pendingLog: PendingTraceLog[] } = { receipts: [], rejected: [], dropped: 0, pendingLog: [] };
    const spans = input.map((s) => withRun(s, this.runKey));
    const mappedSpans = new Set<SpanRecord>();
    const agentSpans: AgentSpan[] = [];
    const handoffs: HandoffSpan[] = [];
    const relays: SpanRecord[] = [];
    const lg = this.langgraph.addBatch(spans, now, (root) => String(root.attrs['topology.run.id'] ?? root.traceId));
    for (const r of lg.receipts) out.receipts.push(r);
    for (const o of this.langgraph.lastOutcomes) for (const r of o.receipts) this.unmapped.receipt(r.event, o.traceId);
    for (const span of spans) {
      const before = out.receipts.length;
      if (explicitReceiptsOf(span, out)) {
        this.unmapped.span(span, now, true, false);
        for (let i = before; i < out.receipts.length; i++) this.unmapped.receipt(out.receipts[i].event, span.traceId);
        observe?.({ span, claimedBy: 'explicit', receipts: out.receipts.slice(before), agent: false });
        continue;
      }
      if (lg.claimed.has(span)) {
        mappedSpans.add(span);
        this.unmapped.span(span, now, true, false);
        observe?.({ span, claimedBy: LANGGRAPH_DIALECT, receipts: [], agent: false });
        continue;
      }
      let claimedBy: string | null = null;
      let agent = false;
      for (const d of this.dialects) {
        const r = d(span);
        if (!r) continue;
        claimedBy = r.dialect;
        mappedSpans.add(span);
        for (const x of r.receipts) out.receipts.push(x);
        if (r.agentSpan) {
          agentSpans.push(r.agentSpan);
          agent = true;
        }
        if (r.handoff) handoffs.push(r.handoff);
        if (r.relay) relays.push(span);
        break;
      }
      this.unmapped.span(span, now, claimedBy !== null, agent);
      for (let i = before; i < out.receipts.length; i++) this.unmapped.receipt(out.receipts[i].event, span.traceId);
      observe?.({ span, claimedBy, receipts: out.receipts.slice(before), agent });
      if (claimedBy === null) out.dropped++;
    }
    if (agentSpans.length > 0 || spans.length > 0) {
      for (const r of this.callers.addBatch(agentSpans, spans, now, { handoffs, relays })) {
        out.receipts.push(r);
        this.unmapped.receipt(r.event);
      }
    }
    // Traces that still wait for a caller, target or graph root: log this batch's spans of them (names only
    // where a dialect read them; attributes are the decoder's allow-list already), so the wait survives a crash.
    if (this.callers.stats().pending > 0 || this.langgraph.waiting > 0) {
      const pendingTraces = this.callers.pendingTraceIds();
      for (const id of this.langgraph.traceIds()) pendingTraces.add(id);
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

  /** Traces holding pending work: a caller, target or LangGraph root still to come. */
  pendingTraceIds(): Set<string> {
    const out = this.callers.pendingTraceIds();
    for (const id of this.langgraph.traceIds()) out.add(id);
    return out;
  }

  /** Gap receipts for agent spans whose caller never arrived, and handoffs whose end never showed. */
  expire(now: number): Receipt[] {
    const out = this.callers.expire(now);
    for (const r of out) this.unmapped.receipt(r.event);
    const lg = this.langgraph.expire(now, (traceId) => traceId);
    for (const o of this.langgraph.lastOutcomes) for (const r of o.receipts) this.unmapped.receipt(r.event, o.traceId);
    out.push(...lg);
    this.unmapped.sweep(now, (traceId) => this.callers.isPending(traceId) || this.langgraph.has(traceId));
    return out;
  }
}
