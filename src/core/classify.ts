/**
 * The verdict: a pure function of (pinned contract, the run's receipts, now).
 *
 * The receipts are folded into a RunState (src/core/state.ts): commutative aggregates, so the verdict cannot depend
 * on arrival order and adding one receipt costs O(1). `evaluate` costs O(plan + distinct edges, agents and versions +
 * declared waits) and allocates little; an evaluation of an unchanged state at a `now` before its verdict's
 * nextChangeAt returns that verdict (runs with handoff receipts also pay the handoff audit).
 * `evaluate` is the one verdict function: it composes the rule families of src/core/rules/ (docs/architecture.md).
 */
import type { Instant } from './time.js';
import type { ContractRegistry, PinResolution } from './registry.js';
import { PRECEDENCE, type Finding, type NaiveVerdict, type Pin, type Receipt, type RunVerdict, type Verdict } from './types.js';
import { RunState, startRef } from './state.js';
import { Collector, STEP_MASK, evalContext } from './rules/context.js';
import { evidenceRules, noPinRule, pinRules } from './rules/evidence.js';
import { agentRuleSteps, agentRules } from './rules/agents.js';
import { routeRuleSteps, routeRules } from './rules/routes.js';
import { PENDING_GUIDANCE, planRules } from './rules/plan.js';
import { waitRules } from './rules/waits.js';
import { endRules, stallRules } from './rules/completion.js';
import { handoffRules } from './rules/handoffs.js';

// The run state lives in src/core/state.ts; its names stay importable from here.
export { EdgeAgg, RunState, groupByRun, sortedEvents, startRef, type AddResult, type ConflictFacts, type ReceiptSource, type WaitEdge, type WaitFacts } from './state.js';

/** A pin decision for a run: the resolved contract, or why there is none. */
export type Pinning = PinResolution;

/** Resolve a run's pin from its receipts: the earliest run.start, else the default contract (newest non-retired, first phase). */
export function resolvePin(state: RunState, registry: ContractRegistry, defaultContract?: string): Pinning {
  const start = state.firstStart();
  if (start) return registry.resolve(startRef(start));
  if (defaultContract) return registry.resolve({ contract: defaultContract });
  return { ok: false, reason: 'no run.start names a contract and no default contract is configured' };
}

/**
 * Whether evaluating the run under `pinning` reads its receipts back from its source (the events of agents the pinned
 * contract does not name, or of versions other than the pinned one, not listed yet; see RunState.readsBackToList):
 * a caller whose source answers only asynchronously loads the run's history before it evaluates.
 */
export function evaluationReadsBack(state: RunState, pinning: Pinning): boolean {
  if (!pinning.ok) return false;
  const agents = pinning.contract.agentSet;
  const unknown = state.agentNames.filter((a) => !agents.has(a));
  const others = state.onlyVersion(pinning.pin.version) ? [] : [...state.versions.keys()].filter((v) => v !== pinning.pin.version);
  return (unknown.length > 0 || others.length > 0) && state.readsBackToList(unknown, others);
}

export interface EvaluateOptions {
  /** Resolves a later run.start's reference with defaults filled, to compare it with the pin. */
  registry?: ContractRegistry;
}

/** The naive rule (section 3), for comparison only: never used to decide. */
export function naiveVerdict(state: RunState): NaiveVerdict {
  if (state.size === 0 && state.conflicts.size === 0) return 'red';
  if (state.notOk.length > 0) return 'red';
  for (const c of state.conflicts.values()) if (c.notOk) return 'red';
  for (const e of state.ends) if (e.result === 'failed') return 'red';
  return 'green';
}

/**
 * Evaluate a run's verdict and every finding at `now`: milliseconds since the epoch, or an Instant exact to the
 * nanosecond (src/core/time.ts). The one verdict function: it composes the rule families of src/core/rules/, each
 * of which adds its findings and the earliest time they may change with time alone.
 *
 * The state remembers its last verdict: evaluated again with no change of the state (its `version`), the same pin
 * (contract, version, phase and contract content), the same registry (and registry revision), at a `now` not before
 * the last one and before the verdict's nextChangeAt (the whole millisecond before it, for a `now` with a sub-ms
 * part), the previous verdict is returned as it is: nothing in it can differ (test/core-incremental.test.ts).
 */
