/**
 * OpenAI Agents SDK as exported by OpenInference (openinference-instrumentation-openai-agents, Python and
 * JS): each agent span (named after the agent, `openinference.span.kind = AGENT`) carries `graph.node.id`
 * = the agent; after a handoff the target's span also carries `graph.node.parent_id` = the source agent
 * (the handoff span itself, `handoff to {agent}` of kind TOOL, names no agent in its attributes).
 */
import { isId, directEdge, agentSpanOf, str, type Dialect } from './common.js';
import { UNNAMED_AGENT } from '../callers.js';
import { targetGap } from './common.js';

/**
 * An OpenInference AGENT span that names its agent with `agent.name` (OpenInference's attribute) and has no
 * `graph.node.id`: an agent invocation whose caller is the nearest ancestor agent span (delegate + return).
 */
export const openinferenceAgent: Dialect = (span) => {
  if (span.attrs['openinference.span.kind'] !== 'AGENT' || span.attrs['graph.node.id'] !== undefined) return null;
  const name = str(span.attrs['agent.name']);
  if (name === undefined) return null;
  if (!isId(name)) return { dialect: 'openinference', receipts: [targetGap(span, 'agent_id_invalid')], agentSpan: agentSpanOf(span, UNNAMED_AGENT, { edges: 'none' }) };
  return { dialect: 'openinference', receipts: [], agentSpan: agentSpanOf(span, name) };
};

export const openinferenceGraph: Dialect = (span) => {
  const node = str(span.attrs['graph.node.id']);
  if (node === undefined) return null;
  const parent = str(span.attrs['graph.node.parent_id']);
  if (!isId(node) || (parent !== undefined && !isId(parent))) {
    return { dialect: 'openinference', receipts: [targetGap(span, 'agent_id_invalid')], agentSpan: agentSpanOf(span, UNNAMED_AGENT, { edges: 'none' }) };
  }
  // A handoff target: the edge is on the span. Otherwise the agent may be nested (an agent used as a tool):
  // its caller is the nearest ancestor agent span, as for GenAI invoke_agent.
  if (parent !== undefined) return { dialect: 'openinference', receipts: [directEdge(span, parent, node, 'handoff', 'graph')], agentSpan: agentSpanOf(span, node, { edges: 'none' }) };
  return { dialect: 'openinference', receipts: [], agentSpan: agentSpanOf(span, node) };
};
