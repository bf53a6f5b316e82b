/**
 * Resolving the other end of an agent interaction through span parentage (and, for frameworks that link
 * instead of nesting, through span links). Spans are exported when they end, so a child `invoke_agent`
 * usually arrives before its parent: unresolved spans wait in a bounded, time-limited buffer keyed by
 * (trace id, span id). Anything still unresolved when the wait ends becomes a `gap` receipt (the run stays
 * uncertain), never a guessed edge. Modelled on the Collector's servicegraph connector (TTL store with a
 * max-items bound; "store full" and "expired" are counted).
 *
 * Three kinds of pending work share one span index:
 * - agent spans (GenAI `invoke_agent` and the like): caller = the nearest ancestor agent span; or, with
 *   `links`, the sender = the nearest agent span at or above each linked span (Microsoft Agent Framework);
 * - handoff spans: an explicit or enclosing source, and an explicit target or, when the target is not on the
 *   span, the next agent invocation in the trace (Google ADK `transfer_to_agent`, OpenLLMetry handoffs whose
 *   target was unknown when the span started);
 * - claims: an agent invocation that a handoff transferred control to is not also a delegation, so its
 *   delegate/return pair is not derived.
 */
import type { Receipt } from '../core/types.js';
import type { SpanLinkRecord, SpanRecord } from '../otlp/types.js';
import { localStatus } from './extract.js';
import { keyOf, PendingIndex } from './pending-index.js';
import { withEvidence } from './trust.js';
import { callPair, isSharedId } from './identity.js';

/** What the resolver reads of a span that is neither an agent nor a handoff: its place in the trace. */
export type SpanPlace = Pick<SpanRecord, 'traceId' | 'spanId' | 'parentSpanId'>;
import { exactIso } from '../otlp/wire.js';

/** The agent of a span whose identity is not an id (or is absent): it stops the walk, so no caller is guessed past it. */
export const UNNAMED_AGENT = '';

export interface AgentSpan {
  run: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  /** The agent id, or UNNAMED_AGENT. */
  agent: string;
  startMs: number;
  endMs: number;
  /** Exact nanoseconds below the millisecond of the span's start / end (the ms are rounded doubles). */
  startNs?: number;
  endNs?: number;
  statusCode: number;
  /** Other identities of the same agent on the span (e.g. `gen_ai.agent.name` beside `gen_ai.agent.id`). */
  aliases?: string[];
  /**
   * What the span yields once its caller is known: `call` (default) a delegate at its start and, unless it
   * failed, a return at its end; `none` nothing (it only names an agent, for its descendants and as a handoff target);
   * `step` as `call`, except beneath a span of the same agent, where it is that agent's own step (no edge: every span
   * of a LangChain agent loop names its agent).
   */
  edges?: 'call' | 'none' | 'step';
  /** Senders arrive through these links instead of the parent: each resolved sender yields a handoff to this agent. */
  links?: SpanLinkRecord[];
  /** The source that sent the span (binding evidence for this agent); absent: unchecked (the auditor itself). */
  source?: string;
  /** OTLP span kind (identity.ts: only a CLIENT span above a span of the same agent is the same invocation). */
  kind?: number;
}

/** A transfer of control whose source or target may be named on another span. */
export interface HandoffSpan {
  /** The run, when the span names one; null: the run of the source agent span. */
  run: string | null;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  startMs: number;
  /** Exact nanoseconds below the millisecond of the span's start. */
  startNs?: number;
  statusCode: number;
  /** The handing agent; null: the nearest enclosing agent span. */
  from: string | null;
  /** The receiving agent; null: the next agent invocation in the trace (the earliest agent span starting at or after this span). */
  to: string | null;
  /** The source that sent the span. */
  source?: string;
}

interface AgentInfo {
  id: string;
  names: string[];
  run: string;
  startMs: number;
  source?: string;
  kind?: number;
}

/** The resolver's own state of a trace (kept and forgotten with the trace's spans in the index). */
interface TraceState {
  /** Named handoff targets whose first invocation at or after `afterMs` is the handoff itself. */
  claims: { agent: string; afterMs: number }[];
  /** Agent spans chosen as the target of an inferred handoff. */
  claimed: Set<string>;
}

export interface CallerStats {
  pending: number;
  /** Spans in the skeleton (every span of the traces kept, agent or not). */
  indexed: number;
  expired: number;
  /** Skeleton spans evicted because the skeleton was full (`maxSpans`). */
  evicted: number;
  /** Skeleton spans evicted because their trace was full (`maxTraceSpans`). */
  evictedPerTrace: number;
}

