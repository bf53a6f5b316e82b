/**
 * Lifecycle audit of handoffs from receipts.
 *
 * State machine of one attempt (semantics section 5):
 *   PROPOSED -> ADMITTED -> DISPATCHED -> RUNNING -> RETURNED -> ACCEPTED | REJECTED
 * Legal moves:
 *   - forward along the chain; RUNNING may be skipped (target acknowledgement is optional) and
 *     PROPOSED may be absent (an attempt may start at ADMITTED);
 *   - REJECTED from PROPOSED (admission refused) or from RETURNED (return refused);
 *   - CANCELLED, TIMED_OUT, FAILED from any non-terminal state;
 *   - a non-terminal state repeated (lease renewal, heartbeat, budget record), or the same terminal
 *     repeated (a late callback recorded for diagnosis after cancellation), changes nothing;
 *   - a non-terminal receipt timed before one already seen (agents' clocks disagree) is ignored.
 * Findings:
 *   - `resurrection`: any other state after a terminal one (nothing leaves a terminal state);
 *   - `lifecycle_gap`: a state whose prerequisite record is absent (dispatched/running/returned/
 *     accepted with no ADMITTED; accepted, or rejected after admission, with no RETURNED). The
 *     evidence has a hole: `uncertain`, cleared when the missing receipt arrives;
 *   - `duplicate_active`: two attempts with one work key whose active lease intervals overlap
 *     (active from the first ADMITTED-or-later receipt until the first terminal or the lease in
 *     force, whichever is first; a lease ending exactly when the next begins does not overlap);
 *   - `accepted_after_cancel`: accepted, and the result came back at or after the earliest
 *     cancellation that applies (the attempt's CANCELLED or the run's cancelled end; ties go to the
 *     cancellation, as in return admission);
 *   - `accepted_after_expiry`: accepted, and the result came back after the lease in force
 *     (renewals count only when timed at or before the lease then in force);
 *   - `accepted_stale`: accepted under a state version different from the one the result observed;
 *   - `missing_final_owner`, `missing_timeout_disposition`: an attempt of the handoff was admitted
 *     (or went further) and no receipt of the handoff names a final owner / timeout disposition;
 *   - `lease_expired_open`: at `now`, an admitted attempt that had not returned is past its lease
 *     with no terminal disposition (the timeout disposition was never applied);
 *   - `target_completed_parent`: a handoff's target, not a final owner, ends the run completed or
 *     reports a verified outcome;
 *   - `budget_overcommitted`, `budget_copied`: see ledger.ts.
 */
import type { Finding, HandoffState, Receipt, Verdict } from '../../types.js';
import { sameStateVersion } from './version.js';
import { handoffWork } from './work.js';
import { ceilMillis, compareInstants, instantText, toInstant, type Instant } from '../../time.js';
import type { AttemptTrace, RunTrace, Transition } from './trace.js';
import { CHAIN, at, edgeOf, isTerminal, traceRuns } from './trace.js';
import type { LedgerWalk, TaggedFinding } from './ledger.js';
import { attemptId, ledgerFindingsOf, ledgerWalk, uniq } from './ledger.js';

export const HANDOFF_FINDING_VERDICTS = {
  lifecycle_gap: 'uncertain',
  duplicate_active: 'ambiguous_route',
  budget_overcommitted: 'ambiguous_route',
  budget_copied: 'ambiguous_route',
  resurrection: 'false_complete',
  accepted_after_cancel: 'false_complete',
  accepted_after_expiry: 'false_complete',
  accepted_stale: 'false_complete',
  target_completed_parent: 'false_complete',
  missing_final_owner: 'incomplete',
  missing_timeout_disposition: 'incomplete',
  lease_expired_open: 'incomplete',
} as const satisfies Record<string, Verdict>;
export type HandoffFindingCode = keyof typeof HANDOFF_FINDING_VERDICTS;

/** Only `lifecycle_gap` (missing evidence) can be cleared by more receipts. */
const SETTLED: Record<HandoffFindingCode, boolean> = Object.fromEntries(
  Object.keys(HANDOFF_FINDING_VERDICTS).map((c) => [c, c !== 'lifecycle_gap']),
) as Record<HandoffFindingCode, boolean>;

