/**
 * No silent drops: a trace that carries agent-framework markers (a GenAI operation name, an OpenInference span
 * kind, a LangGraph node, a framework's instrumentation scope) but yields no receipt is reported once it has
 * gone quiet, with the dialect family and the reason, in a bounded ring buffer (`GET /api/v1/ingest/unmapped`)
 * and a counter per dialect and reason. Only trace ids, closed-set words and counts are kept: content-free.
 */
import { LANGGRAPH_NODE_ATTRIBUTE } from '../otlp/metadata.js';
import type { SpanRecord } from '../otlp/types.js';
import { LC_AGENT_NAME, LC_AGENT_NAME_KEY, TYPED_AGENT_KEY } from '../otlp/typed.js';
import { QuietOrder } from './quiet-order.js';

/** Closed set of dialect families (metric label values). */
export const UNMAPPED_DIALECTS = ['genai', 'openinference', 'langgraph', 'adk', 'openai-agents', 'maf', 'openllmetry', 'mastra', 'langsmith', 'ai-sdk', 'voltagent', 'typed', 'other'] as const;
export type UnmappedDialect = (typeof UNMAPPED_DIALECTS)[number];

/** Closed set of reasons (metric label values). */
export const UNMAPPED_REASONS = [
  /** Markers, but no dialect recognised any span (e.g. OpenInference AGENT spans without graph.node.*). */
  'no_dialect',
  /** A dialect read the spans, but they stood for one agent only (the entry agent: no edge to record). */
  'single_agent',
  /** A dialect read the spans and no edge or gap came out (e.g. tool spans only). */
  'no_edges',
] as const;
export type UnmappedReason = (typeof UNMAPPED_REASONS)[number];

export interface UnmappedTrace {
  traceId: string;
  dialect: UnmappedDialect;
  reason: UnmappedReason;
  spans: number;
  /** Spans carrying framework markers. */
  marked: number;
  /** Spans a dialect claimed. */
  claimed: number;
  /** Agent spans among them. */
  agents: number;
  /**
   * The agent-like signals seen, by key (never a value): dropped attribute keys that look agent-like (as the coverage
   * report lists them) and the keys that typed a span an agent; at most MAX_REPORT_KEYS, sorted.
   */
  keys: string[];
  at: string;
}

/** Keys kept per reported trace. */
export const MAX_REPORT_KEYS = 16;

/** The marker family of a span, or null when it carries none. */
export function frameworkMarker(span: SpanRecord): UnmappedDialect | null {
  const scope = span.scope;
  if (span.attrs[LANGGRAPH_NODE_ATTRIBUTE] !== undefined) return 'langgraph';
  if (scope === 'gcp.vertex.agent') return 'adk';
  if (span.attrs['openinference.span.kind'] !== undefined) return 'openinference';
  if (span.attrs['gen_ai.operation.name'] !== undefined || span.attrs['gen_ai.agent.name'] !== undefined || span.attrs['gen_ai.agent.id'] !== undefined) return 'genai';
  if (span.attrs['executor.id'] !== undefined) return 'maf';
  if (span.attrs['ai.operationId'] !== undefined) return 'ai-sdk';
  if (span.attrs['traceloop.span.kind'] !== undefined) return 'openllmetry';
  if (span.attrs['entity.type'] === 'agent' || scope === '@voltagent/core') return 'voltagent';
  if (span.attrs[TYPED_AGENT_KEY] !== undefined || span.attrs[LC_AGENT_NAME] !== undefined) return 'typed';
  if (scope === undefined) return null;
  if (scope.includes('openinference')) return 'openinference';
  if (scope.includes('openai_agents') || scope.includes('openai-agents') || scope === '@openai/agents') return 'openai-agents';
  if (scope.includes('mastra')) return 'mastra';
  if (scope === 'langsmith') return 'langsmith';
  if (scope === 'agent_framework') return 'maf';
  return 'other';
}

/**
 * Any agent-like signal of a span (no silent drops): a framework marker, else `other` when a dropped key looks
 * agent-like (the keys the coverage report lists), else null. A trace with one that yields no receipt is reported.
 */
export function agentSignal(span: SpanRecord): UnmappedDialect | null {
  return frameworkMarker(span) ?? (span.agentKeys !== undefined && span.agentKeys.length > 0 ? 'other' : null);
}

