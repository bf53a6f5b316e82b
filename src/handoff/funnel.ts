/**
 * The artifact admission funnel (source article, "Evaluate branch utility"), from handoff receipts.
 * Each stage is a subset of the one before; counts are attempts.
 *
 * 1. dispatched: the attempt has a DISPATCHED, RUNNING, RETURNED or ACCEPTED receipt.
 * 2. completedBeforeLease: it returned (first RETURNED, else ACCEPTED) at or before its lease in force
 *    (an attempt without a lease counts when it returned).
 * 3. structurallyValid: the RETURNED receipt's local status is not `error` (emitters mark a returned
 *    artifact that fails the structural return checks - identity, schema, citations, no-evidence
 *    block, budget, capability - with status `error`).
 * 4. inScopeAndCurrent: it returned before any cancellation that applies, and the state version it
 *    observed (RETURNED `stateVersion`) is present and equals the version of the parent's decision
 *    receipt when that receipt carries one.
 * 5. nonDuplicate: the first such artifact of its work key (by return time, then event id); later
 *    artifacts of the same key are duplicates. Independent roles use distinct keys.
 * 6. admitted: it has an ACCEPTED receipt.
 * (The article's seventh stage, "changes a downstream decision", is task-specific and not derivable
 * from receipts.) An acceptance outside the funnel is a lifecycle finding (accepted_after_*).
 */
import type { Receipt } from '../core/types.js';
import { sameStateVersion } from './schema.js';
import type { AttemptTrace, RunTrace } from '../core/index.js';
import { traceRuns } from '../core/index.js';
import { compareInstants } from '../core/time.js';

export interface Funnel {
  dispatched: number;
  completedBeforeLease: number;
  structurallyValid: number;
  inScopeAndCurrent: number;
  nonDuplicate: number;
  admitted: number;
}

const DISPATCH_EVIDENCE = ['DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'] as const;

const wasDispatched = (a: AttemptTrace): boolean => DISPATCH_EVIDENCE.some((s) => a.states.has(s));
const completedBeforeLease = (a: AttemptTrace): boolean => a.returnAt !== null && (a.lease === null || compareInstants(a.returnAt, a.lease) <= 0);
const structurallyValid = (a: AttemptTrace): boolean => (a.returned ?? a.accepted)?.status !== 'error';
function inScopeAndCurrent(a: AttemptTrace): boolean {
  if (a.cancelAt !== null && compareInstants(a.returnAt!, a.cancelAt) >= 0) return false;
  const observed = a.returned?.stateVersion;
  if (observed === undefined) return false;
  const current = a.decision?.stateVersion;
  return current === undefined || sameStateVersion(observed, current);
}

export function runFunnel(trace: RunTrace): Funnel {
  const dispatched = trace.attempts.filter(wasDispatched);
  const completed = dispatched.filter(completedBeforeLease);
  const valid = completed.filter(structurallyValid);
  const current = valid.filter(inScopeAndCurrent);
  const firstOfKey = new Map<string, AttemptTrace>();
  const returnEvent = (a: AttemptTrace): Receipt => (a.returned ?? a.accepted)!;
  for (const a of [...current].sort((x, y) => compareInstants(x.returnAt!, y.returnAt!) || (returnEvent(x).event < returnEvent(y).event ? -1 : 1))) {
    const key = a.duplicateKey ?? `${a.handoff}#${a.attempt}`;
    if (!firstOfKey.has(key)) firstOfKey.set(key, a);
  }
  const nonDuplicate = current.filter((a) => firstOfKey.get(a.duplicateKey ?? `${a.handoff}#${a.attempt}`) === a);
  const admitted = nonDuplicate.filter((a) => a.accepted !== null);
  return {
    dispatched: dispatched.length,
    completedBeforeLease: completed.length,
    structurallyValid: valid.length,
    inScopeAndCurrent: current.length,
    nonDuplicate: nonDuplicate.length,
    admitted: admitted.length,
  };
}

/** The funnel of the given receipts; with several runs, the counts are summed over runs. */
export function funnel(receipts: readonly Receipt[]): Funnel {
  const total: Funnel = { dispatched: 0, completedBeforeLease: 0, structurallyValid: 0, inScopeAndCurrent: 0, nonDuplicate: 0, admitted: 0 };
  for (const t of traceRuns(receipts)) {
    const f = runFunnel(t);
    for (const k of Object.keys(total) as (keyof Funnel)[]) total[k] += f[k];
  }
  return total;
}

export function funnelByRun(receipts: readonly Receipt[]): Map<string, Funnel> {
  return new Map(traceRuns(receipts).map((t) => [t.run, runFunnel(t)]));
}
