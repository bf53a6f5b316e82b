/**
 * The pending-span index behind caller resolution: the spans of the traces being resolved (keyed by trace id
 * and span id, each with its parent), the agent spans and handoff spans still waiting for a caller, sender or
 * target, and the bounds on both. No resolution rules live here (those are in callers.ts).
 *
 * Costs: "does this trace have pending work" is O(1) (a count per trace, kept by every add / resolve / expire);
 * evicting the oldest idle trace when `maxSpans` is reached is O(log n) amortized (a min-heap of idle traces by
 * first-seen order, with lazy deletion), instead of a scan over every pending key per trace.
 *
 * Eviction order: traces in the order they were first indexed (a trace forgotten and seen again counts as new);
 * the oldest trace that holds no pending work is dropped whole, repeatedly, until the index is back within
 * `maxSpans`. When every other trace is waiting, the oldest waiting traces go too (never the trace being
 * indexed): the bound holds whatever arrives, and their waiting spans are handed back (`takeEvicted`) to end as
 * gaps. A trace is also held to `maxTraceSpans` spans: beyond it, its oldest span goes (a waiting one is handed
 * back likewise). A walk that meets an evicted span stops there, so eviction yields gaps, never a guessed edge.
 */

/** One indexed span: its parent, what the resolver knows of it (`info`, null: not an agent), and when it was last seen. */
export interface IndexNode<I> {
  parent: string | null;
  info: I | null;
  seenAt: number;
}

/** One indexed trace. `state` is the resolver's own per-trace state, created with the trace and forgotten with it. */
export interface TraceEntry<I, X> {
  nodes: Map<string, IndexNode<I>>;
  lastSeen: number;
  state: X;
  /** First-indexed order (eviction order). */
  readonly seq: number;
  /** Pending agent spans plus pending handoff spans of this trace. */
  pending: number;
}

export interface SpanKey {
  traceId: string;
  spanId: string;
}

export interface PendingIndexStats {
  /** Agent and handoff spans waiting. */
  pending: number;
  /** Spans indexed across traces (bounded by maxSpans while some trace is idle). */
  indexed: number;
  /** Traces indexed. */
  traces: number;
  /** Pending spans whose wait ran out. */
  expired: number;
  /** Indexed spans dropped because the index was full (`maxSpans`). */
  evicted: number;
  /** Indexed spans dropped because their trace was full (`maxTraceSpans`). */
  evictedPerTrace: number;
  /** Waiting agent and handoff spans whose span or trace was evicted (each handed back to end as a gap). */
  evictedWaiting: number;
}

export interface PendingIndexOptions {
  /** Upper bound of indexed spans across traces. */
  maxSpans: number;
  /** Upper bound of indexed spans of one trace (default: maxSpans). */
  maxTraceSpans?: number;
}

/** Waiting spans whose span or trace was evicted: they can no longer resolve, and end as gaps. */
export interface EvictedWaiting<A, H> {
  agents: A[];
  handoffs: H[];
}

import { DueHeap, type Slot } from './quiet-order.js';

export const keyOf = (traceId: string, spanId: string) => `${traceId}/${spanId}`;

function addTo<T>(byTrace: Map<string, Map<string, T>>, traceId: string, key: string, item: T): void {
  let m = byTrace.get(traceId);
  if (!m) byTrace.set(traceId, (m = new Map()));
  m.set(key, item);
}

function inArrivalOrder<T>(items: Map<string, T>, arrival: Map<string, number>): T[] {
  if (items.size <= 1) return [...items.values()];
  return [...items].sort((x, y) => arrival.get(x[0])! - arrival.get(y[0])!).map((e) => e[1]);
}

/** Push a slot; when stale slots outnumber the current ones, the heap is rebuilt from those (amortised O(1)). */
function pushBounded<T>(heap: DueHeap<string, T>, current: Map<string, Slot<string, T>>, s: Slot<string, T>): void {
  if (heap.size + 1 > 2 * current.size + 1024) heap.reset([...current.values()]);
  else heap.push(s);
}

