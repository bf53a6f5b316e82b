/** Shared pieces of the dialect mappings: reading ids off a span, and the receipts and records they yield. */
import { AGENT_ID_PATTERN } from '../../core/receipt.js';
import type { EdgeKind, Receipt } from '../../core/types.js';
import type { AttrValue, SpanRecord } from '../../otlp/types.js';
import { UNNAMED_AGENT, type AgentSpan, type HandoffSpan } from '../callers.js';
import { localStatus, runIdOf } from '../extract.js';
import { exactIso } from '../../otlp/wire.js';

/** What a dialect makes of one span. */
export interface DialectResult {
  dialect: string;
  /** An agent span whose caller (or linked sender) is resolved later. */
  agentSpan?: AgentSpan;
  /** A transfer of control whose source or target is resolved later. */
  handoff?: HandoffSpan;
  /** The span must be indexed for walks even before its trace shows an agent span (the target of links). */
  relay?: boolean;
  /** Receipts derivable from this span alone. */
  receipts: Receipt[];
}

export type Dialect = (span: SpanRecord) => DialectResult | null;

export const str = (v: AttrValue | undefined): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);
export const isId = (v: string | undefined): v is string => v !== undefined && AGENT_ID_PATTERN.test(v);
/** RFC 3339 text of a span time, exact to the nanosecond when the decoder gave the sub-ms part. */
const iso = exactIso;

/** The run a span names (`topology.run.id`, else `gen_ai.conversation.id`), or null when it names none. */
export function namedRunOf(attrs: Record<string, AttrValue>): string | null {
  return attrs['topology.run.id'] !== undefined || attrs['gen_ai.conversation.id'] !== undefined ? runIdOf(attrs, '') : null;
}

/** A gap receipt: the dialect saw an interaction but cannot name its agent (never an invented edge). */
export function targetGap(span: SpanRecord, reason: string, ends: { from?: string; to?: string } = {}): Receipt {
  const r: Receipt = { run: runIdOf(span.attrs, span.traceId), event: `${span.spanId}:gap`, type: 'gap', at: iso(span.startMs, span.startNs), reason };
  if (isId(ends.from)) r.from = ends.from;
  if (isId(ends.to)) r.to = ends.to;
  return r;
}

/** An edge receipt of a dialect span at its start. */
export function directEdge(span: SpanRecord, from: string, to: string, kind: EdgeKind, suffix: string): Receipt {
  const r: Receipt = { run: runIdOf(span.attrs, span.traceId), event: `${span.spanId}:${suffix}`, type: 'edge', at: iso(span.startMs, span.startNs), from, to, kind };
  if (localStatus(span.statusCode) === 'error') r.status = 'error';
  return r;
}

/** The agent span record of a span, for the resolver. */
export function agentSpanOf(span: SpanRecord, agent: string, extra: Pick<AgentSpan, 'aliases' | 'edges' | 'links'> = {}): AgentSpan {
  return {
    run: runIdOf(span.attrs, span.traceId),
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId,
    agent,
    startMs: span.startMs,
    endMs: span.endMs,
    ...(span.startNs !== undefined ? { startNs: span.startNs } : {}),
    ...(span.endNs !== undefined ? { endNs: span.endNs } : {}),
    statusCode: span.statusCode,
    kind: span.kind,
    ...extra,
  };
}

/**
 * A span that stands for an agent whose identity is not an id (or is missing): a gap now, and a node that
 * stops walks, so that no descendant's caller is guessed past it.
 */
export function unnamedAgent(dialect: string, span: SpanRecord, reason: string): DialectResult {
  return { dialect, receipts: [targetGap(span, reason)], agentSpan: agentSpanOf(span, UNNAMED_AGENT, { edges: 'none' }) };
}

/** The handoff record of a span; `from`/`to` null when the span does not name them. */
export function handoffOf(span: SpanRecord, from: string | null, to: string | null): HandoffSpan {
  return {
    run: namedRunOf(span.attrs),
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId,
    startMs: span.startMs,
    ...(span.startNs !== undefined ? { startNs: span.startNs } : {}),
    statusCode: span.statusCode,
    from,
    to,
  };
}

/**
 * A handoff span naming (some of) its ends: a handoff for the resolver, or a gap when a named end is not an id.
 * A missing source is the enclosing agent; a missing target is the next agent invocation in the trace.
 */
export function namedHandoff(dialect: string, span: SpanRecord, from: string | undefined, to: string | undefined): DialectResult {
  if ((from !== undefined && !isId(from)) || (to !== undefined && !isId(to))) {
    return { dialect, receipts: [targetGap(span, 'handoff_agent_invalid', { from, to })] };
  }
  return { dialect, receipts: [], handoff: handoffOf(span, from ?? null, to ?? null) };
}
