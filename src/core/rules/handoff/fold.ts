/**
 * The handoff audit of one live run, folded receipt by receipt (issue 47: one run with 100,000 handoff receipts made
 * each next receipt slow, the full audit reading them all again). `HandoffFold.audit(now)` gives exactly what
 * `handoffAudit(receipts, now)` (lifecycle.ts) gives for the receipts added (test/handoff-incremental.test.ts
 * compares them on random sequences), and its cost is the work on what changed since the last audit:
 * - an attempt's receipts are folded by AttemptFold.step (trace.ts) as they arrive in (time, event) order; one that
 *   arrives out of order makes that attempt fold again from its first receipt (that attempt only);
 * - the attempt's trace and findings are made again only when it changed (or its logical handoff's first values or
 *   the run's cancellation did); the handoff-level findings, for the handoffs that changed; `duplicate_active`, for
 *   the work keys whose attempts changed; `target_completed_parent`, from counts of targets and final owners;
 * - the budget ledger walks on (BudgetWalk, ledger.ts) while budget receipts arrive in order, and again from the
 *   start when one arrives out of order, the root changes or an attempt with earlier budget receipts appears;
 * - `lease_expired_open`, the one finding that changes with `now` alone, from a heap of the open attempts' leases.
 * What an audit costs beyond that is its output: the findings in force, sorted.
 */
import type { Finding, HandoffReceipt, Receipt } from '../../types.js';
import { ceilMillis, compareInstants, type Instant } from '../../time.js';
import { AttemptFold, at, byTimeThenEvent, isTransition, type AttemptTrace, type LogicalFirsts, type Transition } from './trace.js';
import {
  attemptFacts, attemptFindings, completionFinding, handoffFacts, handoffFindings, isCompletion, leaseExpiredFinding, leaseOpen, leaseOverlaps,
  overlapFinding, pusher, sortFindings,
} from './lifecycle.js';
import { BudgetWalk, addUnits, attemptId, budgetFindings, isBudgetStep, zeroUnits, type BudgetReceipt, type BudgetRow, type TaggedFinding } from './ledger.js';
import { handoffWork } from './work.js';

const LOGICAL_FIELDS = ['from', 'duplicateKey', 'finalOwner', 'onTimeout'] as const;
/** A source or owner absent, as a key of the counts below. */
const NONE = '\u0000';

interface LogicalSlot {
  handoff: string;
  attempts: Map<number, AttemptSlot>;
  /** Per field, the earliest receipt (by time, then event) naming a value, and the values: the logical handoff's first values. */
  firstBy: Partial<Record<(typeof LOGICAL_FIELDS)[number], Transition>>;
  firsts: LogicalFirsts;
  findings: TaggedFinding[];
}

interface AttemptSlot {
  id: string;
  handoff: string;
  attempt: number;
  logical: LogicalSlot;
  fold: AttemptFold;
  /** Receipts that arrived out of order: the attempt folds again from its first receipt at the next audit. */
  late: Transition[] | null;
  trace: AttemptTrace | null;
  findings: TaggedFinding[];
  /** What the counts below hold for it (from its last trace). */
  key: string | undefined;
  target: string | undefined;
  source: string | undefined;
  owner: string | undefined;
  /** Whether the counts hold it. */
  counted: boolean;
  /** Bumped at each trace: a heap entry of an older trace is stale. */
  stamp: number;
}

interface LeaseEntry {
  lease: Instant;
  slot: AttemptSlot;
  stamp: number;
}

