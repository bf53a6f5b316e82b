/**
 * Coverage, never silence: traces with no agent-like signal at all (no framework marker, no dialect read any
 * span, no explicit receipt) are summed per instrumentation scope once quiet, so that an unknown framework shows
 * up by name on day one (`GET /api/v1/ingest/coverage`). Per scope: its name and version, the spans and traces
 * seen, and the KEYS of agent-like attributes its spans carried (keys only, never values: the decoder drops the
 * values and keeps at most 16 keys per span, src/otlp/keys.ts). Bounded: traces followed, scopes summarised and
 * keys per scope; what falls outside the bounds is counted.
 */
import type { SpanRecord } from '../otlp/types.js';
import { QuietOrder } from './quiet-order.js';
import { InsertionOrder } from './unmapped.js';

export interface ScopeCoverage {
  scope: string;
  version: string;
  spans: number;
  traces: number;
  /** Keys of agent-like attributes seen on its spans (sorted, at most `maxKeys`). */
  agentKeys: string[];
}

export interface CoverageSnapshot {
  /** Scopes of traces without any agent-like signal, most spans first. */
  scopes: ScopeCoverage[];
  /** Traces judged: with an agent-like signal (read or reported unmapped) and without. */
  traces: { withSignal: number; withoutSignal: number };
  /** Scopes not summarised because `maxScopes` were already (their spans and traces are counted here). */
  overflow: { spans: number; traces: number };
  /** Traces forgotten before they went quiet (the `maxTraces` bound). */
  evicted: number;
  following: number;
}

interface TraceScopes {
  signal: boolean;
  lastSeen: number;
  /** scope key -> spans and the agent-like keys of those spans */
  scopes: Map<string, { spans: number; keys: Set<string> }>;
}

export interface CoverageOptions {
  quietMs: number;
  maxTraces?: number;
  maxScopes?: number;
  maxKeys?: number;
}

const keyOf = (lib: { name: string; version: string }) => `${lib.name}\u0000${lib.version}`;

export class CoverageTracker {
  private readonly traces = new Map<string, TraceScopes>();
  /** The oldest trace in O(1) (a Map's first key after many deletions is not: see InsertionOrder). */
  private readonly order = new InsertionOrder<string, TraceScopes>();
  /** The followed traces by last-seen time: a sweep looks at those gone quiet (and those held pending), not all. */
  readonly quietOrder = new QuietOrder<string, TraceScopes>(this.traces);
  private readonly summary = new Map<string, { spans: number; traces: number; keys: Set<string> }>();
  private readonly maxTraces: number;
  private readonly maxScopes: number;
  private readonly maxKeys: number;
  private withSignal = 0;
  private withoutSignal = 0;
  private overflow = { spans: 0, traces: 0 };
  evicted = 0;

  constructor(private readonly opts: CoverageOptions) {
    this.maxTraces = opts.maxTraces ?? 20_000;
    this.maxScopes = opts.maxScopes ?? 200;
    this.maxKeys = opts.maxKeys ?? 32;
  }

  /** Note a span; `signal` when it carries a framework marker, a dialect read it, or it is an explicit receipt. */
  span(span: SpanRecord, now: number, signal: boolean): void {
    let t = this.traces.get(span.traceId);
    if (!t) {
      if (this.traces.size >= this.maxTraces) {
        const first = this.order.shift(this.traces);
        if (first !== undefined) {
          this.traces.delete(first);
          this.evicted++;
        }
      }
      this.traces.set(span.traceId, (t = { signal: false, lastSeen: now, scopes: new Map() }));
      this.order.push(span.traceId, t, this.traces);
      this.quietOrder.added(span.traceId, t);
    }
    t.lastSeen = now;
    this.quietOrder.noteTime(now);
    if (signal) t.signal = true;
    if (t.signal) {
      t.scopes.clear(); // nothing of a trace with a signal is summarised
      return;
    }
    const k = keyOf(span.library ?? { name: '(unnamed)', version: '' });
    let s = t.scopes.get(k);
    if (!s) t.scopes.set(k, (s = { spans: 0, keys: new Set() }));
    s.spans++;
    for (const key of span.agentKeys ?? []) if (s.keys.size < this.maxKeys) s.keys.add(key);
  }

  /**
   * Sum the traces quiet for `quietMs` (and not `pending`) into the per-scope summary, in the order they were first
   * followed. O(quiet + touched + held): a quiet trace still `pending` is held aside and asked again at every sweep.
   */
  sweep(now: number, pending: (traceId: string) => boolean = () => false): void {
    for (const traceId of this.quietOrder.quiet(now, this.opts.quietMs, pending)) {
      const t = this.traces.get(traceId)!;
      this.traces.delete(traceId);
      if (t.signal) {
        this.withSignal++;
        continue;
      }
      this.withoutSignal++;
      for (const [k, s] of t.scopes) {
        let sum = this.summary.get(k);
        if (!sum) {
          if (this.summary.size >= this.maxScopes) {
            this.overflow.spans += s.spans;
            this.overflow.traces++;
            continue;
          }
          this.summary.set(k, (sum = { spans: 0, traces: 0, keys: new Set() }));
        }
        sum.spans += s.spans;
        sum.traces++;
        for (const key of s.keys) if (sum.keys.size < this.maxKeys) sum.keys.add(key);
      }
    }
  }

  snapshot(): CoverageSnapshot {
    const scopes = [...this.summary].map(([k, s]) => {
      const [scope, version] = k.split('\u0000');
      return { scope, version, spans: s.spans, traces: s.traces, agentKeys: [...s.keys].sort() };
    });
    scopes.sort((a, b) => b.spans - a.spans || (a.scope < b.scope ? -1 : 1));
    return { scopes, traces: { withSignal: this.withSignal, withoutSignal: this.withoutSignal }, overflow: { ...this.overflow }, evicted: this.evicted, following: this.traces.size };
  }
}