function finding(code: HandoffFindingCode, f: { edge?: string; agents: (string | undefined)[]; events: string[]; message: string }): Finding {
  const out: Finding = {
    verdict: HANDOFF_FINDING_VERDICTS[code],
    code,
    agents: uniq(f.agents),
    events: uniq(f.events),
    message: f.message,
    settled: SETTLED[code],
  };
  if (f.edge !== undefined) out.edge = f.edge;
  return out;
}

/** RFC 3339 text of an instant in a message: full precision, without a `.000` of whole seconds. */
const iso = (t: Instant): string => instantText(t).replace('.000Z', 'Z');
const label = (a: AttemptTrace): string => `${a.handoff} attempt ${a.attempt}`;
const parties = (a: AttemptTrace): (string | undefined)[] => [a.source, a.target];

/**
 * What the audit established about one attempt. The findings below and the operator's board
 * (board.ts) both read these facts, so the board cannot say something the verdict does not.
 */
export interface AttemptFacts {
  id: string;
  trace: AttemptTrace;
  /** The state the state machine is in after the attempt's receipts (a terminal state stays). */
  state: HandoffState;
  /** When that state was recorded. */
  stateAt: Instant;
  /** The first terminal receipt, and the receipts that tried to leave it (resurrection). */
  terminal: Transition | null;
  leftTerminal: Transition[];
  /** States beyond admission reached with no ADMITTED record (lifecycle_gap). */
  beyondAdmissionWithoutAdmitted: HandoffState[];
  /** An ACCEPTED/REJECTED decision with no RETURNED record (lifecycle_gap). */
  decidedWithoutReturn: Transition | null;
  acceptedAfterCancel: boolean;
  acceptedAfterExpiry: boolean;
  /** Accepted under a version other than the one observed: {observed, current}. */
  acceptedStale: { observed: string; current: string } | null;
  /** Open, not returned and past its lease at `now`. */
  leaseExpiredOpen: boolean;
}

export interface HandoffFacts {
  handoff: string;
  attempts: AttemptTrace[];
  /** Some attempt was admitted (or went further). */
  admitted: boolean;
  missingFinalOwner: boolean;
  missingTimeout: boolean;
}

export interface RunFacts {
  trace: RunTrace;
  now: Instant;
  attempts: AttemptFacts[];
  handoffs: HandoffFacts[];
  /** Pairs of attempts with one work key whose active leases overlapped (first started first). */
  overlaps: [AttemptTrace, AttemptTrace][];
  /** The final owners of the root-level handoffs. */
  finalOwners: string[];
  /** Run completions (completed run.end, verified outcome) sent by a target that is not a final owner. */
  targetCompletions: Receipt[];
  ledger: LedgerWalk;
}

export function attemptFacts(a: AttemptTrace, now: Instant): AttemptFacts {
  const has = (s: HandoffState): boolean => a.states.has(s);
  const beyond = (['DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'] as const).filter(has);
  const decidedWithoutReturn =
    (has('ACCEPTED') || (has('REJECTED') && (['ADMITTED', 'DISPATCHED', 'RUNNING'] as const).some(has))) && !has('RETURNED') ? a.decided : null;
  const returnAt = a.accepted !== null ? a.returnAt : null; // accepted: the result came back at returnAt
  const observed = a.returned?.stateVersion;
  const current = a.accepted?.stateVersion;
  return {
    id: attemptId(a),
    trace: a,
    state: a.state,
    stateAt: a.stateAt,
    terminal: a.terminal,
    leftTerminal: [...a.leftTerminal],
    beyondAdmissionWithoutAdmitted: beyond.length > 0 && !has('ADMITTED') ? beyond : [],
    decidedWithoutReturn,
    acceptedAfterCancel: returnAt !== null && a.cancelAt !== null && compareInstants(returnAt, a.cancelAt) >= 0,
    acceptedAfterExpiry: returnAt !== null && a.lease !== null && compareInstants(returnAt, a.lease) > 0,
    acceptedStale:
      returnAt !== null && observed !== undefined && current !== undefined && !sameStateVersion(observed, current) ? { observed, current } : null,
    leaseExpiredOpen: leaseOpen(a) && compareInstants(now, a.lease) >= 0,
  };
}

