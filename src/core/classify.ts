/**
 * The verdict: a pure function of (pinned contract, the run's receipts, now).
 *
 * Receipts are folded into a RunState whose aggregates are commutative (sets, minima, counts), so the
 * verdict cannot depend on arrival order, and adding one receipt costs O(1): the server keeps one RunState
 * per live run and re-evaluates it without re-reading the run. `evaluate` costs O(plan + distinct edges,
 * agents and versions + declared waits), plus the event lists its findings carry; it re-reads receipts only to
 * list the events of an unknown agent or a foreign version.
 */
import type { Contract, PlanStep } from './contract.js';
import { compactKey, edgeKey, formatDuration, humanDuration, parseEdge, specKey, tripleKey, type EdgeSpec } from './edge.js';
import { receiptCanon } from './receipt.js';
import { ceilMillis, formatInstant, humanDelta, subMillisOf, toInstant, type Instant } from './time.js';
import type { ContractRegistry, PinResolution, PinRef } from './registry.js';
import { precedence, type Finding, type NaiveVerdict, type Pin, type Receipt, type RunVerdict, type Verdict } from './types.js';

export type AddResult = 'accepted' | 'duplicate' | 'conflict';

/** An observation: its event and its instant (whole ms `at` plus sub-ms `ns`, see src/core/time.ts). */
interface Obs {
  event: string;
  at: number;
  ns: number;
}

interface EdgeAgg {
  from: string;
  to: string;
  kind: string;
  /** How many receipts observed this edge. */
  count: number;
  /** The earliest observation (by time, then event id). */
  first: Obs;
  /** Event ids of the observations, sorted; ids added since the last read wait in `unsorted` (see sortedEvents). */
  sorted: string[];
  unsorted: string[];
}

/** A parsed wait edge: its spec and canonical text (shared by every wait on the same text). */
interface WaitEdge {
  spec: EdgeSpec;
  key: string;
}

/** A declared wait with what evaluate needs from it, read once when the receipt is folded. */
interface WaitFacts {
  receipt: Receipt;
  at: number;
  atNs: number;
  deadline: number;
  deadlineNs: number;
  /** The awaited edge, or null when its text does not parse (validated at ingest; such a wait is ignored). */
  edge: WaitEdge | null;
}

/** Parsed wait edges by their text: a run's waits usually name a handful of edges. Bounded. */
const waitEdges = new Map<string, WaitEdge | null>();
const WAIT_EDGE_CACHE = 10_000;

function waitEdgeOf(text: string): WaitEdge | null {
  let parsed = waitEdges.get(text);
  if (parsed !== undefined) return parsed;
  try {
    const spec = parseEdge(text);
    parsed = { spec, key: specKey(spec) };
  } catch {
    parsed = null; // validated at ingest; an unparsable wait is ignored by evaluate
  }
  if (waitEdges.size < WAIT_EDGE_CACHE) waitEdges.set(text, parsed);
  return parsed;
}

/**
 * Receipt fields whose values repeat across receipts (types, versions, enums, agent and contract ids): the copy a
 * RunState keeps shares one string per distinct value, so a million live receipts do not hold a million copies
 * of "orchestrator". Bounded: past the bound new values are kept as they are.
 */
const SHARED_FIELDS = ['type', 'version', 'status', 'contract', 'phase', 'from', 'to', 'kind', 'on', 'edge', 'result', 'reason', 'state', 'finalOwner', 'onTimeout', 'budgetOp'] as const;
const sharedStrings = new Map<string, string>();
const SHARED_STRINGS = 100_000;

function shared(v: string): string {
  const s = sharedStrings.get(v);
  if (s !== undefined) return s;
  if (sharedStrings.size < SHARED_STRINGS) sharedStrings.set(v, v);
  return v;
}

/** The receipt as a RunState keeps it: an equal copy (same fields, same order) whose repeated strings are shared. */
function keptReceipt(r: Receipt, run: string): Receipt {
  const c = { ...r } as Record<string, unknown>;
  if (c.run === run) c.run = run;
  for (const k of SHARED_FIELDS) {
    const v = c[k];
    if (typeof v === 'string') c[k] = shared(v);
  }
  return c as unknown as Receipt;
}

/** An edge aggregate's event ids in sorted order (the order sortStr gives), merging in ids added since the last call. */
function sortedEvents(e: EdgeAgg): string[] {
  if (e.unsorted.length > 0) {
    e.sorted = mergeSorted(e.sorted, e.unsorted.sort());
    e.unsorted = [];
  }
  return e.sorted;
}

