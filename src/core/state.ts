/**
 * The fold of one run's receipts: RunState, the observations (src/core/observations.ts) with the receipts' identities.
 *
 * Receipts are folded into aggregates that are commutative (sets, minima, counts), so the verdict cannot depend on
 * arrival order, and adding one receipt costs O(1): the server keeps one RunState per live run and re-evaluates it
 * without re-reading the run. A RunState keeps aggregates and, per event, a digest of its content (for duplicates
 * and conflicts), not the receipts: the few lists findings need (run.start and run.end receipts, declared waits,
 * gaps, handoff receipts) are kept, typed by receipt type, and the rest is read back from the run's receipt source
 * (the store, on a live server) when a conflict needs a rebuild or a finding lists the events of an unknown agent or
 * a foreign version. The rules (src/core/rules/) read a RunState; `evaluate` (src/core/classify.ts) composes them.
 */
import { IdSet } from './idset.js';
import { EMPTY, keptCopy, RunObservations } from './observations.js';
import { receiptCanon } from './receipt.js';
import { millisOf, subMillisOf } from './time.js';
import type { Contract } from './contract.js';
import type { ContractRegistry, PinRef } from './registry.js';
import type { Receipt, RunStartReceipt, RunVerdict } from './types.js';

export { EdgeAgg, RunObservations, sortedEvents, type WaitEdge, type WaitFacts } from './observations.js';

export type AddResult = 'accepted' | 'duplicate' | 'conflict';

/**
 * Where a RunState reads its run's receipts back (every stored version, conflicting ones included, in any order):
 * the receipt store on a live server. Read only to rebuild after a conflict and to list the events of an unknown
 * agent or a foreign version; receipts not (yet) folded into the state are skipped.
 */
export type ReceiptSource = (run: string) => Iterable<Receipt>;

/** A conflicted event id: the canonical forms of the distinct contents delivered under it, and whether any was not ok. */
export interface ConflictFacts {
  canons: string[];
  notOk: boolean;
}

const notOk = (r: Receipt): boolean => r.status !== undefined && r.status !== 'ok';

const NO_CONFLICTS: ReadonlyMap<string, ConflictFacts> = new Map();

/** What a conflict rebuild or an event listing reads: the run's receipts that are folded, each once. */
interface FoldedReceipt {
  receipt: Receipt;
  at: number;
  ns: number;
}

/**
 * The fold of one run's receipts: each event id once (a repeat is a duplicate or a conflict), the accepted ones
 * folded into its observations (RunObservations, which it is: one object per run), the conflict rebuild, the event
 * listings and the evaluation cache.
 */
export class RunState extends RunObservations {
  /**
   * Bumped by every change of the aggregates (a receipt folded, a conflict, a rebuild): an evaluation of the
   * same version, pin and registry may reuse the previous verdict while `now` has not reached its nextChangeAt.
   */
  version = 0;
  /**
   * Every event id seen (conflicted ones included): with a source, the ids only (the source holds the receipts);
   * without one, each with a copy of its accepted receipt (what a repeat is compared with and a rebuild folds again).
   */
  private readonly ids: IdSet | null;
  private readonly kept: Map<string, Receipt> | null;
  private conflictMap: Map<string, ConflictFacts> | null = null;
  // The last evaluation and what it depended on (see evaluate); cachedVerdict is null when there is none.
  /** @internal */ cachedVerdict: RunVerdict | null = null;
  /** @internal */ cachedVersion = -1;
  /** @internal the pin of cachedVerdict: its contract (null: no pin) and fields, or why there was none */
  cachedContract: Contract | null = null;
  /** @internal */ cachedPinContract = '';
  /** @internal */ cachedPinVersion = '';
  /** @internal */ cachedPinPhase = '';
  /** @internal */ cachedRegistry: ContractRegistry | undefined = undefined;
  /** @internal */ cachedRevision = 0;
  /** @internal */ cachedNowMs = 0;
  /** @internal */ cachedNowNs = 0;

  /** @internal per allow rule, the merged events of its edges at the last evaluation (src/core/rules/routes.ts) */
  routeMemo: unknown[] | null = null;
  /** @internal per declared wait (by index), the findings it has had (src/core/rules/waits.ts) */
  waitMemo: unknown[] | null = null;


  /**
   * `source`: where the run's receipts are read back from (the store); the state then keeps no receipt but the
   * few lists above. Without one, the state keeps a copy of every accepted receipt for its rebuilds.
   */
  constructor(
    run: string,
    private readonly source?: ReceiptSource,
  ) {
    super(run);
    this.ids = source ? new IdSet() : null;
    this.kept = source ? null : new Map();
  }

