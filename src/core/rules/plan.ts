/** Plan deadlines: late_edge and missed_deadline (incomplete), waiting on a named dependency, pending work. */
import { humanDuration } from '../edge.js';
import { ceilMillis, humanDelta } from '../time.js';
import { atOrBefore, iso, type Collector, type EvalContext } from './context.js';

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
        out.add({
          verdict: 'incomplete',
          code: 'late_edge',
          edge: step.key,
          agents: step.dependency ? [step.dependency] : [],
          events: [o.event],
          message: `${step.key} came ${humanDelta(o.at, o.ns, deadline, dNs, humanDuration)} after its deadline ${iso(deadline, dNs)}: investigate the first absent expected edge`,
          settled: true,
          deadline: iso(deadline, dNs),
          since: iso(deadline, dNs),
        });
      }
      continue;
    }
    if (d === null) continue; // not due yet: pending behind earlier edges
    // A deadline after the run's end is void (the end settles the run; completion decides).
    if (deadline !== null && atOrBefore(deadline, dNs, clock, clockNs) && ctx.byEnd(deadline, dNs)) {
      out.add({
        verdict: 'incomplete',
        code: 'missed_deadline',
        edge: step.key,
        agents: step.dependency ? [step.dependency] : [],
        message: `${step.key} still absent at its deadline ${iso(deadline, dNs)}: investigate the first absent expected edge`,
        settled: true,
        deadline: iso(deadline, dNs),
        since: iso(deadline, dNs),
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
        message: `waiting on ${step.dependency} for ${step.key} until ${iso(deadline, dNs)}: notify or observe the named dependency`,
        settled: false,
        deadline: iso(deadline, dNs),
        since: iso(d, dNs),
      });
    } else {
      if (deadline !== null) out.changeAt(ceilMillis(deadline, dNs));
      out.add({
        verdict: 'working',
        code: 'pending',
        edge: step.key,
        message: `${step.key} is due since ${iso(d, dNs)}${deadline !== null ? `, deadline ${iso(deadline, dNs)}` : ''}: useful work may continue`,
        settled: false,
        ...(deadline !== null ? { deadline: iso(deadline, dNs) } : {}),
        since: iso(d, dNs),
      });
    }
  }
}
