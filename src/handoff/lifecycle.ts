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
import type { Finding, HandoffState, Receipt, Verdict } from '../core/types.js';
import { compareVersions } from './schema.js';
import type { AttemptTrace, RunTrace } from './trace.js';
import { CHAIN, at, edgeOf, isTerminal, traceRuns } from './trace.js';
import { ledgerFindings, uniq } from './ledger.js';

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

const iso = (t: number): string => new Date(t).toISOString().replace('.000Z', 'Z');
const label = (a: AttemptTrace): string => `${a.handoff} attempt ${a.attempt}`;
const parties = (a: AttemptTrace): (string | undefined)[] => [a.source, a.target];

/** Walks the attempt's receipts through the state machine; reports leaving a terminal state. */
export function resurrection(a: AttemptTrace): Finding[] {
  let current: HandoffState | null = null;
  let terminal: Receipt | null = null;
  const offending: Receipt[] = [];
  for (const r of a.receipts) {
    const s = r.state!;
    if (terminal !== null) {
      if (s !== current) offending.push(r);
      continue;
    }
    if (isTerminal(s)) {
      current = s;
      terminal = r;
    } else if (current === null || CHAIN.indexOf(s) > CHAIN.indexOf(current)) {
      current = s;
    }
  }
  if (terminal === null || offending.length === 0) return [];
  return [finding('resurrection', {
    edge: edgeOf(a),
    agents: parties(a),
    events: [terminal.event, ...offending.map((r) => r.event)],
    message: `${label(a)} left terminal ${terminal.state} (${terminal.at}) for ${offending.map((r) => `${r.state} at ${r.at}`).join(', ')}: late work cannot revive a handoff`,
  })];
}

export function lifecycleGap(a: AttemptTrace): Finding[] {
  const has = (s: HandoffState): boolean => a.states.has(s);
  const out: Finding[] = [];
  const beyondAdmission = (['DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'] as const).filter(has);
  if (beyondAdmission.length > 0 && !has('ADMITTED')) {
    out.push(finding('lifecycle_gap', {
      edge: edgeOf(a), agents: parties(a),
      events: a.receipts.filter((r) => beyondAdmission.includes(r.state as never)).map((r) => r.event).slice(0, 1),
      message: `${label(a)} reached ${beyondAdmission.at(-1)} with no ADMITTED record: the admission evidence is missing`,
    }));
  }
  const decidedWithoutReturn = has('ACCEPTED') || (has('REJECTED') && (['ADMITTED', 'DISPATCHED', 'RUNNING'] as const).some(has));
  if (decidedWithoutReturn && !has('RETURNED')) {
    const decided = a.receipts.find((r) => r.state === 'ACCEPTED' || r.state === 'REJECTED')!;
    out.push(finding('lifecycle_gap', {
      edge: edgeOf(a), agents: parties(a), events: [decided.event],
      message: `${label(a)} was ${decided.state} with no RETURNED record: no artifact was recorded for the decision`,
    }));
  }
  return out;
}

export function acceptedTooLate(a: AttemptTrace): Finding[] {
  if (a.accepted === null || a.returnAt === null) return [];
  const out: Finding[] = [];
  const returnEvent = (a.returned ?? a.accepted).event;
  if (a.cancelAt !== null && a.returnAt >= a.cancelAt) {
    const cancel = a.receipts.find((r) => r.state === 'CANCELLED' && at(r) === a.cancelAt);
    out.push(finding('accepted_after_cancel', {
      edge: edgeOf(a), agents: parties(a),
      events: [returnEvent, a.accepted.event, ...(cancel ? [cancel.event] : [])],
      message: `${label(a)} returned at ${iso(a.returnAt)}, not before the cancellation at ${iso(a.cancelAt)}, and was accepted: cancelled work is diagnostic only`,
    }));
  }
  if (a.lease !== null && a.returnAt > a.lease) {
    out.push(finding('accepted_after_expiry', {
      edge: edgeOf(a), agents: parties(a), events: [returnEvent, a.accepted.event],
      message: `${label(a)} returned at ${iso(a.returnAt)}, after its lease expired at ${iso(a.lease)}, and was accepted`,
    }));
  }
  const observed = a.returned?.stateVersion;
  const current = a.accepted.stateVersion;
  if (observed !== undefined && current !== undefined && compareVersions(observed, current) !== 0) {
    out.push(finding('accepted_stale', {
      edge: edgeOf(a), agents: parties(a), events: [a.returned!.event, a.accepted.event],
      message: `${label(a)} observed state version ${observed} and was accepted at version ${current}: revalidate or reject, never merge`,
    }));
  }
  return out;
}

export function leaseExpiredOpen(a: AttemptTrace, now: number): Finding[] {
  if (a.terminal !== null || a.lease === null || a.activeFrom === null || now < a.lease) return [];
  if (a.states.has('RETURNED')) return []; // the parent holds the artifact; its decision is pending
  const last = a.receipts[a.receipts.length - 1];
  return [finding('lease_expired_open', {
    edge: edgeOf(a), agents: parties(a), events: [last.event],
    message: `${label(a)} is still open at ${iso(now)}; its lease expired at ${iso(a.lease)} and no timeout disposition was applied`,
  })];
}

