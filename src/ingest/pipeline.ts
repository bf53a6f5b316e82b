import { isAgentId, isRunId } from '../core/receipt.js';
import type { Receipt } from '../core/types.js';
import type { AttrValue, SpanRecord } from '../otlp/types.js';
import { CallerResolver, UNNAMED_AGENT, type AgentSpan, type CallerResolverOptions, type HandoffSpan, type SpanPlace } from './callers.js';
import { DIALECTS, type Dialect } from './dialects.js';
import { explicitReceiptsOf, type ExtractResult } from './extract.js';
import { idReason, withEvidence } from './trust.js';
import { INVALID_NAME, isLangGraphSpan, isStep, isTaskPath, isRootCandidate, LangGraphAssembler, LANGGRAPH_DIALECT, lgSpanOf, type LgSpan } from './dialects/langgraph.js';
import { DEFAULT_RUN_KEY, withRun, type RunKeyPart } from './runkey.js';
import { frameworkMarker, UnmappedTracker } from './unmapped.js';
import { CoverageTracker } from './coverage.js';

/** What became of one span, for `explain`: the dialect that claimed it (or 'explicit'), or none. */
export interface SpanObservation {
  span: SpanRecord;
  /** 'explicit', a dialect name, or null when nothing read it (or the span was refused). */
  claimedBy: string | null;
  /** Receipts derived from this span alone (more may come once its caller or root arrives). */
  receipts: Receipt[];
  agent: boolean;
  /** For an agent span: the id its dialect read and its other names (identity.ts), as the resolver sees them. */
  identity?: { id: string; names: string[] };
}

/**
 * One span as the span log keeps it while its trace's skeleton is kept (for the parent wait after the trace's last
 * span) or the trace waits for a caller, target or LangGraph root: only what resolution needs (ids, agent id,
 * operation, times, status, source), every field validated on write and on replay. Never a span name, an event
 * name or any attribute text: a LangGraph node or transfer is logged with its agent id only when that is a valid
 * id, else as the empty string.
 */
export interface LoggedSpan {
  /** trace id, span id, parent span id (lowercase hex) */
  t: string;
  s: string;
  p: string | null;
  /** the source that sent the span (binding evidence) */
  src: string;
  /**
   * what the span is for resolution: an agent invocation, a handoff, a link target (relay), a LangGraph span
   * waiting for its graph root (`langgraph`), a candidate graph root forwarded to the trace's resolver
   * (`lgroot`: an OpenInference CHAIN span without `langgraph_node`; `run` is its run), or a plain node
   */
  op: 'agent' | 'handoff' | 'relay' | 'span' | 'langgraph' | 'lgroot';
  st?: number;
  en?: number;
  /** agent, handoff: the exact nanoseconds below the millisecond of the start / end, when the decoder gave them */
  stn?: number;
  enn?: number;
  sc?: number;
  /** agent, lgroot: its run; handoff: its named run or null */
  run?: string | null;
  agent?: string;
  aliases?: string[];
  edges?: 'none' | 'step';
  /** agent: its OTLP span kind (0-5), when known */
  k?: number;
  links?: { t: string; s: string }[];
  from?: string | null;
  to?: string | null;
  /** langgraph: the node's agent id ('' when its name is not an id), null when the span is not a node */
  node?: string | null;
  /** langgraph: the agent a `transfer_to_<agent>` span names ('' when not an id), else null */
  xfer?: string | null;
  /** langgraph: the node's checkpoint namespace (node names and task ids only, isTaskPath), when it has one */
  ns?: string;
  /** langgraph: the node's superstep (metadata.langgraph_step), when it has one */
  stp?: number;
  /** langgraph: the prebuilt agent whose loop the span ran in (metadata.lc_agent_name), when it is an id */
  lca?: string;
}

/** One trace's spans of one batch, as logged while the trace holds pending work. */
export interface PendingTraceLog {
  traceId: string;
  spans: LoggedSpan[];
}