/** The keys of a span's agent-like signals: its agent-like dropped keys and the keys that typed it an agent. */
export function signalKeysOf(span: SpanRecord): string[] {
  const out: string[] = [];
  for (const k of [span.attrs[TYPED_AGENT_KEY], span.attrs[LC_AGENT_NAME_KEY]]) if (typeof k === 'string') out.push(k);
  for (const k of span.agentKeys ?? []) out.push(k);
  return out;
}

/** The family (metric label) of a dialect name as the pipeline reports it; null for none or `explicit`. */
export function dialectFamily(dialect: string | undefined): UnmappedDialect | null {
  if (dialect === undefined || dialect === 'explicit') return null;
  if (dialect === 'genai-handoff') return 'genai';
  return (UNMAPPED_DIALECTS as readonly string[]).includes(dialect) ? (dialect as UnmappedDialect) : 'other';
}

interface Tracked {
  dialect: UnmappedDialect;
  spans: number;
  marked: number;
  claimed: number;
  agents: number;
  receipts: number;
  keys: Set<string>;
  lastSeen: number;
}

export interface UnmappedOptions {
  /** A trace is judged once it has been quiet this long (ms). */
  quietMs: number;
  /** Traces followed at once (oldest forgotten first, counted as evicted). */
  maxTraces?: number;
  /** Span ids remembered to attribute later receipts to their trace. */
  maxSpanIds?: number;
  /** Reports kept for the API (ring buffer). */
  maxReports?: number;
}

/**
 * Insertion order of a Map's keys, for evicting the oldest in O(1): V8's `map.keys().next()` walks over every
 * entry deleted since the table was last rebuilt, so evicting the first key of a large Map one at a time (a FIFO)
 * costs O(deleted) per call (about 60 µs per span at 200,000 span ids). Entries are [key, value] as inserted; one
 * whose key was deleted (or deleted and set again: another value object) is stale and skipped.
 */
export class InsertionOrder<K, V> {
  private order: [K, V][] = [];
  private head = 0;

  push(key: K, value: V, map: Map<K, V>): void {
    this.order.push([key, value]);
    this.compact(map);
  }

  /** The oldest key still mapped to the value it was inserted with, removed from the order; undefined when none. */
  shift(map: Map<K, V>): K | undefined {
    while (this.head < this.order.length) {
      const [key, value] = this.order[this.head++];
      if (map.get(key) === value) return key;
    }
    this.clear();
    return undefined;
  }

  clear(): void {
    this.order = [];
    this.head = 0;
  }