/** Spans one trace may keep in the skeleton by default (bounded by `maxSpans` too). */
export const DEFAULT_MAX_TRACE_SPANS = 10_000;

export interface CallerResolverOptions {
  /** How long an agent span waits for its ancestors, and a handoff for its target after its trace goes quiet (ms). */
  waitMs: number;
  /** Upper bound of indexed spans (agent and intermediate) across traces. */
  maxSpans: number;
  /** Upper bound of indexed spans of one trace (default DEFAULT_MAX_TRACE_SPANS, at most maxSpans). */
  maxTraceSpans?: number;
}

export interface BatchExtras {
  handoffs?: HandoffSpan[];
  /** Non-agent spans that must be indexed even before their trace shows an agent span (e.g. MAF `message.send`, the target of links). */
  relays?: SpanPlace[];
}

type Walk = AgentInfo | 'entry' | null;

/** RFC 3339 text of a span time, exact to the nanosecond when the decoder gave the sub-ms part. */
const iso = exactIso;
const srcs = (...s: (string | undefined)[]): string[] => s.filter((x): x is string => x !== undefined);

/** The receipts a resolved agent span stands for: a delegate at its start and, unless it failed, a return at its end. */
export function callReceipts(s: AgentSpan, caller: string, callerSource?: string): Receipt[] {
  const callee = srcs(s.source);
  const callerSrc = srcs(callerSource);
  const out: Receipt[] = [
    withEvidence({ run: s.run, event: `${s.spanId}:delegate`, type: 'edge', at: iso(s.startMs, s.startNs), from: caller, to: s.agent, kind: 'delegate' }, { from: callerSrc, to: callee, span: s.source }),
  ];
  if (localStatus(s.statusCode) !== 'error') {
    out.push(withEvidence({ run: s.run, event: `${s.spanId}:return`, type: 'edge', at: iso(s.endMs, s.endNs), from: s.agent, to: caller, kind: 'return' }, { from: callee, to: callerSrc, span: s.source }));
  }
  return out;
}

function agentGap(s: AgentSpan, reason: string, suffix = 'gap'): Receipt {
  const r: Receipt = { run: s.run, event: `${s.spanId}:${suffix}`, type: 'gap', at: iso(s.startMs, s.startNs), reason };
  if (s.agent !== UNNAMED_AGENT) r.to = s.agent;
  return withEvidence(r, { span: s.source });
}

export function unresolvedGap(s: AgentSpan): Receipt {
  return agentGap(s, s.links?.length ? 'sender_unresolved' : 'caller_unresolved');
}

/** A handoff edge at the handoff span's start. */
/**
 * A handoff edge at the handoff span's start. Evidence: the handoff span's source vouches for `from` (and for
 * `to` when the span names it); an enclosing agent span (`fromSource`) and an inferred target's span (`toSource`) too.
 */
export function handoffEdge(h: HandoffSpan, run: string, from: string, to: string, fromSource?: string, toSource?: string): Receipt {
  const r: Receipt = { run, event: `${h.spanId}:handoff`, type: 'edge', at: iso(h.startMs, h.startNs), from, to, kind: 'handoff' };
  if (localStatus(h.statusCode) === 'error') r.status = 'error';
  return withEvidence(r, { from: srcs(h.source, fromSource), to: h.to !== null ? srcs(h.source) : srcs(toSource), span: h.source });
}

export function handoffGap(h: HandoffSpan, run: string, reason: string, ends: { from?: string | null; to?: string | null } = {}): Receipt {
  const r: Receipt = { run, event: `${h.spanId}:gap`, type: 'gap', at: iso(h.startMs, h.startNs), reason };
  if (ends.from) r.from = ends.from;
  if (ends.to) r.to = ends.to;
  return withEvidence(r, { from: srcs(h.source), span: h.source });
}

/** A handoff from a linked sender (MAF executor -> executor). One per link; the index keeps fan-in apart. */
function linkHandoff(s: AgentSpan, from: string, i: number, senderSource?: string): Receipt {
  const r: Receipt = { run: s.run, event: `${s.spanId}:handoff.${i}`, type: 'edge', at: iso(s.startMs, s.startNs), from, to: s.agent, kind: 'handoff' };
  if (localStatus(s.statusCode) === 'error') r.status = 'error';
  return withEvidence(r, { from: srcs(senderSource), to: srcs(s.source), span: s.source });
}

const namesOf = (s: AgentSpan) => (s.aliases?.length ? [s.agent, ...s.aliases] : [s.agent]);

export class CallerResolver {
  /** The spans of the traces being resolved, the agent and handoff spans waiting, and their bounds (pending-index.ts). */
  private readonly idx: PendingIndex<AgentInfo, AgentSpan, HandoffSpan, TraceState>;