export function evaluate(state: RunState, pinning: Pinning, nowAt: number | Instant, opts: EvaluateOptions = {}): RunVerdict {
  const steps = evaluateSteps(state, pinning, nowAt, opts);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/**
 * `evaluate` in steps: a generator that pauses (a bare `yield`, no value) every ~1,000 findings or items of a wide
 * run and returns the verdict `evaluate` returns. Pure: it never waits; the caller decides whether to yield to its
 * event loop at a pause (src/audit/engine.ts does, every ~8 ms). A run of a few dozen findings does not pause.
 *
 * The state must not change while the steps run: if it does (its `version` moved), the verdict returned is not
 * remembered as the state's cached verdict, so the next `evaluate` computes it again from the changed state.
 */
export function* evaluateSteps(state: RunState, pinning: Pinning, nowAt: number | Instant, opts: EvaluateOptions = {}): Generator<void, RunVerdict, void> {
  const now = typeof nowAt === 'number' ? nowAt : nowAt.ms;
  const nowNs = typeof nowAt === 'number' ? 0 : nowAt.ns;
  const registry = opts.registry;
  const cached = state.cachedVerdict;
  if (
    cached !== null &&
    state.cachedVersion === state.version &&
    state.cachedRegistry === registry &&
    (registry === undefined || state.cachedRevision === registry.revision) &&
    samePinning(state, pinning) &&
    (now > state.cachedNowMs || (now === state.cachedNowMs && nowNs >= state.cachedNowNs))
  ) {
    const next = cached.nextChangeAt;
    if (next === null || now < (nowNs === 0 ? next : next - 1)) return cached;
  }
  const version = state.version;
  const out = new Collector();
  evidenceRules(state, out);
  let pin: Pin | null = null;
  let planFinished = false;
  if (!pinning.ok) noPinRule(pinning.reason, out);
  else {
    const ctx = evalContext(state, pinning.pin, pinning.contract, now, nowNs, registry);
    pinRules(ctx, out);
    // a run naming thousands of agents or edges: in steps (a few dozen: at once, no generators)
    if (state.agentNames.length > STEP_MASK) yield* agentRuleSteps(ctx, out);
    else agentRules(ctx, out);
    if (state.edgeAggs.length > STEP_MASK) yield* routeRuleSteps(ctx, out);
    else routeRules(ctx, out);
    planRules(ctx, out);
    waitRules(ctx, out);
    stallRules(ctx, out);
    endRules(ctx, out);
    handoffRules(state, now, nowNs, out);
    pin = ctx.pin;
    planFinished = ctx.absent.length === 0 && ctx.outcomeOk;
  }
  // An exact-size copy: the collector's list keeps room for 17 findings, and a live run keeps its verdict.
  const findings = out.findings.slice();
  if (findings.length > SORT_STEP) yield* sortFindingsSteps(findings);
  else sortFindings(findings);
  const verdict = finish(state, pin, findings, out.nextChangeAt, planFinished);
  if (state.version !== version) return verdict; // changed meanwhile: not remembered (see above)
  state.cachedVerdict = verdict;
  state.cachedVersion = version;
  if (pinning.ok) {
    state.cachedContract = pinning.contract;
    state.cachedPinContract = pinning.pin.contract;
    state.cachedPinVersion = pinning.pin.version;
    state.cachedPinPhase = pinning.pin.phase;
  } else {
    state.cachedContract = null;
    state.cachedPinContract = pinning.reason;
  }
  state.cachedRegistry = registry;
  state.cachedRevision = registry?.revision ?? 0;
  state.cachedNowMs = now;
  state.cachedNowNs = nowNs;
  return verdict;
}

/** The pin decision of the state's cached verdict: the same pin (by value) and contract content, or the same reason for none. */
function samePinning(state: RunState, p: Pinning): boolean {
  if (p.ok) return state.cachedContract === p.contract && state.cachedPinContract === p.pin.contract && state.cachedPinVersion === p.pin.version && state.cachedPinPhase === p.pin.phase;
  return state.cachedContract === null && state.cachedPinContract === p.reason;
}

/** Findings order: precedence, code, edge, agents, events, message (the lists compared as comma-joined text). */
function compareFindings(a: Finding, b: Finding): number {
  return (
    PRECEDENCE[a.verdict] - PRECEDENCE[b.verdict] ||
    cmp(a.code, b.code) ||
    cmp(a.edge ?? '', b.edge ?? '') ||
    cmp(a.agents.join(','), b.agents.join(',')) ||
    cmp(a.events.join(','), b.events.join(',')) ||
    cmp(a.message, b.message)
  );
}
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

interface SortKeys {
  f: Finding;
  agents: string;
  events: string;
}
/** The joined lists of shared (frozen) findings, which later verdicts of the run sort again (see waitRules). */
const sharedSortKeys = new WeakMap<Finding, SortKeys>();

/** list.join(','), without the join for the usual one- and two-item lists. */
const joined = (a: readonly string[]): string => (a.length === 1 ? a[0] : a.length === 0 ? '' : a.length === 2 ? `${a[0]},${a[1]}` : a.join(','));

function sortKeysOf(f: Finding): SortKeys {
  let k = sharedSortKeys.get(f);
  if (k === undefined) {
    k = { f, agents: joined(f.agents), events: joined(f.events) };
    if (Object.isFrozen(f)) sharedSortKeys.set(f, k);
  }
  return k;
}

/**
 * Sorts findings in place by compareFindings, stably. A verdict has a handful: an insertion sort, no wrapper objects;
 * the lists are joined only when two findings tie on precedence, code and edge.
 */
function sortFindings(findings: Finding[]): void {
  const n = findings.length;
  if (n > 32) {
    // many findings: each one's joined lists made once (for a finding shared between verdicts, once for all of them)
    const keyed = findings.map(sortKeysOf);
    keyed.sort(compareKeyed);
    for (let i = 0; i < n; i++) findings[i] = keyed[i].f;
    return;
  }
  for (let i = 1; i < n; i++) {
    const f = findings[i];
    let j = i - 1;
    while (j >= 0 && compareFindings(findings[j], f) > 0) {
      findings[j + 1] = findings[j];
      j--;
    }
    findings[j + 1] = f;
  }
}

/** Findings sorted in one step up to this many; more are sorted in runs of this many, then merged, in steps. */
const SORT_STEP = 4096;

/** The order of sortFindings' keyed form (compareFindings on the joined lists made once). */
const compareKeyed = (a: SortKeys, b: SortKeys): number =>
  PRECEDENCE[a.f.verdict] - PRECEDENCE[b.f.verdict] ||
  cmp(a.f.code, b.f.code) ||
  cmp(a.f.edge ?? '', b.f.edge ?? '') ||
  cmp(a.agents, b.agents) ||
  cmp(a.events, b.events) ||
  cmp(a.f.message, b.f.message);

/**
 * sortFindings in steps, for many findings: runs of SORT_STEP sorted (stably) one per step, then merged pairwise
 * (ties taken from the left run), pausing every SORT_STEP findings merged. A stable merge sort of stably sorted runs:
 * the order sortFindings gives, exactly.
 */
function* sortFindingsSteps(findings: Finding[]): Generator<void, void, void> {
  const n = findings.length;
  let keyed: SortKeys[] = new Array(n);
  for (let i = 0; i < n; i++) keyed[i] = sortKeysOf(findings[i]);
  yield;
  for (let lo = 0; lo < n; lo += SORT_STEP) {
    const run = keyed.slice(lo, lo + SORT_STEP).sort(compareKeyed);
    for (let i = 0; i < run.length; i++) keyed[lo + i] = run[i];
    yield;
  }
  let other: SortKeys[] = new Array(n);
  for (let width = SORT_STEP; width < n; width *= 2) {
    let done = 0;
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) {
        other[k++] = compareKeyed(keyed[j], keyed[i]) < 0 ? keyed[j++] : keyed[i++];
        if (++done === SORT_STEP) {
          done = 0;
          yield;
        }
      }
      while (i < mid) other[k++] = keyed[i++];
      while (j < hi) other[k++] = keyed[j++];
    }
    const t = keyed;
    keyed = other;
    other = t;
    yield;
  }
  for (let i = 0; i < n; i++) findings[i] = keyed[i].f;
}

