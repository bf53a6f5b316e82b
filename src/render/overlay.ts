/**
 * The overlay: the pinned contract's graph (allow rules, the phase's plan) with what a run observed laid over it.
 *
 * A pure function of (contract, phase, verdict, receipts, now). It does not classify: every judgement
 * (forbidden, over the max, late, waiting) comes from the verdict's findings; the receipts give only what was
 * seen (counts, event ids) and the plan's deadlines (due time + `within`), so the web view, `diff` and the
 * verdict cannot disagree.
 */
import type { Contract, Phase } from '../core/contract.js';
import { compactKey, edgeKey, parseEdge, type EdgeSpec } from '../core/edge.js';
import { instant, receiptCanon } from '../core/receipt.js';
import type { EdgeKind, Finding, Receipt, RunVerdict, Verdict } from '../core/types.js';

export const EDGE_STATES = ['allowed', 'observed', 'expected', 'absent', 'forbidden', 'over_max', 'late', 'waiting'] as const;
export type EdgeState = (typeof EDGE_STATES)[number];

export interface OverlayNode {
  id: string;
  /** Declared in the contract's agents. */
  known: boolean;
  /** The contract's final accountable owner. */
  owner: boolean;
}

export interface OverlayEdge {
  /** Canonical edge key `from -> to : kind`. */
  id: string;
  from: string;
  to: string;
  kind: EdgeKind;
  /** In EDGE_STATES order. */
  states: EdgeState[];
  /** Distinct observed events on this edge. */
  count: number;
  /** The allow entry's multiplicity (shared by the targets of a bounded choice). */
  max?: number;
  /** The allow entry as written, when it covers more than this edge (bounded choice). */
  rule?: string;
  /** Observations counted against the allow entry (all its targets). */
  ruleCount?: number;
  /** Deadline (ms since epoch) of the expected edge or of a declared wait on it (the earliest, when both). */
  deadline?: number;
  /** The agent being waited on. */
  dependency?: string;
  /** The plan step's `within` (ms), counted from the edge becoming due. */
  withinMs?: number;
  /** Codes of the findings that name this edge. */
  findings: string[];
  /** Event ids of the observations. */
  events: string[];
}

export interface Overlay {
  contract: string;
  version: string;
  phase: string;
  run?: string;
  verdict?: Verdict;
  now?: number;
  nodes: OverlayNode[];
  edges: OverlayEdge[];
}

const STATE_ORDER = new Map(EDGE_STATES.map((s, i) => [s, i]));

function addState(e: OverlayEdge, s: EdgeState): void {
  if (e.states.includes(s)) return;
  e.states.push(s);
  e.states.sort((a, b) => STATE_ORDER.get(a)! - STATE_ORDER.get(b)!);
}

function addFinding(e: OverlayEdge, code: string): void {
  if (!e.findings.includes(code)) e.findings.push(code);
}

function phaseOf(contract: Contract, phaseName: string): Phase {
  const phase = contract.phases.find((p) => p.name === phaseName);
  if (!phase) throw new Error(`contract ${contract.contract}@${contract.version} has no phase "${phaseName}"`);
  return phase;
}

/** Concrete edges of a spec (one per target). */
const concrete = (spec: EdgeSpec) => spec.to.map((to) => ({ from: spec.from, to, kind: spec.kind }));

class EdgeTable {
  readonly byId = new Map<string, OverlayEdge>();
  readonly agents: string[] = [];

  get(from: string, to: string, kind: EdgeKind): OverlayEdge {
    const id = edgeKey(from, to, kind);
    let e = this.byId.get(id);
    if (!e) {
      e = { id, from, to, kind, states: [], count: 0, findings: [], events: [] };
      this.byId.set(id, e);
    }
    return e;
  }

  agent(id: string): void {
    if (!this.agents.includes(id)) this.agents.push(id);
  }
}

/** The contract's own graph for one phase: allowed edges and the plan's expected edges, nothing observed. */
export function contractGraph(contract: Contract, phaseName: string): Overlay {
  const table = new EdgeTable();
  baseGraph(table, contract, phaseOf(contract, phaseName));
  return finish(table, contract, phaseName);
}

