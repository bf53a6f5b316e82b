/**
 * From receipts to handoff attempts: deduplicated, ordered by (time, event id), grouped per run and
 * per attempt of a logical handoff. Everything downstream (lifecycle audit, ledger, funnel) reads
 * these traces, so none of it depends on the order receipts arrived in or on duplicate delivery.
 */
import type { HandoffReceipt, HandoffState, Receipt } from '../../types.js';
import { NEVER, compareInstants, earlierOf, parseInstant, type Instant } from '../../time.js';

export const TERMINAL_STATES: readonly HandoffState[] = ['ACCEPTED', 'REJECTED', 'CANCELLED', 'TIMED_OUT', 'FAILED'];
/** The main chain; its index orders non-terminal progress. */
export const CHAIN: readonly HandoffState[] = ['PROPOSED', 'ADMITTED', 'DISPATCHED', 'RUNNING', 'RETURNED'];
/** States that hold a granted lease (the attempt was admitted and is not yet terminal). */
export const ACTIVE_STATES: readonly HandoffState[] = ['ADMITTED', 'DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'];

export const isTerminal = (s: HandoffState): boolean => TERMINAL_STATES.includes(s);

/** A handoff receipt recording a transition of one attempt: it names the handoff and a state (a root budget receipt does not). */
export type Transition = HandoffReceipt & { handoff: string; state: HandoffState };
export const isTransition = (r: Receipt): r is Transition => r.type === 'handoff' && r.budgetOp !== 'root' && r.handoff !== undefined && r.state !== undefined;

/** Each receipt's instant, parsed once (receipts are immutable once validated). */
const instants = new WeakMap<Receipt, Instant>();

/** A receipt's observation time, exact to the nanosecond (semantics 5: times at full precision, as in 2a). */
export function at(r: Receipt): Instant {
  let t = instants.get(r);
  if (t === undefined) instants.set(r, (t = parseInstant(r.at)));
  return t;
}

/** Receipt order: observation time, then event id. */
export function byTimeThenEvent(a: Receipt, b: Receipt): number {
  const d = compareInstants(at(a), at(b));
  if (d !== 0) return d;
  return a.event < b.event ? -1 : a.event > b.event ? 1 : 0;
}

/** Normalised content for duplicate comparison: defaults filled, times as instants, keys sorted. */
function canonical(r: Receipt): string {
  const n: Record<string, unknown> = { ...r, at: at(r), status: r.status ?? 'ok' };
  if (r.type === 'handoff') {
    if (r.handoff !== undefined) n.attempt = r.attempt ?? 1;
    if (r.leaseExpiresAt !== undefined) n.leaseExpiresAt = parseInstant(r.leaseExpiresAt);
  }
  return JSON.stringify(sortKeys(n));
}
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
  }
  return v;
}

/**
 * One receipt per (run, event id): a repeat with equal content is a duplicate delivery and counts
 * once; a repeat with different content is a conflict, and neither is used (the run classifier
 * reports the conflict).
 */
export function dedupe(receipts: readonly Receipt[]): Receipt[] {
  const groups = new Map<string, { receipt: Receipt; content: string; conflict: boolean }>();
  for (const r of receipts) {
    const key = `${r.run}\u0000${r.event}`;
    const content = canonical(r);
    const seen = groups.get(key);
    if (seen === undefined) groups.set(key, { receipt: r, content, conflict: false });
    else if (seen.content !== content) seen.conflict = true;
  }
  return [...groups.values()].filter((g) => !g.conflict).map((g) => g.receipt).sort(byTimeThenEvent);
}

export interface AttemptTrace {
  run: string;
  handoff: string;
  attempt: number;
  /** This attempt's receipts, in (time, event) order. */
  receipts: Transition[];
  source?: string;
  target?: string;
  duplicateKey?: string;
  /** Named on any receipt of the logical handoff (all attempts share the contract). */
  finalOwner?: string;
  onTimeout?: string;
  states: Set<HandoffState>;
  firstAt: Instant;
  /** Time of the first receipt showing a granted lease (ADMITTED or later), else null. */
  activeFrom: Instant | null;
  /** The first terminal receipt. */
  terminal: Transition | null;
  /** The lease in force: the first grant, moved only by renewals timed at or before the lease then in force. */
  lease: Instant | null;
  /** The first RETURNED receipt. */
  returned: Transition | null;
  /** When the result came back: the first RETURNED, else the first ACCEPTED. */
  returnAt: Instant | null;
  accepted: Transition | null;
  /** The parent's decision on the returned artifact: the first ACCEPTED or REJECTED after a return. */
  decision: Transition | null;
  /** Earliest cancellation that applies: the attempt's own CANCELLED or the run's cancelled end. */
  cancelAt: Instant | null;
  /** End of the active lease interval: min(first terminal, lease); NEVER when neither exists. */
  activeUntil: Instant;
}

