/** Declared waits: a wait still running (waiting), or its edge absent or late at its deadline (incomplete). */
import type { WaitEdge } from '../classify.js';
import { humanDuration } from '../edge.js';
import { ceilMillis, humanDelta } from '../time.js';
import { Collector, atOrBefore, iso, type EvalContext, type Obs, type RuleResult } from './context.js';

export function waitRules(ctx: EvalContext): RuleResult {
  const { state, end, clock, clockNs, byEnd, observedAt } = ctx;
  const out = new Collector();
  const waitSeen = new Map<WaitEdge, Obs | null>();
  for (const { receipt: w, at, atNs, deadline, deadlineNs, edge } of state.waitFacts) {
    if (!byEnd(at, atNs) || !byEnd(deadline, deadlineNs)) continue; // void after the end
    if (edge === null) continue; // validated at ingest
    const { spec, key } = edge;
    // Waits usually share a few edges (and their WaitEdge objects): look each one up once per evaluation.
    let seen = waitSeen.get(edge);
    if (seen === undefined) waitSeen.set(edge, (seen = observedAt(spec)));
    if (seen && atOrBefore(seen.at, seen.ns, deadline, deadlineNs)) continue;
    const deadlineIso = iso(deadline, deadlineNs);
    if (atOrBefore(deadline, deadlineNs, clock, clockNs) || seen) {
      out.add({
        verdict: 'incomplete',
        code: seen ? 'late_wait' : 'missed_wait',
        edge: key,
        agents: [w.on!],
        events: seen ? [w.event, seen.event] : [w.event],
        message: seen
          ? `${key}, waited on ${w.on}, came ${humanDelta(seen.at, seen.ns, deadline, deadlineNs, humanDuration)} after the wait's deadline ${deadlineIso}: investigate the first absent expected edge`
          : `${key}, waited on ${w.on}, still absent at the wait's deadline ${deadlineIso}: investigate the first absent expected edge`,
        settled: true,
        deadline: deadlineIso,
        since: deadlineIso,
      });
    } else if (!end) {
      out.changeAt(ceilMillis(deadline, deadlineNs));
      out.add({
        verdict: 'waiting',
        code: 'declared_wait',
        edge: key,
        agents: [w.on!],
        events: [w.event],
        message: `declared wait on ${w.on} for ${key} until ${deadlineIso}: notify or observe the named dependency`,
        settled: false,
        deadline: deadlineIso,
        since: iso(at, atNs),
      });
    } else {
      // ended, the deadline at or before the end but not reached by `now`: missed_wait when it passes
      out.changeAt(ceilMillis(deadline, deadlineNs));
    }
  }
  return out;
}