function removeFrom<T>(byTrace: Map<string, Map<string, T>>, traceId: string, key: string): void {
  const m = byTrace.get(traceId);
  if (!m) return;
  m.delete(key);
  if (m.size === 0) byTrace.delete(traceId);
}

/** An idle trace in the idle heap, by the seq of its entry. */
interface IdleEntry {
  seq: number;
  traceId: string;
}

/** Adds an idle trace to the min-heap by seq (the oldest idle trace on top). */
function pushIdle(h: IdleEntry[], seq: number, traceId: string): void {
  h.push({ seq, traceId });
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p].seq <= seq) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = { seq, traceId };
}

/** Removes the top of the idle heap (the caller read it; the heap is not empty). */
function popIdle(h: IdleEntry[]): void {
  const last = h.pop();
  if (last === undefined || h.length === 0) return;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= h.length) break;
    const r = l + 1;
    const c = r < h.length && h[r].seq < h[l].seq ? r : l;
    if (h[c].seq >= last.seq) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
}

export class PendingIndex<I, A extends SpanKey, H extends SpanKey, X> {
  private readonly traces = new Map<string, TraceEntry<I, X>>();
  private readonly agents = new Map<string, A>(); // key trace/span, arrival order
  private readonly handoffs = new Map<string, H>(); // key trace/span, arrival order
  /** The pending handoffs of each trace (key trace/span -> span), for rules that look only at one trace. */
  private readonly handoffsByTrace = new Map<string, Map<string, H>>();
  /** The pending agent spans of each trace (key trace/span -> span), for retrying only the traces a batch touched. */
  private readonly agentsByTrace = new Map<string, Map<string, A>>();
  /**
   * Arrival order of each pending agent and of each pending handoff (a replaced span keeps its place, as in
   * `agents` / `handoffs`); one span may wait as both, so each kind has its own.
   */
  private readonly agentArrival = new Map<string, number>();
  private readonly handoffArrival = new Map<string, number>();
  private arrivals = 0;
  /** Idle traces (no pending work) by seq; entries whose trace is gone, re-created or pending are stale and skipped. */
  private heap: IdleEntry[] = [];
  private seq = 0;
  private indexed = 0;
  private expired = 0;
  private evicted = 0;
  private evictedPerTrace = 0;
  private evictedWaitingCount = 0;
  private evictedWaiting: EvictedWaiting<A, H> = { agents: [], handoffs: [] };
  /**
   * Expiry by due time (issue 44): each waiting agent span, waiting handoff and indexed trace has one current slot in
   * a min-heap, at the time its wait would run out if nothing touched it since: the span's `seenAt`, the trace's
   * `lastSeen` (for handoffs and the sweep). A pass pops the due slots and re-checks each; one touched since goes back
   * at its new time. Slots not current (resolved, replaced, forgotten) are dropped when popped.
   */
  private readonly agentDue = new DueHeap<string, A>();
  private readonly handoffDue = new DueHeap<string, H>();
  private readonly traceDue = new DueHeap<string, TraceEntry<I, X>>();
  private readonly agentSlot = new Map<string, Slot<string, A>>();
  private readonly handoffSlot = new Map<string, Slot<string, H>>();
  private readonly traceSlot = new Map<string, Slot<string, TraceEntry<I, X>>>();
  /** The latest `now` indexed; an earlier one (the clock stepped back) makes the next passes rebuild their heaps. */
  private latest = -Infinity;
  private clockBack = { agents: false, handoffs: false, traces: false };
  /** Slots popped by expiry passes so far: the work of expiry. */
  expiryVisits = 0;

  constructor(
    private readonly opts: PendingIndexOptions,
    private readonly newState: () => X,
  ) {}

  stats(): PendingIndexStats {
    return {
      pending: this.agents.size + this.handoffs.size,
      indexed: this.indexed,
      traces: this.traces.size,
      expired: this.expired,
      evicted: this.evicted,
      evictedPerTrace: this.evictedPerTrace,
      evictedWaiting: this.evictedWaitingCount,
    };
  }

