/** The run lists (API, web view): filters, order and rows. */
import type { RunVerdict } from '../core/types.js';

/** What the run lists filter on: verdict, pinned contract, and (for held runs) the alert state at `now`. */
export interface ListFilter {
  verdict?: string;
  contract?: string;
  limit?: number;
  /** Oldest first (by first receipt) instead of newest first. */
  oldest?: boolean;
  acked?: boolean;
  alerting?: boolean;
  stalled?: boolean;
  now?: number;
  /** The alert window and stall time (serve's --alert-window, --stall-after). */
  windowMs?: number;
  stallMs?: number;
}

export interface ListedRun {
  verdict: RunVerdict;
  updatedAt: number;
  firstAt: number;
  /** Held runs only (a run another instance owns: null). */
  alert: { acked: boolean; alerting: boolean; stalled: boolean } | null;
}

/** Runs read from the shared store per query by the list views (listAll). */
export const LIST_GROUP = 500;

export function matchesAlertFilter(alert: ListedRun['alert'], f: ListFilter): boolean {
  for (const k of ['acked', 'alerting', 'stalled'] as const) {
    if (f[k] === undefined) continue;
    if ((alert?.[k] ?? false) !== f[k]) return false;
  }
  return true;
}

export function listOrder(f: ListFilter): (a: ListedRun, b: ListedRun) => number {
  const sign = f.oldest ? 1 : -1;
  return (a, b) => sign * (a.firstAt - b.firstAt) || (a.verdict.run < b.verdict.run ? -1 : 1);
}