/** Merge of two sorted lists of distinct strings (code unit order, as Array.prototype.sort). */
function mergeSorted(a: string[], b: string[]): string[] {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out: string[] = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i] < b[j] ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}

/** tripleKey of each target of a spec, made once per spec object (plan steps and wait edges are long-lived). */
const specTriples = new WeakMap<EdgeSpec, string[]>();
function tripleKeysOf(spec: EdgeSpec): string[] {
  let keys = specTriples.get(spec);
  if (keys === undefined) specTriples.set(spec, (keys = spec.to.map((t) => tripleKey(spec.from, t, spec.kind))));
  return keys;
}

/** Is b earlier than a (or a absent)? By time (ms, then ns), then event id (code point order; ids are ASCII). */
function earlier(a: Obs | null, b: Obs): boolean {
  return a === null || b.at < a.at || (b.at === a.at && (b.ns < a.ns || (b.ns === a.ns && b.event < a.event)));
}
/** a <= b on (ms, ns) pairs. */
const atOrBefore = (aMs: number, aNs: number, bMs: number, bNs: number): boolean => aMs < bMs || (aMs === bMs && aNs <= bNs);
/** A receipt's observation. */
const obsOf = (r: Receipt): Obs => ({ event: r.event, at: Date.parse(r.at), ns: subMillisOf(r.at) });

function count<K>(m: Map<K, number>, k: K): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

/** The fold of one run's receipts. */
export class RunState {
  readonly byEvent = new Map<string, Receipt>();
  /** event id -> every distinct content seen under it (only for conflicts). */
  readonly conflicts = new Map<string, Receipt[]>();
  // aggregates (rebuilt from byEvent minus conflicts when a conflict appears)
  starts: Receipt[] = [];
  ends: Receipt[] = [];
  /** The earliest and latest receipt instants: whole ms, and the sub-ms nanoseconds in firstNs / lastNs. */
  firstAt = Infinity;
  firstNs = 0;
  lastAt = -Infinity;
  lastNs = 0;
  edges = new Map<string, EdgeAgg>();
  /** Agents named by the receipts (as from, an edge's to, a wait's on), with how often; events via agentEvents. */
  agents = new Map<string, number>();
  /** Versions the receipts carry, with how often; events via versionEvents. */
  versions = new Map<string, number>();
  waits: Receipt[] = [];
  /** Parsed facts of `waits`, in the same order. */
  waitFacts: WaitFacts[] = [];
  verifiedOutcome: Obs | null = null;
  gaps: Receipt[] = [];
  notOk: string[] = [];
  handoffs: Receipt[] = [];

  constructor(readonly run: string) {}

  get size(): number {
    return this.byEvent.size;
  }

  /**
   * Adds one receipt; a repeat of an event id with equal content is a duplicate, with different content a conflict.
   * The state keeps an equal copy of the receipt (see keptReceipt), never the caller's object.
   */
  add(input: Receipt): AddResult {
    const r = keptReceipt(input, this.run);
    const conflicted = this.conflicts.get(r.event);
    if (conflicted) {
      const c = receiptCanon(r);
      if (conflicted.some((x) => receiptCanon(x) === c)) return 'duplicate';
      conflicted.push(r);
      return 'conflict';
    }
    const prev = this.byEvent.get(r.event);
    if (prev) {
      if (receiptCanon(prev) === receiptCanon(r)) return 'duplicate';
      this.conflicts.set(r.event, [prev, r]);
      this.byEvent.delete(r.event);
      this.rebuild();
      return 'conflict';
    }
    this.byEvent.set(r.event, r);
    this.fold(r);
    return 'accepted';
  }

  private rebuild(): void {
    this.starts = [];
    this.ends = [];
    this.firstAt = Infinity;
    this.firstNs = 0;
    this.lastAt = -Infinity;
    this.lastNs = 0;
    this.edges = new Map();
    this.agents = new Map();
    this.versions = new Map();
    this.waits = [];
    this.waitFacts = [];
    this.verifiedOutcome = null;
    this.gaps = [];
    this.notOk = [];
    this.handoffs = [];
    for (const r of this.byEvent.values()) this.fold(r);
  }

