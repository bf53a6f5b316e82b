/**
 * The verdict: a pure function of (pinned contract, the run's receipts, now).
 *
 * Receipts are folded into a RunState whose aggregates are commutative (sets, minima, counts), so the
 * verdict cannot depend on arrival order, and adding one receipt costs O(1): the server keeps one RunState
 * per live run and re-evaluates it without re-reading the run. `evaluate` costs O(plan + distinct edges,
 * agents and versions + declared waits), plus the event lists its findings carry; it re-reads receipts only to
 * list the events of an unknown agent or a foreign version (runs with handoff receipts also pay the handoff audit).
 * `evaluate` is the one verdict function: it composes the rule families of src/core/rules/ (docs/architecture.md).
 */
import { compactKey, parseEdge, specKey, tripleKey, type EdgeSpec } from './edge.js';
import { receiptCanon } from './receipt.js';
import { subMillisOf, toInstant, type Instant } from './time.js';
import type { ContractRegistry, PinResolution, PinRef } from './registry.js';
import { precedence, type Finding, type NaiveVerdict, type Pin, type Receipt, type RunVerdict, type Verdict } from './types.js';
import { earlier, evalContext, mergeSorted, type Obs, type RuleResult } from './rules/context.js';
import { evidenceRules, noPinRule, pinRules } from './rules/evidence.js';
import { agentRules } from './rules/agents.js';
import { routeRules } from './rules/routes.js';
import { planRules } from './rules/plan.js';
import { waitRules } from './rules/waits.js';
import { endRules, stallRules } from './rules/completion.js';
import { handoffRules } from './rules/handoffs.js';

export type AddResult = 'accepted' | 'duplicate' | 'conflict';

export interface EdgeAgg {
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
export interface WaitEdge {
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
export function sortedEvents(e: EdgeAgg): string[] {
  if (e.unsorted.length > 0) {
    e.sorted = mergeSorted(e.sorted, e.unsorted.sort());
    e.unsorted = [];
  }
  return e.sorted;
}

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
}

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
 * nanosecond (src/core/time.ts). The one verdict function: it composes the rule families of src/core/rules/, each
 * of which returns its findings and the earliest time they may change with time alone.
 */
export function evaluate(state: RunState, pinning: Pinning, nowAt: number | Instant, opts: EvaluateOptions = {}): RunVerdict {
  const { ms: now, ns: nowNs } = toInstant(nowAt);
  const evidence = evidenceRules(state);
  if (!pinning.ok) return finish(state, null, [evidence, noPinRule(pinning.reason)], false);
  const ctx = evalContext(state, pinning.pin, pinning.contract, now, nowNs, opts.registry);
  const parts = [
    evidence,
    pinRules(ctx),
    agentRules(ctx),
    routeRules(ctx),
    planRules(ctx),
    waitRules(ctx),
    stallRules(ctx),
    endRules(ctx),
    handoffRules(state, now),
  ];
  return finish(state, ctx.pin, parts, ctx.absent.length === 0 && ctx.outcomeOk);
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

function finish(state: RunState, pin: Pin | null, parts: RuleResult[], planFinished: boolean): RunVerdict {
  const findings: Finding[] = [];
  let nextChangeAt = Infinity;
  for (const p of parts) {
    for (const f of p.findings) findings.push(f);
    if (p.nextChangeAt < nextChangeAt) nextChangeAt = p.nextChangeAt;
  }
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
