/**
 * From receipts to handoff attempts: deduplicated, ordered by (time, event id), grouped per run and
 * per attempt of a logical handoff. Everything downstream (lifecycle audit, ledger, funnel) reads
 * these traces, so none of it depends on the order receipts arrived in or on duplicate delivery.
 */
import type { HandoffReceipt, HandoffState, Receipt } from '../../types.js';
import { NEVER, compareInstants, earlierOf, parseInstant, type Instant } from '../../time.js';
import { handoffWork } from './work.js';

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
  /** The event of the first receipt at the instant of activeFrom. */
  activeEvent: string | undefined;
  /** The first CANCELLED, the first ACCEPTED or REJECTED, the first DISPATCHED, RUNNING, RETURNED or ACCEPTED. */
  cancelled: Transition | null;
  decided: Transition | null;
  beyond: Transition | null;
  /** The state machine's walk: the state reached after the receipts (a terminal state stays), when it was recorded, and the receipts that tried to leave a terminal state. */
  state: HandoffState;
  stateAt: Instant;
  leftTerminal: readonly Transition[];
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
  const f = new AttemptFold();
  for (const r of rs) f.step(r);
  return f.lease;
}

/** The logical handoff's first values (over the receipts of all its attempts, in (time, event) order). */
export interface LogicalFirsts {
  from?: string;
  duplicateKey?: string;
  finalOwner?: string;
  onTimeout?: string;
}

const LOGICAL_FIELDS = ['from', 'duplicateKey', 'finalOwner', 'onTimeout'] as const;

