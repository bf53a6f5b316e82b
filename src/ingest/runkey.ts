/**
 * Run identity: a run is one unit of work (one turn, one framework invocation), not a conversation. The run id
 * of a span is taken by the `--run-key` order: `explicit` (`topology.run.id`), `invocation` (the framework's
 * per-invocation id on the span: Google ADK's `gcp.vertex.agent.invocation_id`), `conversation`
 * (`gen_ai.conversation.id`, only when named: a conversation spans many runs), and `trace` (the trace id),
 * which always matches and is therefore the last resort wherever it is written.
 */
import type { AttrValue, SpanRecord } from '../otlp/types.js';

export type RunKeyPart = 'explicit' | 'invocation' | 'trace' | 'conversation';
export const RUN_KEY_PARTS: readonly RunKeyPart[] = ['explicit', 'invocation', 'trace', 'conversation'];
export const DEFAULT_RUN_KEY: readonly RunKeyPart[] = ['explicit', 'invocation', 'trace'];

/** Per-invocation id attributes, by framework. */
export const INVOCATION_ID_KEYS: readonly string[] = ['gcp.vertex.agent.invocation_id'];

/** Parses `explicit,invocation,trace[,conversation]`; throws with a readable message. */
export function parseRunKey(text: string): RunKeyPart[] {
  const parts = text.split(',').map((p) => p.trim());
  const out: RunKeyPart[] = [];
  for (const p of parts) {
    if (!(RUN_KEY_PARTS as readonly string[]).includes(p)) throw new Error(`--run-key: ${JSON.stringify(p)} is not one of ${RUN_KEY_PARTS.join(', ')}`);
    if (out.includes(p as RunKeyPart)) throw new Error(`--run-key: ${p} is named twice`);
    out.push(p as RunKeyPart);
  }
  return out;
}

const idOf = (v: AttrValue | undefined): string | undefined =>
  v === undefined ? undefined : typeof v === 'string' ? (v.length > 0 ? v : undefined) : String(v);

/** The run id of a span's attributes under `order` (`trace` tried last whatever its place). */
export function runOf(attrs: Record<string, AttrValue>, traceId: string, order: readonly RunKeyPart[] = DEFAULT_RUN_KEY): string {
  for (const part of order) {
    if (part === 'explicit') {
      const v = idOf(attrs['topology.run.id']);
      if (v !== undefined) return v;
    } else if (part === 'invocation') {
      for (const k of INVOCATION_ID_KEYS) {
        const v = idOf(attrs[k]);
        if (v !== undefined) return v;
      }
    } else if (part === 'conversation') {
      const v = idOf(attrs['gen_ai.conversation.id']);
      if (v !== undefined) return v;
    }
  }
  return traceId;
}

/**
 * The span with its run decided, so that every dialect and the explicit-receipt reader see the run the order
 * gives: `topology.run.id` set when a key other than the trace gave it; when the trace id is the run, the
 * span names no run (a handoff then takes its source agent's) and `gen_ai.conversation.id` is hidden from the
 * readers. A copy when anything changes.
 */
export function withRun(span: SpanRecord, order: readonly RunKeyPart[]): SpanRecord {
  const run = runOf(span.attrs, span.traceId, order);
  if (run === span.traceId && idOf(span.attrs['topology.run.id']) !== run) {
    if (span.attrs['gen_ai.conversation.id'] === undefined && span.attrs['topology.run.id'] === undefined) return span;
    const attrs = { ...span.attrs };
    delete attrs['gen_ai.conversation.id'];
    delete attrs['topology.run.id'];
    return { ...span, attrs };
  }
  if (span.attrs['topology.run.id'] === run) return span;
  return { ...span, attrs: { ...span.attrs, 'topology.run.id': run } };
}