  /** Folded events: distinct event ids minus the conflicted ones. */
  get size(): number {
    const held = this.ids ?? this.kept;
    return (held === null ? 0 : held.size) - (this.conflictMap?.size ?? 0);
  }

  /** Conflicted event ids (neither content is used). */
  get conflicts(): ReadonlyMap<string, ConflictFacts> {
    return this.conflictMap ?? NO_CONFLICTS;
  }

  /**
   * Adds one receipt; a repeat of an event id with equal content (equal canonical forms) is a duplicate, with
   * different content a conflict. A new event id costs no comparison: only a repeat reads the earlier content (the
   * kept copy, or the source). `known`: the answer of the store that holds the run's receipts, when the caller has
   * it (the store compares canonical forms itself): a store's duplicate is a duplicate here without reading
   * anything, and a store's conflict is a conflict even for an event id this state has not folded yet.
   */
  add(r: Receipt, known?: AddResult): AddResult {
    const event = r.event;
    const ids = this.ids;
    const kept = this.kept;
    let prev: Receipt | null | undefined;
    if (ids !== null) {
      prev = ids.add(event) ? undefined : null; // one hash lookup: a new id is added, a known one is found
    } else prev = kept?.get(event);
    if (prev === undefined) {
      if (known === 'conflict' && ids !== null) {
        // another content under this id is stored (e.g. by another writer) and was never folded here
        this.conflictMap ??= new Map();
        this.conflictMap.set(event, this.storedConflict(event, r));
        this.version++;
        return 'conflict';
      }
      if (kept !== null) kept.set(event, keptCopy(r));
      this.fold(r, millisOf(r.at), subMillisOf(r.at));
      this.version++;
      return 'accepted';
    }
    if (known === 'duplicate') return 'duplicate';
    const canon = receiptCanon(r);
    const conflicted = this.conflictMap?.get(event);
    if (conflicted) {
      if (conflicted.canons.includes(canon)) return known === 'conflict' ? 'conflict' : 'duplicate';
      conflicted.canons.push(canon);
      if (r.status !== undefined && r.status !== 'ok') conflicted.notOk = true;
      this.version++;
      return 'conflict';
    }
    let facts: ConflictFacts;
    if (prev !== null) {
      const first = receiptCanon(prev);
      if (first === canon && known !== 'conflict') return 'duplicate';
      facts = { canons: first === canon ? [first] : [first, canon], notOk: notOk(prev) || notOk(r) };
    } else {
      facts = this.storedConflict(event, r);
      if (facts.canons.length === 1 && known !== 'conflict') return 'duplicate';
    }
    (this.conflictMap ??= new Map()).set(event, facts);
    this.rebuild();
    return 'conflict';
  }

  /**
   * Whether `add(r, known)` reads the run's receipts back from the source: a repeat of a folded event id the store did
   * not call a duplicate (compared with the stored contents; a conflict then rebuilds), or a stored conflict under an
   * id not folded here. A caller whose source answers only asynchronously loads the run's history first.
   */
  readsBackToAdd(r: Receipt, known?: AddResult): boolean {
    const ids = this.ids;
    if (ids === null || known === 'duplicate') return false;
    if (!ids.has(r.event)) return known === 'conflict';
    return !this.conflictMap?.has(r.event);
  }

  /**
   * Whether agentEventsOf(agents) or versionEventsOf(versions) walk the run's receipts read back from the source: an
   * agent named more than once, or a version, whose events are not listed yet (a state keeping its receipts reads
   * nothing back).
   */
  readsBackToList(agents: readonly string[], versions: readonly string[]): boolean {
    if (this.source === undefined) return false;
    for (const a of agents) {
      if (this.agentLists?.has(a)) continue;
      const i = this.agentAt(a);
      if (i >= 0 && this.agentOnce[i] === null) return true;
    }
    for (const v of versions) if (!this.versionLists?.has(v)) return true;
    return false;
  }

  /** The distinct contents the source holds under `event`, with `r` (first stored first). */
  private storedConflict(event: string, r: Receipt): ConflictFacts {
    const facts: ConflictFacts = { canons: [], notOk: notOk(r) };
    for (const x of this.source?.(this.run) ?? EMPTY) {
      if (x.event !== event) continue;
      const c = receiptCanon(x);
      if (!facts.canons.includes(c)) facts.canons.push(c);
      if (notOk(x)) facts.notOk = true;
    }
    const c = receiptCanon(r);
    if (!facts.canons.includes(c)) facts.canons.push(c);
    return facts;
  }