/** Two active leases on one work key: two owners of one route. */
export function leaseOverlaps(attempts: AttemptTrace[]): [AttemptTrace, AttemptTrace][] {
  const active = attempts
    .filter((a): a is AttemptTrace & { activeFrom: Instant } => a.activeFrom !== null && a.duplicateKey !== undefined)
    .sort((x, y) => compareInstants(x.activeFrom, y.activeFrom) || (x.handoff < y.handoff ? -1 : x.handoff > y.handoff ? 1 : x.attempt - y.attempt));
  const out: [AttemptTrace, AttemptTrace][] = [];
  for (let i = 0; i < active.length; i++) {
    for (let j = i + 1; j < active.length; j++) {
      const [a, b] = [active[i], active[j]];
      if (a.duplicateKey !== b.duplicateKey) continue;
      if (!(compareInstants(a.activeFrom, b.activeUntil) < 0 && compareInstants(b.activeFrom, a.activeUntil) < 0)) continue;
      out.push([a, b]);
    }
  }
  return out;
}

/** Final owners of the root-level handoffs (those whose source is not itself a target). */
export function finalOwnersOf(trace: RunTrace): string[] {
  const targets = new Set(trace.attempts.map((a) => a.target).filter((t): t is string => t !== undefined));
  const rootLevel = trace.attempts.filter((a) => a.source === undefined || !targets.has(a.source));
  return uniq((rootLevel.length > 0 ? rootLevel : trace.attempts).map((a) => a.finalOwner));
}

/** Everything the audit establishes about one run at `now`. */
export function runFacts(trace: RunTrace, now: Instant): RunFacts {
  const byHandoff = new Map<string, AttemptTrace[]>();
  for (const a of trace.attempts) byHandoff.set(a.handoff, [...(byHandoff.get(a.handoff) ?? []), a]);
  const targets = new Set(trace.attempts.map((a) => a.target).filter((t): t is string => t !== undefined));
  const finalOwners = finalOwnersOf(trace);
  const owners = new Set(finalOwners);
  return {
    trace,
    now,
    attempts: trace.attempts.map((a) => attemptFacts(a, now)),
    handoffs: [...byHandoff].map(([handoff, as]) => handoffFacts(handoff, as)),
    overlaps: leaseOverlaps(trace.attempts),
    finalOwners,
    targetCompletions:
      targets.size === 0
        ? []
        : trace.receipts.filter(
            (r) => isCompletion(r) && r.from !== undefined && targets.has(r.from) && !owners.has(r.from),
          ),
    ledger: ledgerWalk(trace),
  };
}

type Push = (attempts: AttemptTrace[], code: HandoffFindingCode, x: Parameters<typeof finding>[1]) => void;

/** A `push` into `out`: each finding tagged with the attempts it concerns. */
export function pusher(out: TaggedFinding[]): Push {
  return (attempts, code, x) => {
    out.push({ attempts: attempts.map(attemptId), finding: finding(code, x) });
  };
}

/**
 * The findings of one attempt's facts but `lease_expired_open` (the one that changes with `now` alone: see
 * leaseExpiredFinding): resurrection, lifecycle gaps, accepted after cancel or expiry, accepted stale.
 */
