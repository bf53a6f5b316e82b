/**
 * The observations of one run's receipts, as the rules read them: RunObservations, the aggregates a RunState
 * (src/core/state.ts) folds each accepted receipt into.
 *
 * The aggregates are commutative (sets, minima, counts), so the verdict cannot depend on arrival order, and folding
 * one receipt costs O(1). Memory-tuned (a live server holds one per run): packed lists, maps made only past a few
 * entries, the repeated names of receipts shared. Only the few lists findings need are kept as receipts (run.start
 * and run.end, verified outcomes, gaps, handoff receipts), each a copy.
 */
import { parseEdge, specKey, tripleKey, type EdgeSpec } from './edge.js';
import { earlier, mergeSorted, type Obs } from './obs.js';
import { millisOf, subMillisOf } from './time.js';
import { HandoffFold } from './rules/handoff/fold.js';
import type { Instant } from './time.js';
import type { Finding, GapReceipt, HandoffReceipt, OutcomeReceipt, Receipt, RunEndReceipt, RunStartReceipt } from './types.js';

/**
 * The observations of one edge (from, to, kind) in a run. It is also its earliest observation (by time, then event
 * id): `event`, `at`, `ns` (an Obs; `first` is the same object).
 */
export class EdgeAgg implements Obs {
  /** How many receipts observed this edge. */
  count = 1;
  /**
   * Event ids of the observations, sorted; ids added since the last read wait in `unsorted` (see sortedEvents).
   * A `sorted` array is never changed once made (a read replaces it), so findings may hold it.
   */
  sorted: string[];
  unsorted: string[] = NO_EVENTS;

  constructor(
    readonly from: string,
    readonly to: string,
    readonly kind: string,
    /** tripleKey(from, to, kind): its key in RunState.edges. */
    readonly key: string,
    public event: string,
    public at: number,
    public ns: number,
  ) {
    this.sorted = [event];
  }

  /** The earliest observation (by time, then event id). */
  get first(): Obs {
    return this;
  }
}

/** A parsed wait edge: its spec, canonical text and the tripleKeys it matches (shared by every wait on the same text). */
export interface WaitEdge {
  spec: EdgeSpec;
  key: string;
  keys: string[];
}

/** A declared wait with what evaluate needs from it, read once when the receipt is folded. */
export interface WaitFacts {
  event: string;
  /** The awaited agent. */
  on: string;
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
    parsed = { spec, key: specKey(spec), keys: spec.to.map((t) => tripleKey(spec.from, t, spec.kind)) };
  } catch {
    parsed = null; // validated at ingest; an unparsable wait is ignored by evaluate
  }
  if (waitEdges.size < WAIT_EDGE_CACHE) waitEdges.set(text, parsed);
  return parsed;
}

/** An edge aggregate's event ids in sorted order (the order sortStr gives), merging in ids added since the last call. */
export function sortedEvents(e: EdgeAgg): string[] {
  if (e.unsorted.length > 0) {
    const added = e.unsorted;
    e.unsorted = NO_EVENTS;
    e.sorted = mergeSorted(e.sorted, added.sort());
  }
  return e.sorted;
}

/** Up to this many distinct wait edges a run's waits are summarised per edge (see RunState.waitEdgeList). */
const WAIT_EDGES_TRACKED = 8;

/** Up to this many agents a run's are found by a scan; past it, also by a set. */
const SCAN_AGENTS = 16;

/** Up to this many edge aggregates a run's are found by a scan; past it, by a map. */
const SCAN_EDGES = 8;

/** Shared empty list of the lists a RunState allocates on first use (never written: replaced on the first push). */
export const EMPTY = Object.freeze([]) as unknown as never[];
const NO_EVENTS: string[] = EMPTY;
const NO_VERSIONS: ReadonlyMap<string, number> = new Map();

/**
 * Names that repeat across runs (versions, agents, edge kinds) as a state keeps them: one string per distinct
 * value, so a million live receipts do not hold a copy of "orchestrator" per run. Bounded: past the bound new
 * values are kept as they are.
 */
const sharedStrings = new Map<string, string>();
const SHARED_STRINGS = 100_000;

function sharedText(v: string): string {
  const s = sharedStrings.get(v);
  if (s !== undefined) return s;
  if (sharedStrings.size < SHARED_STRINGS) sharedStrings.set(v, v);
  return v;
}

