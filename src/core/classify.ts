/**
 * The verdict: a pure function of (pinned contract, the run's receipts, now).
 *
 * Receipts are folded into a RunState whose aggregates are commutative (sets, minima, counts), so the
 * verdict cannot depend on arrival order, and adding one receipt costs O(1): the server keeps one RunState
 * per live run and re-evaluates it without re-reading the run. `evaluate` costs O(plan + distinct edges,
 * agents and versions), not O(receipts).
 */
import type { Contract, PlanStep } from './contract.js';
import { compactKey, edgeKey, humanDuration, parseEdge, specKey, tripleKey, type EdgeSpec } from './edge.js';
import { instant, receiptCanon } from './receipt.js';
import type { ContractRegistry, PinResolution, PinRef } from './registry.js';
import { precedence, type Finding, type NaiveVerdict, type Pin, type Receipt, type RunVerdict, type Verdict } from './types.js';

export type AddResult = 'accepted' | 'duplicate' | 'conflict';

interface Obs {
  event: string;
  at: number;
}

interface EdgeAgg {
  from: string;
  to: string;
  kind: string;
  obs: Obs[];
  /** The earliest observation (by time, then event id). */
  first: Obs;
}

/** Earlier of two (time, event) pairs: by time, then event id. */
function earlier(a: Obs | null, b: Obs): boolean {
  return a === null || b.at < a.at || (b.at === a.at && b.event < a.event);
}

function push<K>(m: Map<K, string[]>, k: K, v: string): void {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}

/** The fold of one run's receipts. */
export class RunState {
  readonly byEvent = new Map<string, Receipt>();
  /** event id -> every distinct content seen under it (only for conflicts). */
  readonly conflicts = new Map<string, Receipt[]>();
  // aggregates (rebuilt from byEvent minus conflicts when a conflict appears)
  starts: Receipt[] = [];
  ends: Receipt[] = [];
  firstAt = Infinity;
  lastAt = -Infinity;
  edges = new Map<string, EdgeAgg>();
  agents = new Map<string, string[]>();
  versions = new Map<string, string[]>();
  waits: Receipt[] = [];
  verifiedOutcome: Obs | null = null;
  gaps: Receipt[] = [];
  notOk: string[] = [];
  handoffs: Receipt[] = [];

  constructor(readonly run: string) {}

  get size(): number {
    return this.byEvent.size;
  }

  /** Adds one receipt; a repeat of an event id with equal content is a duplicate, with different content a conflict. */
  add(r: Receipt): AddResult {
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
    this.lastAt = -Infinity;
    this.edges = new Map();
    this.agents = new Map();
    this.versions = new Map();
    this.waits = [];
    this.verifiedOutcome = null;
    this.gaps = [];
    this.notOk = [];
    this.handoffs = [];
    for (const r of this.byEvent.values()) this.fold(r);
  }