export interface PipelineOptions extends CallerResolverOptions {
  dialects?: Dialect[];
  /** The order in which a span's run id is taken (`serve --run-key`); default explicit,invocation,trace. */
  runKey?: readonly RunKeyPart[];
  /** How long a trace must be quiet before it is judged unmapped (ms); default twice `waitMs`. */
  unmappedQuietMs?: number;
  /**
   * Cluster with `--span-routing any`: LangGraph roots are read by readLangGraphRoots after a read of the shared
   * span log, not on arrival (see src/ingest/dialects/langgraph.ts).
   */
  deferLangGraphRoots?: boolean;
}

const TRACE_HEX = /^[0-9a-f]{32}$/;
const SPAN_HEX = /^[0-9a-f]{16}$/;
/** Source names are the server's own (`token-3-ab12cd34`, `anonymous`, `auditor`). */
const SOURCE = /^[A-Za-z0-9_.:-]{1,100}$/;
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isSubNs = (v: unknown): v is number => v === undefined || (Number.isInteger(v) && (v as number) >= 0 && (v as number) < 1_000_000);
const isAgentOrUnnamed = (v: unknown): v is string => v === UNNAMED_AGENT || isAgentId(v);
const optAgent = (v: unknown) => v === null || isAgentId(v);
const lgName = (v: unknown): v is string | null => v === null || v === INVALID_NAME || isAgentId(v);

/** Validates one logged span (as read back from the store); null when any field fails. */
export function parseLoggedSpan(v: unknown): LoggedSpan | null {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const x = v as Record<string, unknown>;
  if (typeof x.t !== 'string' || !TRACE_HEX.test(x.t) || typeof x.s !== 'string' || !SPAN_HEX.test(x.s)) return null;
  if (!(x.p === null || (typeof x.p === 'string' && SPAN_HEX.test(x.p)))) return null;
  if (typeof x.src !== 'string' || !SOURCE.test(x.src)) return null;
  const base: LoggedSpan = { t: x.t, s: x.s, p: x.p, src: x.src, op: 'span' };
  if (x.op === 'span' || x.op === 'relay') return { ...base, op: x.op };
  if (!isTime(x.st) || !(x.sc === 0 || x.sc === 1 || x.sc === 2)) return null;
  if (!isSubNs(x.stn) || !isSubNs(x.enn)) return null;
  const ns = (l: LoggedSpan, end: boolean): LoggedSpan => {
    if (x.stn !== undefined) l.stn = x.stn as number;
    if (end && x.enn !== undefined) l.enn = x.enn as number;
    return l;
  };
  if (x.op === 'agent') {
    if (!isTime(x.en) || !isRunId(x.run) || !isAgentOrUnnamed(x.agent)) return null;
    if (x.aliases !== undefined && !(Array.isArray(x.aliases) && x.aliases.length <= 8 && x.aliases.every(isAgentId))) return null;
    if (x.edges !== undefined && x.edges !== 'none' && x.edges !== 'step') return null;
    if (x.k !== undefined && !(Number.isInteger(x.k) && (x.k as number) >= 0 && (x.k as number) <= 5)) return null;
    if (x.links !== undefined) {
      if (!Array.isArray(x.links) || x.links.length > 1000) return null;
      for (const l of x.links as unknown[]) {
        const ll = l as Record<string, unknown> | null;
        if (!ll || typeof ll.t !== 'string' || !TRACE_HEX.test(ll.t) || typeof ll.s !== 'string' || !SPAN_HEX.test(ll.s)) return null;
      }
    }
    const out: LoggedSpan = ns({ ...base, op: 'agent', st: x.st, en: x.en, sc: x.sc, run: x.run, agent: x.agent }, true);
    if (x.aliases !== undefined) out.aliases = x.aliases as string[];
    if (x.edges === 'none' || x.edges === 'step') out.edges = x.edges;
    if (x.k !== undefined) out.k = x.k as number;
    if (x.links !== undefined) out.links = (x.links as { t: string; s: string }[]).map((l) => ({ t: l.t, s: l.s }));
    return out;
  }
  if (x.op === 'handoff') {
    if (!(x.run === null || isRunId(x.run)) || !optAgent(x.from) || !optAgent(x.to)) return null;
    return ns({ ...base, op: 'handoff', st: x.st, sc: x.sc, run: x.run as string | null, from: x.from as string | null, to: x.to as string | null }, false);
  }
  if (x.op === 'langgraph') {
    if (!isTime(x.en) || !lgName(x.node) || !lgName(x.xfer) || !(x.ns === undefined || isTaskPath(x.ns))) return null;
    if (!(x.stp === undefined || isStep(x.stp)) || !(x.lca === undefined || isAgentId(x.lca))) return null;
    const out: LoggedSpan = { ...base, op: 'langgraph', st: x.st, en: x.en, sc: x.sc, node: x.node, xfer: x.xfer };
    if (x.ns !== undefined) out.ns = x.ns;
    if (x.stp !== undefined) out.stp = x.stp;
    if (x.lca !== undefined) out.lca = x.lca as string;
    return out;
  }
  if (x.op === 'lgroot') {
    if (!isRunId(x.run)) return null;
    return { ...base, op: 'lgroot', st: x.st, sc: x.sc, run: x.run };
  }
  return null;
}

