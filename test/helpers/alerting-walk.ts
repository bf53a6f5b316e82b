/**
 * The alerting and stalled rows by a walk over every live run (O(live runs)): the model the incremental gauges
 * (RunGauges.alerting, src/audit/gauges.ts) must agree with. A test helper: serve never walks.
 */
import type { AuditEngine } from '../../src/audit/engine.js';
import { ALERT_VERDICTS } from '../../src/audit/live-run.js';
import type { Verdict } from '../../src/core/types.js';

export function alertingByWalk(engine: AuditEngine, now: number, windowMs: number, stallMs: number): { alerting: { contract: string; verdict: Verdict; count: number }[]; stalled: { contract: string; count: number }[] } {
  const a = new Map<string, { contract: string; verdict: Verdict; count: number }>();
  const st = new Map<string, { contract: string; count: number }>();
  for (const live of engine.heldRuns()) {
    const v = live.verdict;
    if (!v) continue;
    const contract = v.pin?.contract ?? '';
    const acked = live.ackedVerdict === v.verdict;
    if (ALERT_VERDICTS.has(v.verdict) && !acked && now - (live.enteredAt ?? live.updatedAt) <= windowMs) {
      const k = `${contract}\u0000${v.verdict}`;
      const e = a.get(k);
      if (e) e.count++;
      else a.set(k, { contract, verdict: v.verdict, count: 1 });
    }
    if (!v.settled && !acked && Number.isFinite(live.state.lastAt) && now - live.state.lastAt > stallMs) {
      const e = st.get(contract);
      if (e) e.count++;
      else st.set(contract, { contract, count: 1 });
    }
  }
  return { alerting: [...a.values()], stalled: [...st.values()] };
}
