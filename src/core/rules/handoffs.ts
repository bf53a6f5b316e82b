/**
 * Handoff lifecycle and budgets (src/core/rules/handoff/): resurrection, lifecycle gaps, duplicate leases, accepted
 * after cancel/expiry/stale, missing owner or timeout disposition, lease_expired_open, budget over-commit and copies.
 * Its next change is the earliest lease in force to expire on an open attempt, so a live server turns
 * `lease_expired_open` at the expiry with no new receipt.
 */
import type { RunState } from '../state.js';
import type { Collector } from './context.js';

export function handoffRules(state: RunState, now: number, nowNs: number, out: Collector): void {
  if (state.handoffs.length === 0) return; // only runs with handoff receipts pay
  // The audit reads the handoff transitions, the run's ends and its verified outcomes, folded receipt by receipt as
  // the state takes them (src/core/rules/handoff/fold.ts: what handoffAudit of those receipts gives, at the cost of
  // what changed since the last evaluation), at `now` exact to the nanosecond (semantics 5: times at full precision).
  const { findings, nextChangeAt } = state.handoffAudit({ ms: now, ns: nowNs });
  for (const f of findings) out.add(f);
  out.changeAt(nextChangeAt);
}