function logLangGraph(traceId: string, spanId: string, l: LgSpan): LoggedSpan {
  const out: LoggedSpan = { t: traceId, s: spanId, p: l.parent, src: l.source, op: 'langgraph', st: l.startMs, en: l.endMs, sc: l.status, node: l.node, xfer: l.transferTo };
  if (l.ns) out.ns = l.ns;
  if (l.step !== undefined) out.stp = l.step;
  if (l.agentName !== undefined) out.lca = l.agentName;
  return out;
}

/** The run of a LangGraph root span (after withRun): its `topology.run.id`, else its trace. */
const runOfRoot = (root: SpanRecord): string => String(root.attrs['topology.run.id'] ?? root.traceId);

/** A candidate LangGraph root as logged or forwarded: its place, start, status and run; no name or text. */
function logRoot(span: SpanRecord, src: string): LoggedSpan {
  return { t: span.traceId, s: span.spanId, p: span.parentSpanId, src, op: 'lgroot', st: span.startMs, sc: span.statusCode, run: runOfRoot(span) };
}

function logAgent(a: AgentSpan, src: string): LoggedSpan {
  const l: LoggedSpan = { t: a.traceId, s: a.spanId, p: a.parentSpanId, src, op: 'agent', st: a.startMs, en: a.endMs, sc: a.statusCode, run: a.run, agent: a.agent };
  if (a.startNs !== undefined) l.stn = a.startNs;
  if (a.endNs !== undefined) l.enn = a.endNs;
  if (a.aliases?.length) l.aliases = a.aliases;
  if (a.edges === 'none' || a.edges === 'step') l.edges = a.edges;
  if (a.kind !== undefined) l.k = a.kind;
  if (a.links?.length) l.links = a.links.map((k) => ({ t: k.traceId, s: k.spanId }));
  return l;
}

function logHandoff(h: HandoffSpan, src: string): LoggedSpan {
  const l: LoggedSpan = { t: h.traceId, s: h.spanId, p: h.parentSpanId, src, op: 'handoff', st: h.startMs, sc: h.statusCode, run: h.run, from: h.from, to: h.to };
  if (h.startNs !== undefined) l.stn = h.startNs;
  return l;
}

/**
 * The run id a span names, checked by the id rule. Called after withRun, so `topology.run.id` holds the run the
 * `--run-key` order chose (explicit, invocation or, when named, conversation id) and a conversation id that is
 * not the run is gone; 'ok' when the span names none (the trace id is the run).
 */
function namedRun(attrs: Record<string, AttrValue>): 'ok' | 'invalid' {
  const v = attrs['topology.run.id'] ?? attrs['gen_ai.conversation.id'];
  if (v === undefined) return 'ok';
  return isRunId(typeof v === 'string' ? v : String(v)) ? 'ok' : 'invalid';
}

/** spans -> receipts, for one server. Keeps the caller-resolution and LangGraph buffers between batches. */
export class SpanPipeline {
  readonly callers: CallerResolver;
  readonly langgraph: LangGraphAssembler;
  readonly unmapped: UnmappedTracker;
  /** Traces with no agent-like signal, per instrumentation scope (GET /api/v1/ingest/coverage). */
  readonly coverage: CoverageTracker;
  private readonly dialects: Dialect[];
  private readonly runKey: readonly RunKeyPart[];