function finish(state: RunState, pin: Pin | null, findings: Finding[], nextChangeAt: number, planFinished: boolean): RunVerdict {
  let verdict: Verdict = planFinished ? 'healthy' : 'working';
  let best = PRECEDENCE[verdict];
  let settled = false;
  for (let i = 0; i < findings.length; i++) {
    const f = findings[i];
    const p = PRECEDENCE[f.verdict];
    if (p < best) {
      best = p;
      verdict = f.verdict;
    }
    if (f.settled) settled = true;
  }
  const settledVerdict = verdict !== 'working' && verdict !== 'waiting' && verdict !== 'uncertain';
  // A pending edge says "useful work may continue" only when that is the run's guidance: beside a worse verdict
  // (forbidden_edge: contain the route) it states the fact alone, so no finding contradicts the verdict's action.
  if (verdict !== 'working') {
    for (let i = 0; i < findings.length; i++) {
      const f = findings[i];
      if (f.code === 'pending' && f.message.endsWith(PENDING_GUIDANCE)) findings[i] = { ...f, message: f.message.slice(0, -PENDING_GUIDANCE.length) };
    }
  }
  return {
    run: state.run,
    pin,
    verdict,
    naive: naiveVerdict(state),
    findings,
    settled: settledVerdict || settled,
    nextChangeAt: Number.isFinite(nextChangeAt) ? nextChangeAt : null,
  };
}

/** One-call form: (registry, receipts of one run, now) -> verdict. */
export function classify(receipts: Receipt[], now: number | Instant, registry: ContractRegistry, defaultContract?: string, opts: EvaluateOptions = {}): RunVerdict {
  if (receipts.length === 0) throw new Error('classify needs at least one receipt');
  const state = new RunState(receipts[0].run);
  for (const r of receipts) state.add(r);
  return evaluate(state, resolvePin(state, registry, defaultContract), now, { registry, ...opts });
}

