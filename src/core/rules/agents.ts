/** unknown_agent: an agent the receipts name that the pinned contract does not. */
import { Collector, type EvalContext, type RuleResult } from './context.js';

export function agentRules(ctx: EvalContext): RuleResult {
  const { state, contract, where } = ctx;
  const out = new Collector();
  for (const agent of state.agents.keys()) {
    if (contract.agentSet.has(agent)) continue;
    out.add({ verdict: 'unknown_agent', code: 'unknown_agent', agents: [agent], events: state.agentEvents(agent), message: `agent "${agent}" is not in ${where}: verify identity and authority`, settled: true });
  }
  return out;
}
