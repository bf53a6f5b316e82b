/**
 * A run held in live memory, and the small interface by which the jobs around the live runs (gauges, admission,
 * cluster reads) learn of its changes: the live runs announce `runChanged` / `runForgotten` / `runAcked`; the gauges
 * listen (src/audit/gauges.ts).
 */
import type { RunState } from '../core/classify.js';
import type { ShadowVerdict } from '../core/shadow.js';
import type { AckRecord, RunVerdict, Verdict } from '../core/types.js';
import { ALERTING_VERDICTS } from '../core/types.js';
import type { PinRecord } from '../store/index.js';

export interface LiveRun {
  state: RunState;
  verdict: RunVerdict;
  updatedAt: number;
  /** The run's pin record once one exists (a pin never changes once written), so evaluations skip the store. */
  pin?: PinRecord;
  /** The verdict the topology_runs gauge last counted this run under, and its row (see RunGauges.gauge). */
  gaugeOf?: RunVerdict;
  gaugeId?: string;
  /** The alerting row (`contract\0verdict`) and stalled row (contract) this run is counted in (see RunGauges.alerting). */
  alertId?: string;
  stallId?: string;
  /** Shadow verdicts under the candidates (with `shadow` configured). */
  shadow?: ShadowVerdict[];
  /** Cluster mode: the first receipt time last written with the listed verdict (listsVerdicts stores). */
  listedFirstAt?: number;
  /** When the run entered its current verdict (drives the alert window). */
  enteredAt?: number;
  /** The verdict an operator acknowledged (a new verdict alerts again); the record is stored by serve. */
  ackedVerdict?: Verdict;
  ackedAt?: number;
  /** The latest acknowledgement (who, when, why), also once the run left the acknowledged verdict. */
  ackRecord?: AckRecord;
  /** Receipts this run holds in memory (distinct contents). */
  held: number;
  /** Server time of the run's latest receipt (idle eviction: a sender's `at` cannot make a run look busy). */
  receivedAt?: number;
  /** The source whose receipt brought the run into live memory (the fair live cap counts per source). */
  source?: string;
  /** Counted among the runs that can still change (Admission.track). */
  counted?: boolean;
  /** A run loaded again from the store: its stored verdict, the previous one of its first evaluation. */
  previous?: { contract: string; version: string; verdict: Verdict };
}

/** What listens to the live runs (the gauges): told of every change, acknowledgement and forgotten run. */
export interface RunListener {
  /** The run's verdict, its entry time or its receipts changed (also a run new to live memory). */
  runChanged(live: LiveRun): void;
  /** An acknowledgement changed the run's alert state. */
  runAcked(live: LiveRun): void;
  /** The run left live memory (pruned, evicted, dropped). */
  runForgotten(live: LiveRun): void;
}

/** The earliest time the run's verdict or a shadow verdict may change with time alone. */
export function nextChange(live: LiveRun): number | null {
  let t = live.verdict.nextChangeAt ?? Infinity;
  for (const s of live.shadow ?? []) if (s.nextChangeAt !== null && s.nextChangeAt < t) t = s.nextChangeAt;
  return Number.isFinite(t) ? t : null;
}

/** The (contract, version, verdict) a verdict counts under ('' without a pin). */
export function verdictKey(v: RunVerdict): { contract: string; version: string; verdict: Verdict } {
  return v.pin ? { contract: v.pin.contract, version: v.pin.version, verdict: v.verdict } : { contract: '', version: '', verdict: v.verdict };
}

/** Verdicts that alert: unsafe topology, false completion, incomplete and uncertain. */
export const ALERT_VERDICTS: ReadonlySet<Verdict> = new Set<Verdict>(ALERTING_VERDICTS);

/** A live run's alert state at `now` (the rules the alerting and stalled gauges count by). */
export function alertState(live: LiveRun, now: number, windowMs: number, stallMs: number): { acked: boolean; alerting: boolean; stalled: boolean } | null {
  const v = live.verdict;
  if (!v) return null;
  const acked = live.ackedVerdict === v.verdict;
  const alerting = ALERT_VERDICTS.has(v.verdict) && !acked && now - (live.enteredAt ?? live.updatedAt) <= windowMs;
  const lastAt = live.state.lastAt;
  const stalled = !v.settled && !acked && Number.isFinite(lastAt) && now - lastAt > stallMs;
  return { acked, alerting, stalled };
}