  constructor(private readonly opts: CallerResolverOptions) {
    const maxTraceSpans = Math.min(opts.maxTraceSpans ?? DEFAULT_MAX_TRACE_SPANS, opts.maxSpans);
    this.idx = new PendingIndex({ maxSpans: opts.maxSpans, maxTraceSpans }, () => ({ claims: [], claimed: new Set() }));
  }

  stats(): CallerStats {
    const s = this.idx.stats();
    return { pending: s.pending, indexed: s.indexed, expired: s.expired, evicted: s.evicted, evictedPerTrace: s.evictedPerTrace };
  }

  /**
   * Whether the trace's skeleton is kept (its spans may still be walked through by a child that arrives later) or it
   * holds pending work: what the span log keeps of it must then survive a restart.
   */
  keepsTrace(traceId: string): boolean {
    return this.idx.trace(traceId) !== undefined || this.idx.hasPending(traceId);
  }

  /**
   * Index a batch. `agentSpans` are the batch's agent spans and `extras.handoffs` its handoff spans (already
   * mapped by dialects); `spans` the whole batch, whose other spans join the skeleton too, whatever their trace
   * holds so far: a tool or chain span that arrives before the agent spans around it is walked through when they
   * come (delivery order never changes the caller). Returns the receipts that became derivable, and a gap for
   * each waiting span the skeleton's bounds evicted meanwhile.
   */
  addBatch(agentSpans: AgentSpan[], spans: readonly SpanPlace[], now: number, extras: BatchExtras = {}): Receipt[] {
    const idx = this.idx;
    const handoffs = extras.handoffs ?? [];
    // The traces this batch changes: only their waiting spans (and agents linked to them) can resolve now.
    const touched = new Set<string>();
    for (const a of agentSpans) {
      idx.index(a.traceId, a.spanId, a.parentSpanId, { id: a.agent, names: namesOf(a), run: a.run, startMs: a.startMs, source: a.source, kind: a.kind }, now);
      touched.add(a.traceId);
    }
    for (const h of handoffs) {
      idx.index(h.traceId, h.spanId, h.parentSpanId, null, now);
      touched.add(h.traceId);
    }
    for (const r of extras.relays ?? []) {
      if (!idx.has(r.traceId, r.spanId)) idx.index(r.traceId, r.spanId, r.parentSpanId, null, now);
      touched.add(r.traceId);
    }
    for (const s of spans) {
      if (idx.has(s.traceId, s.spanId)) continue;
      idx.index(s.traceId, s.spanId, s.parentSpanId, null, now);
      touched.add(s.traceId);
    }
    // Waiting spans the bounds evicted while indexing end now (before this batch's spans start waiting: a span
    // sent again must not lose its new link waits to the old one's).
    const evicted = this.evictedGaps();
    for (const a of agentSpans) {
      if ((a.edges ?? 'call') !== 'none' || a.links?.length) {
        const replaced = idx.agentByKey(keyOf(a.traceId, a.spanId));
        if (replaced?.links?.length) this.stopWaitingOnLinks(replaced);
        idx.addAgent(a);
        if (a.links?.length) this.waitOnLinks(a);
      }
    }
    for (const h of handoffs) idx.addHandoff(h);
    const out = this.resolvePending(touched);
    out.push(...evicted);
    return out;
  }

  /** Gaps for the waiting spans the skeleton's bounds evicted: they cannot resolve any more (never a guessed edge). */
  private evictedGaps(): Receipt[] {
    const ev = this.idx.takeEvicted();
    const out: Receipt[] = [];
    for (const h of ev.handoffs) out.push(this.unresolvedHandoffGap(h));
    for (const a of ev.agents) {
      if (a.links?.length) this.stopWaitingOnLinks(a);
      out.push(unresolvedGap(a));
    }
    return out;
  }

  /** The gap of a handoff whose wait ended: its source if the walk finds it, else its named one. */
  private unresolvedHandoffGap(h: HandoffSpan): Receipt {
    const c = h.from === null ? this.walk(h.traceId, h.parentSpanId) : null;
    const from = h.from ?? (c && c !== 'entry' && c.id !== UNNAMED_AGENT ? c.id : null);
    const run = h.run ?? (c && c !== 'entry' ? c.run : h.traceId);
    return handoffGap(h, run, from === null ? 'handoff_source_unresolved' : 'handoff_target_unresolved', { from, to: h.to });
  }

  /**
   * Agent spans whose senders arrive through links, by the traces their links point into: a span indexed in
   * one of those traces may resolve them, though their own trace did not change.
   */
  private readonly linkWaiters = new Map<string, Set<string>>();