  /** The waiting spans evicted since the last call (their waits are over: they end as gaps). */
  takeEvicted(): EvictedWaiting<A, H> {
    const out = this.evictedWaiting;
    if (out.agents.length + out.handoffs.length > 0) this.evictedWaiting = { agents: [], handoffs: [] };
    return out;
  }

  // ---- the span index ----

  traceCount(): number {
    return this.traces.size;
  }

  trace(traceId: string): TraceEntry<I, X> | undefined {
    return this.traces.get(traceId);
  }

  has(traceId: string, spanId: string): boolean {
    return this.traces.get(traceId)?.nodes.has(spanId) ?? false;
  }

  /** Index a span (or refresh it: a known span keeps its `info` unless a new one is given). Evicts when over the bound. */
  index(traceId: string, spanId: string, parent: string | null, info: I | null, now: number): void {
    let t = this.traces.get(traceId);
    if (!t) {
      const orphan = this.orphanPending.get(traceId) ?? 0;
      if (orphan > 0) this.orphanPending.delete(traceId);
      t = { nodes: new Map(), lastSeen: now, state: this.newState(), seq: ++this.seq, pending: orphan };
      this.traces.set(traceId, t);
      if (orphan === 0) pushIdle(this.heap, t.seq, traceId);
      this.dueTrace(traceId, t);
    }
    if (now < this.latest) this.clockBack = { agents: true, handoffs: true, traces: true };
    else this.latest = now;
    const prev = t.nodes.get(spanId);
    if (!prev) this.indexed++;
    t.nodes.set(spanId, { parent, info: info ?? prev?.info ?? null, seenAt: now });
    t.lastSeen = now;
    if (!prev && t.nodes.size > (this.opts.maxTraceSpans ?? this.opts.maxSpans)) this.evictOldestSpan(traceId, t);
    if (this.indexed > this.opts.maxSpans) this.evictOldest(traceId);
  }

  // ---- pending work ----

  /** O(1): true while the trace holds agent or handoff spans waiting. */
  hasPending(traceId: string): boolean {
    return (this.traces.get(traceId)?.pending ?? this.orphanPending.get(traceId) ?? 0) > 0;
  }

  pendingCount(traceId: string): number {
    return (this.traces.get(traceId)?.pending ?? 0) + (this.orphanPending.get(traceId) ?? 0);
  }

  /** The traces holding pending work. */
  pendingTraceIds(): Set<string> {
    const out = new Set<string>();
    for (const [id, t] of this.traces) if (t.pending > 0) out.add(id);
    for (const id of this.orphanPending.keys()) out.add(id);
    return out;
  }

  /** Pending agent spans, in arrival order (safe to resolve or expire while iterating). */
  pendingAgents(): IterableIterator<A> {
    return this.agents.values();
  }

  /** Pending handoff spans, in arrival order (safe to resolve or expire while iterating). */
  pendingHandoffs(): IterableIterator<H> {
    return this.handoffs.values();
  }

  /** Make an agent span wait (a span already waiting is replaced and keeps its place). */
  addAgent(a: A): void {
    const k = keyOf(a.traceId, a.spanId);
    if (!this.agents.has(k)) {
      this.inc(a.traceId);
      this.agentArrival.set(k, ++this.arrivals);
    }
    this.agents.set(k, a);
    addTo(this.agentsByTrace, a.traceId, k, a);
    this.dueAgent(k, a, this.agentArrival.get(k)!);
  }

  addHandoff(h: H): void {
    const k = keyOf(h.traceId, h.spanId);
    if (!this.handoffs.has(k)) {
      this.inc(h.traceId);
      this.handoffArrival.set(k, ++this.arrivals);
    }
    this.handoffs.set(k, h);
    addTo(this.handoffsByTrace, h.traceId, k, h);
    this.dueHandoff(k, h, this.handoffArrival.get(k)!);
  }

  /** The pending handoffs of one trace (order unspecified). */
  handoffsOf(traceId: string): Iterable<H> {
    return this.handoffsByTrace.get(traceId)?.values() ?? [];
  }

