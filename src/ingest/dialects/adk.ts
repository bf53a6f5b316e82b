/**
 * Google ADK (google/adk-python, `telemetry/tracing.py`): agents run in `invoke_agent {agent.name}` spans
 * with `gen_ai.operation.name = invoke_agent`, `gen_ai.agent.name` and `gen_ai.conversation.id` (the
 * session), without `gen_ai.agent.id` (read by the GenAI mapping). A transfer is the LLM calling the
 * built-in tool: an `execute_tool transfer_to_agent` span with `gen_ai.operation.name = execute_tool` and
 * `gen_ai.tool.name = transfer_to_agent`; its target travels only in the tool arguments
 * (`gcp.vertex.agent.tool_call_args`), which are content: never read, and empty when content capture is
 * off. The target is the next `invoke_agent` in the trace; the source is the agent enclosing the tool call.
 */
import { handoffOf, type Dialect } from './common.js';

export const adkTransfer: Dialect = (span) => {
  if (span.attrs['gen_ai.operation.name'] !== 'execute_tool' || span.attrs['gen_ai.tool.name'] !== 'transfer_to_agent') return null;
  return { dialect: 'adk', receipts: [], handoff: handoffOf(span, null, null) };
};