/** The logical handoff's first values of `logical`, its receipts in (time, event) order. */
export function logicalFirsts(logical: readonly Transition[]): LogicalFirsts {
  const out: LogicalFirsts = {};
  for (const k of LOGICAL_FIELDS) {
    const v = first(logical, k);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

const present = (v: string | undefined | null): v is string => v !== undefined && v !== null && v !== '';
const BEYOND_ADMISSION: readonly HandoffState[] = ['DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'];

/** The earliest of the receipts folded (the last is rs[end]) at the instant `t` of rs[end]: a walk back over that instant. */
function firstAtInstantOf(rs: readonly Transition[], end: number, t: Instant): Transition {
  let i = end;
  while (i > 0 && compareInstants(at(rs[i - 1]), t) === 0) i--;
  return rs[i];
}

/**
 * One attempt's receipts folded one by one in (time, event) order: `step` is what one more (later) receipt changes,
 * in O(1) but for receipts sharing one instant. The full trace (traceAttempt) and the incremental audit of a live run
 * (fold.ts, which folds again from the start only when a receipt arrives out of order) both fold with it, so they
 * cannot disagree on an attempt.
 */
export class AttemptFold {
  /** The receipts folded, in (time, event) order. */
  readonly receipts: Transition[] = [];
  readonly states = new Set<HandoffState>();
  /** The attempt's own first from, to and duplicateKey. */
  from: string | undefined;
  to: string | undefined;
  duplicateKey: string | undefined;
  activeFrom: Instant | null = null;
  /** The event of the first receipt at the instant of activeFrom. */
  activeEvent: string | undefined;
  terminal: Transition | null = null;
  returned: Transition | null = null;
  accepted: Transition | null = null;
  decision: Transition | null = null;
  /** The first CANCELLED, the first ACCEPTED or REJECTED, the first receipt beyond admission. */
  cancelled: Transition | null = null;
  decided: Transition | null = null;
  beyond: Transition | null = null;
  lease: Instant | null = null;
  /** The state machine's walk (lifecycle.ts): the state reached, when, and the receipts that tried to leave a terminal. */
  state: HandoffState | null = null;
  stateAt: Instant | null = null;
  readonly leftTerminal: Transition[] = [];

  /** Whether `r` sorts after every receipt folded (then `step` folds it; else the attempt is folded again). */
  follows(r: Transition): boolean {
    const rs = this.receipts;
    return rs.length === 0 || byTimeThenEvent(rs[rs.length - 1], r) < 0;
  }

  /** Folds `r`, which sorts after every receipt folded. */
  step(r: Transition): void {
    const rs = this.receipts;
    rs.push(r);
    const t = at(r);
    const s = r.state;
    this.states.add(s);
    if (this.from === undefined && present(r.from)) this.from = r.from;
    if (this.to === undefined && present(r.to)) this.to = r.to;
    if (this.duplicateKey === undefined && present(r.duplicateKey)) this.duplicateKey = r.duplicateKey;
    if (this.activeFrom === null && ACTIVE_STATES.includes(s)) {
      this.activeFrom = t;
      this.activeEvent = firstAtInstantOf(rs, rs.length - 1, t).event;
    }
    if (s === 'RETURNED' && this.returned === null) {
      this.returned = r;
      // a REJECTED at the return's instant, folded before it (a smaller event id), is a decision after the return
      // unless an earlier decision (an ACCEPTED folded before it) is first
      if (this.decision === null || compareInstants(at(this.decision), t) === 0) {
        let k = rs.length - 1;
        while (k > 0 && compareInstants(at(rs[k - 1]), t) === 0) k--;
        for (; k < rs.length - 1 && rs[k] !== this.decision; k++) {
          if (rs[k].state === 'REJECTED') {
            this.decision = rs[k];
            break;
          }
        }
      }
    }
    if (s === 'ACCEPTED' && this.accepted === null) this.accepted = r;
    if (this.decision === null && (s === 'ACCEPTED' || (s === 'REJECTED' && this.returned !== null && compareInstants(t, at(this.returned)) >= 0))) this.decision = r;
    if (s === 'CANCELLED' && this.cancelled === null) this.cancelled = r;
    if ((s === 'ACCEPTED' || s === 'REJECTED') && this.decided === null) this.decided = r;
    if (this.beyond === null && BEYOND_ADMISSION.includes(s)) this.beyond = r;
    if (r.leaseExpiresAt !== undefined) {
      // the first grant; then a renewal timed at or before the lease in force moves it (after it: a new admission decision)
      if (this.lease === null || compareInstants(t, this.lease) <= 0) this.lease = parseInstant(r.leaseExpiresAt);
    }
    // the state machine: nothing leaves a terminal state; non-terminal progress only moves forward along the chain
    if (this.terminal !== null) {
      if (s !== this.state) this.leftTerminal.push(r);
    } else if (isTerminal(s)) {
      this.state = s;
      this.stateAt = t;
      this.terminal = r;
    } else if (this.state === null || CHAIN.indexOf(s) > CHAIN.indexOf(this.state)) {
      this.state = s;
      this.stateAt = t;
    }
  }

  /** The attempt's trace: its fold with the logical handoff's first values and the run's cancellation. */
  trace(run: string, logical: LogicalFirsts, runCancelAt: Instant | null): AttemptTrace {
    const rs = this.receipts;
    const { terminal, lease, returned, accepted } = this;
    const own = this.cancelled ? at(this.cancelled) : null;
    const cancelAt = own === null ? runCancelAt : runCancelAt === null ? own : earlierOf(own, runCancelAt);
    return {
      run,
      handoff: rs[0].handoff,
      attempt: rs[0].attempt ?? 1,
      receipts: rs,
      source: this.from ?? logical.from,
      target: this.to,
      duplicateKey: this.duplicateKey ?? logical.duplicateKey,
      finalOwner: logical.finalOwner,
      onTimeout: logical.onTimeout,
      states: this.states,
      firstAt: at(rs[0]),
      activeFrom: this.activeFrom,
      activeEvent: this.activeEvent,
      terminal,
      lease,
      returned,
      returnAt: returned ? at(returned) : accepted ? at(accepted) : null,
      accepted,
      decision: this.decision,
      cancelled: this.cancelled,
      decided: this.decided,
      beyond: this.beyond,
      cancelAt,
      activeUntil: earlierOf(terminal ? at(terminal) : NEVER, lease ?? NEVER),
      state: this.state ?? rs[0].state,
      stateAt: this.stateAt ?? at(rs[0]),
      leftTerminal: this.leftTerminal,
    };
  }
}

/** The trace of one attempt's receipts `rs` (in (time, event) order). */
function traceAttempt(run: string, rs: readonly Transition[], logical: LogicalFirsts, runCancelAt: Instant | null): AttemptTrace {
  const f = new AttemptFold();
  for (const r of rs) f.step(r);
  handoffWork.steps += rs.length;
  return f.trace(run, logical, runCancelAt);
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
    .map((rs) => traceAttempt(run, rs, logicalFirsts(byHandoff.get(rs[0].handoff) ?? rs), runCancelAt))
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