  /** The folded receipts, each once (from the kept copies, or the source), with their instants. */
  private *folded(): Generator<FoldedReceipt> {
    for (const r of this.foldedReceipts()) yield { receipt: r, at: millisOf(r.at), ns: subMillisOf(r.at) };
  }

  /** The folded receipts, each once, without their instants (what the event walks read). */
  private *foldedReceipts(): Generator<Receipt> {
    const conflicts = this.conflictMap;
    if (this.kept !== null) {
      for (const [event, r] of this.kept) if (!conflicts?.has(event)) yield r;
      return;
    }
    const ids = this.ids;
    if (ids === null || this.source === undefined) return;
    const seen = new Set<string>();
    for (const r of this.source(this.run)) {
      const event = r.event;
      if (!ids.has(event) || conflicts?.has(event) || seen.has(event)) continue;
      seen.add(event);
      yield r;
    }
  }

  private rebuild(): void {
    this.version++;
    this.cachedVerdict = null;
    this.routeMemo = null;
    this.waitMemo = null;
    this.resetObservations();
    for (const { receipt, at, ns } of this.folded()) this.fold(receipt, at, ns);
  }

  /** Event ids of the receipts naming `agent` (as from, an edge's to, a wait's on), once per naming. */
  agentEvents(agent: string): string[] {
    return this.agentEventsOf([agent])[0];
  }

  /**
   * agentEvents of several agents with one walk over the folded receipts for those not asked before (a run naming
   * thousands of unknown agents is one walk, not one per agent: the walk reads the whole run).
   */
  agentEventsOf(agents: readonly string[]): string[][] {
    const lists = (this.agentLists ??= new Map());
    const missing = new Map<string, string[]>();
    for (const a of agents) {
      if (lists.has(a) || missing.has(a)) continue;
      const i = this.agentAt(a);
      if (i < 0) continue;
      const once = this.agentOnce[i];
      // named once: that event is its list (no walk; a later naming makes it null, and the next ask walks)
      if (once === null) missing.set(a, []);
    }
    if (missing.size > 0) {
      for (const r of this.foldedReceipts()) {
        if (r.from !== undefined) missing.get(r.from)?.push(r.event);
        if (r.type === 'edge' && r.to !== undefined) missing.get(r.to)?.push(r.event);
        else if (r.type === 'wait' && r.on !== undefined) missing.get(r.on)?.push(r.event);
      }
      for (const [a, list] of missing) lists.set(a, list);
    }
    const out: string[][] = new Array(agents.length);
    for (let k = 0; k < agents.length; k++) {
      const a = agents[k];
      const list = lists.get(a);
      if (list !== undefined) out[k] = list;
      else {
        const i = this.agentAt(a);
        const once = i < 0 ? null : this.agentOnce[i];
        out[k] = once === null ? [] : [once];
      }
    }
    return out;
  }

  /** Event ids of the receipts carrying `version`. */
  versionEvents(version: string): string[] {
    return this.versionEventsOf([version])[0];
  }

  /** versionEvents of several versions with one walk for those not asked before. */
  versionEventsOf(versions: readonly string[]): string[][] {
    const lists = (this.versionLists ??= new Map());
    const has = (v: string) => (this.versionMap !== null ? this.versionMap.has(v) : this.version1 === v);
    const missing = new Map<string, string[]>();
    for (const v of versions) if (has(v) && !lists.has(v) && !missing.has(v)) missing.set(v, []);
    if (missing.size > 0) {
      for (const r of this.foldedReceipts()) if (r.version !== undefined) missing.get(r.version)?.push(r.event);
      for (const [v, list] of missing) lists.set(v, list);
    }
    return versions.map((v) => lists.get(v) ?? []);
  }
}

/** The pin reference a run.start names. */
export function startRef(s: RunStartReceipt): PinRef {
  return { contract: s.contract, version: s.version, phase: s.phase };
}

/** Group receipts by run, preserving nothing about order (the verdict does not depend on it). Each state keeps its receipts. */
export function groupByRun(receipts: Iterable<Receipt>): Map<string, RunState> {
  const runs = new Map<string, RunState>();
  for (const r of receipts) {
    let s = runs.get(r.run);
    if (!s) runs.set(r.run, (s = new RunState(r.run)));
    s.add(r);
  }
  return runs;
}
