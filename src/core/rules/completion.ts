/**
 * Completion: the run-level stall limits (semantics 2 rule 9: max_duration, progress_within), how the run ended
 * (false_complete, run_failed / run_cancelled ...), and a finished plan still awaiting its verified outcome.
 */
import { formatDuration } from '../edge.js';
import { ceilMillis } from '../time.js';
import type { Finding } from '../types.js';
import { atOrBefore, iso, type Collector, type EvalContext, type Obs } from './context.js';

/** max_duration_exceeded and no_progress, settled like missed deadlines. */
export function stallRules(ctx: EvalContext, out: Collector): void {
  const { state, phase, plan, obs, due, dueNs, end, clock, clockNs, startAt, startNs } = ctx;
  if ((phase.progressWithinMs === undefined && phase.maxDurationMs === undefined) || !Number.isFinite(startAt)) return;
  const byEnd = (ms: number, ns: number): boolean => ctx.byEnd(ms, ns);
  const observedAt = ctx.observedAt.bind(ctx);
  const vo = state.verifiedOutcome;
  /** Is the plan finished at (t, tNs): every expected edge and, where required, a verified outcome observed by then? */
  const finishedAt = (t: number, tNs: number): boolean => {
    for (const o of obs) if (o === null || !atOrBefore(o.at, o.ns, t, tNs)) return false;
    return phase.outcome === 'optional' || (vo !== null && byEnd(vo.at, vo.ns) && atOrBefore(vo.at, vo.ns, t, tNs));
  };
  /**
   * Does a receipt timed after (t, tNs) show the run got past it unfinished (2a: "a plan finished, or progress made,
   * only by a receipt timed after the cap or the stall is late like an expected edge: the finding holds at any
   * now")? Progress (the run's `run.start` or an expected edge's first observation) after it, or the verified outcome that finished the plan
   * after it. Other receipts timed after it do not move the clock (as for a missed deadline).
   */
  const shownPast = (t: number, tNs: number): boolean => {
    // The run's start is progress too (rule 9): a `run.start` timed after the stall shows the run got past it.
    if (ctx.first !== null && !atOrBefore(startAt, startNs, t, tNs)) return true;
    for (const o of obs) if (o !== null && !atOrBefore(o.at, o.ns, t, tNs)) return true;
    return vo !== null && ctx.absent.length === 0 && phase.outcome !== 'optional' && byEnd(vo.at, vo.ns) && !atOrBefore(vo.at, vo.ns, t, tNs);
  };
  const M = phase.maxDurationMs;
  if (M !== undefined) {
    const s = startAt + M;
    if (byEnd(s, startNs) && !finishedAt(s, startNs)) {
      if (atOrBefore(s, startNs, clock, clockNs) || shownPast(s, startNs)) {
        out.add({
          verdict: 'incomplete',
          code: 'max_duration_exceeded',
          message: `run still unfinished ${formatDuration(M)} after its start ${iso(startAt, startNs)}, at ${iso(s, startNs)}: investigate the first absent expected edge`,
          settled: true,
          deadline: iso(s, startNs),
          since: iso(s, startNs),
        });
      } else if (!end) out.changeAt(ceilMillis(s, startNs));
    }
  }
  const W = phase.progressWithinMs;
  if (W !== undefined) {
    // Progress: the run's start and the first observation of each expected edge.
    const progress: Obs[] = [{ event: '', at: startAt, ns: startNs }];
    for (const o of obs) if (o !== null) progress.push(o);
    // Waits declared by the end; one whose deadline falls after the end is void from the end on, but still
    // explained the silence before it (2a).
    const waits = state.waitFacts.filter((w) => w.edge !== null && byEnd(w.at, w.atNs));
    const waitSeenAt = waits.map((w) => observedAt(w.edge!.spec));
    // The condition can only begin at a window's end or where an explanation ends (a deadline, a waited edge observed).
    const candidates: Obs[] = progress.map((p) => ({ event: '', at: p.at + W, ns: p.ns }));
    plan.forEach((step, i) => {
      if (due[i] !== null && step.withinMs !== undefined) candidates.push({ event: '', at: due[i]! + step.withinMs, ns: dueNs[i] });
    });
    waits.forEach((w, i) => {
      candidates.push({ event: '', at: w.deadline, ns: w.deadlineNs });
      const seen = waitSeenAt[i];
      if (seen !== null) candidates.push(seen);
    });
    candidates.sort((a, b) => a.at - b.at || a.ns - b.ns);
    /** The last progress at or before (t, tNs), or null. */
    const lastProgress = (t: number, tNs: number): Obs | null => {
      let best: Obs | null = null;
      for (const p of progress) if (atOrBefore(p.at, p.ns, t, tNs) && (best === null || best.at < p.at || (best.at === p.at && best.ns < p.ns))) best = p;
      return best;
    };
    /** A running deadline or declared wait at (t, tNs): due, still absent, deadline ahead. */
    const explained = (t: number, tNs: number): boolean => {
      for (let i = 0; i < plan.length; i++) {
        const d = due[i];
        const within = plan[i].withinMs;
        if (d === null || within === undefined || !atOrBefore(d, dueNs[i], t, tNs)) continue;
        const o = obs[i];
        if (o !== null && atOrBefore(o.at, o.ns, t, tNs)) continue;
        if (!atOrBefore(d + within, dueNs[i], t, tNs)) return true;
      }
      for (let i = 0; i < waits.length; i++) {
        const w = waits[i];
        if (!atOrBefore(w.at, w.atNs, t, tNs) || atOrBefore(w.deadline, w.deadlineNs, t, tNs)) continue;
        const seen = waitSeenAt[i];
        if (seen === null || !atOrBefore(seen.at, seen.ns, t, tNs)) return true;
      }
      return false;
    };
    for (const c of candidates) {
      if (!byEnd(c.at, c.ns)) break; // an ended run stalls no more after its end
      const p = lastProgress(c.at, c.ns);
      if (p === null || !atOrBefore(p.at + W, p.ns, c.at, c.ns) || finishedAt(c.at, c.ns) || explained(c.at, c.ns)) continue;
      if (atOrBefore(c.at, c.ns, clock, clockNs) || shownPast(c.at, c.ns)) {
        // Live runs keep this finding (every stalled run has one): each instant formatted once, the same string
        // where the deadline is the stall (the usual case).
        const since = iso(c.at, c.ns);
        const deadline = p.at + W === c.at && p.ns === c.ns ? since : iso(p.at + W, p.ns);
        out.add({
          verdict: 'incomplete',
          code: 'no_progress',
          message: `no progress on the plan within ${formatDuration(W)} of ${iso(p.at, p.ns)} (stalled at ${since}), and no running deadline or declared wait explains it: investigate the first absent expected edge`,
          settled: true,
          deadline,
          since,
        });
      } else if (!end) out.changeAt(ceilMillis(c.at, c.ns));
      break;
    }
  }
}

