/** unknown_agent: an agent the receipts name that the pinned contract does not. */
import { sortStr, type Collector, type EvalContext } from './context.js';

export function agentRules(ctx: EvalContext, out: Collector): void {
  const { state, contract, where } = ctx;
  const agents = state.agentNames;
  for (let i = 0; i < agents.length; i++) {
    const agent = agents[i];
    if (contract.agentSet.has(agent)) continue;
    out.add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: sortStr(state.agentEvents(agent)), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true }, true);
  }
}