  private fold(r: Receipt): void {
    const at = Date.parse(r.at);
    const ns = subMillisOf(r.at);
    if (at < this.firstAt || (at === this.firstAt && ns < this.firstNs)) {
      this.firstAt = at;
      this.firstNs = ns;
    }
    if (at > this.lastAt || (at === this.lastAt && ns > this.lastNs)) {
      this.lastAt = at;
      this.lastNs = ns;
    }
    if (r.version !== undefined) count(this.versions, r.version);
    if (r.status !== undefined && r.status !== 'ok') this.notOk.push(r.event);
    if (r.from !== undefined) count(this.agents, r.from);
    switch (r.type) {
      case 'run.start':
        this.starts.push(r);
        break;
      case 'run.end':
        this.ends.push(r);
        break;
      case 'edge': {
        count(this.agents, r.to!);
        const k = tripleKey(r.from!, r.to!, r.kind!);
        const e = this.edges.get(k);
        if (e) {
          e.count++;
          e.unsorted.push(r.event);
          const o = { event: r.event, at, ns };
          if (earlier(e.first, o)) e.first = o;
        } else this.edges.set(k, { from: r.from!, to: r.to!, kind: r.kind!, count: 1, first: { event: r.event, at, ns }, sorted: [r.event], unsorted: [] });
        break;
      }
      case 'wait':
        count(this.agents, r.on!);
        this.waits.push(r);
        this.waitFacts.push({ receipt: r, at, atNs: ns, deadline: Date.parse(r.deadline!), deadlineNs: subMillisOf(r.deadline!), edge: waitEdgeOf(r.edge!) });
        break;
      case 'outcome':
        if (r.verified === true) {
          const o = { event: r.event, at, ns };
          if (earlier(this.verifiedOutcome, o)) this.verifiedOutcome = o;
        }
        break;
      case 'gap':
        this.gaps.push(r);
        break;
      case 'handoff':
        this.handoffs.push(r);
        break;
    }
  }

  /** Event ids of the receipts naming `agent` (as from, an edge's to, a wait's on), in fold order. */
  agentEvents(agent: string): string[] {
    const out: string[] = [];
    for (const r of this.byEvent.values()) {
      if ((r.from !== undefined && r.from === agent) || (r.type === 'edge' && r.to === agent) || (r.type === 'wait' && r.on === agent)) out.push(r.event);
    }
    return out;
  }

  /** Event ids of the receipts carrying `version`, in fold order. */
  versionEvents(version: string): string[] {
    const out: string[] = [];
    for (const r of this.byEvent.values()) if (r.version !== undefined && r.version === version) out.push(r.event);
    return out;
  }

  /** The earliest run.start (by time, then event id), the one that pins. */
  firstStart(): Receipt | null {
    let best: Receipt | null = null;
    for (const s of this.starts) if (!best || earlier(obsOf(best), obsOf(s))) best = s;
    return best;
  }

  /** The run's end: its earliest run.end (by time, then event id). */
  firstEnd(): Receipt | null {
    let best: Receipt | null = null;
    for (const s of this.ends) if (!best || earlier(obsOf(best), obsOf(s))) best = s;
    return best;
  }
}

/** A pin decision for a run: the resolved contract, or why there is none. */
export type Pinning = PinResolution;

/** Resolve a run's pin from its receipts: the earliest run.start, else the default contract (newest non-retired, first phase). */
export function resolvePin(state: RunState, registry: ContractRegistry, defaultContract?: string): Pinning {
  const start = state.firstStart();
  if (start) return registry.resolve(startRef(start));
  if (defaultContract) return registry.resolve({ contract: defaultContract });
  return { ok: false, reason: 'no run.start names a contract and no default contract is configured' };
}

export function startRef(s: Receipt): PinRef {
  return { contract: s.contract!, version: s.version, phase: s.phase };
}

export interface EvaluateOptions {
  /** Resolves a later run.start's reference with defaults filled, to compare it with the pin. */
  registry?: ContractRegistry;
  /** Extra findings from other audits (e.g. the handoff lifecycle); precedence still decides. */
  extraFindings?: (state: RunState, now: number) => Finding[];
}

/** Distinct values, sorted (copies; short lists without the Set). */
const sortStr = (a: string[]): string[] => (a.length === 0 ? [] : a.length === 1 ? [a[0]] : [...new Set(a)].sort());
/** RFC 3339 text of an instant, with the sub-millisecond digits when it has any. */
const iso = (ms: number, ns = 0) => formatInstant(ms, ns);

/** The naive rule (section 3), for comparison only: never used to decide. */
export function naiveVerdict(state: RunState): NaiveVerdict {
  if (state.size === 0 && state.conflicts.size === 0) return 'red';
  if (state.notOk.length > 0) return 'red';
  for (const c of state.conflicts.values()) if (c.some((r) => r.status !== undefined && r.status !== 'ok')) return 'red';
  if (state.ends.some((e) => e.result === 'failed')) return 'red';
  return 'green';
}