/** Lists up to this long grow by an exact-size copy (see grown). */
const EXACT_GROWTH = 64;

/**
 * `list` with `k` items (a, b, c, d) added: while the list is short, a copy of exact size (an array pushed to keeps
 * room for 16 more, which most runs' few edges and waits never use); past EXACT_GROWTH, in place. Items past `k` are
 * not read (their defaults only type them).
 */
function grown<T>(list: T[], k: 1 | 3 | 4, a: T, b: T = a, c: T = a, d: T = a): T[] {
  const n = list.length;
  let out = list;
  if (n + k > EXACT_GROWTH && n > 0) {
    out.push(a);
  } else {
    out = new Array<T>(n + k);
    for (let i = 0; i < n; i++) out[i] = list[i];
    out[n] = a;
  }
  if (k === 1) return out;
  if (out === list) {
    out.push(b, c);
    if (k === 4) out.push(d);
  } else {
    out[n + 1] = b;
    out[n + 2] = c;
    if (k === 4) out[n + 3] = d;
  }
  return out;
}

/** Receipt fields whose values repeat across receipts: shared in the copies a state keeps. */
const SHARED_FIELDS = ['type', 'version', 'status', 'contract', 'phase', 'from', 'to', 'kind', 'on', 'edge', 'result', 'reason', 'state', 'finalOwner', 'onTimeout', 'budgetOp'] as const;

/** An equal copy of a receipt (same fields, same order), its repeated names shared: never the caller's object. */
export function keptCopy<R extends Receipt>(r: R): R {
  const c = { ...r };
  const fields: Record<string, unknown> = c;
  for (const k of SHARED_FIELDS) {
    const v = fields[k];
    if (typeof v === 'string') fields[k] = sharedText(v);
  }
  return c;
}

/** Whether (at, ns, event) comes before the receipt held as first (none held: true): by instant, then event id. */
function earlierThan(at: number, ns: number, event: string, first: { event: string } | null, firstAt: number, firstNs: number): boolean {
  return first === null || at < firstAt || (at === firstAt && (ns < firstNs || (ns === firstNs && event < first.event)));
}

/** The observations of one run's receipts: what the rules read (see the file's head). */
export class RunObservations {
  constructor(readonly run: string) {}

  starts: readonly RunStartReceipt[] = EMPTY;
  ends: readonly RunEndReceipt[] = EMPTY;
  /** The earliest run.start and run.end (by time, then event id) and their instants. */
  protected firstStartR: RunStartReceipt | null = null;
  firstStartAt = Infinity;
  firstStartNs = 0;
  protected firstEndR: RunEndReceipt | null = null;
  firstEndAt = Infinity;
  firstEndNs = 0;
  /** The earliest and latest receipt instants: whole ms, and the sub-ms nanoseconds in firstNs / lastNs. */
  firstAt = Infinity;
  firstNs = 0;
  lastAt = -Infinity;
  lastNs = 0;
  /** The edge aggregates in creation order (scanned while there are few, else looked up in edgeMap). */
  protected edgeList: EdgeAgg[] = [];
  /** The aggregates by tripleKey, made once a run has more than SCAN_EDGES of them (or `edges` is read). */
  protected edgeMap: Map<string, EdgeAgg> | null = null;

  /** The edge aggregates (the values of `edges`), in creation order. */
  get edgeAggs(): readonly EdgeAgg[] {
    return this.edgeList;
  }

  /** The edge aggregates by tripleKey(from, to, kind). */
  get edges(): ReadonlyMap<string, EdgeAgg> {
    return (this.edgeMap ??= new Map(this.edgeList.map((e) => [e.key, e])));
  }

  /** The aggregate of a tripleKey, or undefined. */
  edge(key: string): EdgeAgg | undefined {
    if (this.edgeMap !== null) return this.edgeMap.get(key);
    const list = this.edgeList;
    for (let i = 0; i < list.length; i++) if (list[i].key === key) return list[i];
    return undefined;
  }
  /**
   * Agents named by the receipts (as from, an edge's to, a wait's on), in order of first naming; events via
   * agentEvents. A list (a run names a handful: a set would cost ~10x the memory), found by a scan while short, past
   * SCAN_AGENTS also through agentIndex.
   */
  protected agentList: string[] = EMPTY;
  /** Past SCAN_AGENTS: each agent's index in agentList. */
  protected agentIndex: Map<string, number> | null = null;
  /**
   * Parallel to agentList: the one event naming the agent while it was named once, else null. agentEventsOf needs
   * no walk over the run for an agent named once (a run naming thousands of agents once each: no walk at all).
   */
  protected agentOnce: (string | null)[] = EMPTY;

