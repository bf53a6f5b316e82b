/** forbidden_edge (an edge no allow rule permits) and ambiguous_route (an allow rule observed more than its max). */
import type { EdgeAgg } from '../classify.js';
import { sortedEvents } from '../classify.js';
import { edgeKey } from '../edge.js';
import { mergeSorted, type Collector, type EvalContext, type RouteRule } from './context.js';

/** Multiplicity messages are kept per rule for counts up to this (the usual ones); larger counts are written each time. */
const MESSAGE_MEMO = 1024;

function multiplicityMessage(r: RouteRule, count: number): string {
  const memo = count <= MESSAGE_MEMO;
  let m = memo ? r.messages[count] : undefined;
  if (m === undefined) {
    m = `${r.rule.key} observed ${count} times (max ${r.rule.max}): reconcile ownership and possible duplicate effects`;
    if (memo) r.messages[count] = m;
  }
  return m;
}

export function routeRules(ctx: EvalContext, out: Collector): void {
  const { state, contract, where } = ctx;
  const aggs = state.edgeAggs;
  for (let i = 0; i < aggs.length; i++) {
    const e = aggs[i];
    if (contract.allowByEdge.has(e.key)) continue; // edges are keyed by tripleKey(from, to, kind)
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
  }
  // Per allow rule: how often its edges were observed (events and agents are read only for a finding).
  const routes = ctx.info.routes;
  for (let r = 0; r < routes.length; r++) {
    const route = routes[r];
    const keys = route.keys;
    let count = 0;
    for (let i = 0; i < keys.length; i++) count += state.edge(keys[i])?.count ?? 0;
    if (count <= route.rule.max) continue;
    // Event ids are distinct across a run's edges, so merging each edge's sorted ids gives sortStr's result.
    let events: string[] = [];
    let observed = 0;
    for (let i = 0; i < keys.length; i++) {
      const e: EdgeAgg | undefined = state.edge(keys[i]);
      if (e === undefined) continue;
      events = mergeSorted(events, sortedEvents(e));
      observed |= 1 << i;
    }
    out.add(
      {
        verdict: 'ambiguous_route',
        code: 'multiplicity',
        edge: route.rule.key,
        agents: agentsOf(route, observed) as string[],
        events,
        message: multiplicityMessage(route, count),
        settled: true,
      },
      true,
      true,
    );
  }
}

/** The distinct, sorted agents of a rule's observed edges (shared per rule and set of observed edges). */
function agentsOf(route: RouteRule, observed: number): readonly string[] {
  const keys = route.keys.length;
  let a = keys <= 16 ? route.agents[observed] : undefined;
  if (a === undefined) {
    const names: string[] = [];
    const { from, to } = route.rule.spec;
    for (let i = 0; i < to.length; i++) if (observed & (1 << i)) names.push(from, to[i]);
    a = Object.freeze([...new Set(names)].sort());
    if (keys <= 16) route.agents[observed] = a;
  }
  return a;
}