/** A binary min-heap of leases. */
class LeaseHeap {
  private readonly items: LeaseEntry[] = [];
  get size(): number {
    return this.items.length;
  }
  peek(): LeaseEntry | undefined {
    return this.items[0];
  }
  clear(): void {
    this.items.length = 0;
  }
  /** Keeps only the entries `keep` accepts (a heap again: a sorted array is one). */
  retain(keep: (e: LeaseEntry) => boolean): void {
    const kept = this.items.filter(keep).sort((a, b) => compareInstants(a.lease, b.lease));
    this.items.length = 0;
    for (const e of kept) this.items.push(e);
  }
  push(e: LeaseEntry): void {
    const h = this.items;
    h.push(e);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (compareInstants(h[p].lease, h[i].lease) <= 0) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }
  pop(): LeaseEntry | undefined {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last !== undefined) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && compareInstants(h[l].lease, h[m].lease) < 0) m = l;
        if (r < h.length && compareInstants(h[r].lease, h[m].lease) < 0) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i], h[m]];
        i = m;
      }
    }
    return top;
  }
}

const byAttempt = (a: AttemptSlot, b: AttemptSlot): number => (a.handoff < b.handoff ? -1 : a.handoff > b.handoff ? 1 : a.attempt - b.attempt);

function count(m: Map<string, number>, k: string, d: number): void {
  const n = (m.get(k) ?? 0) + d;
  if (n === 0) m.delete(k);
  else m.set(k, n);
}

/** The handoff audit of one run, folded receipt by receipt (see the file comment). */
export class HandoffFold {
  private readonly attempts = new Map<string, AttemptSlot>();
  private readonly logicals = new Map<string, LogicalSlot>();
  private readonly changed = new Set<AttemptSlot>();
  private readonly changedLogicals = new Set<LogicalSlot>();
  private readonly changedKeys = new Set<string>();
  private readonly withFindings = new Set<AttemptSlot>();
  private readonly withLogicalFindings = new Set<LogicalSlot>();
  private readonly groups = new Map<string, Set<AttemptSlot>>();
  private readonly overlaps = new Map<string, TaggedFinding[]>();
  // run-level: the run's cancellation, its completions, the targets and final owners they are checked against
  private runCancel: Receipt | null = null;
  private readonly completions: Receipt[] = [];
  private completionsDirty = false;
  private completionFindings: TaggedFinding[] = [];
  private readonly targets = new Map<string, number>();
  private readonly byTarget = new Map<string, Set<AttemptSlot>>();
  /** Per source (NONE: none), the final owners (NONE: none) of its attempts, counted. */
  private readonly ownersBySource = new Map<string, Map<string, number>>();
  // the budget ledger
  private root: HandoffReceipt | null = null;
  private readonly budget: BudgetReceipt[] = [];
  private readonly budgetIds = new Set<string>();
  private rows = new Map<string, BudgetRow>();
  private walk = new BudgetWalk(null);
  private ledgerDirty = false;
  private ledgerChanged = false;
  private ledgerFindings: TaggedFinding[] = [];
  /** A holder of a reservation was traced again (its trace names the budget findings' agents and edge). */
  private holderRetraced = false;
  // lease_expired_open
  private readonly heap = new LeaseHeap();
  private readonly expired = new Set<AttemptSlot>();
  private lastNow: Instant | null = null;

  constructor(readonly run: string) {}

  /** Adds one receipt of the run (each event once: the run state keeps out duplicates and conflicts). */
  add(r: Receipt): void {
    if (isTransition(r)) this.addTransition(r);
    if (isBudgetStep(r)) this.addBudget(r);
    if (r.type === 'handoff' && r.budgetOp === 'root' && (this.root === null || byTimeThenEvent(r, this.root) < 0)) {
      this.root = r;
      this.ledgerDirty = true;
    }
    if (r.type === 'run.end' && r.result === 'cancelled' && (this.runCancel === null || byTimeThenEvent(r, this.runCancel) < 0)) {
      this.runCancel = r;
      for (const s of this.attempts.values()) this.changed.add(s);
    }
    if (isCompletion(r)) {
      this.completions.push(r);
      this.completionsDirty = true;
    }
  }