  /** The agents named, in order of first naming. */
  get agentNames(): readonly string[] {
    return this.agentList;
  }

  /** The agents named, as a set (made on each call). */
  get agents(): ReadonlySet<string> {
    return new Set(this.agentList);
  }

  /** Does a receipt name `agent`? */
  hasAgent(agent: string): boolean {
    return this.agentAt(agent) >= 0;
  }

  /** The agent's index in agentList, or -1. */
  protected agentAt(agent: string): number {
    if (this.agentIndex !== null) return this.agentIndex.get(agent) ?? -1;
    const list = this.agentList;
    for (let i = 0; i < list.length; i++) if (list[i] === agent) return i;
    return -1;
  }
  // Versions the receipts carry, with how often: the one version most runs carry inline, a map once there are more.
  protected version1: string | undefined = undefined;
  protected version1Count = 0;
  protected versionMap: Map<string, number> | null = null;

  /** Versions the receipts carry, with how often; events via versionEvents. */
  get versions(): ReadonlyMap<string, number> {
    if (this.versionMap !== null) return this.versionMap;
    return this.version1 === undefined ? NO_VERSIONS : new Map([[this.version1, this.version1Count]]);
  }

  /** Do the receipts that carry a version all carry `version` (or none carries one)? */
  onlyVersion(version: string): boolean {
    return this.versionMap === null && (this.version1 === undefined || this.version1 === version);
  }
  /**
   * The declared waits, in fold order, packed (no object per wait): wait i's instants at waitTimes[4i..4i+3] (at, atNs,
   * deadline, deadlineNs: an array of doubles, unboxed) and its event, awaited agent and edge at waitRefs[3i..3i+2].
   */
  waitTimes: readonly number[] = EMPTY;
  waitRefs: readonly (string | WaitEdge | null)[] = EMPTY;
  /**
   * The distinct edges the waits name (a run's waits name a few) and, per edge i, its waits' earliest deadline at
   * waitEdgeMin[2i] (ms) and [2i+1] (ns): when each edge was observed by then, every wait is met (waitRules skips
   * them). `waitEdgesTracked` is false past WAIT_EDGES_TRACKED distinct edges (the waits are then checked one by one).
   */
  waitEdgeList: readonly WaitEdge[] = EMPTY;
  waitEdgeMin: readonly number[] = EMPTY;
  waitEdgesTracked = true;
  /** How many waits were declared. */
  get waitCount(): number {
    return this.waitTimes.length >> 2;
  }

  /** The declared waits as objects (made on each call). */
  get waitFacts(): WaitFacts[] {
    const out: WaitFacts[] = [];
    const t = this.waitTimes;
    const r = this.waitRefs;
    for (let i = 0, n = this.waitCount; i < n; i++) {
      out.push({ event: r[3 * i] as string, on: r[3 * i + 1] as string, at: t[4 * i], atNs: t[4 * i + 1], deadline: t[4 * i + 2], deadlineNs: t[4 * i + 3], edge: r[3 * i + 2] as WaitEdge | null });
    }
    return out;
  }
  verifiedOutcome: Obs | null = null;
  /** Verified outcome receipts (the handoff audit reads them). */
  verifiedOutcomes: readonly OutcomeReceipt[] = EMPTY;
  gaps: readonly GapReceipt[] = EMPTY;
  notOk: readonly string[] = EMPTY;
  handoffs: readonly HandoffReceipt[] = EMPTY;
  /**
   * The handoff audit folded receipt by receipt (src/core/rules/handoff/fold.ts): made with the run's first handoff
   * receipt, fed its handoff receipts, run ends and verified outcomes (what handoffReceipts lists), made again by a
   * rebuild.
   */
  protected handoffFold: HandoffFold | null = null;

  /** Event lists of agents and versions asked for (see RunState.agentEvents), kept up to date from then on. */
  protected agentLists: Map<string, string[]> | null = null;
  protected versionLists: Map<string, string[]> | null = null;