/**
 * Evaluate a run's verdict and every finding at `now`: milliseconds since the epoch, or an Instant exact to the
 * nanosecond (src/core/time.ts).
 */
export function evaluate(state: RunState, pinning: Pinning, nowAt: number | Instant, opts: EvaluateOptions = {}): RunVerdict {
  const { ms: now, ns: nowNs } = toInstant(nowAt);
  const findings: Finding[] = [];
  let nextChangeAt = Infinity;
  // `eventsSorted`: the events are already distinct and sorted (a fresh copy is still made).
  const add = (f: Omit<Finding, 'agents' | 'events'> & { agents?: string[]; events?: string[] }, eventsSorted = false) =>
    findings.push({ ...f, agents: sortStr(f.agents ?? []), events: eventsSorted ? f.events!.slice() : sortStr(f.events ?? []) });

  // 1. uncertain: conflicts and gaps are reported whatever the pin.
  for (const [event, versions] of state.conflicts) {
    add({
      verdict: 'uncertain',
      code: 'conflict',
      events: [event],
      message: `event ${event} was delivered ${versions.length} times with different content; neither is used: fix the emitter's event ids`,
      settled: false,
    });
  }
  for (const g of state.gaps) {
    add({
      verdict: 'uncertain',
      code: 'gap',
      agents: g.to ? [g.to] : [],
      events: [g.event],
      message: `evidence has a hole (${g.reason}${g.to ? ` for ${g.to}` : ''}): the verdict stays uncertain until the missing evidence arrives`,
      settled: false,
    });
  }
  if (!pinning.ok) {
    add({ verdict: 'uncertain', code: 'no_pin', message: `no resolvable pinned contract: ${pinning.reason}`, settled: false });
    return finish(state, null, findings, Infinity);
  }
  const { pin, contract } = pinning;
  const phase = contract.phases.find((p) => p.name === pin.phase)!;
  const where = `${contract.contract}@${contract.version}`;

  // 2. stale_contract
  if (contract.retired) {
    add({ verdict: 'stale_contract', code: 'retired_version', message: `the pinned version ${where} is retired: stop comparing the run with the wrong design; start runs on a current version`, settled: true });
  }
  for (const version of state.versions.keys()) {
    if (version === pin.version) continue;
    const events = state.versionEvents(version);
    add({
      verdict: 'stale_contract',
      code: 'version_mismatch',
      events,
      message: `receipts carry version "${version}" but the run is pinned to "${pin.version}" (${where}): stop comparing the run with the wrong design`,
      settled: true,
    });
  }
  const first = state.firstStart();
  for (const s of state.starts) {
    if (s === first) continue;
    const ref = startRef(s);
    const res = opts.registry ? opts.registry.resolve(ref) : null;
    const same = res
      ? res.ok && res.pin.contract === pin.contract && res.pin.version === pin.version && res.pin.phase === pin.phase
      : ref.contract === pin.contract && (ref.version ?? pin.version) === pin.version && (ref.phase ?? pin.phase) === pin.phase;
    if (!same) {
      add({
        verdict: 'stale_contract',
        code: 'repinned',
        events: [s.event],
        message: `a later run.start names ${ref.contract}@${ref.version ?? '(newest)'}/${ref.phase ?? '(first phase)'} but the run is pinned to ${where}/${pin.phase}: a run never adopts a new version midway`,
        settled: true,
      });
    }
  }

  // 3. unknown_agent
  for (const agent of state.agents.keys()) {
    if (contract.agentSet.has(agent)) continue;
    add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: state.agentEvents(agent), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true });
  }

  // 4. forbidden_edge and 5. ambiguous_route
  // Per allow rule: how often its edges were observed, by which aggregates (events are read only for a finding).
  const ruleCounts = new Map<number, { count: number; aggs: EdgeAgg[]; edges: Set<string> }>();
  for (const [triple, e] of state.edges) {
    const rule = contract.allowByEdge.get(triple); // edges are keyed by tripleKey(from, to, kind)
    if (!rule) {
      const k = edgeKey(e.from, e.to, e.kind);
      add(
        {
          verdict: 'forbidden_edge',
          code: 'forbidden_edge',
          edge: k,
          agents: [e.from, e.to],
          events: sortedEvents(e),
          message: `${k} is not allowed by ${where}: contain the route before retrying work`,
          settled: true,
        },
        true,
      );
      continue;
    }
    const c = ruleCounts.get(rule.index) ?? { count: 0, aggs: [], edges: new Set<string>() };
    c.count += e.count;
    c.aggs.push(e);
    c.edges.add(e.from).add(e.to);
    ruleCounts.set(rule.index, c);
  }
  for (const rule of contract.allow) {
    const c = ruleCounts.get(rule.index);
    if (!c || c.count <= rule.max) continue;
    // Event ids are distinct across a run's edges, so merging each edge's sorted ids gives sortStr's result.
    let events: string[] = [];
    for (const e of c.aggs) events = mergeSorted(events, sortedEvents(e));
    add(
      {
        verdict: 'ambiguous_route',
        code: 'multiplicity',
        edge: rule.key,
        agents: [...c.edges],
        events,
        message: `${rule.key} observed ${c.count} times (max ${rule.max}): reconcile ownership and possible duplicate effects`,
        settled: true,
      },
      true,
    );
  }

  // Plan, waits, outcome and end. Every instant is a pair (whole ms, sub-ms ns): see src/core/time.ts.
  const end = state.firstEnd();
  const endAt = end ? Date.parse(end.at) : Infinity;
  const endNs = end ? subMillisOf(end.at) : 0;
  // A run's own end receipt proves time reached its end: for an ended run, a deadline at or before the end has
  // passed whatever `now` says (clock skew, `replay --now` in the past), so an ended run's verdict cannot move with time.
  const endLater = end !== null && !atOrBefore(endAt, endNs, now, nowNs);
  const clock = endLater ? endAt : now;
  const clockNs = endLater ? endNs : nowNs;
  const startAt = first ? Date.parse(first.at) : state.firstAt;
  const startNs = first ? subMillisOf(first.at) : state.firstNs;
  /** Is (ms, ns) at or before the run's end (always, for a run without an end)? */
  const byEnd = (ms: number, ns: number) => ms < endAt || (ms === endAt && ns <= endNs);
  const observedAt = (spec: EdgeSpec): Obs | null => {
    let best: Obs | null = null;
    for (const triple of tripleKeysOf(spec)) {
      const e = state.edges.get(triple);
      // The earliest observation at or before the end is the edge's earliest, if that one is not after the end.
      if (e && byEnd(e.first.at, e.first.ns) && earlier(best, e.first)) best = e.first;
    }
    return best;
  };
  const plan = phase.plan;
  const obs = plan.map((s) => observedAt(s.spec));
  // Due instants: whole ms in `due` (null: not due), sub-ms ns in `dueNs`.
  const due: (number | null)[] = new Array(plan.length).fill(null);
  const dueNs: number[] = new Array(plan.length).fill(0);
  // `after` is acyclic (refused at load): resolve due times by memoised recursion.
  const dueOf = (i: number, seen: Set<number>): number | null => {
    if (due[i] !== null) return due[i];
    if (seen.has(i)) return null;
    seen.add(i);
    const step = plan[i];
    // The first edges and parallel branches are due at the run's start; any other edge at the latest
    // observation time of its `after` edges, even when agents' clocks put that before the start.
    // A run whose every receipt conflicts has no usable start: nothing is due.
    if (step.after.length === 0) {
      if (!Number.isFinite(startAt)) return null;
      dueNs[i] = startNs;
      return (due[i] = startAt);
    }
    let t = -Infinity;
    let tNs = 0;
    for (const a of step.after) {
      const o = obs[a];
      if (!o) return null;
      if (o.at > t || (o.at === t && o.ns > tNs)) {
        t = o.at;
        tNs = o.ns;
      }
    }
    dueNs[i] = tNs;
    due[i] = t;
    return t;
  };
  const absent: PlanStep[] = [];
  plan.forEach((step, i) => {
    const d = dueOf(i, new Set());
    const dNs = dueNs[i];
    const o = obs[i];
    // Durations are whole milliseconds: the deadline keeps the due instant's nanoseconds.
    const deadline = d !== null && step.withinMs !== undefined ? d + step.withinMs : null;
    if (o) {
      if (deadline !== null && !atOrBefore(o.at, o.ns, deadline, dNs)) {
        add({
          verdict: 'incomplete',
          code: 'late_edge',
          edge: step.key,
          agents: step.dependency ? [step.dependency] : [],
          events: [o.event],
          message: `${step.key} came ${humanDelta(o.at, o.ns, deadline, dNs, humanDuration)} after its deadline ${iso(deadline, dNs)}: investigate the first absent expected edge`,
          settled: true,
          deadline: iso(deadline, dNs),
          since: iso(deadline, dNs),
        });
      }
      return;
    }
    absent.push(step);
    if (d === null) return; // not due yet: pending behind earlier edges
    // A deadline after the run's end is void (the end settles the run; completion decides below).
    if (deadline !== null && atOrBefore(deadline, dNs, clock, clockNs) && byEnd(deadline, dNs)) {
      add({
        verdict: 'incomplete',
        code: 'missed_deadline',
        edge: step.key,
        agents: step.dependency ? [step.dependency] : [],
        message: `${step.key} still absent at its deadline ${iso(deadline, dNs)}: investigate the first absent expected edge`,
        settled: true,
        deadline: iso(deadline, dNs),
        since: iso(deadline, dNs),
      });
    } else if (end) {
      // an ended run waits for nothing; completion decides below
    } else if (deadline !== null && step.dependency) {
      nextChangeAt = Math.min(nextChangeAt, ceilMillis(deadline, dNs));
      add({
        verdict: 'waiting',
        code: 'waiting',
        edge: step.key,
        agents: [step.dependency],
        message: `waiting on ${step.dependency} for ${step.key} until ${iso(deadline, dNs)}: notify or observe the named dependency`,
        settled: false,
        deadline: iso(deadline, dNs),
        since: iso(d, dNs),
      });
    } else {
      if (deadline !== null) nextChangeAt = Math.min(nextChangeAt, ceilMillis(deadline, dNs));
      add({
        verdict: 'working',
        code: 'pending',
        edge: step.key,
        message: `${step.key} is due since ${iso(d, dNs)}${deadline !== null ? `, deadline ${iso(deadline, dNs)}` : ''}: useful work may continue`,
        settled: false,
        ...(deadline !== null ? { deadline: iso(deadline, dNs) } : {}),
        since: iso(d, dNs),
      });
    }
  });

  const waitSeen = new Map<WaitEdge, Obs | null>();
  for (const { receipt: w, at, atNs, deadline, deadlineNs, edge } of state.waitFacts) {
    if (!byEnd(at, atNs) || !byEnd(deadline, deadlineNs)) continue; // void after the end
    if (edge === null) continue; // validated at ingest
    const { spec, key } = edge;
    // Waits usually share a few edges (and their WaitEdge objects): look each one up once per evaluation.
    let seen = waitSeen.get(edge);
    if (seen === undefined) waitSeen.set(edge, (seen = observedAt(spec)));
    if (seen && atOrBefore(seen.at, seen.ns, deadline, deadlineNs)) continue;
    const deadlineIso = iso(deadline, deadlineNs);
    if (atOrBefore(deadline, deadlineNs, clock, clockNs) || seen) {
      add({
        verdict: 'incomplete',
        code: seen ? 'late_wait' : 'missed_wait',
        edge: key,
        agents: [w.on!],
        events: seen ? [w.event, seen.event] : [w.event],
        message: seen
          ? `${key}, waited on ${w.on}, came ${humanDelta(seen.at, seen.ns, deadline, deadlineNs, humanDuration)} after the wait's deadline ${deadlineIso}: investigate the first absent expected edge`
          : `${key}, waited on ${w.on}, still absent at the wait's deadline ${deadlineIso}: investigate the first absent expected edge`,
        settled: true,
        deadline: deadlineIso,
        since: deadlineIso,
      });
    } else if (!end) {
      nextChangeAt = Math.min(nextChangeAt, ceilMillis(deadline, deadlineNs));
      add({
        verdict: 'waiting',
        code: 'declared_wait',
        edge: key,
        agents: [w.on!],
        events: [w.event],
        message: `declared wait on ${w.on} for ${key} until ${deadlineIso}: notify or observe the named dependency`,
        settled: false,
        deadline: deadlineIso,
        since: iso(at, atNs),
      });
    } else {
      // ended, the deadline at or before the end but not reached by `now`: missed_wait when it passes
      nextChangeAt = Math.min(nextChangeAt, ceilMillis(deadline, deadlineNs));
    }
  }

  // Run-level stall limits (semantics 2 rule 9), settled like missed deadlines.
  if ((phase.progressWithinMs !== undefined || phase.maxDurationMs !== undefined) && Number.isFinite(startAt)) {
    const vo = state.verifiedOutcome;
    /** Is the plan finished at (t, tNs): every expected edge and, where required, a verified outcome observed by then? */
    const finishedAt = (t: number, tNs: number): boolean => {
      for (const o of obs) if (o === null || !atOrBefore(o.at, o.ns, t, tNs)) return false;
      return phase.outcome === 'optional' || (vo !== null && byEnd(vo.at, vo.ns) && atOrBefore(vo.at, vo.ns, t, tNs));
    };
    const M = phase.maxDurationMs;
    if (M !== undefined) {
      const s = startAt + M;
      if (byEnd(s, startNs) && !finishedAt(s, startNs)) {
        if (atOrBefore(s, startNs, clock, clockNs)) {
          add({
            verdict: 'incomplete',
            code: 'max_duration_exceeded',
            message: `run still unfinished ${formatDuration(M)} after its start ${iso(startAt, startNs)}, at ${iso(s, startNs)}: investigate the first absent expected edge`,
            settled: true,
            deadline: iso(s, startNs),
            since: iso(s, startNs),
          });
        } else if (!end) nextChangeAt = Math.min(nextChangeAt, ceilMillis(s, startNs));
      }
    }
    const W = phase.progressWithinMs;
    if (W !== undefined) {
      // Progress: the run's start and the first observation of each expected edge.
      const progress: Obs[] = [{ event: '', at: startAt, ns: startNs }];
      for (const o of obs) if (o !== null) progress.push(o);
      const waits = state.waitFacts.filter((w) => w.edge !== null && byEnd(w.at, w.atNs) && byEnd(w.deadline, w.deadlineNs));
      const waitSeenAt = waits.map((w) => observedAt(w.edge!.spec));
      // The condition can only begin at a window's end or where an explanation ends (a deadline, a waited edge observed).
      const candidates: Obs[] = progress.map((p) => ({ event: '', at: p.at + W, ns: p.ns }));
      plan.forEach((step, i) => {
        if (due[i] !== null && step.withinMs !== undefined) candidates.push({ event: '', at: due[i]! + step.withinMs, ns: dueNs[i] });
      });
      waits.forEach((w, i) => {
        candidates.push({ event: '', at: w.deadline, ns: w.deadlineNs });
        const seen = waitSeenAt[i];
        if (seen !== null) candidates.push(seen);
      });
      candidates.sort((a, b) => a.at - b.at || a.ns - b.ns);
      /** The last progress at or before (t, tNs), or null. */
      const lastProgress = (t: number, tNs: number): Obs | null => {
        let best: Obs | null = null;
        for (const p of progress) if (atOrBefore(p.at, p.ns, t, tNs) && (best === null || best.at < p.at || (best.at === p.at && best.ns < p.ns))) best = p;
        return best;
      };
      /** A running deadline or declared wait at (t, tNs): due, still absent, deadline ahead. */
      const explained = (t: number, tNs: number): boolean => {
        for (let i = 0; i < plan.length; i++) {
          const d = due[i];
          const within = plan[i].withinMs;
          if (d === null || within === undefined || !atOrBefore(d, dueNs[i], t, tNs)) continue;
          const o = obs[i];
          if (o !== null && atOrBefore(o.at, o.ns, t, tNs)) continue;
          if (!atOrBefore(d + within, dueNs[i], t, tNs)) return true;
        }
        for (let i = 0; i < waits.length; i++) {
          const w = waits[i];
          if (!atOrBefore(w.at, w.atNs, t, tNs) || atOrBefore(w.deadline, w.deadlineNs, t, tNs)) continue;
          const seen = waitSeenAt[i];
          if (seen === null || !atOrBefore(seen.at, seen.ns, t, tNs)) return true;
        }
        return false;
      };
      for (const c of candidates) {
        if (!byEnd(c.at, c.ns)) break; // an ended run stalls no more after its end
        const p = lastProgress(c.at, c.ns);
        if (p === null || !atOrBefore(p.at + W, p.ns, c.at, c.ns) || finishedAt(c.at, c.ns) || explained(c.at, c.ns)) continue;
        if (atOrBefore(c.at, c.ns, clock, clockNs)) {
          add({
            verdict: 'incomplete',
            code: 'no_progress',
            message: `no progress on the plan within ${formatDuration(W)} of ${iso(p.at, p.ns)} (stalled at ${iso(c.at, c.ns)}), and no running deadline or declared wait explains it: investigate the first absent expected edge`,
            settled: true,
            deadline: iso(p.at + W, p.ns),
            since: iso(c.at, c.ns),
          });
        } else if (!end) nextChangeAt = Math.min(nextChangeAt, ceilMillis(c.at, c.ns));
        break;
      }
    }
  }

  const outcomeOk = phase.outcome === 'optional' || (state.verifiedOutcome !== null && byEnd(state.verifiedOutcome.at, state.verifiedOutcome.ns));
  const planFinished = absent.length === 0 && outcomeOk;
  if (end) {
    if (end.result === 'completed') {
      if (!planFinished) {
        const missing = absent.map((s) => s.key);
        add({
          verdict: 'false_complete',
          code: 'false_complete',
          edge: missing[0],
          agents: end.from ? [end.from] : [],
          events: [end.event],
          message: `run ended completed at ${iso(endAt, endNs)} but ${[
            ...missing.map((m) => `${m} is absent`),
            ...(outcomeOk ? [] : ['no verified outcome exists']),
          ].join(', ')}: reopen the run; completion lacks required evidence`,
          settled: true,
          since: iso(endAt, endNs),
        });
      }
    } else {
      add({
        verdict: 'incomplete',
        code: `run_${end.result}`,
        agents: end.from ? [end.from] : [],
        events: [end.event],
        message: `run ended ${end.result} at ${iso(endAt, endNs)}: an ended-but-not-completed run is never healthy; investigate the first absent expected edge`,
        settled: true,
        since: iso(endAt, endNs),
      });
    }
  } else if (absent.length === 0 && !outcomeOk) {
    add({ verdict: 'working', code: 'awaiting_outcome', message: 'every expected edge is observed; a verified outcome receipt is still required for healthy', settled: false });
  }

  if (opts.extraFindings) for (const f of opts.extraFindings(state, now)) add(f);
  return finish(state, pin, findings, nextChangeAt, planFinished);
}

