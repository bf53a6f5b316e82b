/** forbidden_edge (an edge no allow rule permits) and ambiguous_route (an allow rule observed more than its max). */
import type { EdgeAgg, RunState } from '../state.js';
import { sortedEvents } from '../state.js';
import { edgeKey } from '../edge.js';
import { STEP_MASK, mergeSorted, type Collector, type EvalContext, type RouteRule } from './context.js';

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
  forbiddenEdges(ctx, out, 0, ctx.state.edgeAggs.length);
  multiplicity(ctx, out);
}

/** routeRules, pausing (a bare `yield`) after every STEP_MASK + 1 edges: a caller may yield to its event loop there. */
export function* routeRuleSteps(ctx: EvalContext, out: Collector): Generator<void, void, void> {
  const n = ctx.state.edgeAggs.length;
  for (let lo = 0; lo < n; lo += STEP_MASK + 1) {
    if (lo > 0) yield;
    forbiddenEdges(ctx, out, lo, Math.min(lo + STEP_MASK + 1, n));
  }
  multiplicity(ctx, out);
}

/** forbidden_edge for the edge aggregates lo..hi-1. */
function forbiddenEdges(ctx: EvalContext, out: Collector, lo: number, hi: number): void {
  const { state, contract, where } = ctx;
  const aggs = state.edgeAggs;
  for (let i = lo; i < hi; i++) {
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
}

/** ambiguous_route: an allow rule observed more often than its max. */
function multiplicity(ctx: EvalContext, out: Collector): void {
  const state = ctx.state;
  // Per allow rule: how often its edges were observed (events and agents are read only for a finding).
  const routes = ctx.info.routes;
  for (let r = 0; r < routes.length; r++) {
    const route = routes[r];
    const keys = route.keys;
    let count = 0;
    for (let i = 0; i < keys.length; i++) count += state.edge(keys[i])?.count ?? 0;
    if (count <= route.rule.max) continue;
    let observed = 0;
    for (let i = 0; i < keys.length; i++) if (state.edge(keys[i]) !== undefined) observed |= 1 << i;
    const events = routeEvents(state, route);
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

/** A rule's merged events are kept on the state once they are this many (see routeEvents). */
const MEMO_EVENTS = 64;

/** A rule's merged events at an evaluation, with the edge aggregates and sorted lists they were merged from. */
interface RouteMemo {
  route: RouteRule;
  edges: (EdgeAgg | undefined)[];
  sorted: (readonly string[] | undefined)[];
  events: string[];
}

/**
 * The sorted event ids of a rule's observed edges. Event ids are distinct across a run's edges, so merging each
 * edge's sorted ids gives sortStr's result. A rule of one edge has its edge's list (kept sorted incrementally by
 * sortedEvents). For a rule of several edges with MEMO_EVENTS events or more the merged list is kept on the state (a
 * short list of such rules, scanned): when the
 * rule's edges are the ones merged last time and only gained events since (a long run's usual evaluation), the new
 * ids are merged into the last list (binary searches: O(new log n)) instead of merging every edge's list again.
 * Lists are never changed once made.
 */
function routeEvents(state: RunState, route: RouteRule): string[] {
  const keys = route.keys;
  if (keys.length === 1) {
    const e = state.edge(keys[0]);
    return e === undefined ? [] : sortedEvents(e);
  }
  const memos = state.routeMemo as RouteMemo[] | null;
  let memo: RouteMemo | undefined;
  if (memos !== null) {
    for (let i = 0; i < memos.length; i++) {
      if (memos[i].route === route) {
        memo = memos[i];
        break;
      }
    }
  }
  if (memo !== undefined) {
    let valid = true;
    let added: string[] | null = null;
    for (let i = 0; i < keys.length; i++) {
      const e = state.edge(keys[i]);
      if (e !== memo.edges[i] || (e !== undefined && e.sorted !== memo.sorted[i])) {
        valid = false;
        break;
      }
      if (e !== undefined && e.unsorted.length > 0) added = added === null ? e.unsorted.slice() : added.concat(e.unsorted);
    }
    if (valid) {
      if (added === null) return memo.events;
      memo.events = mergeSorted(memo.events, added.sort());
      for (let i = 0; i < keys.length; i++) {
        const e = memo.edges[i];
        if (e !== undefined) memo.sorted[i] = sortedEvents(e);
      }
      return memo.events;
    }
  }
  let events: string[] = [];
  const edges: (EdgeAgg | undefined)[] = new Array(keys.length);
  const sorted: (readonly string[] | undefined)[] = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const e = state.edge(keys[i]);
    edges[i] = e;
    if (e === undefined) continue;
    const s = sortedEvents(e);
    sorted[i] = s;
    events = mergeSorted(events, s);
  }
  if (memo !== undefined) {
    memo.edges = edges;
    memo.sorted = sorted;
    memo.events = events;
  } else if (events.length < MEMO_EVENTS) {
    // a short list is merged again cheaply: no memo (its memory would outweigh it for the many short runs)
  } else if (memos !== null) memos.push({ route, edges, sorted, events });
  else state.routeMemo = [{ route, edges, sorted, events }];
  return events;
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