  /** Forgets every observation (a conflict rebuild folds the run's receipts again). */
  protected resetObservations(): void {
    this.starts = EMPTY;
    this.ends = EMPTY;
    this.firstStartR = null;
    this.firstStartAt = Infinity;
    this.firstStartNs = 0;
    this.firstEndR = null;
    this.firstEndAt = Infinity;
    this.firstEndNs = 0;
    this.firstAt = Infinity;
    this.firstNs = 0;
    this.lastAt = -Infinity;
    this.lastNs = 0;
    this.edgeMap = null;
    this.edgeList = [];
    this.agentList = EMPTY;
    this.agentIndex = null;
    this.agentOnce = EMPTY;
    this.version1 = undefined;
    this.version1Count = 0;
    this.versionMap = null;
    this.agentLists = null;
    this.versionLists = null;
    this.waitTimes = EMPTY;
    this.waitRefs = EMPTY;
    this.waitEdgeList = EMPTY;
    this.waitEdgeMin = EMPTY;
    this.waitEdgesTracked = true;
    this.verifiedOutcome = null;
    this.verifiedOutcomes = EMPTY;
    this.gaps = EMPTY;
    this.notOk = EMPTY;
    this.handoffs = EMPTY;
    this.handoffFold = null;
  }

  /** Keeps a receipt in one of the few lists of whole receipts (a copy, its repeated names shared). */
  private push<R extends Receipt>(list: readonly R[], r: R): { list: readonly R[]; copy: R } {
    const copy = keptCopy(r);
    if (list === EMPTY) return { list: [copy], copy };
    (list as R[]).push(copy);
    return { list, copy };
  }

  private mention(agent: string, event: string): void {
    const i = this.agentAt(agent);
    if (i < 0) {
      // a new name: keep the shared copy of it
      const name = sharedText(agent);
      const n = this.agentList.length;
      this.agentList = grown(this.agentList, 1, name);
      this.agentOnce = grown(this.agentOnce, 1, event);
      if (this.agentIndex !== null) this.agentIndex.set(name, n);
      else if (n + 1 > SCAN_AGENTS) this.agentIndex = new Map(this.agentList.map((a, k) => [a, k]));
    } else this.agentOnce[i] = null;
    if (this.agentLists !== null) this.agentLists.get(agent)?.push(event);
  }