  constructor(opts: PipelineOptions) {
    this.callers = new CallerResolver(opts);
    this.langgraph = new LangGraphAssembler({ waitMs: opts.waitMs, deferRoots: opts.deferLangGraphRoots });
    this.unmapped = new UnmappedTracker({ quietMs: opts.unmappedQuietMs ?? opts.waitMs * 2 });
    this.coverage = new CoverageTracker({ quietMs: opts.unmappedQuietMs ?? opts.waitMs * 2 });
    this.dialects = opts.dialects ?? DIALECTS;
    this.runKey = opts.runKey ?? DEFAULT_RUN_KEY;
  }

  /**
   * One export's spans from `source`. The run key is applied first (withRun); a span whose run id then fails
   * the id rule is refused whole (no receipt, not indexed: a descendant waiting on it ends as a gap, never a
   * guessed edge); every receipt, derived ones included (LangGraph's too), passes the same id rule before it
   * leaves and carries the sources of the spans it was derived from. `observe` sees what became of each span
   * (explain).
   */
  process(
    input: SpanRecord[],
    now: number,
    source = 'auditor',
    observe?: (o: SpanObservation) => void,
  ): ExtractResult & { pendingLog: PendingTraceLog[]; agentIdsRefused: number } {
    const out: ExtractResult & { pendingLog: PendingTraceLog[]; agentIdsRefused: number } = { receipts: [], rejected: [], dropped: 0, pendingLog: [], agentIdsRefused: 0 };
    const agentSpans: AgentSpan[] = [];
    const handoffs: HandoffSpan[] = [];
    const relays: SpanRecord[] = [];
    const places: SpanRecord[] = [];
    const logged = new Map<SpanRecord, LoggedSpan>();
    const produced: Receipt[] = [];
    const evidence = { from: [source], to: [source], span: source };
    for (const raw of input) {
      const span = withRun(raw, this.runKey);
      if (namedRun(span.attrs) === 'invalid') {
        out.rejected.push({ spanId: span.spanId, reason: 'the span names a run id that is not an id (1-200 of letters, digits and _ . : @ # + = - /)', code: 'run_id_invalid' });
        observe?.({ span, claimedBy: null, receipts: [], agent: false });
        continue;
      }
      places.push(span);
    }
    const lg = this.langgraph.addBatch(places, now, runOfRoot, source);
    for (const [span, l] of lg.kept) logged.set(span, logLangGraph(span.traceId, span.spanId, l));
    if (this.langgraph.deferring) {
      // A root waits for readLangGraphRoots: logged as one while its trace is pending, so a restart keeps it.
      for (const span of places) if (isRootCandidate(span)) logged.set(span, logRoot(span, source));
    }
    for (const span of places) {
      const before = produced.length;
      const explicitBefore = out.receipts.length;
      if (explicitReceiptsOf(span, out)) {
        this.unmapped.span(span, now, true, false);
        this.coverage.span(span, now, true);
        for (let i = explicitBefore; i < out.receipts.length; i++) this.unmapped.receipt(out.receipts[i].event, span.traceId);
        observe?.({ span, claimedBy: 'explicit', receipts: out.receipts.slice(explicitBefore), agent: false });
        continue;
      }
      if (lg.claimed.has(span)) {
        this.unmapped.span(span, now, true, false, LANGGRAPH_DIALECT);
        this.coverage.span(span, now, true);
        observe?.({ span, claimedBy: LANGGRAPH_DIALECT, receipts: [], agent: false });
        continue;
      }
      let claimedBy: string | null = null;
      let agent = false;
      let identity: SpanObservation['identity'];
      for (const d of this.dialects) {
        const r = d(span);
        if (!r) continue;
        claimedBy = r.dialect;
        for (const x of r.receipts) {
          // An agent named by text that is not an id: the span stands for an unnamed agent (a gap, no id stored).
          if (x.type === 'gap' && (x.reason === 'agent_id_invalid' || x.reason === 'handoff_agent_invalid')) out.agentIdsRefused++;
          produced.push(withEvidence(x, evidence));
        }
        if (r.agentSpan) {
          r.agentSpan.source = source;
          agentSpans.push(r.agentSpan);
          logged.set(span, logAgent(r.agentSpan, source));
          agent = true;
          if (observe && r.agentSpan.agent !== UNNAMED_AGENT) identity = { id: r.agentSpan.agent, names: [r.agentSpan.agent, ...(r.agentSpan.aliases ?? [])] };
        }
        if (r.handoff) {
          r.handoff.source = source;
          handoffs.push(r.handoff);
          logged.set(span, logHandoff(r.handoff, source));
        }
        if (r.relay) {
          relays.push(span);
          logged.set(span, { t: span.traceId, s: span.spanId, p: span.parentSpanId, src: source, op: 'relay' });
        }
        break;
      }
      this.unmapped.span(span, now, claimedBy !== null, agent, claimedBy ?? undefined);
      this.coverage.span(span, now, claimedBy !== null || frameworkMarker(span) !== null);
      for (let i = before; i < produced.length; i++) this.unmapped.receipt(produced[i].event, span.traceId);
      observe?.({ span, claimedBy, receipts: produced.slice(before), agent, ...(identity ? { identity } : {}) });
      if (claimedBy === null) out.dropped++;
    }
    // The graphs read in this batch: counted once their traces' spans are noted (a trace that gave receipts is never unmapped).
    this.langGraphReceipts(produced, out);
    if (agentSpans.length > 0 || places.length > 0) {
      for (const r of this.callers.addBatch(agentSpans, places, now, { handoffs, relays })) {
        produced.push(r);
        this.unmapped.receipt(r.event);
      }
    }
    this.checked(produced, out);
    // Traces whose skeleton is kept or that still wait for a caller, target or graph root: log this batch's spans
    // of them (resolution fields only, never names or text), so the skeleton and the waits survive a crash.
    out.pendingLog = this.pendingLogOf(places, (span) => span.traceId, (span) => logged.get(span) ?? { t: span.traceId, s: span.spanId, p: span.parentSpanId, src: source, op: 'span' as const });
    return out;
  }

