/**
 * OpenTelemetry GenAI semantic conventions (gen-ai-agent-spans.md): `invoke_agent {gen_ai.agent.name}` spans,
 * CLIENT for a remote agent and INTERNAL for an in-process one, with `gen_ai.operation.name = invoke_agent`,
 * `gen_ai.agent.id` (client spans; newer conventions drop it from internal spans), `gen_ai.agent.name` and
 * `gen_ai.conversation.id`. The target is the span's agent; the caller is the nearest ancestor agent span.
 * Also the proposed handoff attributes (semantic-conventions-genai PR #98) on the `execute_tool
 * transfer_to_<agent>` span: `gen_ai.agent.handoff.source.name` -> `gen_ai.agent.handoff.target.name`.
 */
import { isId, namedHandoff, str, unnamedAgent, agentSpanOf, type Dialect } from './common.js';

export const genaiInvokeAgent: Dialect = (span) => {
  if (span.attrs['gen_ai.operation.name'] !== 'invoke_agent') return null;
  const id = str(span.attrs['gen_ai.agent.id']);
  const name = str(span.attrs['gen_ai.agent.name']);
  const agent = id ?? name;
  if (agent === undefined) return unnamedAgent('genai', span, 'agent_unidentified');
  if (!isId(agent)) return unnamedAgent('genai', span, 'agent_id_invalid');
  const aliases = id !== undefined && name !== undefined && name !== id && isId(name) ? [name] : undefined;
  return { dialect: 'genai', receipts: [], agentSpan: agentSpanOf(span, agent, aliases ? { aliases } : {}) };
};

export const genaiProposedHandoff: Dialect = (span) => {
  const from = str(span.attrs['gen_ai.agent.handoff.source.name']);
  const to = str(span.attrs['gen_ai.agent.handoff.target.name']);
  if (from === undefined && to === undefined) return null;
  return namedHandoff('genai-handoff', span, from, to);
};