  private waitOnLinks(a: AgentSpan): void {
    const key = keyOf(a.traceId, a.spanId);
    for (const l of a.links ?? []) {
      let w = this.linkWaiters.get(l.traceId);
      if (!w) this.linkWaiters.set(l.traceId, (w = new Set()));
      w.add(key);
    }
  }

  private stopWaitingOnLinks(a: AgentSpan): void {
    const key = keyOf(a.traceId, a.spanId);
    for (const l of a.links ?? []) {
      const w = this.linkWaiters.get(l.traceId);
      if (!w) continue;
      w.delete(key);
      if (w.size === 0) this.linkWaiters.delete(l.traceId);
    }
  }

  /**
   * Cluster (`--span-routing any`): forgets the traces `pick` selects, waiting spans included, deriving nothing (no
   * edge, no gap): the owner of their partition adopted their span records. Returns how many waiting spans went.
   */
  dropTraces(pick: (traceId: string) => boolean): number {
    const gone = this.idx.dropTraces(pick);
    for (const a of gone.agents) this.stopWaitingOnLinks(a);
    return gone.agents.length + gone.handoffs.length;
  }

  /** True while the trace holds agent spans or handoffs waiting for a caller, sender or target (O(1)). */
  isPending(traceId: string): boolean {
    return this.idx.hasPending(traceId);
  }

  /** The traces holding pending work. */
  pendingTraceIds(): Set<string> {
    return this.idx.pendingTraceIds();
  }

  /** Does the trace hold agent spans that share the id `id` under different names (identity.ts)? */
  private sharedId(traceId: string, id: string): boolean {
    const infos: AgentInfo[] = [];
    for (const n of this.idx.trace(traceId)?.nodes.values() ?? []) if (n.info !== null && n.info.id === id) infos.push(n.info);
    return isSharedId(id, infos);
  }

  /** Walk up from `start` (inclusive): the nearest agent, 'entry' (no agent above, all received), or null (still waiting). */
  private walk(traceId: string, start: string | null): Walk {
    const t = this.idx.trace(traceId)?.nodes;
    let p = start;
    for (let hops = 0; hops < 10_000; hops++) {
      if (p === null) return 'entry';
      const n = t?.get(p);
      if (!n) return null;
      if (n.info !== null) return n.info;
      p = n.parent;
    }
    return null;
  }

  /**
   * The target of a handoff that does not name it: the earliest agent span starting at or after the handoff.
   * Decided only once that span's ancestors have all arrived, so that an enclosing invocation which started
   * later (a workflow agent around the one that ended first) cannot still turn up.
   */
  private nextInvocation(h: HandoffSpan): { spanId: string; agent: AgentInfo } | null {
    const t = this.idx.trace(h.traceId);
    if (!t) return null;
    let best: { spanId: string; agent: AgentInfo; parent: string | null } | null = null;
    for (const [spanId, n] of t.nodes) {
      const a = n.info;
      if (!a || spanId === h.spanId || a.startMs < h.startMs) continue;
      if (!best || a.startMs < best.agent.startMs || (a.startMs === best.agent.startMs && spanId < best.spanId)) best = { spanId, agent: a, parent: n.parent };
    }
    if (!best || this.walk(h.traceId, best.parent) === null) return null;
    return best;
  }

  private tryHandoff(h: HandoffSpan): Receipt[] | null {
    let from = h.from;
    let run = h.run;
    let fromSource: string | undefined;
    if (from === null) {
      const c = this.walk(h.traceId, h.parentSpanId);
      if (c === null) return null;
      if (c === 'entry' || c.id === UNNAMED_AGENT) return [handoffGap(h, run ?? (c === 'entry' ? h.traceId : c.run), 'handoff_source_unidentified', { to: h.to })];
      from = c.id;
      fromSource = c.source;
      run ??= c.run;
    }
    // The trace's state is gone only when the index evicted the trace while this span was being added (every
    // other trace waiting): its claims went with it.
    const t = this.idx.trace(h.traceId)?.state;
    if (h.to !== null) {
      t?.claims.push({ agent: h.to, afterMs: h.startMs });
      return [handoffEdge(h, run ?? h.traceId, from, h.to, fromSource)];
    }
    const next = this.nextInvocation(h);
    if (next === null) return null;
    t!.claimed.add(next.spanId); // nextInvocation found the target in the trace, so the trace is indexed
    if (next.agent.id === UNNAMED_AGENT) return [handoffGap(h, run ?? next.agent.run, 'handoff_target_unidentified', { from })];
    return [handoffEdge(h, run ?? next.agent.run, from, next.agent.id, fromSource, next.agent.source)];
  }