  /**
   * Cluster mode with spans not routed by trace id (`serve --span-routing any`): spans of traces another instance
   * resolves (the owner of the trace's partition). Explicit receipts and the receipts a dialect reads off one span
   * alone are made here; what caller resolution needs (every span's place, agent invocations, handoffs, relays) is
   * returned as logged spans for the trace's resolver and never enters this pipeline's buffers, so nothing of these
   * traces waits or expires here. LangGraph spans go the same way (`langgraph`), and so do candidate graph roots
   * (`lgroot`, with their run): the resolver reads the graph (its roots wait for a read of the shared span log).
   */
  forward(input: SpanRecord[], source = 'auditor'): ExtractResult & { forwardLog: PendingTraceLog[]; agentIdsRefused: number } {
    const out: ExtractResult & { forwardLog: PendingTraceLog[]; agentIdsRefused: number } = { receipts: [], rejected: [], dropped: 0, forwardLog: [], agentIdsRefused: 0 };
    const produced: Receipt[] = [];
    const evidence = { from: [source], to: [source], span: source };
    const byTrace = new Map<string, LoggedSpan[]>();
    for (const raw of input) {
      const span = withRun(raw, this.runKey);
      if (namedRun(span.attrs) === 'invalid') {
        out.rejected.push({ spanId: span.spanId, reason: 'the span names a run id that is not an id (1-200 of letters, digits and _ . : @ # + = - /)', code: 'run_id_invalid' });
        continue;
      }
      let logged: LoggedSpan = { t: span.traceId, s: span.spanId, p: span.parentSpanId, src: source, op: 'span' };
      if (isLangGraphSpan(span)) {
        // As in process: kept for its graph, and its explicit receipts (if any) made here.
        explicitReceiptsOf(span, out);
        logged = logLangGraph(span.traceId, span.spanId, lgSpanOf(span, source));
      } else if (!explicitReceiptsOf(span, out)) {
        let claimed = false;
        for (const d of this.dialects) {
          const r = d(span);
          if (!r) continue;
          claimed = true;
          for (const x of r.receipts) {
            if (x.type === 'gap' && (x.reason === 'agent_id_invalid' || x.reason === 'handoff_agent_invalid')) out.agentIdsRefused++;
            produced.push(withEvidence(x, evidence));
          }
          if (r.agentSpan) logged = logAgent(r.agentSpan, source);
          else if (r.handoff) logged = logHandoff(r.handoff, source);
          else if (r.relay) logged = { ...logged, op: 'relay' };
          break;
        }
        if (!claimed && isRootCandidate(span)) {
          // Perhaps a graph's root: its resolver decides (not counted as dropped here).
          logged = logRoot(span, source);
        } else if (!claimed) out.dropped++;
      }
      const list = byTrace.get(span.traceId);
      if (list) list.push(logged);
      else byTrace.set(span.traceId, [logged]);
    }
    this.checked(produced, out);
    out.forwardLog = [...byTrace].map(([traceId, spans]) => ({ traceId, spans }));
    return out;
  }

