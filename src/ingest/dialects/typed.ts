/**
 * Agent recognition by rule, for frameworks no dialect names (docs/dialects.md "Agent recognition by rule"). Read only
 * when no named dialect recognised the span (they come first in DIALECTS):
 * - an agent-typed span: an attribute of any namespace whose last segment is `type`, `kind` or `subtype` says `agent`
 *   (the decoder keeps it as `agent.typed.key`, src/otlp/typed.ts). The agent is the namespace's id/key attribute when
 *   it has one, else its name attribute, else the span name; `explain` names the attribute (or the span name) used.
 *   Its caller is the nearest ancestor agent span, through any tool span between them (delegate + return). Beneath a
 *   span of the same agent it is that agent's own step, no edge: some frameworks type every span of an agent's run
 *   (e.g. `subagent.type = agent` on a sub-agent's model and tool spans too);
 * - a span of a LangChain agent loop traced by a callback handler that flattens the run metadata
 *   (`<ns>.observation.metadata.lc_agent_name`): every span of the loop names its agent, so each is an agent span that,
 *   beneath a span of the same agent, is that agent's own step (no edge); an agent called from another agent's loop
 *   (a sub-agent used as a tool) is a delegate + return.
 */
import { LC_AGENT_NAME, TYPED_AGENT_ID, TYPED_AGENT_ID_KEY, TYPED_AGENT_KEY, TYPED_AGENT_NAME, TYPED_AGENT_NAME_KEY } from '../../otlp/typed.js';
import type { SpanRecord } from '../../otlp/types.js';
import { agentSpanOf, isId, str, unnamedAgent, type Dialect } from './common.js';

export const TYPED_DIALECT = 'typed';

/** Where an agent-typed span's identity came from: `id` (the namespace's id/key attribute), `name`, or the span name. */
export function typedIdentityOf(span: SpanRecord): { agent: string | undefined; from: string } | null {
  const typeKey = str(span.attrs[TYPED_AGENT_KEY]);
  if (typeKey === undefined) return null;
  const id = str(span.attrs[TYPED_AGENT_ID]);
  if (id !== undefined) return { agent: id, from: `${String(span.attrs[TYPED_AGENT_ID_KEY])} (the namespace's id attribute)` };
  const name = str(span.attrs[TYPED_AGENT_NAME]);
  if (name !== undefined) return { agent: name, from: `${String(span.attrs[TYPED_AGENT_NAME_KEY])} (the namespace's name attribute)` };
  return { agent: span.name.length > 0 ? span.name : undefined, from: 'the span name (no id or name attribute in the namespace)' };
}

export const typedAgent: Dialect = (span) => {
  const identity = typedIdentityOf(span);
  if (identity === null) return null;
  const { agent } = identity;
  if (agent === undefined) return unnamedAgent(TYPED_DIALECT, span, 'agent_unidentified');
  if (!isId(agent)) return unnamedAgent(TYPED_DIALECT, span, 'agent_id_invalid');
  const name = str(span.attrs[TYPED_AGENT_NAME]);
  const aliases = name !== undefined && name !== agent && isId(name) ? [name] : undefined;
  return { dialect: TYPED_DIALECT, receipts: [], agentSpan: agentSpanOf(span, agent, aliases ? { aliases, edges: 'step' } : { edges: 'step' }) };
};

/** A span of a LangChain agent's loop named by a flattened `lc_agent_name` (the OpenInference form is the LangGraph reader's). */
export const lcAgentLoop: Dialect = (span) => {
  const agent = str(span.attrs[LC_AGENT_NAME]);
  if (agent === undefined || !isId(agent)) return null;
  return { dialect: TYPED_DIALECT, receipts: [], agentSpan: agentSpanOf(span, agent, { edges: 'step' }) };
};