  private addTransition(r: Transition): void {
    const attempt = r.attempt ?? 1;
    const id = attemptId({ handoff: r.handoff, attempt });
    let slot = this.attempts.get(id);
    if (slot === undefined) {
      let logical = this.logicals.get(r.handoff);
      if (logical === undefined) this.logicals.set(r.handoff, (logical = { handoff: r.handoff, attempts: new Map(), firstBy: {}, firsts: {}, findings: [] }));
      slot = { id, handoff: r.handoff, attempt, logical, fold: new AttemptFold(), late: null, trace: null, findings: [], key: undefined, target: undefined, source: undefined, owner: undefined, counted: false, stamp: 0 };
      this.attempts.set(id, slot);
      logical.attempts.set(attempt, slot);
      if (this.budgetIds.has(id)) this.ledgerDirty = true; // its earlier budget receipts count from now on
    }
    const logical = slot.logical;
    let firstsMoved = false;
    for (const k of LOGICAL_FIELDS) {
      const v = r[k];
      if (v === undefined || v === null || v === '') continue;
      const held = logical.firstBy[k];
      if (held === undefined || byTimeThenEvent(r, held) < 0) {
        logical.firstBy[k] = r;
        logical.firsts[k] = v;
        firstsMoved = true;
      }
    }
    if (firstsMoved) for (const s of logical.attempts.values()) this.changed.add(s);
    if (slot.late === null && slot.fold.follows(r)) {
      slot.fold.step(r);
      handoffWork.steps++;
    } else (slot.late ??= []).push(r);
    this.changed.add(slot);
  }

  private addBudget(r: BudgetReceipt): void {
    const id = attemptId({ handoff: r.handoff, attempt: r.attempt ?? 1 });
    this.budgetIds.add(id);
    const list = this.budget;
    const inOrder = list.length === 0 || byTimeThenEvent(list[list.length - 1], r) < 0;
    list.push(r);
    if (!inOrder) this.ledgerDirty = true;
    if (this.ledgerDirty) return;
    // in order: the walk goes on from where it stopped
    const row = this.rowOf(id);
    if (row !== undefined) {
      this.walk.step(r, row);
      handoffWork.steps++;
      this.ledgerChanged = true;
    }
  }

  /** The budget row of an attempt the run has (a budget receipt of an attempt with no transition is not walked). */
  private rowOf(id: string): BudgetRow | undefined {
    if (!this.attempts.has(id)) return undefined;
    let row = this.rows.get(id);
    if (row === undefined) this.rows.set(id, (row = { reserved: zeroUnits(), consumed: zeroUnits(), released: zeroUnits(), rejected: zeroUnits() }));
    return row;
  }