  /** The pending agent span with this key (`trace/span`), if it waits. */
  agentByKey(key: string): A | undefined {
    return this.agents.get(key);
  }

  /** The pending agent spans of these traces, plus those with the given keys, in arrival order. */
  pendingAgentsOf(traceIds: Iterable<string>, keys: Iterable<string> = []): A[] {
    const out = new Map<string, A>();
    for (const t of traceIds) for (const [k, a] of this.agentsByTrace.get(t) ?? []) out.set(k, a);
    for (const k of keys) {
      const a = this.agents.get(k);
      if (a !== undefined) out.set(k, a);
    }
    return inArrivalOrder(out, this.agentArrival);
  }

  /** The pending handoff spans of these traces, in arrival order. */
  pendingHandoffsOf(traceIds: Iterable<string>): H[] {
    const out = new Map<string, H>();
    for (const t of traceIds) for (const [k, h] of this.handoffsByTrace.get(t) ?? []) out.set(k, h);
    return inArrivalOrder(out, this.handoffArrival);
  }

  /** Stop an agent span's wait (resolved). */
  removeAgent(a: SpanKey): boolean {
    const k = keyOf(a.traceId, a.spanId);
    if (!this.agents.delete(k)) return false;
    removeFrom(this.agentsByTrace, a.traceId, k);
    this.agentArrival.delete(k);
    this.agentSlot.delete(k);
    this.dec(a.traceId);
    return true;
  }

  removeHandoff(h: SpanKey): boolean {
    const k = keyOf(h.traceId, h.spanId);
    if (!this.handoffs.delete(k)) return false;
    removeFrom(this.handoffsByTrace, h.traceId, k);
    this.handoffArrival.delete(k);
    this.handoffSlot.delete(k);
    this.dec(h.traceId);
    return true;
  }

  /**
   * Forgets every trace `pick` selects, with its waiting agent and handoff spans, without handing them back (they end
   * as no gap here): another resolver took the traces over. Returns the waiting spans removed.
   */
  dropTraces(pick: (traceId: string) => boolean): { agents: A[]; handoffs: H[] } {
    const out: { agents: A[]; handoffs: H[] } = { agents: [], handoffs: [] };
    const ids = new Set<string>();
    for (const id of this.traces.keys()) if (pick(id)) ids.add(id);
    for (const id of this.agentsByTrace.keys()) if (pick(id)) ids.add(id);
    for (const id of this.handoffsByTrace.keys()) if (pick(id)) ids.add(id);
    for (const id of this.orphanPending.keys()) if (pick(id)) ids.add(id);
    for (const id of ids) {
      for (const a of [...(this.agentsByTrace.get(id)?.values() ?? [])]) if (this.removeAgent(a)) out.agents.push(a);
      for (const h of [...(this.handoffsByTrace.get(id)?.values() ?? [])]) if (this.removeHandoff(h)) out.handoffs.push(h);
      const t = this.traces.get(id);
      if (t) {
        this.traces.delete(id);
        this.traceSlot.delete(id);
        this.indexed -= t.nodes.size;
      }
      this.orphanPending.delete(id);
    }
    if (ids.size) this.compact();
    return out;
  }

  /**
   * Handoffs whose trace has been quiet for `waitMs` (or is gone): removed, counted as expired, returned in arrival
   * order. O(expired + touched): the due slots only.
   */
  expireHandoffs(now: number, waitMs: number): H[] {
    if (this.clockBack.handoffs) {
      this.clockBack.handoffs = false;
      for (const [k, h] of this.handoffs) this.dueHandoff(k, h, this.handoffArrival.get(k)!);
    }
    const out = this.popDue(this.handoffDue, this.handoffSlot, now, waitMs, (h) => this.traces.get(h.traceId)?.lastSeen);
    for (const h of out) {
      this.removeHandoff(h);
      this.expired++;
    }
    return out;
  }

