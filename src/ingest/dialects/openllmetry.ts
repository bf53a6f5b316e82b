/**
 * OpenAI Agents SDK as exported by OpenLLMetry (traceloop/openllmetry,
 * opentelemetry-instrumentation-openai-agents `_hooks.py`): every agent runs in a flat `{agent}.agent` CLIENT
 * span under the `Agent Workflow` root, and a handoff is an INTERNAL `{from} → {to}.handoff` span, parented
 * to the source agent's span, with `gen_ai.handoff.from_agent` and `gen_ai.handoff.to_agent`. The attributes
 * are read when the SDK span starts, and the SDK sets the handoff's `to_agent` only after that, so
 * `gen_ai.handoff.to_agent` is often missing (the span is then named `{from} → unknown.handoff`): the
 * target is the next agent span in the trace.
 */
import { isId, namedHandoff, str, agentSpanOf, type Dialect } from './common.js';
import { UNNAMED_AGENT } from '../callers.js';

export const openllmetryHandoff: Dialect = (span) => {
  const from = str(span.attrs['gen_ai.handoff.from_agent']);
  const to = str(span.attrs['gen_ai.handoff.to_agent']);
  if (from === undefined && to === undefined) return null;
  return namedHandoff('openllmetry', span, from, to);
};

/**
 * OpenLLMetry agent spans: `{agent}.agent` spans carrying `gen_ai.agent.name` (and no GenAI operation), or any span
 * OpenLLMetry marks `traceloop.span.kind = agent` (its `@agent` decorator and instrumentations), named by
 * `gen_ai.agent.name` else `traceloop.entity.name`. Their caller is the nearest ancestor agent span: the OpenAI
 * Agents SDK's flat parentage (every agent a child of the workflow root) gives none, and the handoff spans name
 * the transfers; an agent nested beneath another agent's tool span is called by that agent (delegate + return).
 */
export const openllmetryAgent: Dialect = (span) => {
  const marked = span.attrs['traceloop.span.kind'] === 'agent';
  const name = str(span.attrs['gen_ai.agent.name']) ?? (marked ? str(span.attrs['traceloop.entity.name']) : undefined);
  if (name === undefined || span.attrs['gen_ai.operation.name'] !== undefined || !(marked || span.name === `${name}.agent`)) return null;
  return { dialect: 'openllmetry', receipts: [], agentSpan: agentSpanOf(span, isId(name) ? name : UNNAMED_AGENT, isId(name) ? {} : { edges: 'none' }) };
};
