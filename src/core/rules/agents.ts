/** unknown_agent: an agent the receipts name that the pinned contract does not. */
import { sortStr, type Collector, type EvalContext } from './context.js';

export function agentRules(ctx: EvalContext, out: Collector): void {
  const { state, contract, where } = ctx;
  const unknown = state.agentNames.filter((agent) => !contract.agentSet.has(agent));
  if (unknown.length === 0) return;
  const events = state.agentEventsOf(unknown); // one walk over the run for all of them
  for (let i = 0; i < unknown.length; i++) {
    const agent = unknown[i];
    out.add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: sortStr(events[i]), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true }, true);
  }
}
