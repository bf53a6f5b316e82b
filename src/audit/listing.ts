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
  /** When the run entered its current verdict (ms since epoch); held runs only. */
  enteredAt?: number;
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

/**
 * A verdict as the shared store keeps it for the list views of a cluster (runs.listed): compact JSON of the RunVerdict
 * without its run id. Content-free as the verdict is: codes, ids, instants and messages built from them.
 */
export function listedJson(v: RunVerdict, firstAt: number): string {
  return JSON.stringify({ pin: v.pin, verdict: v.verdict, naive: v.naive, settled: v.settled, findings: v.findings, nextChangeAt: v.nextChangeAt, firstAt: Number.isFinite(firstAt) ? firstAt : null });
}

/**
 * A stored listed verdict back (listedJson) with the owner's first receipt time (null: none), or null when it is not
 * one (then the run is evaluated instead).
 */
export function parseListed(run: string, text: string | null): { verdict: RunVerdict; firstAt: number | null } | null {
  if (text === null) return null;
  try {
    const o = JSON.parse(text) as Omit<RunVerdict, 'run'> & { firstAt?: number | null };
    if (typeof o?.verdict !== 'string' || !Array.isArray(o.findings) || typeof o.settled !== 'boolean') return null;
    const verdict: RunVerdict = { run, pin: o.pin ?? null, verdict: o.verdict, naive: o.naive, findings: o.findings, settled: o.settled, nextChangeAt: o.nextChangeAt ?? null };
    return { verdict, firstAt: typeof o.firstAt === 'number' ? o.firstAt : null };
  } catch {
    return null;
  }
}

/** Whether two evaluations of a run list the same (listedJson would give the same text), without serialising them. */
export function sameListed(a: RunVerdict, b: RunVerdict): boolean {
  if (a.verdict !== b.verdict || a.naive !== b.naive || a.settled !== b.settled || a.nextChangeAt !== b.nextChangeAt) return false;
  if (a.pin !== b.pin && (a.pin?.contract !== b.pin?.contract || a.pin?.version !== b.pin?.version || a.pin?.phase !== b.pin?.phase)) return false;
  if (a.findings.length !== b.findings.length) return false;
  for (let i = 0; i < a.findings.length; i++) {
    const x = a.findings[i];
    const y = b.findings[i];
    if (x === y) continue;
    if (x.verdict !== y.verdict || x.code !== y.code || x.edge !== y.edge || x.message !== y.message || x.deadline !== y.deadline || x.since !== y.since || x.settled !== y.settled) return false;
    if (!sameStrings(x.agents, y.agents) || !sameStrings(x.events, y.events)) return false;
  }
  return true;
}

function sameStrings(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
