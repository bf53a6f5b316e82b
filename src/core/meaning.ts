import type { Finding, RunVerdict, Verdict } from './types.js';
import { humanDuration } from './edge.js';
import { millisOf } from './time.js';

/** What the operator does, per verdict (the drift table's "operator meaning"). */
export const OPERATOR_MEANING: Record<Verdict, string> = {
  uncertain: 'Evidence has a hole; find the missing pin or receipt, never treat it as green',
  stale_contract: 'Stop comparing the run with the wrong design',
  unknown_agent: 'Verify identity and authority',
  forbidden_edge: 'Contain the route before retrying work',
  ambiguous_route: 'Reconcile ownership and possible duplicate effects',
  false_complete: 'Reopen the run; completion lacks required evidence',
  waiting: 'Notify or observe the named dependency',
  incomplete: 'Investigate the first absent expected edge',
  working: 'Useful work may continue; do not intervene',
  healthy: 'The planned graph and final result are verified',
};

/** The finding that explains the verdict: the first one carrying the verdict itself. */
export function firstFinding(v: RunVerdict) {
  return v.findings.find((f) => f.verdict === v.verdict) ?? v.findings[0] ?? null;
}

/** JSON shape shared by `replay --json` and the run API. */
export function verdictJson(v: RunVerdict) {
  return { run: v.run, pin: v.pin, verdict: v.verdict, naive: v.naive, settled: v.settled, findings: v.findings };
}

/**
 * A finding's message for display at `now`: the stored message names absolute instants only; this adds the
 * countdown a reader wants, computed now from the finding's `deadline` ("(9m59s left)" after "until <deadline>",
 * "(15m ago)" after "at its deadline <deadline>" while the run has not ended). Pure; never stored.
 */
export function displayMessage(f: Pick<Finding, 'code' | 'message' | 'deadline'>, v: { findings: readonly Pick<Finding, 'code'>[] }, nowMs: number): string {
  if (f.deadline === undefined) return f.message;
  const deadline = millisOf(f.deadline);
  const ended = v.findings.some((x) => x.code === 'false_complete' || x.code.startsWith('run_'));
  if ((f.code === 'waiting' || f.code === 'declared_wait') && deadline > nowMs) {
    return f.message.replace(`until ${f.deadline}`, `until ${f.deadline} (${humanDuration(deadline - nowMs)} left)`);
  }
  if (f.code === 'missed_deadline' && !ended && nowMs >= deadline) {
    return f.message.replace(`at its deadline ${f.deadline}`, `at its deadline ${f.deadline} (${humanDuration(nowMs - deadline)} ago)`);
  }
  return f.message;
}