  protected fold(r: Receipt, at: number, ns: number): void {
    if (at < this.firstAt || (at === this.firstAt && ns < this.firstNs)) {
      this.firstAt = at;
      this.firstNs = ns;
    }
    if (at > this.lastAt || (at === this.lastAt && ns > this.lastNs)) {
      this.lastAt = at;
      this.lastNs = ns;
    }
    const event = r.event;
    if (r.version !== undefined) {
      const v = r.version;
      const v1 = this.version1;
      if (this.versionMap === null && (v1 === undefined || v1 === v)) {
        this.version1 ??= sharedText(v);
        this.version1Count++;
      } else {
        // a second version: the map takes over, starting from the one version held inline
        const map = (this.versionMap ??= v1 === undefined ? new Map() : new Map([[v1, this.version1Count]]));
        const n = map.get(v);
        map.set(v, n === undefined ? 1 : n + 1);
      }
      if (this.versionLists !== null) this.versionLists.get(r.version)?.push(event);
    }
    if (r.status !== undefined && r.status !== 'ok') {
      if (this.notOk === EMPTY) this.notOk = [event];
      else (this.notOk as string[]).push(event);
    }
    if (r.from !== undefined) this.mention(r.from, event);
    switch (r.type) {
      case 'run.start': {
        const { list, copy: c } = this.push(this.starts, r);
        this.starts = list;
        if (earlierThan(at, ns, event, this.firstStartR, this.firstStartAt, this.firstStartNs)) {
          this.firstStartR = c;
          this.firstStartAt = at;
          this.firstStartNs = ns;
        }
        break;
      }
      case 'run.end': {
        const { list, copy: c } = this.push(this.ends, r);
        this.ends = list;
        this.handoffFold?.add(c);
        if (earlierThan(at, ns, event, this.firstEndR, this.firstEndAt, this.firstEndNs)) {
          this.firstEndR = c;
          this.firstEndAt = at;
          this.firstEndNs = ns;
        }
        break;
      }
      case 'edge': {
        const { from, to, kind } = r;
        this.mention(to, event);
        let e: EdgeAgg | undefined;
        const list = this.edgeList;
        if (this.edgeMap === null) {
          // few edges (the usual run): compare the fields, no key made
          for (let i = 0; i < list.length; i++) {
            const x = list[i];
            if (x.to === to && x.from === from && x.kind === kind) {
              e = x;
              break;
            }
          }
        } else e = this.edgeMap.get(tripleKey(from, to, kind));
        if (e) {
          e.count++;
          if (e.unsorted === NO_EVENTS) e.unsorted = [event];
          else e.unsorted.push(event);
          if (at < e.at || (at === e.at && (ns < e.ns || (ns === e.ns && event < e.event)))) {
            e.event = event;
            e.at = at;
            e.ns = ns;
          }
        } else {
          e = new EdgeAgg(sharedText(from), sharedText(to), sharedText(kind), tripleKey(from, to, kind), event, at, ns);
          this.edgeList = grown(list, 1, e);
          if (this.edgeMap !== null) this.edgeMap.set(e.key, e);
          else if (this.edgeList.length > SCAN_EDGES) this.edgeMap = new Map(this.edgeList.map((x) => [x.key, x]));
        }
        break;
      }
      case 'wait': {
        this.mention(r.on, event);
        const deadline = millisOf(r.deadline);
        const deadlineNs = subMillisOf(r.deadline);
        const we = waitEdgeOf(r.edge);
        this.waitTimes = grown(this.waitTimes as number[], 4, at, ns, deadline, deadlineNs);
        this.waitRefs = grown(this.waitRefs as (string | WaitEdge | null)[], 3, event, sharedText(r.on), we);
        if (we !== null && this.waitEdgesTracked) this.trackWaitEdge(we, deadline, deadlineNs);
        break;
      }
      case 'outcome':
        if (r.verified === true) {
          const { list, copy: c } = this.push(this.verifiedOutcomes, r);
          this.verifiedOutcomes = list;
          this.handoffFold?.add(c);
          const o = { event, at, ns };
          if (earlier(this.verifiedOutcome, o)) this.verifiedOutcome = o;
        }
        break;
      case 'gap':
        this.gaps = this.push(this.gaps, r).list;
        break;
      case 'handoff': {
        const { list, copy: c } = this.push(this.handoffs, r);
        this.handoffs = list;
        if (this.handoffFold === null) {
          this.handoffFold = new HandoffFold(this.run);
          for (const x of this.ends) this.handoffFold.add(x);
          for (const x of this.verifiedOutcomes) this.handoffFold.add(x);
        }
        this.handoffFold.add(c);
        break;
      }
    }
  }

  /** Keeps the earliest deadline of the waits on `we` (see waitEdgeList). */
  private trackWaitEdge(we: WaitEdge, deadline: number, deadlineNs: number): void {
    const list = this.waitEdgeList;
    for (let i = 0; i < list.length; i++) {
      if (list[i] !== we) continue;
      const min = this.waitEdgeMin as number[];
      if (deadline < min[2 * i] || (deadline === min[2 * i] && deadlineNs < min[2 * i + 1])) {
        min[2 * i] = deadline;
        min[2 * i + 1] = deadlineNs;
      }
      return;
    }
    if (list.length >= WAIT_EDGES_TRACKED) {
      this.waitEdgesTracked = false;
      return;
    }
    this.waitEdgeList = grown(list as WaitEdge[], 1, we);
    const min = this.waitEdgeMin;
    this.waitEdgeMin = min === EMPTY ? [deadline, deadlineNs] : [...min, deadline, deadlineNs];
  }

  /**
   * The handoff findings at `now` and when they next change with time alone: what handoffAudit(handoffReceipts(),
   * now) gives, from the fold (its cost: what changed since the last call, and the findings in force).
   */
  handoffAudit(now: Instant): { findings: Finding[]; nextChangeAt: number } {
    return this.handoffFold === null ? { findings: [], nextChangeAt: Infinity } : this.handoffFold.audit(now);
  }

  /** The receipts a handoff audit reads: handoff transitions, run ends and verified outcomes. */
  handoffReceipts(): Receipt[] {
    return [...this.handoffs, ...this.ends, ...this.verifiedOutcomes];
  }

  /** The earliest run.start (by time, then event id), the one that pins. */
  firstStart(): RunStartReceipt | null {
    return this.firstStartR;
  }

  /** The run's end: its earliest run.end (by time, then event id). */
  firstEnd(): RunEndReceipt | null {
    return this.firstEndR;
  }
}

