/** forbidden_edge (an edge no allow rule permits) and ambiguous_route (an allow rule observed more than its max). */
import type { EdgeAgg } from '../classify.js';
import { sortedEvents } from '../classify.js';
import { edgeKey } from '../edge.js';
import { Collector, mergeSorted, type EvalContext, type RuleResult } from './context.js';

export function routeRules(ctx: EvalContext): RuleResult {
  const { state, contract, where } = ctx;
  const out = new Collector();
  // Per allow rule: how often its edges were observed, by which aggregates (events are read only for a finding).
  const ruleCounts = new Map<number, { count: number; aggs: EdgeAgg[]; edges: Set<string> }>();
  for (const [triple, e] of state.edges) {
    const rule = contract.allowByEdge.get(triple); // edges are keyed by tripleKey(from, to, kind)
    if (!rule) {
      const k = edgeKey(e.from, e.to, e.kind);
      out.add(
        {
          verdict: 'forbidden_edge',
          code: 'forbidden_edge',
          edge: k,
          agents: [e.from, e.to],
          events: sortedEvents(e),
          message: `${k} is not allowed by ${where}: contain the route before retrying work`,
          settled: true,
        },
        true,
      );
      continue;
    }
    const c = ruleCounts.get(rule.index) ?? { count: 0, aggs: [], edges: new Set<string>() };
    c.count += e.count;
    c.aggs.push(e);
    c.edges.add(e.from).add(e.to);
    ruleCounts.set(rule.index, c);
  }
  for (const rule of contract.allow) {
    const c = ruleCounts.get(rule.index);
    if (!c || c.count <= rule.max) continue;
    // Event ids are distinct across a run's edges, so merging each edge's sorted ids gives sortStr's result.
    let events: string[] = [];
    for (const e of c.aggs) events = mergeSorted(events, sortedEvents(e));
    out.add(
      {
        verdict: 'ambiguous_route',
        code: 'multiplicity',
        edge: rule.key,
        agents: [...c.edges],
        events,
        message: `${rule.key} observed ${c.count} times (max ${rule.max}): reconcile ownership and possible duplicate effects`,
        settled: true,
      },
      true,
    );
  }
  return out;
}