/** Per logical handoff: an admitted handoff must name its final owner and timeout disposition. */
export function ownership(attempts: AttemptTrace[]): Finding[] {
  const out: Finding[] = [];
  const byHandoff = new Map<string, AttemptTrace[]>();
  for (const a of attempts) byHandoff.set(a.handoff, [...(byHandoff.get(a.handoff) ?? []), a]);
  for (const [handoff, as] of byHandoff) {
    const admitted = as.filter((a) => a.activeFrom !== null);
    if (admitted.length === 0) continue;
    const firstActive = admitted.flatMap((a) => a.receipts.filter((r) => at(r) === a.activeFrom).slice(0, 1)).map((r) => r.event);
    const agents = as.flatMap(parties);
    if (as[0].finalOwner === undefined) {
      out.push(finding('missing_final_owner', {
        edge: edgeOf(as[0]), agents, events: firstActive,
        message: `handoff ${handoff} was admitted with no final accountable owner on any receipt: the branch is orphaned`,
      }));
    }
    if (as[0].onTimeout === undefined) {
      out.push(finding('missing_timeout_disposition', {
        edge: edgeOf(as[0]), agents, events: firstActive,
        message: `handoff ${handoff} was admitted with no timeout disposition on any receipt: nobody is responsible when its lease ends`,
      }));
    }
  }
  return out;
}

/** Two active leases on one work key: two owners of one route. */
export function duplicateActive(attempts: AttemptTrace[]): Finding[] {
  const active = attempts
    .filter((a) => a.activeFrom !== null && a.duplicateKey !== undefined)
    .sort((x, y) => x.activeFrom! - y.activeFrom! || (x.handoff < y.handoff ? -1 : x.handoff > y.handoff ? 1 : x.attempt - y.attempt));
  const out: Finding[] = [];
  for (let i = 0; i < active.length; i++) {
    for (let j = i + 1; j < active.length; j++) {
      const [a, b] = [active[i], active[j]];
      if (a.duplicateKey !== b.duplicateKey) continue;
      if (!(a.activeFrom! < b.activeUntil && b.activeFrom! < a.activeUntil)) continue;
      const firstActive = (x: AttemptTrace): string => x.receipts.find((r) => at(r) === x.activeFrom)!.event;
      out.push(finding('duplicate_active', {
        edge: edgeOf(b), agents: [...parties(a), ...parties(b)], events: [firstActive(a), firstActive(b)],
        message: `work key '${a.duplicateKey}' had two active leases: ${label(a)} from ${iso(a.activeFrom!)} and ${label(b)} from ${iso(b.activeFrom!)}`,
      }));
    }
  }
  return out;
}

/** A target completion never directly completes the parent run. */
export function targetCompletedParent(trace: RunTrace): Finding[] {
  const targets = new Set(trace.attempts.map((a) => a.target).filter((t): t is string => t !== undefined));
  if (targets.size === 0) return [];
  const rootLevel = trace.attempts.filter((a) => a.source === undefined || !targets.has(a.source));
  const owners = new Set((rootLevel.length > 0 ? rootLevel : trace.attempts).map((a) => a.finalOwner).filter((o) => o !== undefined));
  const completions = trace.receipts.filter(
    (r) => (r.type === 'run.end' && r.result === 'completed') || (r.type === 'outcome' && r.verified === true),
  );
  const out: Finding[] = [];
  for (const r of completions) {
    if (r.from === undefined || !targets.has(r.from) || owners.has(r.from)) continue;
    const own = trace.attempts.filter((a) => a.target === r.from);
    out.push(finding('target_completed_parent', {
      edge: edgeOf(own[0]),
      agents: [r.from, ...own.map((a) => a.finalOwner)],
      events: [r.event],
      message: `handoff target ${r.from} sent the run's ${r.type === 'run.end' ? 'completed end' : 'verified outcome'}; only the final owner (${[...owners].sort().join(', ') || 'none named'}) completes the run`,
    }));
  }
  return out;
}

export function auditRun(trace: RunTrace, now: number): Finding[] {
  return [
    ...trace.attempts.flatMap((a) => [...resurrection(a), ...lifecycleGap(a), ...acceptedTooLate(a), ...leaseExpiredOpen(a, now)]),
    ...ownership(trace.attempts),
    ...duplicateActive(trace.attempts),
    ...targetCompletedParent(trace),
    ...ledgerFindings(trace),
  ];
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
 * the epoch). Independent of receipt order and of duplicate delivery.
 */
export function auditHandoffs(receipts: Receipt[], now: number): Finding[] {
  return sortFindings(traceRuns(receipts).flatMap((t) => auditRun(t, now)));
}
