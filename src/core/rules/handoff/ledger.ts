/**
 * Nested budget ledger of one run, from `handoff` receipts carrying `budgetOp` and `units`.
 *
 * - `root`: the run's root budget (the earliest root receipt). Child budgets are reservations
 *   inside it, never additions to it.
 * - `reserve`: a child attempt reserves units of the root.
 * - `consume`: work actually done by the attempt (settles part of its reservation).
 * - `release`: unused reservation handed back to the root.
 * - `reject`: work refused and not charged to the run (a duplicate-active dispatch, a late result
 *   after cancellation); still counted, because total accounting includes rejected, late and
 *   duplicate attempts.
 *
 * An attempt commits max(reserved - released, consumed) of the root at any moment (work done beyond
 * a reservation is committed too). The children's commitment summed over attempts, walked in
 * (time, event) order, gives the peak; a peak above the root on any dimension is
 * `budget_overcommitted`. A reservation that covers the root's whole work budget (actions and
 * context units both at or above the root, the root having some) is `budget_copied`: the child got
 * a fresh copy of the root and the parent has no continuation allowance left. Effects are left out
 * of the copy test: an effect budget is a handful of units that may move whole to an effect slice,
 * and effects in read slices are refused at admission.
 */
import type { Finding, Receipt } from '../../types.js';
import type { AttemptTrace, RunTrace } from './trace.js';
import { at, edgeOf, traceRuns } from './trace.js';
import { compareInstants, type Instant } from '../../time.js';

export interface Units {
  actions: number;
  contextUnits: number;
  effects: number;
}
export const UNIT_KEYS = ['actions', 'contextUnits', 'effects'] as const;

export const zeroUnits = (): Units => ({ actions: 0, contextUnits: 0, effects: 0 });
export const addUnits = (a: Units, b: Partial<Units> | undefined): Units => ({
  actions: a.actions + (b?.actions ?? 0),
  contextUnits: a.contextUnits + (b?.contextUnits ?? 0),
  effects: a.effects + (b?.effects ?? 0),
});
const mapUnits = (f: (k: (typeof UNIT_KEYS)[number]) => number): Units => ({ actions: f('actions'), contextUnits: f('contextUnits'), effects: f('effects') });

export interface AttemptLedger {
  handoff: string;
  attempt: number;
  target?: string;
  reserved: Units;
  consumed: Units;
  released: Units;
  rejected: Units;
  /** The attempt reached TIMED_OUT. */
  timedOut: boolean;
  /** It returned, or recorded work, after its lease expired or at/after a cancellation. */
  late: boolean;
  /** It started while another attempt held an active lease on the same work key. */
  duplicate: boolean;
}

export interface Tally {
  attempts: number;
  /** Work of those attempts: consumed + rejected. */
  units: Units;
}

export interface LedgerSummary {
  run: string | null;
  root: Units | null;
  reserved: Units;
  consumed: Units;
  released: Units;
  rejected: Units;
  /** Reservations still held at the end: per attempt max(reserved - released - consumed, 0), summed. */
  outstanding: Units;
  /** Peak of the children's concurrent commitment against the root. */
  peakCommitted: Units;
  /** All work done, admitted or not: consumed + rejected. */
  totalWork: Units;
  timedOut: Tally;
  late: Tally;
  duplicate: Tally;
  attempts: AttemptLedger[];
}

export interface LedgerWalk {
  summary: LedgerSummary;
  /** First receipt at which the commitment exceeded the root on some dimension. */
  overcommitAt: Receipt | null;
  reserveEvents: Map<string, string[]>;
}

export const attemptId = (a: { handoff: string; attempt: number }): string => `${a.handoff}#${a.attempt}`;

/** Whether attempt `a` started while `b` held an active lease on the same work key. */
export function startedDuringLeaseOf(a: AttemptTrace, b: AttemptTrace): boolean {
  return (
    a !== b &&
    a.duplicateKey !== undefined &&
    a.duplicateKey === b.duplicateKey &&
    b.activeFrom !== null &&
    compareInstants(a.firstAt, b.activeFrom) >= 0 &&
    compareInstants(a.firstAt, b.activeUntil) < 0
  );
}

function isLate(a: AttemptTrace): boolean {
  const afterLease = (t: Instant): boolean => a.lease !== null && compareInstants(t, a.lease) > 0;
  const afterCancel = (t: Instant): boolean => a.cancelAt !== null && compareInstants(t, a.cancelAt) >= 0;
  if (a.returnAt !== null && (afterLease(a.returnAt) || afterCancel(a.returnAt))) return true;
  return a.receipts.some((r) => (r.budgetOp === 'consume' || r.budgetOp === 'reject') && (afterLease(at(r)) || afterCancel(at(r))));
}

/** The budget an attempt holds: what its receipts reserved, consumed, released and rejected. */
export type BudgetRow = Pick<AttemptLedger, 'reserved' | 'consumed' | 'released' | 'rejected'>;

/** What an attempt commits of the root: max(reserved - released, consumed) per dimension. */
const commitment = (row: BudgetRow): Units => mapUnits((k) => Math.max(row.reserved[k] - row.released[k], row.consumed[k], 0));