export function attemptFindings(x: AttemptFacts, push: Push): void {
  const a = x.trace;
  if (x.terminal !== null && x.leftTerminal.length > 0) {
    const t = x.terminal;
    push([a], 'resurrection', {
      edge: edgeOf(a), agents: parties(a), events: [t.event, ...x.leftTerminal.map((r) => r.event)],
      message: `${label(a)} left terminal ${t.state} (${t.at}) for ${x.leftTerminal.map((r) => `${r.state} at ${r.at}`).join(', ')}: late work cannot revive a handoff`,
    });
  }
  if (x.beyondAdmissionWithoutAdmitted.length > 0) {
    const beyond = x.beyondAdmissionWithoutAdmitted;
    push([a], 'lifecycle_gap', {
      edge: edgeOf(a), agents: parties(a),
      events: a.beyond !== null ? [a.beyond.event] : [],
      message: `${label(a)} reached ${beyond.at(-1)} with no ADMITTED record: the admission evidence is missing`,
    });
  }
  if (x.decidedWithoutReturn !== null) {
    const decided = x.decidedWithoutReturn;
    push([a], 'lifecycle_gap', {
      edge: edgeOf(a), agents: parties(a), events: [decided.event],
      message: `${label(a)} was ${decided.state} with no RETURNED record: no artifact was recorded for the decision`,
    });
  }
  // The flags below hold only for an accepted attempt whose result came back (attemptFacts); the null checks narrow.
  const { accepted, returnAt, cancelAt, lease, returned } = a;
  const returnEvent = (returned ?? accepted)?.event;
  if (x.acceptedAfterCancel && accepted !== null && returnEvent !== undefined && returnAt !== null && cancelAt !== null) {
    const own = a.cancelled;
    const cancel = own !== null && compareInstants(at(own), cancelAt) === 0 ? own : undefined;
    push([a], 'accepted_after_cancel', {
      edge: edgeOf(a), agents: parties(a),
      events: [returnEvent, accepted.event, ...(cancel ? [cancel.event] : [])],
      message: `${label(a)} returned at ${iso(returnAt)}, not before the cancellation at ${iso(cancelAt)}, and was accepted: cancelled work is diagnostic only`,
    });
  }
  if (x.acceptedAfterExpiry && accepted !== null && returnEvent !== undefined && returnAt !== null && lease !== null) {
    push([a], 'accepted_after_expiry', {
      edge: edgeOf(a), agents: parties(a), events: [returnEvent, accepted.event],
      message: `${label(a)} returned at ${iso(returnAt)}, after its lease expired at ${iso(lease)}, and was accepted`,
    });
  }
  if (x.acceptedStale !== null && returned !== null && accepted !== null) {
    push([a], 'accepted_stale', {
      edge: edgeOf(a), agents: parties(a), events: [returned.event, accepted.event],
      message: `${label(a)} observed state version ${x.acceptedStale.observed} and was accepted at version ${x.acceptedStale.current}: revalidate or reject, never merge`,
    });
  }
}

/** Whether the attempt is open with a lease in force and has not returned: it turns `lease_expired_open` at the lease. */
export function leaseOpen(a: AttemptTrace): a is AttemptTrace & { lease: Instant } {
  return a.terminal === null && a.lease !== null && a.activeFrom !== null && !a.states.has('RETURNED');
}

/** `lease_expired_open` of an attempt open past its lease at `now` (leaseOpen, and `now` at or after the lease). */
export function leaseExpiredFinding(a: AttemptTrace, now: Instant, push: Push): void {
  const lease = a.lease;
  if (lease === null) return;
  push([a], 'lease_expired_open', {
    edge: edgeOf(a), agents: parties(a), events: [a.receipts[a.receipts.length - 1].event],
    message: `${label(a)} is still open at ${iso(now)}; its lease expired at ${iso(lease)} and no timeout disposition was applied`,
  });
}

/** `missing_final_owner` and `missing_timeout_disposition` of one logical handoff (its attempts in attempt order). */
export function handoffFindings(h: HandoffFacts, push: Push): void {
  if (!h.admitted) return;
  const firstActive = h.attempts.flatMap((a) => a.activeEvent ?? []);
  const agents = h.attempts.flatMap(parties);
  if (h.missingFinalOwner) {
    push(h.attempts, 'missing_final_owner', {
      edge: edgeOf(h.attempts[0]), agents, events: firstActive,
      message: `handoff ${h.handoff} was admitted with no final accountable owner on any receipt: the branch is orphaned`,
    });
  }
  if (h.missingTimeout) {
    push(h.attempts, 'missing_timeout_disposition', {
      edge: edgeOf(h.attempts[0]), agents, events: firstActive,
      message: `handoff ${h.handoff} was admitted with no timeout disposition on any receipt: nobody is responsible when its lease ends`,
    });
  }
}

/** The facts of one logical handoff from its attempts (in attempt order). */
export function handoffFacts(handoff: string, as: AttemptTrace[]): HandoffFacts {
  return {
    handoff,
    attempts: as,
    admitted: as.some((a) => a.activeFrom !== null),
    missingFinalOwner: as[0].finalOwner === undefined,
    missingTimeout: as[0].onTimeout === undefined,
  };
}

