/**
 * What every verdict rule reads: the run's fold, its pin, `now`, and the plan's schedule (computed once per
 * evaluation), plus the collector each rule returns its findings and next change time through.
 */
import type { AllowRule, Contract, Phase, PlanStep } from '../contract.js';
import type { EdgeSpec } from '../edge.js';
import { tripleKey } from '../edge.js';
import type { ContractRegistry } from '../registry.js';
import { formatInstant } from '../time.js';
import type { Finding, Pin, Receipt, RunEndReceipt, RunStartReceipt } from '../types.js';
import type { RunState } from '../state.js';
import { atOrBefore, earlier, type Obs } from '../obs.js';

export { atOrBefore, earlier, mergeSorted, type Obs } from '../obs.js';

/** What one rule family contributes to a verdict: its findings, and the earliest time they may change with time alone. */
export interface RuleResult {
  findings: Finding[];
  /** Milliseconds since the epoch; Infinity when the findings cannot change without a new receipt. */
  nextChangeAt: number;
}

/** A finding as rules write it: agents and events are normalised (distinct, sorted) by `add`. */
export type FindingInput = Omit<Finding, 'agents' | 'events'> & { agents?: string[]; events?: string[] };

/** Distinct values, sorted (copies; short lists without the Set). */
export const sortStr = (a: readonly string[]): string[] => (a.length === 0 ? [] : a.length === 1 ? [a[0]] : [...new Set(a)].sort());

/** A list the rule made for this finding, made distinct and sorted in place (no copy). */
function normalised(a: string[]): string[] {
  if (a.length < 2) return a;
  if (a.length === 2) {
    if (a[0] === a[1]) a.length = 1;
    else if (a[1] < a[0]) a.reverse();
    return a;
  }
  return [...new Set(a)].sort();
}

/**
 * Collects an evaluation's findings and next change time: one per evaluation, every rule family adds to it.
 * `add` takes the finding object the rule wrote and completes it in place: `agents` and `events` become distinct
 * and sorted (added after the rule's own fields when the rule left them out, as the findings' JSON always had).
 */
export class Collector implements RuleResult {
  findings: Finding[] = [];
  nextChangeAt = Infinity;
  /**
   * `shared`: `events` is a list the state holds (already distinct and sorted, never changed once made): the finding
   * holds it as it is; `sharedAgents` likewise for `agents`. Otherwise the lists are the rule's own, normalised in
   * place. A finding's lists are read-only (they may be shared with the state, other findings and other verdicts).
   */
  add(f: FindingInput, shared = false, sharedAgents = false): void {
    const x = f as Finding;
    x.agents = f.agents === undefined ? [] : sharedAgents ? f.agents : normalised(f.agents);
    x.events = f.events === undefined ? [] : shared ? f.events : normalised(f.events);
    this.findings.push(x);
  }
  /** A finding made once and shared by every verdict that has it (frozen, lists included). */
  push(f: Finding): void {
    this.findings.push(f);
  }
  changeAt(t: number): void {
    if (t < this.nextChangeAt) this.nextChangeAt = t;
  }
}

/**
 * The stepwise forms of the rules (agentRuleSteps, routeRuleSteps, evaluation) pause after every STEP_MASK + 1
 * findings or items: a run naming 20,000 agents is evaluated in ~40 steps a caller may yield between.
 */
export const STEP_MASK = 1023;

/** RFC 3339 text of an instant, with the sub-millisecond digits when it has any. */
export const iso = (ms: number, ns = 0): string => formatInstant(ms, ns);

/** tripleKey of each target of a spec, made once per spec object (plan steps and wait edges are long-lived). */
const specTriples = new WeakMap<EdgeSpec, string[]>();
export function tripleKeysOf(spec: EdgeSpec): string[] {
  let keys = specTriples.get(spec);
  if (keys === undefined) specTriples.set(spec, (keys = spec.to.map((t) => tripleKey(spec.from, t, spec.kind))));
  return keys;
}

/** An allow rule with what routeRules reads of it on every evaluation, made once per contract. */
export interface RouteRule {
  rule: AllowRule;
  /** tripleKey of each target (the keys of the edges it allows). */
  keys: string[];
  /** The multiplicity message by observed count (made on first use, for counts up to MESSAGE_MEMO). */
  messages: string[];
  /** The multiplicity finding's agents by the set of observed edges (a bit per target), shared and frozen. */
  agents: (readonly string[] | undefined)[];
}

/** What every evaluation against one contract reads of it, made once per contract. */
export interface ContractInfo {
  /** `contract@version`, for messages. */
  where: string;
  routes: RouteRule[];
  /** Per phase, the tripleKeys of each plan step's spec. */
  planKeys: Map<Phase, string[][]>;
}
const contractInfos = new WeakMap<Contract, ContractInfo>();

export function contractInfo(contract: Contract): ContractInfo {
  let info = contractInfos.get(contract);
  if (info !== undefined) return info;
  info = {
    where: `${contract.contract}@${contract.version}`,
    routes: contract.allow.map((rule) => ({ rule, keys: tripleKeysOf(rule.spec), messages: [], agents: [] })),
    planKeys: new Map(contract.phases.map((p) => [p, p.plan.map((step) => tripleKeysOf(step.spec))])),
  };
  contractInfos.set(contract, info);
  return info;
}