const BUDGET_FIELD = { reserve: 'reserved', consume: 'consumed', release: 'released', reject: 'rejected' } as const;

/** A budget receipt of an attempt (not the root): what the ledger walk reads. */
export type BudgetReceipt = Receipt & { type: 'handoff'; handoff: string; budgetOp: keyof typeof BUDGET_FIELD };
export const isBudgetStep = (r: Receipt): r is BudgetReceipt => r.type === 'handoff' && r.budgetOp !== undefined && r.budgetOp !== 'root' && r.handoff !== undefined;

/**
 * The ledger walked receipt by receipt in (time, event) order: the children's commitment kept as a running total (one
 * attempt's part changes per receipt), its peak, and the first receipt at which it exceeded the root. The full walk
 * (ledgerWalk) and the incremental audit (fold.ts) both walk with it.
 */
export class BudgetWalk {
  readonly committed = zeroUnits();
  readonly peak = zeroUnits();
  overcommitAt: Receipt | null = null;
  readonly reserveEvents = new Map<string, string[]>();

  constructor(readonly root: Units | null) {}

  /** Walks `r`, a budget receipt of the attempt whose row is `row`. */
  step(r: BudgetReceipt, row: BudgetRow): void {
    const before = commitment(row);
    const field = BUDGET_FIELD[r.budgetOp];
    row[field] = addUnits(row[field], r.units);
    const after = commitment(row);
    const root = this.root;
    let over = false;
    for (const k of UNIT_KEYS) {
      const now = (this.committed[k] += after[k] - before[k]);
      if (now > this.peak[k]) this.peak[k] = now;
      if (root !== null && now > root[k]) over = true;
    }
    if (r.budgetOp === 'reserve') {
      const id = attemptId({ handoff: r.handoff, attempt: r.attempt ?? 1 });
      const list = this.reserveEvents.get(id);
      if (list) list.push(r.event);
      else this.reserveEvents.set(id, [r.event]);
    }
    if (over && this.overcommitAt === null) this.overcommitAt = r;
  }
}

/** The ledger walk of one run: the state both the budget findings and the operator's board read. */
export function ledgerWalk(trace: RunTrace): LedgerWalk {
  const root = trace.root ? addUnits(zeroUnits(), trace.root.units) : null;
  const rows = new Map<string, AttemptLedger>();
  for (const a of trace.attempts) {
    rows.set(attemptId(a), {
      handoff: a.handoff,
      attempt: a.attempt,
      target: a.target,
      reserved: zeroUnits(),
      consumed: zeroUnits(),
      released: zeroUnits(),
      rejected: zeroUnits(),
      timedOut: a.states.has('TIMED_OUT'),
      late: isLate(a),
      duplicate: trace.attempts.some((b) => startedDuringLeaseOf(a, b)),
    });
  }
  const walk = new BudgetWalk(root);
  for (const r of trace.receipts) {
    if (!isBudgetStep(r)) continue;
    const row = rows.get(attemptId({ handoff: r.handoff, attempt: r.attempt ?? 1 }));
    if (row !== undefined) walk.step(r, row);
  }
  const { peak, overcommitAt, reserveEvents } = walk;
  const list = [...rows.values()];
  const sum = (f: (row: AttemptLedger) => Units, filter: (row: AttemptLedger) => boolean = () => true): Units =>
    list.filter(filter).reduce((acc, row) => addUnits(acc, f(row)), zeroUnits());
  const work = (row: AttemptLedger): Units => addUnits(row.consumed, row.rejected);
  const tally = (filter: (row: AttemptLedger) => boolean): Tally => ({ attempts: list.filter(filter).length, units: sum(work, filter) });
  const summary: LedgerSummary = {
    run: trace.run,
    root,
    reserved: sum((row) => row.reserved),
    consumed: sum((row) => row.consumed),
    released: sum((row) => row.released),
    rejected: sum((row) => row.rejected),
    outstanding: sum((row) => mapUnits((k) => Math.max(row.reserved[k] - row.released[k] - row.consumed[k], 0))),
    peakCommitted: peak,
    totalWork: sum(work),
    timedOut: tally((row) => row.timedOut),
    late: tally((row) => row.late),
    duplicate: tally((row) => row.duplicate),
    attempts: list,
  };
  return { summary, overcommitAt, reserveEvents };
}

export function runLedger(trace: RunTrace): LedgerSummary {
  return ledgerWalk(trace).summary;
}

/** The ledger of one run's receipts (receipts of several runs: use `ledgerByRun`). */
export function ledger(receipts: readonly Receipt[]): LedgerSummary {
  const runs = traceRuns(receipts);
  if (runs.length > 1) throw new RangeError(`ledger: receipts of ${runs.length} runs; use ledgerByRun`);
  if (runs.length === 0) return emptyLedger();
  return runLedger(runs[0]);
}

export function ledgerByRun(receipts: readonly Receipt[]): Map<string, LedgerSummary> {
  return new Map(traceRuns(receipts).map((t) => [t.run, runLedger(t)]));
}

