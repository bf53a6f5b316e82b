/** unknown_agent: an agent the receipts name that the pinned contract does not. */
import { STEP_MASK, sortStr, type Collector, type EvalContext } from './context.js';

export function agentRules(ctx: EvalContext, out: Collector): void {
  const steps = agentRuleSteps(ctx, out);
  while (!steps.next().done);
}

/** agentRules, pausing (a bare `yield`) after every STEP findings: a caller may yield to its event loop there. */
export function* agentRuleSteps(ctx: EvalContext, out: Collector): Generator<void, void, void> {
  const { state, contract, where } = ctx;
  const unknown = state.agentNames.filter((agent) => !contract.agentSet.has(agent));
  if (unknown.length === 0) return;
  const events = state.agentEventsOf(unknown); // one walk over the run for all of them (none for agents named once)
  for (let i = 0; i < unknown.length; i++) {
    if ((i & STEP_MASK) === STEP_MASK) yield;
    const agent = unknown[i];
    out.add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: sortStr(events[i]), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true }, true);
  }
}