  /** LangGraph receipts of the last addBatch/expire, counted for the unmapped report and the refusal metric. */
  private langGraphReceipts(produced: Receipt[], out: { agentIdsRefused: number }): void {
    for (const o of this.langgraph.lastOutcomes) {
      for (const r of o.receipts) {
        this.unmapped.receipt(r.event, o.traceId);
        if (r.type === 'gap' && r.reason === 'agent_id_invalid') out.agentIdsRefused++;
        produced.push(r);
      }
    }
  }

  /**
   * The logged spans of traces whose skeleton is kept (a child may still walk through them) or that hold pending
   * work (callers, targets or a LangGraph root). A trace evicted from the skeleton is not logged.
   */
  private pendingLogOf<T>(spans: readonly T[], traceOf: (span: T) => string, toLogged: (span: T) => LoggedSpan): PendingTraceLog[] {
    const kept = new Map<string, boolean>();
    const byTrace = new Map<string, LoggedSpan[]>();
    for (const span of spans) {
      const traceId = traceOf(span);
      let keep = kept.get(traceId);
      if (keep === undefined) kept.set(traceId, (keep = this.keepsTrace(traceId)));
      if (!keep) continue;
      const l = toLogged(span);
      const list = byTrace.get(l.t);
      if (list) list.push(l);
      else byTrace.set(l.t, [l]);
    }
    return [...byTrace].map(([traceId, list]) => ({ traceId, spans: list }));
  }

  /**
   * Replay logged spans after a restart (validated with parseLoggedSpan): each keeps the source that sent it, so
   * binding is checked as if the resolution had completed before the restart.
   */
  replay(spans: LoggedSpan[], now: number): ExtractResult & { pendingLog: PendingTraceLog[] } {
    const out: ExtractResult & { pendingLog: PendingTraceLog[] } = { receipts: [], rejected: [], dropped: 0, pendingLog: [] };
    const agentSpans: AgentSpan[] = [];
    const handoffs: HandoffSpan[] = [];
    const relays: SpanPlace[] = [];
    const places: SpanPlace[] = spans.map((l) => ({ traceId: l.t, spanId: l.s, parentSpanId: l.p }));
    spans.forEach((l, i) => {
      if (l.op === 'agent') {
        const a: AgentSpan = { run: l.run as string, traceId: l.t, spanId: l.s, parentSpanId: l.p, agent: l.agent!, startMs: l.st!, endMs: l.en!, statusCode: l.sc!, source: l.src };
        if (l.stn !== undefined) a.startNs = l.stn;
        if (l.enn !== undefined) a.endNs = l.enn;
        if (l.aliases) a.aliases = l.aliases;
        if (l.edges) a.edges = l.edges;
        if (l.k !== undefined) a.kind = l.k;
        if (l.links) a.links = l.links.map((k) => ({ traceId: k.t, spanId: k.s }));
        agentSpans.push(a);
      } else if (l.op === 'handoff') {
        const h: HandoffSpan = { run: l.run ?? null, traceId: l.t, spanId: l.s, parentSpanId: l.p, startMs: l.st!, statusCode: l.sc!, from: l.from ?? null, to: l.to ?? null, source: l.src };
        if (l.stn !== undefined) h.startNs = l.stn;
        handoffs.push(h);
      } else if (l.op === 'relay') relays.push(places[i]);
      else if (l.op === 'langgraph') {
        // The trace waits for its graph root again, with the sources that sent its spans.
        const lg: LgSpan = { parent: l.p, node: l.node ?? null, transferTo: l.xfer ?? null, ns: l.ns ?? null, startMs: l.st!, endMs: l.en!, status: l.sc!, source: l.src };
        if (l.stp !== undefined) lg.step = l.stp;
        if (l.lca !== undefined) lg.agentName = l.lca;
        this.langgraph.keep(l.t, l.s, lg, now);
      }
    });
    // A forwarded root waits for the next read of the shared span log like one that arrived here (readLangGraphRoots);
    // without deferLangGraphRoots (nothing forwards roots then) it is read at once if its nodes are here.
    for (const l of spans) if (l.op === 'lgroot') this.langgraph.deferRoot(l.t, l.s, l.run as string, now);
    if (!this.langgraph.deferring && this.langgraph.deferredRoots > 0) {
      this.langgraph.readRoots(Infinity);
      this.langGraphRootsRead(out);
    }
    this.checked(this.callers.addBatch(agentSpans, places, now, { handoffs, relays }), out);
    out.pendingLog = this.pendingLogOf(spans, (l) => l.t, (l) => l);
    return out;
  }