/** A finding with its sort keys; the joined agent and event lists are made only when a comparison reaches them. */
interface SortableFinding {
  f: Finding;
  precedence: number;
  agents: string | null;
  events: string | null;
}

/** Findings order: precedence, code, edge, agents, events, message. */
function compareFindings(a: SortableFinding, b: SortableFinding): number {
  return (
    a.precedence - b.precedence ||
    cmp(a.f.code, b.f.code) ||
    cmp(a.f.edge ?? '', b.f.edge ?? '') ||
    cmp((a.agents ??= a.f.agents.join(',')), (b.agents ??= b.f.agents.join(','))) ||
    cmp((a.events ??= a.f.events.join(',')), (b.events ??= b.f.events.join(','))) ||
    cmp(a.f.message, b.f.message)
  );
}
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Sorts findings in place by compareFindings (a stable sort, as before). */
function sortFindings(findings: Finding[]): void {
  if (findings.length < 2) return;
  const sortable = findings.map((f): SortableFinding => ({ f, precedence: precedence(f.verdict), agents: null, events: null }));
  sortable.sort(compareFindings);
  for (let i = 0; i < sortable.length; i++) findings[i] = sortable[i].f;
}

function finish(state: RunState, pin: Pin | null, findings: Finding[], nextChangeAt: number, planFinished = false): RunVerdict {
  sortFindings(findings);
  let verdict: Verdict = planFinished ? 'healthy' : 'working';
  for (const f of findings) if (precedence(f.verdict) < precedence(verdict)) verdict = f.verdict;
  const settledVerdict = verdict !== 'working' && verdict !== 'waiting' && verdict !== 'uncertain';
  return {
    run: state.run,
    pin,
    verdict,
    naive: naiveVerdict(state),
    findings,
    settled: settledVerdict || findings.some((f) => f.settled),
    nextChangeAt: Number.isFinite(nextChangeAt) ? nextChangeAt : null,
  };
}

/** Group receipts by run, preserving nothing about order (the verdict does not depend on it). */
export function groupByRun(receipts: Iterable<Receipt>): Map<string, RunState> {
  const runs = new Map<string, RunState>();
  for (const r of receipts) {
    let s = runs.get(r.run);
    if (!s) runs.set(r.run, (s = new RunState(r.run)));
    s.add(r);
  }
  return runs;
}

/** One-call form: (registry, receipts of one run, now) -> verdict. */
export function classify(receipts: Receipt[], now: number | Instant, registry: ContractRegistry, defaultContract?: string, opts: EvaluateOptions = {}): RunVerdict {
  if (receipts.length === 0) throw new Error('classify needs at least one receipt');
  const state = new RunState(receipts[0].run);
  for (const r of receipts) state.add(r);
  return evaluate(state, resolvePin(state, registry, defaultContract), now, { registry, ...opts });
}

export { compactKey };