function emptyLedger(): LedgerSummary {
  const z = zeroUnits;
  return {
    run: null, root: null, reserved: z(), consumed: z(), released: z(), rejected: z(), outstanding: z(),
    peakCommitted: z(), totalWork: z(), timedOut: { attempts: 0, units: z() }, late: { attempts: 0, units: z() },
    duplicate: { attempts: 0, units: z() }, attempts: [],
  };
}

const LABEL = { actions: 'actions', contextUnits: 'context units', effects: 'effects' } as const;
const fmt = (u: Units): string => UNIT_KEYS.map((k) => `${u[k]} ${LABEL[k]}`).join(', ');

/** A finding with the attempts (`handoff#attempt`) it concerns, so the board can show it on their rows. */
export interface TaggedFinding {
  finding: Finding;
  attempts: string[];
}

/** Attempts whose reservation copies the whole root work budget (`budget_copied`). */
export function copiedReservations(trace: RunTrace, w: LedgerWalk): AttemptTrace[] {
  const root = w.summary.root;
  if (trace.root === null || root === null) return [];
  const rows = rowsById(w.summary);
  return trace.attempts.filter((a) => w.reserveEvents.has(attemptId(a)) && copiesRoot(root, rows.get(attemptId(a))));
}

const rowsById = (summary: LedgerSummary): Map<string, AttemptLedger> => new Map(summary.attempts.map((row) => [attemptId(row), row]));

/** Whether a reservation covers the root's whole work budget (actions and context units, the root having some). */
function copiesRoot(root: Units, row: BudgetRow | undefined): row is BudgetRow {
  return (root.actions > 0 || root.contextUnits > 0) && row !== undefined && row.reserved.actions >= root.actions && row.reserved.contextUnits >= root.contextUnits;
}

/** budget_overcommitted and budget_copied findings of one ledger walk, tagged with their attempts. */
export function ledgerFindingsOf(trace: RunTrace, w: LedgerWalk): TaggedFinding[] {
  const root = w.summary.root; // null exactly when the trace has no root receipt
  if (trace.root === null || root === null) return [];
  const holders = trace.attempts.filter((a) => w.reserveEvents.has(attemptId(a)));
  const rows = rowsById(w.summary);
  return budgetFindings(trace.root, root, { peak: w.summary.peakCommitted, overcommitAt: w.overcommitAt, reserveEvents: w.reserveEvents }, holders, (id) => rows.get(id));
}

/**
 * budget_overcommitted and budget_copied findings of a walk against the root receipt `rootReceipt` (its units
 * `root`): `holders` are the attempts that reserved (in attempt order), `rowOf` their budget rows.
 */
export function budgetFindings(
  rootReceipt: Receipt,
  root: Units,
  w: { peak: Units; overcommitAt: Receipt | null; reserveEvents: ReadonlyMap<string, string[]> },
  holders: readonly AttemptTrace[],
  rowOf: (id: string) => BudgetRow | undefined,
): TaggedFinding[] {
  const { peak, overcommitAt, reserveEvents } = w;
  const owner = rootReceipt.from;
  const findings: TaggedFinding[] = [];
  if (overcommitAt !== null) {
    const over = UNIT_KEYS.filter((k) => peak[k] > root[k]);
    findings.push({
      attempts: holders.map(attemptId),
      finding: {
        verdict: 'ambiguous_route',
        code: 'budget_overcommitted',
        agents: uniq([owner, ...holders.map((a) => a.target)]),
        events: uniq([rootReceipt.event, ...holders.flatMap((a) => reserveEvents.get(attemptId(a)) ?? []), overcommitAt.event]),
        message: `child reservations reach ${over.map((k) => `${peak[k]} ${LABEL[k]}`).join(', ')} against a root budget of ${fmt(root)}: reservations must nest inside the root`,
        settled: true,
      },
    });
  }
  for (const a of holders) {
    const row = rowOf(attemptId(a));
    if (!copiesRoot(root, row)) continue;
    findings.push({
      attempts: [attemptId(a)],
      finding: {
        verdict: 'ambiguous_route',
        code: 'budget_copied',
        edge: edgeOf(a),
        agents: uniq([owner, a.source, a.target]),
        events: uniq([rootReceipt.event, ...(reserveEvents.get(attemptId(a)) ?? [])]),
        message: `${a.handoff} attempt ${a.attempt} reserves ${fmt(row.reserved)}, a copy of the whole root work budget (${root.actions} actions, ${root.contextUnits} context units): the parent keeps no continuation allowance`,
        settled: true,
      },
    });
  }
  return findings;
}

/** budget_overcommitted and budget_copied findings of one run (verdict: ambiguous_route). */
export function ledgerFindings(trace: RunTrace): Finding[] {
  return ledgerFindingsOf(trace, ledgerWalk(trace)).map((t) => t.finding);
}

export function uniq(xs: readonly (string | undefined)[]): string[] {
  return [...new Set(xs.filter((x): x is string => x !== undefined && x !== ''))].sort();
}
