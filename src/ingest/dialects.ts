/**
 * Agent-framework dialects: how spans from instrumentations that know nothing of topology-audit become
 * edges. Each mapping is a small named function from one span to an agent span (whose caller is resolved
 * through parentage), direct receipts, or nothing.
 */
import { ID_PATTERN } from '../core/receipt.js';
import type { EdgeKind, Receipt } from '../core/types.js';
import type { AttrValue, SpanRecord } from '../otlp/types.js';
import type { AgentSpan } from './callers.js';
import { localStatus, runIdOf } from './extract.js';

export interface DialectResult {
  dialect: string;
  agentSpan?: AgentSpan;
  receipts: Receipt[];
}

export type Dialect = (span: SpanRecord) => DialectResult | null;

const str = (v: AttrValue | undefined) => (typeof v === 'string' && v.length > 0 ? v : undefined);
const iso = (ms: number) => new Date(ms).toISOString();

/** A gap receipt: the dialect saw an interaction but cannot name its agent (never an invented edge). */
export function targetGap(span: SpanRecord, reason: string): Receipt {
  return { run: runIdOf(span.attrs, span.traceId), event: `${span.spanId}:gap`, type: 'gap', at: iso(span.startMs), reason };
}

/** An edge receipt of a dialect span at its start. */
export function directEdge(span: SpanRecord, from: string, to: string, kind: EdgeKind, suffix: string): Receipt {
  const r: Receipt = { run: runIdOf(span.attrs, span.traceId), event: `${span.spanId}:${suffix}`, type: 'edge', at: iso(span.startMs), from, to, kind };
  if (localStatus(span.statusCode) === 'error') r.status = 'error';
  return r;
}

/** OpenTelemetry GenAI `invoke_agent` spans (client or internal): the target is the span's agent; the caller is resolved through parentage. */
export const genaiInvokeAgent: Dialect = (span) => {
  if (span.attrs['gen_ai.operation.name'] !== 'invoke_agent') return null;
  const agent = str(span.attrs['gen_ai.agent.id']) ?? str(span.attrs['gen_ai.agent.name']);
  if (!agent) return { dialect: 'genai', receipts: [targetGap(span, 'agent_unidentified')] };
  if (!ID_PATTERN.test(agent)) return { dialect: 'genai', receipts: [targetGap(span, 'agent_id_invalid')] };
  return {
    dialect: 'genai',
    receipts: [],
    agentSpan: {
      run: runIdOf(span.attrs, span.traceId),
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId,
      agent,
      startMs: span.startMs,
      endMs: span.endMs,
      statusCode: span.statusCode,
    },
  };
};

function handoffPair(fromKey: string, toKey: string, dialect: string): Dialect {
  return (span) => {
    const from = str(span.attrs[fromKey]);
    const to = str(span.attrs[toKey]);
    if (from === undefined && to === undefined) return null;
    if (!from || !to || !ID_PATTERN.test(from) || !ID_PATTERN.test(to)) return { dialect, receipts: [targetGap(span, 'handoff_agent_unidentified')] };
    return { dialect, receipts: [directEdge(span, from, to, 'handoff', 'handoff')] };
  };
}

/** OpenAI Agents SDK handoffs as exported by OpenLLMetry. */
export const openllmetryHandoff = handoffPair('gen_ai.handoff.from_agent', 'gen_ai.handoff.to_agent', 'openllmetry');
/** The proposed GenAI handoff attributes. */
export const genaiProposedHandoff = handoffPair('gen_ai.agent.handoff.source.name', 'gen_ai.agent.handoff.target.name', 'genai-handoff');

/** OpenInference agent spans: `graph.node.parent_id` -> `graph.node.id` is a delegation. */
export const openinferenceGraph: Dialect = (span) => {
  const node = str(span.attrs['graph.node.id']);
  if (node === undefined) return null;
  const parent = str(span.attrs['graph.node.parent_id']);
  if (!parent) return { dialect: 'openinference', receipts: [] }; // the entry node
  if (!ID_PATTERN.test(node) || !ID_PATTERN.test(parent)) return { dialect: 'openinference', receipts: [targetGap(span, 'agent_id_invalid')] };
  return { dialect: 'openinference', receipts: [directEdge(span, parent, node, 'delegate', 'graph')] };
};

/** Tried in order; the first that recognises a span wins. */
export const DIALECTS: Dialect[] = [openllmetryHandoff, genaiProposedHandoff, genaiInvokeAgent, openinferenceGraph];
