/** unknown_agent: an agent the receipts name that the pinned contract does not. */
import { STEP_MASK, sortStr, type Collector, type EvalContext } from './context.js';

export function agentRules(ctx: EvalContext, out: Collector): void {
  const unknown = unknownAgents(ctx);
  if (unknown.length === 0) return;
  const events = ctx.state.agentEventsOf(unknown); // one walk over the run for all of them (none for agents named once)
  addUnknown(ctx, out, unknown, events, 0, unknown.length);
}

/** agentRules, pausing (a bare `yield`) after every STEP_MASK + 1 findings: a caller may yield to its event loop there. */
export function* agentRuleSteps(ctx: EvalContext, out: Collector): Generator<void, void, void> {
  const unknown = unknownAgents(ctx);
  if (unknown.length === 0) return;
  const events = ctx.state.agentEventsOf(unknown);
  for (let lo = 0; lo < unknown.length; lo += STEP_MASK + 1) {
    if (lo > 0) yield;
    addUnknown(ctx, out, unknown, events, lo, Math.min(lo + STEP_MASK + 1, unknown.length));
  }
}

const unknownAgents = (ctx: EvalContext): string[] => ctx.state.agentNames.filter((agent) => !ctx.contract.agentSet.has(agent));

function addUnknown(ctx: EvalContext, out: Collector, unknown: readonly string[], events: readonly string[][], lo: number, hi: number): void {
  const where = ctx.where;
  for (let i = lo; i < hi; i++) {
    const agent = unknown[i];
    out.add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: sortStr(events[i]), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true }, true);
  }
}