/** The evaluation of one run at one instant, with a resolved pin: what the rules after the evidence rules read. */
export class EvalContext {
  /** The earliest run.start (the one that pins), and the run's end (earliest run.end). */
  readonly first: RunStartReceipt | null;
  readonly end: RunEndReceipt | null;
  readonly endAt: number;
  readonly endNs: number;
  /** The clock deadlines are compared with: `now`, or the run's end when that is later (an ended run cannot move with time). */
  readonly clock: number;
  readonly clockNs: number;
  /** The run's start (its pinning run.start, else its earliest receipt). */
  readonly startAt: number;
  readonly startNs: number;
  readonly phase: Phase;
  /** `contract@version`, for messages. */
  readonly where: string;
  readonly info: ContractInfo;
  /** The plan's steps, each one's first observation (null: absent), and due instants (ms, null: not due; ns). */
  readonly plan: PlanStep[];
  readonly obs: (Obs | null)[];
  readonly due: (number | null)[];
  readonly dueNs: number[];
  /** The steps not observed (by the end). */
  readonly absent: PlanStep[] = [];
  /** A verified outcome observed by the end, or an optional outcome. */
  readonly outcomeOk: boolean;

  constructor(
    readonly state: RunState,
    readonly pin: Pin,
    readonly contract: Contract,
    /** `now`: whole ms and sub-ms ns. */
    readonly now: number,
    readonly nowNs: number,
    readonly registry?: ContractRegistry,
  ) {
    const phases = contract.phases;
    let phase = phases[0];
    for (let i = 0; i < phases.length; i++) {
      if (phases[i].name === pin.phase) {
        phase = phases[i];
        break;
      }
    }
    this.phase = phase;
    const info = contractInfo(contract);
    this.info = info;
    this.where = info.where;
    this.first = state.firstStart();
    this.end = state.firstEnd();
    const endAt = this.end ? state.firstEndAt : Infinity;
    const endNs = this.end ? state.firstEndNs : 0;
    this.endAt = endAt;
    this.endNs = endNs;
    // A run's own end receipt proves time reached its end: for an ended run, a deadline at or before the end has
    // passed whatever `now` says (clock skew, `replay --now` in the past), so an ended run's verdict cannot move with time.
    const endLater = this.end !== null && !atOrBefore(endAt, endNs, now, nowNs);
    this.clock = endLater ? endAt : now;
    this.clockNs = endLater ? endNs : nowNs;
    this.startAt = this.first ? state.firstStartAt : state.firstAt;
    this.startNs = this.first ? state.firstStartNs : state.firstNs;
    const plan = phase.plan;
    this.plan = plan;
    const n = plan.length;
    const obs: (Obs | null)[] = new Array(n);
    const due: (number | null)[] = new Array(n);
    const dueNs: number[] = new Array(n);
    const planKeys = info.planKeys.get(phase);
    for (let i = 0; i < n; i++) {
      obs[i] = planKeys !== undefined ? this.observedKeys(planKeys[i]) : this.observedAt(plan[i].spec);
      due[i] = null;
      dueNs[i] = 0;
    }
    // Due instants. The first edges and parallel branches are due at the run's start; any other edge at the latest
    // observation time of its `after` edges (once all are observed), even when agents' clocks put that before the
    // start. A run whose every receipt conflicts has no usable start: nothing is due.
    const startKnown = Number.isFinite(this.startAt);
    for (let i = 0; i < n; i++) {
      const after = plan[i].after;
      if (after.length === 0) {
        if (startKnown) {
          due[i] = this.startAt;
          dueNs[i] = this.startNs;
        }
        continue;
      }
      let t = -Infinity;
      let tNs = 0;
      let all = true;
      for (let k = 0; k < after.length; k++) {
        const o = obs[after[k]];
        if (!o) {
          all = false;
          break;
        }
        if (o.at > t || (o.at === t && o.ns > tNs)) {
          t = o.at;
          tNs = o.ns;
        }
      }
      if (all) {
        due[i] = t;
        dueNs[i] = tNs;
      }
    }
    for (let i = 0; i < n; i++) if (!obs[i]) this.absent.push(plan[i]);
    this.obs = obs;
    this.due = due;
    this.dueNs = dueNs;
    const vo = state.verifiedOutcome;
    this.outcomeOk = phase.outcome === 'optional' || (vo !== null && this.byEnd(vo.at, vo.ns));
  }

  /** Is (ms, ns) at or before the run's end (always, for a run without an end)? */
  byEnd(ms: number, ns: number): boolean {
    return ms < this.endAt || (ms === this.endAt && ns <= this.endNs);
  }

  /** The earliest observation at or before the end of an edge the spec matches. */
  observedAt(spec: EdgeSpec): Obs | null {
    return this.observedKeys(tripleKeysOf(spec));
  }

  /** The earliest observation at or before the end of the edges with these tripleKeys. */
  observedKeys(keys: readonly string[]): Obs | null {
    let best: Obs | null = null;
    const state = this.state;
    for (let i = 0; i < keys.length; i++) {
      const e = state.edge(keys[i]);
      // The earliest observation at or before the end is the edge's earliest (the aggregate itself), if that one is
      // not after the end.
      if (e !== undefined && this.byEnd(e.at, e.ns) && earlier(best, e)) best = e;
    }
    return best;
  }
}

/** Builds the context: the end, the clock, and the plan's observations and due instants. */
export function evalContext(state: RunState, pin: Pin, contract: Contract, now: number, nowNs: number, registry?: ContractRegistry): EvalContext {
  return new EvalContext(state, pin, contract, now, nowNs, registry);
}