  private fold(r: Receipt): void {
    const at = instant(r.at);
    if (at < this.firstAt) this.firstAt = at;
    if (at > this.lastAt) this.lastAt = at;
    if (r.version !== undefined) push(this.versions, r.version, r.event);
    if (r.status !== undefined && r.status !== 'ok') this.notOk.push(r.event);
    if (r.from !== undefined) push(this.agents, r.from, r.event);
    switch (r.type) {
      case 'run.start':
        this.starts.push(r);
        break;
      case 'run.end':
        this.ends.push(r);
        break;
      case 'edge': {
        push(this.agents, r.to!, r.event);
        const k = tripleKey(r.from!, r.to!, r.kind!);
        const e = this.edges.get(k);
        const o = { event: r.event, at };
        if (e) {
          e.obs.push(o);
          if (earlier(e.first, o)) e.first = o;
        } else this.edges.set(k, { from: r.from!, to: r.to!, kind: r.kind!, obs: [o], first: o });
        break;
      }
      case 'wait':
        push(this.agents, r.on!, r.event);
        this.waits.push(r);
        break;
      case 'outcome':
        if (r.verified === true) {
          const o = { event: r.event, at };
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

  /** The earliest run.start (by time, then event id), the one that pins. */
  firstStart(): Receipt | null {
    let best: Receipt | null = null;
    for (const s of this.starts) if (!best || earlier({ at: instant(best.at), event: best.event }, { at: instant(s.at), event: s.event })) best = s;
    return best;
  }

  /** The run's end: its earliest run.end (by time, then event id). */
  firstEnd(): Receipt | null {
    let best: Receipt | null = null;
    for (const s of this.ends) if (!best || earlier({ at: instant(best.at), event: best.event }, { at: instant(s.at), event: s.event })) best = s;
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

const sortStr = (a: string[]) => [...new Set(a)].sort();
const iso = (ms: number) => new Date(ms).toISOString();

/** The naive rule (section 3), for comparison only: never used to decide. */
export function naiveVerdict(state: RunState): NaiveVerdict {
  if (state.size === 0 && state.conflicts.size === 0) return 'red';
  if (state.notOk.length > 0) return 'red';
  for (const c of state.conflicts.values()) if (c.some((r) => r.status !== undefined && r.status !== 'ok')) return 'red';
  if (state.ends.some((e) => e.result === 'failed')) return 'red';
  return 'green';
}

/** Evaluate a run's verdict and every finding at `now` (ms since epoch). */
export function evaluate(state: RunState, pinning: Pinning, now: number, opts: EvaluateOptions = {}): RunVerdict {
  const findings: Finding[] = [];
  let nextChangeAt = Infinity;
  const add = (f: Omit<Finding, 'agents' | 'events'> & { agents?: string[]; events?: string[] }) =>
    findings.push({ ...f, agents: sortStr(f.agents ?? []), events: sortStr(f.events ?? []) });

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
  for (const [version, events] of state.versions) {
    if (version === pin.version) continue;
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
  for (const [agent, events] of state.agents) {
    if (contract.agentSet.has(agent)) continue;
    add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events, message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true });
  }

  // 4. forbidden_edge and 5. ambiguous_route
  const ruleCounts = new Map<number, { events: string[]; edges: Set<string> }>();
  for (const e of state.edges.values()) {
    const k = edgeKey(e.from, e.to, e.kind);
    const rule = contract.allowByEdge.get(tripleKey(e.from, e.to, e.kind));
    if (!rule) {
      add({
        verdict: 'forbidden_edge',
        code: 'forbidden_edge',
        edge: k,
        agents: [e.from, e.to],
        events: e.obs.map((o) => o.event),
        message: `${k} is not allowed by ${where}: contain the route before retrying work`,
        settled: true,
      });
      continue;
    }
    const c = ruleCounts.get(rule.index) ?? { events: [], edges: new Set<string>() };
    for (const o of e.obs) c.events.push(o.event);
    c.edges.add(e.from).add(e.to);
    ruleCounts.set(rule.index, c);
  }
  for (const rule of contract.allow) {
    const c = ruleCounts.get(rule.index);
    if (!c || c.events.length <= rule.max) continue;
    add({
      verdict: 'ambiguous_route',
      code: 'multiplicity',
      edge: rule.key,
      agents: [...c.edges],
      events: c.events,
      message: `${rule.key} observed ${c.events.length} times (max ${rule.max}): reconcile ownership and possible duplicate effects`,
      settled: true,
    });
  }

  // Plan, waits, outcome and end.
  const end = state.firstEnd();
  const endAt = end ? instant(end.at) : Infinity;
  const startAt = first ? instant(first.at) : state.firstAt;
  const observedAt = (spec: EdgeSpec): Obs | null => {
    let best: Obs | null = null;
    for (const t of spec.to) {
      const e = state.edges.get(tripleKey(spec.from, t, spec.kind));
      // The earliest observation at or before the end is the edge's earliest, if that one is not after the end.
      if (e && e.first.at <= endAt && earlier(best, e.first)) best = e.first;
    }
    return best;
  };
  const plan = phase.plan;
  const obs = plan.map((s) => observedAt(s.spec));
  const due: (number | null)[] = new Array(plan.length).fill(null);
  // `after` is acyclic (refused at load): resolve due times by memoised recursion.
  const dueOf = (i: number, seen: Set<number>): number | null => {
    if (due[i] !== null) return due[i];
    if (seen.has(i)) return null;
    seen.add(i);
    const step = plan[i];
    // The first edges and parallel branches are due at the run's start; any other edge at the latest
    // observation time of its `after` edges, even when agents' clocks put that before the start.
    // A run whose every receipt conflicts has no usable start: nothing is due.
    if (step.after.length === 0) return Number.isFinite(startAt) ? (due[i] = startAt) : null;
    let t = -Infinity;
    for (const a of step.after) {
      const o = obs[a];
      if (!o) return null;
      if (o.at > t) t = o.at;
    }
    due[i] = t;
    return t;
  };
  const absent: PlanStep[] = [];
  plan.forEach((step, i) => {
    const d = dueOf(i, new Set());
    const o = obs[i];
    const deadline = d !== null && step.withinMs !== undefined ? d + step.withinMs : null;
    if (o) {
      if (deadline !== null && o.at > deadline) {
        add({
          verdict: 'incomplete',
          code: 'late_edge',
          edge: step.key,
          agents: step.dependency ? [step.dependency] : [],
          events: [o.event],
          message: `${step.key} came ${humanDuration(o.at - deadline)} after its deadline ${iso(deadline)}: investigate the first absent expected edge`,
          settled: true,
        });
      }
      return;
    }
    absent.push(step);
    if (d === null) return; // not due yet: pending behind earlier edges
    if (deadline !== null && now >= deadline && deadline <= endAt) {
      add({
        verdict: 'incomplete',
        code: 'missed_deadline',
        edge: step.key,
        agents: step.dependency ? [step.dependency] : [],
        message: `${step.key} still absent at its deadline ${iso(deadline)} (${humanDuration(now - deadline)} ago): investigate the first absent expected edge`,
        settled: true,
      });
    } else if (end) {
      // an ended run waits for nothing; completion decides below. A deadline at or before the end
      // that `now` has not reached yet still adds a missed_deadline finding when it passes.
      if (deadline !== null && deadline <= endAt) nextChangeAt = Math.min(nextChangeAt, deadline);
    } else if (deadline !== null && step.dependency) {
      nextChangeAt = Math.min(nextChangeAt, deadline);
      add({
        verdict: 'waiting',
        code: 'waiting',
        edge: step.key,
        agents: [step.dependency],
        message: `waiting on ${step.dependency} for ${step.key} until ${iso(deadline)} (${humanDuration(deadline - now)} left): notify or observe the named dependency`,
        settled: false,
      });
    } else {
      if (deadline !== null) nextChangeAt = Math.min(nextChangeAt, deadline);
      add({
        verdict: 'working',
        code: 'pending',
        edge: step.key,
        message: `${step.key} is due since ${iso(d)}${deadline !== null ? `, deadline ${iso(deadline)}` : ''}: useful work may continue`,
        settled: false,
      });
    }
  });

  for (const w of state.waits) {
    const at = instant(w.at);
    const deadline = instant(w.deadline!);
    if (at > endAt || deadline > endAt) continue; // void after the end
    let spec: EdgeSpec;
    try {
      spec = parseEdge(w.edge!);
    } catch {
      continue; // validated at ingest
    }
    const seen = observedAt(spec);
    const key = specKey(spec);
    if (seen && seen.at <= deadline) continue;
    if (now >= deadline || seen) {
      add({
        verdict: 'incomplete',
        code: seen ? 'late_wait' : 'missed_wait',
        edge: key,
        agents: [w.on!],
        events: seen ? [w.event, seen.event] : [w.event],
        message: seen
          ? `${key}, waited on ${w.on}, came ${humanDuration(seen.at - deadline)} after the wait's deadline ${iso(deadline)}: investigate the first absent expected edge`
          : `${key}, waited on ${w.on}, still absent at the wait's deadline ${iso(deadline)}: investigate the first absent expected edge`,
        settled: true,
      });
    } else if (!end) {
      nextChangeAt = Math.min(nextChangeAt, deadline);
      add({
        verdict: 'waiting',
        code: 'declared_wait',
        edge: key,
        agents: [w.on!],
        events: [w.event],
        message: `declared wait on ${w.on} for ${key} until ${iso(deadline)} (${humanDuration(deadline - now)} left): notify or observe the named dependency`,
        settled: false,
      });
    } else {
      // ended, the deadline at or before the end but not reached by `now`: missed_wait when it passes
      nextChangeAt = Math.min(nextChangeAt, deadline);
    }
  }

  const outcomeOk = phase.outcome === 'optional' || (state.verifiedOutcome !== null && state.verifiedOutcome.at <= endAt);
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
          message: `run ended completed at ${iso(endAt)} but ${[
            ...missing.map((m) => `${m} is absent`),
            ...(outcomeOk ? [] : ['no verified outcome exists']),
          ].join(', ')}: reopen the run; completion lacks required evidence`,
          settled: true,
        });
      }
    } else {
      add({
        verdict: 'incomplete',
        code: `run_${end.result}`,
        agents: end.from ? [end.from] : [],
        events: [end.event],
        message: `run ended ${end.result} at ${iso(endAt)}: an ended-but-not-completed run is never healthy; investigate the first absent expected edge`,
        settled: true,
      });
    }
  } else if (absent.length === 0 && !outcomeOk) {
    add({ verdict: 'working', code: 'awaiting_outcome', message: 'every expected edge is observed; a verified outcome receipt is still required for healthy', settled: false });
  }

  if (opts.extraFindings) for (const f of opts.extraFindings(state, now)) add(f);
  return finish(state, pin, findings, nextChangeAt, planFinished);
}

function compareFindings(a: Finding, b: Finding): number {
  return (
    precedence(a.verdict) - precedence(b.verdict) ||
    cmp(a.code, b.code) ||
    cmp(a.edge ?? '', b.edge ?? '') ||
    cmp(a.agents.join(','), b.agents.join(',')) ||
    cmp(a.events.join(','), b.events.join(',')) ||
    cmp(a.message, b.message)
  );
}
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function finish(state: RunState, pin: Pin | null, findings: Finding[], nextChangeAt: number, planFinished = false): RunVerdict {
  findings.sort(compareFindings);
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
export function classify(receipts: Receipt[], now: number, registry: ContractRegistry, defaultContract?: string, opts: EvaluateOptions = {}): RunVerdict {
  if (receipts.length === 0) throw new Error('classify needs at least one receipt');
  const state = new RunState(receipts[0].run);
  for (const r of receipts) state.add(r);
  return evaluate(state, resolvePin(state, registry, defaultContract), now, { registry, ...opts });
}

export { compactKey };