/** `duplicate_active` of two attempts whose active leases on one work key overlapped (leaseOverlaps: `a` started first). */
export function overlapFinding(a: AttemptTrace, b: AttemptTrace, push: Push): void {
  if (a.activeFrom === null || b.activeFrom === null) return; // overlapping leases are active (leaseOverlaps)
  push([a, b], 'duplicate_active', {
    edge: edgeOf(b), agents: [...parties(a), ...parties(b)], events: [a.activeEvent ?? [], b.activeEvent ?? []].flat(),
    message: `work key '${a.duplicateKey}' had two active leases: ${label(a)} from ${iso(a.activeFrom)} and ${label(b)} from ${iso(b.activeFrom)}`,
  });
}

/** `target_completed_parent` of a run completion `r` sent by a handoff target (`own`: its attempts, in attempt order). */
export function completionFinding(r: Receipt, own: AttemptTrace[], finalOwners: readonly string[], push: Push): void {
  push(own, 'target_completed_parent', {
    edge: edgeOf(own[0]),
    agents: [r.from, ...own.map((a) => a.finalOwner)],
    events: [r.event],
    message: `handoff target ${r.from} sent the run's ${r.type === 'run.end' ? 'completed end' : 'verified outcome'}; only the final owner (${finalOwners.join(', ') || 'none named'}) completes the run`,
  });
}

/** Whether `r` completes the run (a completed run.end, a verified outcome). */
export const isCompletion = (r: Receipt): boolean => (r.type === 'run.end' && r.result === 'completed') || (r.type === 'outcome' && r.verified === true);

/** The findings of a run's facts, each tagged with the attempts it concerns. */
export function factFindings(f: RunFacts): TaggedFinding[] {
  const out: TaggedFinding[] = [];
  const push = pusher(out);
  for (const x of f.attempts) {
    attemptFindings(x, push);
    if (x.leaseExpiredOpen) leaseExpiredFinding(x.trace, f.now, push);
  }
  for (const h of f.handoffs) handoffFindings(h, push);
  for (const [a, b] of f.overlaps) overlapFinding(a, b, push);
  for (const r of f.targetCompletions) completionFinding(r, f.trace.attempts.filter((a) => a.target === r.from), f.finalOwners, push);
  out.push(...ledgerFindingsOf(f.trace, f.ledger));
  return out;
}

export function auditRun(trace: RunTrace, now: number | Instant): Finding[] {
  return factFindings(runFacts(trace, toInstant(now))).map((t) => t.finding);
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Findings in a stable order: code, edge, events, message. */
export function sortFindings(fs: Finding[]): Finding[] {
  return [...fs].sort(
    (a, b) => cmp(a.code, b.code) || cmp(a.edge ?? '', b.edge ?? '') || cmp(a.events.join(','), b.events.join(',')) || cmp(a.message, b.message),
  );
}

/**
 * Handoff findings of the given receipts (one run or several), at evaluation time `now` (ms since
 * the epoch, or an Instant exact to the nanosecond). Independent of receipt order and of duplicate delivery.
 */
export function auditHandoffs(receipts: Receipt[], now: number | Instant): Finding[] {
  return sortFindings(traceRuns(receipts).flatMap((t) => auditRun(t, now)));
}

/**
 * The handoff findings of these receipts at `now`, and the earliest instant after `now` at which they change with
 * time alone: the expiry of a lease in force on an attempt that is open and not returned (it turns
 * `lease_expired_open` then); Infinity when none.
 */
export function handoffAudit(receipts: Receipt[], nowAt: number | Instant): { findings: Finding[]; nextChangeAt: number } {
  const now = toInstant(nowAt);
  handoffWork.steps += receipts.length;
  const traces = traceRuns(receipts);
  let next: Instant | null = null;
  for (const t of traces) {
    for (const a of t.attempts) {
      const lease = a.lease;
      if (leaseOpen(a) && compareInstants(now, lease!) < 0 && (next === null || compareInstants(lease!, next) < 0)) next = lease;
    }
  }
  // A millisecond timer fires at the first whole millisecond at or after the lease.
  return { findings: sortFindings(traces.flatMap((t) => auditRun(t, now))), nextChangeAt: next === null ? Infinity : ceilMillis(next.ms, next.ns) };
}