  /** The handoff findings at `now`, sorted, and the earliest instant after `now` they change with time alone (handoffAudit). */
  audit(now: Instant): { findings: Finding[]; nextChangeAt: number } {
    if (this.lastNow !== null && compareInstants(now, this.lastNow) < 0) {
      // an earlier `now` than the last audit's: the expired leases are found again from every attempt
      this.heap.clear();
      this.expired.clear();
      for (const s of this.attempts.values()) this.changed.add(s);
    }
    this.lastNow = now;
    const runCancelAt = this.runCancel === null ? null : at(this.runCancel);
    let identities = false;
    for (const slot of this.changed) {
      if (slot.late !== null) {
        const rs = [...slot.fold.receipts, ...slot.late].sort(byTimeThenEvent);
        slot.fold = new AttemptFold();
        for (const r of rs) slot.fold.step(r);
        slot.late = null;
        handoffWork.steps += rs.length;
      }
      identities = this.retrace(slot, runCancelAt, now) || identities;
    }
    this.changed.clear();
    // each trace of an open attempt pushes its lease (renewals: one per receipt): past twice the attempts, the
    // entries of older traces are dropped, so the heap stays bounded by the attempts, not their receipts
    if (this.heap.size > 2 * this.attempts.size + 64) this.heap.retain((e) => e.stamp === e.slot.stamp);
    // open leases that reached `now`
    for (let top = this.heap.peek(); top !== undefined && compareInstants(top.lease, now) <= 0; top = this.heap.peek()) {
      this.heap.pop();
      if (top.stamp === top.slot.stamp) this.expired.add(top.slot);
    }
    for (const logical of this.changedLogicals) {
      const slots = [...logical.attempts.values()].sort(byAttempt);
      handoffWork.steps += slots.length;
      logical.findings = [];
      handoffFindings(handoffFacts(logical.handoff, slots.map((s) => s.trace!)), pusher(logical.findings));
      if (logical.findings.length > 0) this.withLogicalFindings.add(logical);
      else this.withLogicalFindings.delete(logical);
    }
    this.changedLogicals.clear();
    for (const key of this.changedKeys) {
      const group = this.groups.get(key);
      const found: TaggedFinding[] = [];
      if (group !== undefined) {
        handoffWork.steps += group.size;
        const push = pusher(found);
        for (const [a, b] of leaseOverlaps([...group].map((s) => s.trace!))) overlapFinding(a, b, push);
      }
      if (found.length > 0) this.overlaps.set(key, found);
      else this.overlaps.delete(key);
    }
    this.changedKeys.clear();
    if (this.completionsDirty || (identities && this.completions.length > 0)) this.completionFindings = this.targetCompletions();
    this.completionsDirty = false;
    this.auditLedger();
    const out: TaggedFinding[] = [];
    for (const s of this.withFindings) out.push(...s.findings);
    const push = pusher(out);
    for (const s of this.expired) leaseExpiredFinding(s.trace!, now, push);
    for (const l of this.withLogicalFindings) out.push(...l.findings);
    for (const found of this.overlaps.values()) out.push(...found);
    out.push(...this.completionFindings, ...this.ledgerFindings);
    let next: Instant | null = null;
    for (let top = this.heap.peek(); top !== undefined; top = this.heap.peek()) {
      if (top.stamp === top.slot.stamp) {
        next = top.lease;
        break;
      }
      this.heap.pop(); // an entry of an older trace of its attempt
    }
    // A millisecond timer fires at the first whole millisecond at or after the lease.
    return { findings: sortFindings(out.map((t) => t.finding)), nextChangeAt: next === null ? Infinity : ceilMillis(next.ms, next.ns) };
  }

  /**
   * Traces a changed attempt again, its findings and what the run-level counts hold for it; marks its logical
   * handoff and work keys changed. Whether its source, target or final owner changed.
   */
  private retrace(slot: AttemptSlot, runCancelAt: Instant | null, now: Instant): boolean {
    handoffWork.steps++;
    const t = slot.fold.trace(this.run, slot.logical.firsts, runCancelAt);
    slot.trace = t;
    slot.stamp++;
    slot.findings = [];
    attemptFindings(attemptFacts(t, now), pusher(slot.findings));
    if (slot.findings.length > 0) this.withFindings.add(slot);
    else this.withFindings.delete(slot);
    this.expired.delete(slot);
    if (leaseOpen(t)) {
      if (compareInstants(now, t.lease) >= 0) this.expired.add(slot);
      else this.heap.push({ lease: t.lease, slot, stamp: slot.stamp });
    }
    this.changedLogicals.add(slot.logical);
    if (slot.key !== undefined) this.changedKeys.add(slot.key);
    if (t.duplicateKey !== undefined) this.changedKeys.add(t.duplicateKey);
    if (slot.key !== t.duplicateKey) {
      if (slot.key !== undefined) this.groups.get(slot.key)?.delete(slot);
      if (t.duplicateKey !== undefined) {
        let g = this.groups.get(t.duplicateKey);
        if (g === undefined) this.groups.set(t.duplicateKey, (g = new Set()));
        g.add(slot);
      }
      slot.key = t.duplicateKey;
    }
    if (this.walk.reserveEvents.has(slot.id)) this.holderRetraced = true;
    if (slot.counted) {
      if (slot.target === t.target && slot.source === t.source && slot.owner === t.finalOwner) return false;
      this.countIdentity(slot, -1);
    }
    slot.target = t.target;
    slot.source = t.source;
    slot.owner = t.finalOwner;
    slot.counted = true;
    this.countIdentity(slot, 1);
    return true;
  }