  /** An invocation a still-undecided handoff may claim waits for that decision. */
  private heldByHandoff(a: AgentSpan): boolean {
    for (const h of this.idx.handoffsOf(a.traceId)) {
      if (h.traceId !== a.traceId || h.startMs > a.startMs) continue;
      if (h.to === null || namesOf(a).includes(h.to)) return true;
    }
    return false;
  }

  private tryAgent(a: AgentSpan): Receipt[] | null {
    if (a.links?.length) {
      const senders: Walk[] = [];
      for (const l of a.links) {
        const c = this.walk(l.traceId, l.spanId);
        if (c === null) return null;
        senders.push(c);
      }
      const out: Receipt[] = [];
      senders.forEach((c, i) => {
        if (c === 'entry' || c === null) return; // the message came from outside any agent (the workflow's input)
        out.push(c.id === UNNAMED_AGENT ? agentGap(a, 'sender_unidentified', `gap.${i}`) : linkHandoff(a, c.id, i, c.source));
      });
      return out;
    }
    const c = this.walk(a.traceId, a.parentSpanId);
    if (c === null) return null;
    if (this.heldByHandoff(a)) return null;
    const t = this.idx.trace(a.traceId)?.state; // absent: evicted while this span was added (see tryHandoff)
    if (t?.claimed.delete(a.spanId)) return [];
    const names = namesOf(a);
    const claim = t ? t.claims.findIndex((x) => names.includes(x.agent) && x.afterMs <= a.startMs) : -1;
    if (claim >= 0) {
      t!.claims.splice(claim, 1);
      return [];
    }
    if (c === 'entry') return []; // the entry agent
    if (c.id === UNNAMED_AGENT || a.agent === UNNAMED_AGENT) return [agentGap(a, 'caller_unidentified')];
    if (a.edges === 'step' && c.names.includes(a.agent)) return []; // the agent's own step
    const pair = callPair(c, { id: a.agent, names, kind: a.kind }, (id) => this.sharedId(a.traceId, id));
    if (pair === null) return []; // the same invocation seen from client and server side
    return callReceipts(pair.to === a.agent ? a : { ...a, agent: pair.to }, pair.from, c.source);
  }

  /**
   * Retry the waiting spans of the traces `touched` changed (and the agents linked into them), handoffs first,
   * each kind in arrival order. A waiting span's outcome depends only on its own trace (its walk, the trace's
   * handoffs, claims and claimed targets) and, for linked senders, on the traces its links name; a retry that
   * fails changes nothing, and nothing in a pass unblocks a span tried earlier in the same pass. So a span in
   * a trace nothing touched would fail again: retrying only these gives exactly the receipts (and order) of
   * retrying every waiting span, at a cost that follows the batch instead of everything pending.
   */
  private resolvePending(touched: ReadonlySet<string>): Receipt[] {
    const out: Receipt[] = [];
    if (touched.size === 0) return out;
    for (const h of this.idx.pendingHandoffsOf(touched)) {
      const r = this.tryHandoff(h);
      if (r === null) continue;
      this.idx.removeHandoff(h);
      out.push(...r);
    }
    const linked: string[] = [];
    for (const t of touched) for (const k of this.linkWaiters.get(t) ?? []) linked.push(k);
    for (const a of this.idx.pendingAgentsOf(touched, linked)) {
      const r = this.tryAgent(a);
      if (r === null) continue;
      this.idx.removeAgent(a);
      if (a.links?.length) this.stopWaitingOnLinks(a);
      out.push(...r);
    }
    return out;
  }

  /**
   * Expire waits that ran out: a gap receipt each. An agent span waits `waitMs` from its arrival; a handoff
   * waits until its trace has been quiet for `waitMs` (its target's invocation arrives only when it ends).
   * Also forgets traces idle for longer than twice the wait.
   */
  expire(now: number): Receipt[] {
    const out: Receipt[] = [];
    const expiredHandoffs = this.idx.expireHandoffs(now, this.opts.waitMs);
    for (const h of expiredHandoffs) out.push(this.unresolvedHandoffGap(h));
    // Invocations held for an expired handoff are released first: their own caller may be known.
    if (out.length > 0) {
      const touched = new Set<string>();
      for (const h of expiredHandoffs) touched.add(h.traceId);
      out.push(...this.resolvePending(touched));
    }
    for (const a of this.idx.expireAgents(now, this.opts.waitMs)) {
      if (a.links?.length) this.stopWaitingOnLinks(a);
      out.push(unresolvedGap(a));
    }
    this.idx.sweep(now, this.opts.waitMs * 2);
    return out;
  }
}