  /**
   * Agent spans that arrived `waitMs` ago or more (or whose span is gone): removed, counted as expired, returned in
   * arrival order. O(expired + touched): the due slots only.
   */
  expireAgents(now: number, waitMs: number): A[] {
    if (this.clockBack.agents) {
      this.clockBack.agents = false;
      for (const [k, a] of this.agents) this.dueAgent(k, a, this.agentArrival.get(k)!);
    }
    const out = this.popDue(this.agentDue, this.agentSlot, now, waitMs, (a) => this.traces.get(a.traceId)?.nodes.get(a.spanId)?.seenAt);
    for (const a of out) {
      this.removeAgent(a);
      this.expired++;
    }
    return out;
  }

  /** Forget traces quiet for `idleMs` or more that hold no pending work. O(forgotten + touched). */
  sweep(now: number, idleMs: number): void {
    if (this.clockBack.traces) {
      this.clockBack.traces = false;
      for (const [id, t] of this.traces) this.dueTrace(id, t);
    }
    const cutoff = now - idleMs;
    for (let s = this.traceDue.popDue(cutoff); s !== undefined; s = this.traceDue.popDue(cutoff)) {
      this.expiryVisits++;
      if (this.traceSlot.get(s.key) !== s) continue;
      const t = s.value;
      if (now - t.lastSeen < idleMs) this.dueTrace(s.key, t); // touched since
      else if (t.pending === 0) this.forget(s.key, t);
      else this.traceSlot.delete(s.key); // waiting: due again when its last wait ends (dec)
    }
    this.compact();
  }

  /**
   * Pops the due slots of one kind of waiting span and re-checks each: `timeOf` is the time its wait runs from now
   * (undefined: its span or trace is gone, so the wait is over). Returns the expired ones in arrival order (not yet
   * removed); one touched since goes back at its new time.
   */
  private popDue<T>(heap: DueHeap<string, T>, slots: Map<string, Slot<string, T>>, now: number, waitMs: number, timeOf: (x: T) => number | undefined): T[] {
    const due: Slot<string, T>[] = [];
    const cutoff = now - waitMs;
    for (let s = heap.popDue(cutoff); s !== undefined; s = heap.popDue(cutoff)) {
      this.expiryVisits++;
      if (slots.get(s.key) !== s) continue; // resolved, expired, or replaced (its own slot)
      const at = timeOf(s.value) ?? -Infinity;
      if (now - at < waitMs) {
        const again = { ...s, at };
        slots.set(s.key, again);
        pushBounded(heap, slots, again);
      } else due.push(s);
    }
    due.sort((x, y) => x.seq - y.seq);
    return due.map((s) => s.value);
  }

  private dueAgent(k: string, a: A, arrival: number): void {
    const s = { at: this.traces.get(a.traceId)?.nodes.get(a.spanId)?.seenAt ?? -Infinity, key: k, value: a, seq: arrival };
    this.agentSlot.set(k, s);
    pushBounded(this.agentDue, this.agentSlot, s);
  }

  private dueHandoff(k: string, h: H, arrival: number): void {
    const s = { at: this.traces.get(h.traceId)?.lastSeen ?? -Infinity, key: k, value: h, seq: arrival };
    this.handoffSlot.set(k, s);
    pushBounded(this.handoffDue, this.handoffSlot, s);
  }

  private dueTrace(traceId: string, t: TraceEntry<I, X>): void {
    const s = { at: t.lastSeen, key: traceId, value: t, seq: t.seq };
    this.traceSlot.set(traceId, s);
    pushBounded(this.traceDue, this.traceSlot, s);
  }

  // ---- internals ----

  /**
   * Pending counts of traces not (or no longer) in the span index. A pending span's trace is normally indexed
   * (its span is indexed before it waits), but an eviction between the two must not lose the count; a trace
   * indexed again takes its orphan count back. A trace is in at most one of `traces` and `orphanPending`.
   */
  private readonly orphanPending = new Map<string, number>();

  private inc(traceId: string): void {
    const t = this.traces.get(traceId);
    if (t) t.pending++;
    else this.orphanPending.set(traceId, (this.orphanPending.get(traceId) ?? 0) + 1);
  }

