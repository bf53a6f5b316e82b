/**
 * What every verdict rule reads: the run's fold, its pin, `now`, and the plan's schedule (computed once per
 * evaluation), plus the collector each rule returns its findings and next change time through.
 */
import type { Contract, Phase, PlanStep } from '../contract.js';
import type { EdgeSpec } from '../edge.js';
import { tripleKey } from '../edge.js';
import type { ContractRegistry } from '../registry.js';
import { formatInstant, subMillisOf as subMillis } from '../time.js';
import type { Finding, Pin, Receipt } from '../types.js';
import type { RunState } from '../classify.js';

/** An observation: its event and its instant (whole ms `at` plus sub-ms `ns`, see src/core/time.ts). */
export interface Obs {
  event: string;
  at: number;
  ns: number;
}

/** What one rule family contributes to a verdict: its findings, and the earliest time they may change with time alone. */
export interface RuleResult {
  findings: Finding[];
  /** Milliseconds since the epoch; Infinity when the findings cannot change without a new receipt. */
  nextChangeAt: number;
}

/** The empty findings list, shared (never written: Collector.add replaces it with a fresh list). */
const NONE = Object.freeze([]) as unknown as Finding[];
export const NO_CHANGE: RuleResult = Object.freeze({ findings: NONE, nextChangeAt: Infinity }) as RuleResult;

/** A finding as rules write it: agents and events are normalised (distinct, sorted) by `add`. */
export type FindingInput = Omit<Finding, 'agents' | 'events'> & { agents?: string[]; events?: string[] };

/** Distinct values, sorted (copies; short lists without the Set). */
export const sortStr = (a: string[]): string[] => (a.length === 0 ? [] : a.length === 1 ? [a[0]] : [...new Set(a)].sort());

/** Collects one rule family's findings and next change time. */
export class Collector implements RuleResult {
  /** Most families find nothing on most evaluations: the list is allocated on the first finding. */
  findings: Finding[] = NONE;
  nextChangeAt = Infinity;
  /** `eventsSorted`: the events are already distinct and sorted (a fresh copy is still made). */
  add(f: FindingInput, eventsSorted = false): void {
    if (this.findings === NONE) this.findings = [];
    this.findings.push({ ...f, agents: sortStr(f.agents ?? []), events: eventsSorted ? f.events!.slice() : sortStr(f.events ?? []) });
  }
  changeAt(t: number): void {
    if (t < this.nextChangeAt) this.nextChangeAt = t;
  }
}

/** RFC 3339 text of an instant, with the sub-millisecond digits when it has any. */
export const iso = (ms: number, ns = 0): string => formatInstant(ms, ns);

/** Is b earlier than a (or a absent)? By time (ms, then ns), then event id (code point order; ids are ASCII). */
export function earlier(a: Obs | null, b: Obs): boolean {
  return a === null || b.at < a.at || (b.at === a.at && (b.ns < a.ns || (b.ns === a.ns && b.event < a.event)));
}
/** a <= b on (ms, ns) pairs. */
export const atOrBefore = (aMs: number, aNs: number, bMs: number, bNs: number): boolean => aMs < bMs || (aMs === bMs && aNs <= bNs);

/** Merge of two sorted lists of distinct strings (code unit order, as Array.prototype.sort). */
export function mergeSorted(a: string[], b: string[]): string[] {
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
export function tripleKeysOf(spec: EdgeSpec): string[] {
  let keys = specTriples.get(spec);
  if (keys === undefined) specTriples.set(spec, (keys = spec.to.map((t) => tripleKey(spec.from, t, spec.kind))));
  return keys;
}

/** The evaluation of one run at one instant, with a resolved pin: what the rules after the evidence rules read. */
export interface EvalContext {
  state: RunState;
  /** `now`: whole ms and sub-ms ns. */
  now: number;
  nowNs: number;
  pin: Pin;
  contract: Contract;
  phase: Phase;
  /** `contract@version`, for messages. */
  where: string;
  registry?: ContractRegistry;
  /** The earliest run.start (the one that pins), and the run's end (earliest run.end). */
  first: Receipt | null;
  end: Receipt | null;
  endAt: number;
  endNs: number;
  /** The clock deadlines are compared with: `now`, or the run's end when that is later (an ended run cannot move with time). */
  clock: number;
  clockNs: number;
  /** The run's start (its pinning run.start, else its earliest receipt). */
  startAt: number;
  startNs: number;
  /** Is (ms, ns) at or before the run's end (always, for a run without an end)? */
  byEnd(ms: number, ns: number): boolean;
  /** The earliest observation at or before the end of an edge the spec matches. */
  observedAt(spec: EdgeSpec): Obs | null;
  /** The plan's steps, each one's first observation (null: absent), and due instants (ms, null: not due; ns). */
  plan: PlanStep[];
  obs: (Obs | null)[];
  due: (number | null)[];
  dueNs: number[];
  /** The steps not observed (by the end). */
  absent: PlanStep[];
  /** A verified outcome observed by the end, or an optional outcome. */
  outcomeOk: boolean;
}

/** Builds the context: the end, the clock, and the plan's observations and due instants. */
export function evalContext(state: RunState, pin: Pin, contract: Contract, now: number, nowNs: number, registry?: ContractRegistry): EvalContext {
  const phase = contract.phases.find((p) => p.name === pin.phase)!;
  const first = state.firstStart();
  const end = state.firstEnd();
  const endAt = end ? Date.parse(end.at) : Infinity;
  const endNs = end ? subMillis(end.at) : 0;
  // A run's own end receipt proves time reached its end: for an ended run, a deadline at or before the end has
  // passed whatever `now` says (clock skew, `replay --now` in the past), so an ended run's verdict cannot move with time.
  const endLater = end !== null && !atOrBefore(endAt, endNs, now, nowNs);
  const startAt = first ? Date.parse(first.at) : state.firstAt;
  const startNs = first ? subMillis(first.at) : state.firstNs;
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
  for (let i = 0; i < plan.length; i++) {
    dueOf(i, new Set());
    if (!obs[i]) absent.push(plan[i]);
  }
  const vo = state.verifiedOutcome;
  const outcomeOk = phase.outcome === 'optional' || (vo !== null && byEnd(vo.at, vo.ns));
  return {
    state, now, nowNs, pin, contract, phase, where: `${contract.contract}@${contract.version}`, registry,
    first, end, endAt, endNs,
    clock: endLater ? endAt : now,
    clockNs: endLater ? endNs : nowNs,
    startAt, startNs, byEnd, observedAt, plan, obs, due, dueNs, absent, outcomeOk,
  };
}