/** The same in every run: one frozen object (its fields in the order the findings' JSON always had). */
const AWAITING_OUTCOME: Finding = Object.freeze({
  verdict: 'working',
  code: 'awaiting_outcome',
  message: 'every expected edge is observed; a verified outcome receipt is still required for healthy',
  settled: false,
  agents: Object.freeze([]) as unknown as string[],
  events: Object.freeze([]) as unknown as string[],
});

/** How the run ended (false_complete, run_<result>), or a finished plan awaiting its verified outcome. */
export function endRules(ctx: EvalContext, out: Collector): void {
  const { end, endAt, endNs, absent, outcomeOk } = ctx;
  if (end) {
    if (end.result === 'completed') {
      if (absent.length > 0 || !outcomeOk) {
        const missing = absent.map((s) => s.key);
        out.add({
          verdict: 'false_complete',
          code: 'false_complete',
          edge: missing[0],
          agents: end.from ? [end.from] : [],
          events: [end.event],
          message: `run ended completed at ${iso(endAt, endNs)} but ${[
            ...missing.map((m) => `${m} is absent`),
            ...(outcomeOk ? [] : ['no verified outcome exists']),
          ].join(', ')}: reopen the run; completion lacks required evidence`,
          settled: true,
          since: iso(endAt, endNs),
        });
      }
    } else {
      out.add({
        verdict: 'incomplete',
        code: `run_${end.result}`,
        agents: end.from ? [end.from] : [],
        events: [end.event],
        message: `run ended ${end.result} at ${iso(endAt, endNs)}: an ended-but-not-completed run is never healthy; investigate the first absent expected edge`,
        settled: true,
        since: iso(endAt, endNs),
      });
    }
  } else if (absent.length === 0 && !outcomeOk) {
    out.push(AWAITING_OUTCOME);
  }
}
