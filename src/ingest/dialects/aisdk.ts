/**
 * The Vercel AI SDK's own spans (`experimental_telemetry`, AI SDK 6 built in; AI SDK 7 `@ai-sdk/otel` in its legacy
 * mode): each call is an `ai.generateText` / `ai.streamText` / `ai.generateObject` / `ai.streamObject` span with
 * `ai.operationId` and, when the application names it, `ai.telemetry.functionId`; model calls are `….doGenerate` /
 * `….doStream` spans beneath it, tools `ai.toolCall` spans. An agent (a `ToolLoopAgent`, or `generateText` in a
 * loop) is the outer call span, named by its `functionId`; an agent used as a tool runs its own call span beneath
 * the caller's `ai.toolCall` span, so its caller is the nearest ancestor agent span, as for every dialect.
 * A call span without a `functionId` names no agent: not read (a trace of such calls is listed as unmapped).
 */
import { agentSpanOf, isId, str, unnamedAgent, type Dialect } from './common.js';

/** The outer call operations of the AI SDK (not the provider calls `.doGenerate`/`.doStream` beneath them). */
const CALL_OPERATIONS = new Set(['ai.generateText', 'ai.streamText', 'ai.generateObject', 'ai.streamObject']);

export const aiSdkCall: Dialect = (span) => {
  const op = span.attrs['ai.operationId'];
  if (typeof op !== 'string' || !CALL_OPERATIONS.has(op)) return null;
  const fn = str(span.attrs['ai.telemetry.functionId']);
  if (fn === undefined) return null;
  if (!isId(fn)) return unnamedAgent('ai-sdk', span, 'agent_id_invalid');
  return { dialect: 'ai-sdk', receipts: [], agentSpan: agentSpanOf(span, fn) };
};
