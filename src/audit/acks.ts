/**
 * Acknowledgements of live runs: an operator acknowledges a run's current verdict, which then leaves the alerting
 * series until the run enters another verdict. Pure updates of the LiveRun; the caller tells the gauges (runAcked).
 */
import type { AckRecord, Verdict } from '../core/types.js';
import type { LiveRun } from './live-run.js';

export type AckWho = { by?: string | null; reason?: string | null };

/** Acknowledge the run's current verdict; `acked`: false when it was acknowledged already (the gauges are unchanged). */
export function ackRun(live: LiveRun, now: number, who: AckWho = {}): { acked: boolean; at: string; record: AckRecord } | null {
  if (!live.verdict) return null;
  if (live.ackedVerdict === live.verdict.verdict && live.ackedAt !== undefined) {
    const record = live.ackRecord ?? { verdict: live.ackedVerdict, by: null, at: live.ackedAt, reason: null };
    return { acked: false, at: new Date(live.ackedAt).toISOString(), record };
  }
  live.ackedVerdict = live.verdict.verdict;
  live.ackedAt = now;
  live.ackRecord = { verdict: live.verdict.verdict, by: who.by ?? null, at: now, reason: who.reason ?? null };
  return { acked: true, at: new Date(now).toISOString(), record: live.ackRecord };
}

/**
 * Acknowledge a run that left live memory (settled, a single instance): its verdict `current` as evaluated from the
 * store, its latest acknowledgement `stored`; the caller stores the new record. Null when the run is not stored.
 */
export function ackLeft(current: Verdict | undefined, stored: AckRecord | null, now: number, who: AckWho = {}): { acked: boolean; at: string; record: AckRecord } | null {
  if (!current) return null;
  if (stored?.verdict === current) return { acked: false, at: new Date(stored.at).toISOString(), record: stored };
  const record: AckRecord = { verdict: current, by: who.by ?? null, at: now, reason: who.reason ?? null };
  return { acked: true, at: new Date(now).toISOString(), record };
}

/** The run's latest acknowledgement (null when none); `current` when it covers the run's verdict now. */
export function ackOf(live: LiveRun | undefined): (AckRecord & { current: boolean }) | null {
  if (!live?.ackRecord) return null;
  return { ...live.ackRecord, current: live.ackedVerdict === live.verdict?.verdict && live.ackRecord.verdict === live.verdict?.verdict };
}

/**
 * Cluster mode: an acknowledgement recorded in the shared store (at any instance) applied by the run's owner. It
 * holds only while the run is still in the acknowledged verdict. Returns whether the run's alert state changed.
 */
export function applyAck(live: LiveRun | undefined, verdict: string, at: number, who: AckWho = {}): boolean {
  if (live && (!live.ackRecord || live.ackRecord.at <= at)) live.ackRecord = { verdict: verdict as Verdict, by: who.by ?? null, at, reason: who.reason ?? null };
  if (!live?.verdict || live.verdict.verdict !== verdict) return false;
  if (live.ackedVerdict === live.verdict.verdict && live.ackedAt !== undefined && live.ackedAt >= at) return false;
  live.ackedVerdict = live.verdict.verdict;
  live.ackedAt = at;
  return true;
}

/** When the run's current verdict was acknowledged (ISO), or null. */
export function ackedAtOf(live: LiveRun | undefined): string | null {
  return live && live.ackedVerdict === live.verdict?.verdict && live.ackedAt !== undefined ? new Date(live.ackedAt).toISOString() : null;
}