  /** Drop consumed entries once they are half the array, and stale ones once they outnumber the map (amortised O(1)). */
  compact(map: Map<K, V>): void {
    if (this.order.length - this.head > 2 * map.size + 1024) {
      this.order = [...map];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}

export class UnmappedTracker {
  private readonly traces = new Map<string, Tracked>();
  private readonly traceOrder = new InsertionOrder<string, Tracked>();
  /** The followed traces by last-seen time: a sweep looks at those gone quiet (and those held pending), not all. */
  readonly quietOrder = new QuietOrder<string, Tracked>(this.traces);
  private readonly spanTrace = new Map<string, string>();
  private readonly spanOrder = new InsertionOrder<string, string>();
  private readonly ring: UnmappedTrace[] = [];
  private readonly counts = new Map<string, number>();
  private readonly maxTraces: number;
  private readonly maxSpanIds: number;
  private readonly maxReports: number;
  evicted = 0;
  /** Called with each report (metrics). */
  onReport: ((r: UnmappedTrace) => void) | null = null;

  constructor(private readonly opts: UnmappedOptions) {
    this.maxTraces = opts.maxTraces ?? 20_000;
    this.maxSpanIds = opts.maxSpanIds ?? 200_000;
    this.maxReports = opts.maxReports ?? 200;
  }

  /**
   * Note a span of a batch: `claimed` when a dialect (or the explicit reader) took it, `agent` when it stood for an
   * agent; `dialect` the dialect that claimed it (its family names the trace, so the report and `explain` agree).
   */
  span(span: SpanRecord, now: number, claimed: boolean, agent: boolean, dialect?: string): void {
    const family = dialectFamily(dialect);
    const marker = family ?? agentSignal(span);
    let t = this.traces.get(span.traceId);
    if (!t) {
      if (marker === null && !claimed) return;
      if (this.traces.size >= this.maxTraces) {
        const first = this.traceOrder.shift(this.traces);
        if (first !== undefined) {
          this.traces.delete(first);
          this.evicted++;
        }
      }
      this.traces.set(span.traceId, (t = { dialect: marker ?? 'other', spans: 0, marked: 0, claimed: 0, agents: 0, receipts: 0, keys: new Set(), lastSeen: now }));
      this.traceOrder.push(span.traceId, t, this.traces);
      this.quietOrder.added(span.traceId, t);
    }
    if (t.dialect === 'other' && marker !== null) t.dialect = marker;
    if (marker === 'langgraph' || marker === 'adk') t.dialect = marker; // the more specific family wins
    if (family !== null && t.claimed === 0) t.dialect = family; // the first dialect that read a span names the trace
    t.spans++;
    if (marker !== null) t.marked++;
    for (const k of signalKeysOf(span)) if (t.keys.size < MAX_REPORT_KEYS) t.keys.add(k);
    if (claimed) t.claimed++;
    if (agent) t.agents++;
    t.lastSeen = now;
    this.quietOrder.noteTime(now);
    // Receipts that arrive later without their trace (derived ones: `<span id>:delegate`, gaps of expired waits)
    // come from agent and handoff spans, which a dialect claimed; unclaimed spans (content, model, tool spans:
    // most of a batch) never name one, so only claimed spans are remembered.
    if (!claimed) return;
    const known = this.spanTrace.get(span.spanId);
    if (known === span.traceId) return;
    if (known === undefined && this.spanTrace.size >= this.maxSpanIds) {
      const first = this.spanOrder.shift(this.spanTrace);
      if (first !== undefined) this.spanTrace.delete(first);
    }
    this.spanTrace.set(span.spanId, span.traceId);
    this.spanOrder.push(span.spanId, span.traceId, this.spanTrace); // a span id seen again under another trace moves to the end
  }

  /** Note a receipt: its event id starts with the id of the (claimed) span it came from. */
  receipt(event: string, traceId?: string): void {
    const trace = traceId ?? this.spanTrace.get(event.slice(0, 16));
    if (trace === undefined) return;
    const t = this.traces.get(trace);
    if (t) t.receipts++;
  }

  /**
   * Judge quiet traces; returns the new reports, in the order the traces were first followed. O(quiet + touched +
   * held): a quiet trace still `isPending` is held aside and asked again at every sweep until it is touched or judged.
   */
  sweep(now: number, isPending: (traceId: string) => boolean = () => false): UnmappedTrace[] {
    const out: UnmappedTrace[] = [];
    for (const traceId of this.quietOrder.quiet(now, this.opts.quietMs, isPending)) {
      const t = this.traces.get(traceId)!;
      this.traces.delete(traceId);
      if (t.receipts > 0 || t.marked === 0) continue;
      const reason: UnmappedReason = t.claimed === 0 ? 'no_dialect' : t.agents === 1 ? 'single_agent' : 'no_edges';
      const r: UnmappedTrace = { traceId, dialect: t.dialect, reason, spans: t.spans, marked: t.marked, claimed: t.claimed, agents: t.agents, keys: [...t.keys].sort(), at: new Date(now).toISOString() };
      out.push(r);
      this.ring.push(r);
      if (this.ring.length > this.maxReports) this.ring.shift();
      const key = `${r.dialect}\u0000${r.reason}`;
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      this.onReport?.(r);
    }
    if (this.spanTrace.size > 0 && this.traces.size === 0) {
      this.spanTrace.clear();
      this.spanOrder.clear();
    }
    this.traceOrder.compact(this.traces);
    return out;
  }

  /** The recent reports, newest first, and the totals per dialect and reason since start. */
  snapshot(): { traces: UnmappedTrace[]; totals: { dialect: string; reason: string; count: number }[]; following: number } {
    const totals = [...this.counts].map(([k, count]) => {
      const [dialect, reason] = k.split('\u0000');
      return { dialect, reason, count };
    });
    return { traces: [...this.ring].reverse(), totals, following: this.traces.size };
  }
}