  private dec(traceId: string): void {
    const t = this.traces.get(traceId);
    if (t) {
      if (--t.pending === 0) {
        pushIdle(this.heap, t.seq, traceId);
        if (!this.traceSlot.has(traceId)) this.dueTrace(traceId, t); // the sweep dropped it while it waited
      }
      return;
    }
    const o = this.orphanPending.get(traceId) ?? 0;
    if (o <= 1) this.orphanPending.delete(traceId);
    else this.orphanPending.set(traceId, o - 1);
  }

  private forget(traceId: string, t: TraceEntry<I, X>): void {
    this.traces.delete(traceId);
    this.traceSlot.delete(traceId);
    this.indexed -= t.nodes.size;
    if (t.pending > 0) this.orphanPending.set(traceId, (this.orphanPending.get(traceId) ?? 0) + t.pending);
  }

  /**
   * Back within `maxSpans`: the oldest idle traces first; then, while every other trace waits, the oldest waiting
   * traces, whose waiting spans are handed back through takeEvicted. Never `current`, the trace being indexed.
   */
  private evictOldest(current: string): void {
    let held: { seq: number; traceId: string } | null = null;
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      const t = this.traces.get(top.traceId);
      popIdle(this.heap);
      if (!t || t.seq !== top.seq || t.pending > 0) continue; // stale: gone, re-created, or waiting again
      if (top.traceId === current) {
        held = top; // the span just indexed stays (its agent span is about to wait): back in the heap below
        continue;
      }
      this.forget(top.traceId, t);
      this.evicted += t.nodes.size;
      if (this.indexed <= this.opts.maxSpans) break;
    }
    if (held !== null) pushIdle(this.heap, held.seq, held.traceId);
    if (this.indexed > this.opts.maxSpans) {
      // Map order is first-indexed order, and no idle trace is left: the first ones are the oldest waiting.
      for (const [traceId, t] of this.traces) {
        if (this.indexed <= this.opts.maxSpans) break;
        if (traceId === current) continue;
        this.evictWaitingTrace(traceId, t);
      }
    }
    this.compact();
  }

  /** Drops a trace that holds waiting spans: they stop waiting and are handed back, then the trace goes whole. */
  private evictWaitingTrace(traceId: string, t: TraceEntry<I, X>): void {
    for (const a of [...(this.agentsByTrace.get(traceId)?.values() ?? [])]) this.handBackAgent(a);
    for (const h of [...(this.handoffsByTrace.get(traceId)?.values() ?? [])]) this.handBackHandoff(h);
    this.forget(traceId, t);
    this.evicted += t.nodes.size;
  }

  /** A trace over `maxTraceSpans`: its oldest span goes (a waiting one is handed back). */
  private evictOldestSpan(traceId: string, t: TraceEntry<I, X>): void {
    const oldest = t.nodes.keys().next().value as string;
    t.nodes.delete(oldest);
    this.indexed--;
    this.evictedPerTrace++;
    const k = keyOf(traceId, oldest);
    const a = this.agents.get(k);
    if (a !== undefined) this.handBackAgent(a);
    const h = this.handoffs.get(k);
    if (h !== undefined) this.handBackHandoff(h);
  }

  private handBackAgent(a: A): void {
    if (!this.removeAgent(a)) return;
    this.evictedWaitingCount++;
    this.evictedWaiting.agents.push(a);
  }

  private handBackHandoff(h: H): void {
    if (!this.removeHandoff(h)) return;
    this.evictedWaitingCount++;
    this.evictedWaiting.handoffs.push(h);
  }

  /** Rebuild the heap when stale entries outnumber live traces (keeps it O(traces)). */
  private compact(): void {
    if (this.heap.length <= 2 * this.traces.size + 64) return;
    this.heap = [];
    for (const [traceId, t] of this.traces) if (t.pending === 0) this.heap.push({ seq: t.seq, traceId }); // Map order = seq order: a valid heap
  }
}