export interface RunTrace {
  run: string;
  /** All the run's receipts, deduplicated and ordered. */
  receipts: Receipt[];
  attempts: AttemptTrace[];
  /** The earliest `budgetOp: "root"` receipt. */
  root: HandoffReceipt | null;
  /** The earliest run.end with result cancelled. */
  runCancelAt: Instant | null;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

const attemptKey = (r: Transition): string => `${r.handoff}\u0000${r.attempt ?? 1}`;

export function edgeOf(a: Pick<AttemptTrace, 'source' | 'target'>): string | undefined {
  return a.source !== undefined && a.target !== undefined ? `${a.source} -> ${a.target} : handoff` : undefined;
}

/** The first value of a field, in receipt order. */
function first<K extends 'from' | 'to' | 'duplicateKey' | 'finalOwner' | 'onTimeout'>(rs: readonly Transition[], k: K): string | undefined {
  for (const r of rs) {
    const v = r[k];
    if (v !== undefined && v !== null && v !== '') return v;
  }
  return undefined;
}

/** The lease in force: the first grant, moved by each renewal timed at or before the lease then in force. */
export function effectiveLease(rs: readonly Transition[]): Instant | null {
  let lease: Instant | null = null;
  for (const r of rs) {
    if (r.leaseExpiresAt === undefined) continue;
    const next = parseInstant(r.leaseExpiresAt);
    if (lease === null) lease = next;
    else if (compareInstants(at(r), lease) <= 0) lease = next; // renewal at or before expiry; after it, a new admission decision
  }
  return lease;
}

function traceAttempt(run: string, rs: Transition[], logical: Transition[], runCancelAt: Instant | null): AttemptTrace {
  const states = new Set(rs.map((r) => r.state));
  const activeFrom = rs.find((r) => ACTIVE_STATES.includes(r.state));
  const terminal = rs.find((r) => isTerminal(r.state)) ?? null;
  const returned = rs.find((r) => r.state === 'RETURNED') ?? null;
  const accepted = rs.find((r) => r.state === 'ACCEPTED') ?? null;
  const decision = rs.find((r) => r.state === 'ACCEPTED' || (r.state === 'REJECTED' && returned !== null && compareInstants(at(r), at(returned)) >= 0)) ?? null;
  const ownCancel = rs.find((r) => r.state === 'CANCELLED');
  const cancels = [ownCancel ? at(ownCancel) : null, runCancelAt].filter((x): x is Instant => x !== null);
  const lease = effectiveLease(rs);
  const returnAt = returned ? at(returned) : accepted ? at(accepted) : null;
  return {
    run,
    handoff: rs[0].handoff,
    attempt: rs[0].attempt ?? 1,
    receipts: rs,
    source: first(rs, 'from') ?? first(logical, 'from'),
    target: first(rs, 'to'),
    duplicateKey: first(rs, 'duplicateKey') ?? first(logical, 'duplicateKey'),
    finalOwner: first(logical, 'finalOwner'),
    onTimeout: first(logical, 'onTimeout'),
    states,
    firstAt: at(rs[0]),
    activeFrom: activeFrom ? at(activeFrom) : null,
    terminal,
    lease,
    returned,
    returnAt,
    accepted,
    decision,
    cancelAt: cancels.length > 0 ? cancels.reduce(earlierOf) : null,
    activeUntil: earlierOf(terminal ? at(terminal) : NEVER, lease ?? NEVER),
  };
}

export function traceRun(run: string, receipts: Receipt[]): RunTrace {
  const ends = receipts.filter((r) => r.type === 'run.end' && r.result === 'cancelled');
  const runCancelAt = ends.length > 0 ? at(ends[0]) : null;
  const transitions = receipts.filter(isTransition);
  const byAttempt = new Map<string, Transition[]>();
  const byHandoff = new Map<string, Transition[]>();
  for (const r of transitions) {
    push(byAttempt, attemptKey(r), r);
    push(byHandoff, r.handoff, r);
  }
  const attempts = [...byAttempt.values()]
    .map((rs) => traceAttempt(run, rs, byHandoff.get(rs[0].handoff) ?? rs, runCancelAt))
    .sort((a, b) => (a.handoff < b.handoff ? -1 : a.handoff > b.handoff ? 1 : a.attempt - b.attempt));
  const root = receipts.find((r): r is HandoffReceipt => r.type === 'handoff' && r.budgetOp === 'root') ?? null;
  return { run, receipts, attempts, root, runCancelAt };
}

/** Per run, in run-id order. */
export function traceRuns(receipts: readonly Receipt[]): RunTrace[] {
  const byRun = new Map<string, Receipt[]>();
  for (const r of dedupe(receipts)) push(byRun, r.run, r);
  return [...byRun].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([run, rs]) => traceRun(run, rs));
}