  /** Counts (d = 1) or uncounts (d = -1) an attempt's target, source and final owner. */
  private countIdentity(slot: AttemptSlot, d: 1 | -1): void {
    if (slot.target !== undefined) {
      count(this.targets, slot.target, d);
      let set = this.byTarget.get(slot.target);
      if (set === undefined) this.byTarget.set(slot.target, (set = new Set()));
      if (d > 0) set.add(slot);
      else if (set.delete(slot) && set.size === 0) this.byTarget.delete(slot.target);
    }
    const source = slot.source ?? NONE;
    let owners = this.ownersBySource.get(source);
    if (owners === undefined) this.ownersBySource.set(source, (owners = new Map()));
    count(owners, slot.owner ?? NONE, d);
    if (owners.size === 0) this.ownersBySource.delete(source);
  }

  /** The final owners of the root-level handoffs (finalOwnersOf), from the counts. */
  private finalOwners(): string[] {
    const owners = new Set<string>();
    let rootLevel = false;
    for (const [source, counted] of this.ownersBySource) {
      if (source !== NONE && this.targets.has(source)) continue;
      rootLevel = true;
      for (const o of counted.keys()) owners.add(o);
    }
    if (!rootLevel) for (const counted of this.ownersBySource.values()) for (const o of counted.keys()) owners.add(o);
    owners.delete(NONE);
    return [...owners].sort();
  }

  /** `target_completed_parent` findings: run completions sent by a target that is not a final owner. */
  private targetCompletions(): TaggedFinding[] {
    const out: TaggedFinding[] = [];
    if (this.targets.size === 0) return out;
    const finalOwners = this.finalOwners();
    const owners = new Set(finalOwners);
    const push = pusher(out);
    for (const r of this.completions) {
      handoffWork.steps++;
      if (r.from === undefined || !this.targets.has(r.from) || owners.has(r.from)) continue;
      const own = [...(this.byTarget.get(r.from) ?? [])].sort(byAttempt);
      handoffWork.steps += own.length;
      completionFinding(r, own.map((s) => s.trace!), finalOwners, push);
    }
    return out;
  }

  /** Walks the ledger again if it must, and makes its findings again if it or a holder changed. */
  private auditLedger(): void {
    if (this.ledgerDirty) {
      this.budget.sort(byTimeThenEvent);
      this.rows = new Map();
      this.walk = new BudgetWalk(this.root === null ? null : addUnits(zeroUnits(), this.root.units));
      for (const r of this.budget) {
        const row = this.rowOf(attemptId({ handoff: r.handoff, attempt: r.attempt ?? 1 }));
        if (row !== undefined) this.walk.step(r, row);
      }
      handoffWork.steps += this.budget.length;
      this.ledgerDirty = false;
      this.ledgerChanged = true;
    }
    // a holder's trace names the agents and edge of the budget findings
    if (!this.ledgerChanged && !this.holderRetraced) return;
    this.ledgerChanged = false;
    this.holderRetraced = false;
    const root = this.walk.root;
    if (this.root === null || root === null) {
      this.ledgerFindings = [];
      return;
    }
    const holders = [...this.walk.reserveEvents.keys()].flatMap((id) => this.attempts.get(id) ?? []).sort(byAttempt);
    handoffWork.steps += holders.length;
    const w = this.walk;
    this.ledgerFindings = budgetFindings(this.root, root, { peak: w.peak, overcommitAt: w.overcommitAt, reserveEvents: w.reserveEvents }, holders.map((s) => s.trace!), (id) => this.rows.get(id));
  }

}