function baseGraph(table: EdgeTable, contract: Contract, phase: Phase): void {
  for (const a of contract.agents) table.agent(a);
  for (const rule of contract.allow) {
    for (const c of concrete(rule.spec)) {
      const e = table.get(c.from, c.to, c.kind);
      addState(e, 'allowed');
      e.max = rule.max;
      if (rule.spec.to.length > 1) e.rule = rule.key;
    }
  }
  for (const step of phase.plan) {
    for (const c of concrete(step.spec)) {
      const e = table.get(c.from, c.to, c.kind);
      addState(e, 'expected');
      if (step.dependency) e.dependency = step.dependency;
      if (step.withinMs !== undefined) e.withinMs = step.withinMs;
    }
  }
}

function finish(table: EdgeTable, contract: Contract, phaseName: string, extra: Partial<Overlay> = {}): Overlay {
  const declared = new Set(contract.agents);
  const unknown = table.agents.filter((a) => !declared.has(a)).sort();
  const nodes: OverlayNode[] = [...contract.agents, ...unknown].map((id) => ({ id, known: declared.has(id), owner: id === contract.owner }));
  for (const e of table.byId.values()) e.findings.sort();
  // The contract's edges in its own order, then the rest by key: the same receipts in any order give the same overlay.
  const all = [...table.byId.values()];
  const declaredEdges = all.filter((e) => e.states.includes('allowed') || e.states.includes('expected'));
  const rest = all.filter((e) => !declaredEdges.includes(e)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { contract: contract.contract, version: contract.version, phase: phaseName, ...extra, nodes, edges: [...declaredEdges, ...rest] };
}

/** Receipts usable as evidence: one per event id; an event delivered with different contents (a conflict) is left out, as the verdict does. */
export function usableReceipts(receipts: Receipt[]): Receipt[] {
  const byEvent = new Map<string, { r: Receipt; canon: string; conflict: boolean }>();
  for (const r of receipts) {
    const canon = receiptCanon(r);
    const prev = byEvent.get(r.event);
    if (!prev) byEvent.set(r.event, { r, canon, conflict: false });
    else if (prev.canon !== canon) prev.conflict = true;
  }
  return [...byEvent.values()].filter((x) => !x.conflict).map((x) => x.r);
}

interface Seen {
  at: number;
  event: string;
}
const earlier = (a: Seen | null, b: Seen) => a === null || b.at < a.at || (b.at === a.at && b.event < a.event);

/** The earliest receipt of a type (by time, then event id). */
function firstOf(receipts: Receipt[], type: Receipt['type']): Receipt | null {
  let best: Receipt | null = null;
  for (const r of receipts) {
    if (r.type !== type) continue;
    if (!best || earlier({ at: instant(best.at), event: best.event }, { at: instant(r.at), event: r.event })) best = r;
  }
  return best;
}

/**
 * When each plan step is due and its deadline: due once every `after` step has an observation (at or before the
 * run's end), from the run's start; deadline = due + `within`. Steps not due yet have no deadline.
 */
export function planTimes(phase: Phase, receipts: Receipt[]): { due: number | null; deadline: number | null; satisfied: boolean }[] {
  const usable = usableReceipts(receipts);
  const end = firstOf(usable, 'run.end');
  const endAt = end ? instant(end.at) : Infinity;
  const start = firstOf(usable, 'run.start');
  const startAt = start ? instant(start.at) : Math.min(...usable.map((r) => instant(r.at)));
  const firstSeen = new Map<string, Seen>();
  for (const r of usable) {
    if (r.type !== 'edge') continue;
    const at = instant(r.at);
    if (at > endAt) continue;
    const k = edgeKey(r.from!, r.to!, r.kind!);
    const o = { at, event: r.event };
    if (earlier(firstSeen.get(k) ?? null, o)) firstSeen.set(k, o);
  }
  const seen = phase.plan.map((s) => {
    let best: Seen | null = null;
    for (const c of concrete(s.spec)) {
      const o = firstSeen.get(edgeKey(c.from, c.to, c.kind));
      if (o && earlier(best, o)) best = o;
    }
    return best;
  });
  return phase.plan.map((s, i) => {
    let due: number | null = startAt;
    for (const a of s.after) {
      const o = seen[a];
      if (!o) {
        due = null;
        break;
      }
      if (o.at > due!) due = o.at;
    }
    const deadline = due !== null && s.withinMs !== undefined ? due + s.withinMs : null;
    return { due, deadline, satisfied: seen[i] !== null };
  });
}

/** An edge with both a plan deadline and declared waits shows the earliest: the next instant its verdict can move. */
const earliestDeadline = (a: number | undefined, b: number) => (a === undefined ? b : Math.min(a, b));

/** Concrete edge keys a finding names (its `edge`, expanded over a bounded choice). */
function findingEdges(f: Finding): { from: string; to: string; kind: EdgeKind }[] {
  if (!f.edge) return [];
  try {
    return concrete(parseEdge(f.edge));
  } catch {
    return [];
  }
}

/**
 * The overlay of one run on its pinned contract and phase, at `now`.
 * States: allowed / expected come from the contract; observed and counts from the receipts; absent is an expected
 * edge with no observation at or before the run's end; forbidden, over_max, late and waiting come from the findings.
 */
export function overlay(contract: Contract, phaseName: string, verdict: RunVerdict, receipts: Receipt[], now: number): Overlay {
  const phase = phaseOf(contract, phaseName);
  const table = new EdgeTable();
  baseGraph(table, contract, phase);
  const usable = usableReceipts(receipts);

  // Observed: every edge receipt counts, whatever its time (as for the forbidden and multiplicity findings).
  for (const r of usable) {
    if (r.from !== undefined) table.agent(r.from);
    if (r.type === 'wait' && r.on) table.agent(r.on);
    if (r.type !== 'edge') continue;
    table.agent(r.to!);
    const e = table.get(r.from!, r.to!, r.kind!);
    e.count++;
    e.events.push(r.event);
    addState(e, 'observed');
  }
  for (const e of table.byId.values()) e.events.sort();
  // Observations counted per allow entry (a bounded choice shares its max).
  for (const rule of contract.allow) {
    if (rule.spec.to.length < 2) continue;
    const edges = concrete(rule.spec).map((c) => table.get(c.from, c.to, c.kind));
    const total = edges.reduce((n, e) => n + e.count, 0);
    for (const e of edges) e.ruleCount = total;
  }

  // Absent and deadlines: from the plan and the receipts.
  const times = planTimes(phase, usable);
  phase.plan.forEach((step, i) => {
    const t = times[i];
    for (const c of concrete(step.spec)) {
      const e = table.get(c.from, c.to, c.kind);
      if (!t.satisfied) addState(e, 'absent');
      if (t.deadline !== null) e.deadline = t.deadline;
    }
  });

  // Judgements: from the findings alone.
  const waitsByEvent = new Map(usable.filter((r) => r.type === 'wait').map((r) => [r.event, r]));
  for (const f of verdict.findings) {
    for (const a of f.agents) if (f.code === 'unknown_agent') table.agent(a);
    const edges = findingEdges(f);
    if (!edges.length) continue;
    const targets = edges.map((c) => table.get(c.from, c.to, c.kind));
    for (const e of targets) addFinding(e, f.code);
    const wait = f.events.map((ev) => waitsByEvent.get(ev)).find((w) => w !== undefined);
    switch (f.code) {
      case 'forbidden_edge':
        for (const e of targets) addState(e, 'forbidden');
        break;
      case 'multiplicity': {
        const seen = targets.filter((e) => e.count > 0);
        for (const e of seen.length ? seen : targets) {
          addState(e, 'over_max');
          if (e.rule) e.ruleCount = f.events.length;
        }
        break;
      }
      case 'waiting':
        for (const e of targets) {
          addState(e, 'waiting');
          if (f.agents[0]) e.dependency = f.agents[0];
        }
        break;
      case 'declared_wait':
        for (const e of targets) {
          addState(e, 'waiting');
          if (e.count === 0) addState(e, 'absent');
          if (f.agents[0]) e.dependency = f.agents[0];
          if (wait?.deadline) e.deadline = earliestDeadline(e.deadline, instant(wait.deadline));
        }
        break;
      case 'late_edge':
      case 'missed_deadline':
      case 'late_wait':
      case 'missed_wait':
        for (const e of targets) {
          addState(e, 'late');
          if (f.code === 'missed_wait') addState(e, 'absent');
          if (f.agents[0] && (f.code === 'late_wait' || f.code === 'missed_wait')) e.dependency = f.agents[0];
          if (wait?.deadline) e.deadline = earliestDeadline(e.deadline, instant(wait.deadline));
        }
        break;
      default:
        break;
    }
  }
  return finish(table, contract, phaseName, { run: verdict.run, verdict: verdict.verdict, now });
}

/** Edge key lookup tolerant of spacing (`a->b:kind`). */
export function findEdge(o: Overlay, key: string): OverlayEdge | undefined {
  const k = compactKey(key);
  return o.edges.find((e) => compactKey(e.id) === k);
}
