/**
 * VoltAgent (`@voltagent/core`, its own OpenTelemetry observability): every span of an agent's operation carries
 * `entity.type = agent` and the agent's `entity.id` / `entity.name`; the operation's own span (the agent span) is
 * the one without `span.type` (its LLM, tool and memory spans have `span.type` = `llm`, `tool`, …). A sub-agent
 * called through the supervisor's `delegate_task` tool runs its own operation span (`subagent:{name}`) beneath
 * that tool span, with `entity.id` still the supervisor's and its own id in `subagent.id` / `subagent.name`; so the
 * agent is `subagent.id` when present, else `entity.id`, and its caller is the nearest ancestor agent span, as for
 * every dialect. `agent.parent.id` is not read: parentage already names the caller.
 */
import { agentSpanOf, isId, str, unnamedAgent, type Dialect } from './common.js';

export const voltAgentOperation: Dialect = (span) => {
  if (span.attrs['entity.type'] !== 'agent' || span.attrs['span.type'] !== undefined) return null;
  const sub = str(span.attrs['subagent.id']);
  const id = sub ?? str(span.attrs['entity.id']);
  const name = sub !== undefined ? str(span.attrs['subagent.name']) : str(span.attrs['entity.name']);
  const agent = id ?? name;
  if (agent === undefined) return unnamedAgent('voltagent', span, 'agent_unidentified');
  if (!isId(agent)) return unnamedAgent('voltagent', span, 'agent_id_invalid');
  const aliases = id !== undefined && name !== undefined && name !== id && isId(name) ? [name] : undefined;
  return { dialect: 'voltagent', receipts: [], agentSpan: agentSpanOf(span, agent, aliases ? { aliases } : {}) };
};
