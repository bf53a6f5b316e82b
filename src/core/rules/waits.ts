/** Declared waits: a wait still running (waiting), or its edge absent or late at its deadline (incomplete). */
import type { RunState, WaitEdge } from '../state.js';
import type { Finding } from '../types.js';
import { humanDuration } from '../edge.js';
import { ceilMillis, humanDelta } from '../time.js';
import { atOrBefore, iso, type Collector, type EvalContext, type Obs } from './context.js';

export function waitRules(ctx: EvalContext, out: Collector): void {
  const { state, end, clock, clockNs } = ctx;
  const n = state.waitCount;
  if (n === 0) return;
  if (state.waitEdgesTracked) {
    // Every wait met (its edge observed by its deadline, the usual case once the awaited edges came): no finding and
    // no change with time, whichever waits the end voids. Checked per distinct edge against its earliest deadline.
    const edges = state.waitEdgeList;
    const min = state.waitEdgeMin;
    let allMet = true;
    for (let i = 0; i < edges.length; i++) {
      const seen = ctx.observedKeys(edges[i].keys);
      if (seen === null || !atOrBefore(seen.at, seen.ns, min[2 * i], min[2 * i + 1])) {
        allMet = false;
        break;
      }
    }
    if (allMet) return;
  }
  const times = state.waitTimes;
  const refs = state.waitRefs;
  // Waits usually share a few edges (and their WaitEdge objects): each one's observation is looked up once per
  // evaluation (the last edge kept at hand, the others in a map).
  let lastEdge: WaitEdge | null = null;
  let lastSeen: Obs | null = null;
  let waitSeen: Map<WaitEdge, Obs | null> | null = null;
  for (let i = 0; i < n; i++) {
    const at = times[4 * i];
    const atNs = times[4 * i + 1];
    const deadline = times[4 * i + 2];
    const deadlineNs = times[4 * i + 3];
    if (!ctx.byEnd(at, atNs) || !ctx.byEnd(deadline, deadlineNs)) continue; // void after the end
    const edge = refs[3 * i + 2] as WaitEdge | null;
    if (edge === null) continue; // validated at ingest
    const key = edge.key;
    let seen: Obs | null;
    if (edge === lastEdge) seen = lastSeen;
    else {
      const known = waitSeen?.get(edge);
      seen = known !== undefined ? known : ctx.observedKeys(edge.keys);
      if (lastEdge !== null) (waitSeen ??= new Map()).set(lastEdge, lastSeen);
      lastEdge = edge;
      lastSeen = seen;
    }
    if (seen && atOrBefore(seen.at, seen.ns, deadline, deadlineNs)) continue;
    const memo = waitMemoOf(state, i);
    if (atOrBefore(deadline, deadlineNs, clock, clockNs) || seen) {
      let f = seen ? memo.late : memo.missed;
      if (f === undefined || (seen && (memo.lateEvent !== seen.event || memo.lateAt !== seen.at || memo.lateNs !== seen.ns))) {
        f = incompleteFinding(refs[3 * i] as string, refs[3 * i + 1] as string, key, deadline, deadlineNs, seen);
        if (seen) {
          memo.late = f;
          memo.lateEvent = seen.event;
          memo.lateAt = seen.at;
          memo.lateNs = seen.ns;
        } else memo.missed = f;
      }
      out.push(f);
    } else if (!end) {
      out.changeAt(ceilMillis(deadline, deadlineNs));
      const f = (memo.waiting ??= waitingFinding(refs[3 * i] as string, refs[3 * i + 1] as string, key, at, atNs, deadline, deadlineNs));
      out.push(f);
    } else {
      // ended, the deadline at or before the end but not reached by `now`: missed_wait when it passes
      out.changeAt(ceilMillis(deadline, deadlineNs));
    }
  }
}

/**
 * The findings a wait has had, kept on the state per wait (RunState.waitMemo, cleared by a rebuild) and shared by
 * every verdict that has them: a wait's `waiting` and `missed_wait` findings depend on the wait alone, its
 * `late_wait` on the wait and the awaited edge's earliest observation (kept beside it, compared by value). A run
 * with many open waits then pays no text formatting or allocation for the waits that did not change.
 */
interface WaitMemo {
  waiting?: Finding;
  missed?: Finding;
  late?: Finding;
  lateEvent?: string;
  lateAt?: number;
  lateNs?: number;
}

function waitMemoOf(state: RunState, i: number): WaitMemo {
  const list = (state.waitMemo ??= []) as (WaitMemo | undefined)[];
  return (list[i] ??= {});
}

/** A finding shared between verdicts: frozen, lists included. */
function shared(f: Finding): Finding {
  Object.freeze(f.agents);
  Object.freeze(f.events);
  return Object.freeze(f);
}

function incompleteFinding(event: string, on: string, key: string, deadline: number, deadlineNs: number, seen: Obs | null): Finding {
  const deadlineIso = iso(deadline, deadlineNs);
  return shared({
    verdict: 'incomplete',
    code: seen ? 'late_wait' : 'missed_wait',
    edge: key,
    agents: [on],
    events: seen ? (event === seen.event ? [event] : event < seen.event ? [event, seen.event] : [seen.event, event]) : [event],
    message: seen
      ? `${key}, waited on ${on}, came ${humanDelta(seen.at, seen.ns, deadline, deadlineNs, humanDuration)} after the wait's deadline ${deadlineIso}: investigate the first absent expected edge`
      : `${key}, waited on ${on}, still absent at the wait's deadline ${deadlineIso}: investigate the first absent expected edge`,
    settled: true,
    deadline: deadlineIso,
    since: deadlineIso,
  });
}

function waitingFinding(event: string, on: string, key: string, at: number, atNs: number, deadline: number, deadlineNs: number): Finding {
  const deadlineIso = iso(deadline, deadlineNs);
  return shared({
    verdict: 'waiting',
    code: 'declared_wait',
    edge: key,
    agents: [on],
    events: [event],
    message: `declared wait on ${on} for ${key} until ${deadlineIso}: notify or observe the named dependency`,
    settled: false,
    deadline: deadlineIso,
    since: iso(at, atNs),
  });
}
