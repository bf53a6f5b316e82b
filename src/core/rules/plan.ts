/** Plan deadlines: late_edge and missed_deadline (incomplete), waiting on a named dependency, pending work. */
import { humanDuration } from '../edge.js';
import { ceilMillis, humanDelta } from '../time.js';
import { atOrBefore, iso, type Collector, type EvalContext } from './context.js';

/** The guidance a pending-edge finding ends with; classify drops it when the run's verdict is not working. */
export const PENDING_GUIDANCE = ': useful work may continue';

export function planRules(ctx: EvalContext, out: Collector): void {
  const { plan, obs, due, dueNs, end, clock, clockNs } = ctx;
  for (let i = 0; i < plan.length; i++) {
    const step = plan[i];
    const d = due[i];
    const dNs = dueNs[i];
    const o = obs[i];
    // Durations are whole milliseconds: the deadline keeps the due instant's nanoseconds.
    const deadline = d !== null && step.withinMs !== undefined ? d + step.withinMs : null;
    if (o) {
      if (deadline !== null && !atOrBefore(o.at, o.ns, deadline, dNs)) {
        const deadlineIso = iso(deadline, dNs);
        out.add({
          verdict: 'incomplete',
          code: 'late_edge',
          edge: step.key,
          agents: step.dependency ? [step.dependency] : [],
          events: [o.event],
          message: `${step.key} came ${humanDelta(o.at, o.ns, deadline, dNs, humanDuration)} after its deadline ${deadlineIso}: investigate the first absent expected edge`,
          settled: true,
          deadline: deadlineIso,
          since: deadlineIso,
        });
      }
      continue;
    }
    if (d === null) continue; // not due yet: pending behind earlier edges
    // A deadline after the run's end is void (the end settles the run; completion decides).
    // (each instant's text is made once: the same string in the message and the fields)
    const deadlineIso = deadline !== null ? iso(deadline, dNs) : '';
    if (deadline !== null && atOrBefore(deadline, dNs, clock, clockNs) && ctx.byEnd(deadline, dNs)) {
      out.add({
        verdict: 'incomplete',
        code: 'missed_deadline',
        edge: step.key,
        agents: step.dependency ? [step.dependency] : [],
        message: `${step.key} still absent at its deadline ${deadlineIso}: investigate the first absent expected edge`,
        settled: true,
        deadline: deadlineIso,
        since: deadlineIso,
      });
    } else if (end) {
      // an ended run waits for nothing; completion decides
    } else if (deadline !== null && step.dependency) {
      out.changeAt(ceilMillis(deadline, dNs));
      out.add({
        verdict: 'waiting',
        code: 'waiting',
        edge: step.key,
        agents: [step.dependency],
        message: `waiting on ${step.dependency} for ${step.key} until ${deadlineIso}: notify or observe the named dependency`,
        settled: false,
        deadline: deadlineIso,
        since: iso(d, dNs),
      });
    } else {
      if (deadline !== null) out.changeAt(ceilMillis(deadline, dNs));
      const since = iso(d, dNs);
      out.add({
        verdict: 'working',
        code: 'pending',
        edge: step.key,
        message: `${step.key} is due since ${since}${deadline !== null ? `, deadline ${deadlineIso}` : ''}${PENDING_GUIDANCE}`,
        settled: false,
        ...(deadline !== null ? { deadline: deadlineIso } : {}),
        since,
      });
    }
  }
}