  /**
   * deferLangGraphRoots: reads the graphs of the LangGraph roots that arrived before `before` (the start of a read
   * of the shared span log that is now done); their receipts pass the id rule like any other.
   */
  readLangGraphRoots(before: number): ExtractResult & { agentIdsRefused: number } {
    const out: ExtractResult & { agentIdsRefused: number } = { receipts: [], rejected: [], dropped: 0, agentIdsRefused: 0 };
    if (this.langgraph.deferredRoots > 0) {
      this.langgraph.readRoots(before);
      this.langGraphRootsRead(out);
    }
    return out;
  }

  /** The receipts of the graphs readRoots just read (its lastOutcomes), through the id rule into `out`. */
  private langGraphRootsRead(out: ExtractResult & { agentIdsRefused?: number }): void {
    const produced: Receipt[] = [];
    const refused = { agentIdsRefused: 0 };
    this.langGraphReceipts(produced, refused);
    if (out.agentIdsRefused !== undefined) out.agentIdsRefused += refused.agentIdsRefused;
    this.checked(produced, out);
  }

  /**
   * Whether the span log must keep what it holds of the trace: its skeleton is kept (for the parent wait after its
   * last span) or it holds pending work (a caller, target or LangGraph root still to come).
   */
  keepsTrace(traceId: string): boolean {
    return this.callers.keepsTrace(traceId) || this.langgraph.has(traceId);
  }

  /**
   * Cluster (`--span-routing any`): this instance no longer resolves the traces `pick` selects (their partition went to
   * another instance, which adopts their span records): their pending spans are forgotten, deriving nothing.
   */
  dropTraces(pick: (traceId: string) => boolean): number {
    return this.callers.dropTraces(pick);
  }

  /** Traces holding pending work: a caller, target or LangGraph root still to come. */
  pendingTraceIds(): Set<string> {
    const out = this.callers.pendingTraceIds();
    for (const id of this.langgraph.traceIds()) out.add(id);
    return out;
  }

  /** The id rule on every derived receipt: a receipt that fails it is refused with its reason, never stored. */
  private checked(receipts: Receipt[], out: ExtractResult): void {
    for (const r of receipts) {
      const why = idReason(r);
      if (why === null) out.receipts.push(r);
      else out.rejected.push({ spanId: r.event.length <= 64 ? r.event.split(':')[0] : '', reason: `a derived ${r.type} receipt failed the id rule (${why})`, code: why });
    }
  }

  /**
   * Gap receipts for agent spans whose caller never arrived, handoffs whose end never showed and LangGraph
   * traces whose root never came (id rule applied); then traces quiet for long enough are judged unmapped.
   */
  expire(now: number): Receipt[] {
    const out = this.callers.expire(now);
    for (const r of out) this.unmapped.receipt(r.event);
    this.langgraph.expire(now, (traceId) => traceId);
    this.langGraphReceipts(out, { agentIdsRefused: 0 });
    this.unmapped.sweep(now, (traceId) => this.callers.isPending(traceId) || this.langgraph.has(traceId));
    this.coverage.sweep(now, (traceId) => this.callers.isPending(traceId) || this.langgraph.has(traceId));
    return out.filter((r) => idReason(r) === null);
  }
}
