import type { RunState } from '../core/classify.js';
import type { Finding } from '../core/types.js';
import { auditHandoffs } from './lifecycle.js';

/** The handoff layer's findings for a run, for the classifier's `extraFindings` (only runs with handoff receipts pay). */
export function handoffFindings(state: RunState, now: number): Finding[] {
  if (state.handoffs.length === 0) return [];
  return auditHandoffs([...state.byEvent.values()], now);
}
