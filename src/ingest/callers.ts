/**
 * Resolving an agent span's caller through span parentage. Spans are exported when they end, so a child
 * `invoke_agent` usually arrives before its parent: unresolved agent spans wait in a bounded, time-limited
 * buffer keyed by (trace id, span id). A caller still unresolved when the wait ends becomes a `gap` receipt
 * (the run stays uncertain), never a guessed edge. Modelled on the Collector's servicegraph connector
 * (TTL store with a max-items bound; "store full" and "expired" are counted).
 */
import type { Receipt } from '../core/types.js';
import type { SpanRecord } from '../otlp/types.js';
import { localStatus } from './extract.js';

export interface AgentSpan {
  run: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  agent: string;
  startMs: number;
  endMs: number;
  statusCode: number;
}

interface Node {
  parent: string | null;
  agent: string | null;
  seenAt: number;
}

export interface CallerStats {
  pending: number;
  indexed: number;
  expired: number;
  evicted: number;
}

export interface CallerResolverOptions {
  /** How long an agent span waits for its ancestors (ms). */
  waitMs: number;
  /** Upper bound of indexed spans (agent and intermediate) across traces. */
  maxSpans: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The receipts a resolved agent span stands for: a delegate at its start and, unless it failed, a return at its end. */
export function callReceipts(s: AgentSpan, caller: string): Receipt[] {
  const out: Receipt[] = [{ run: s.run, event: `${s.spanId}:delegate`, type: 'edge', at: iso(s.startMs), from: caller, to: s.agent, kind: 'delegate' }];
  if (localStatus(s.statusCode) !== 'error') out.push({ run: s.run, event: `${s.spanId}:return`, type: 'edge', at: iso(s.endMs), from: s.agent, to: caller, kind: 'return' });
  return out;
}

export function unresolvedGap(s: AgentSpan): Receipt {
  return { run: s.run, event: `${s.spanId}:gap`, type: 'gap', at: iso(s.startMs), reason: 'caller_unresolved', to: s.agent };
}

export class CallerResolver {
  private readonly traces = new Map<string, Map<string, Node>>();
  private readonly pending = new Map<string, AgentSpan>(); // key trace/span
  private indexed = 0;
  private expired = 0;
  private evicted = 0;

  constructor(private readonly opts: CallerResolverOptions) {}

  stats(): CallerStats {
    return { pending: this.pending.size, indexed: this.indexed, expired: this.expired, evicted: this.evicted };
  }

  /**
   * Index a batch. `agentSpans` are the batch's agent spans (already mapped by a dialect); `spans` the whole
   * batch, whose non-agent spans are indexed only for traces that hold agent spans (to walk through them).
   * Returns the receipts that became derivable.
   */
  addBatch(agentSpans: AgentSpan[], spans: SpanRecord[], now: number): Receipt[] {
    for (const a of agentSpans) this.index(a.traceId, a.spanId, a.parentSpanId, a.agent, now);
    if (this.traces.size > 0) {
      for (const s of spans) {
        if (this.traces.has(s.traceId)) {
          const t = this.traces.get(s.traceId)!;
          if (!t.has(s.spanId)) this.index(s.traceId, s.spanId, s.parentSpanId, null, now);
        }
      }
    }
    for (const a of agentSpans) this.pending.set(`${a.traceId}/${a.spanId}`, a);
    return this.resolvePending();
  }

  private index(traceId: string, spanId: string, parent: string | null, agent: string | null, now: number): void {
    let t = this.traces.get(traceId);
    if (!t) this.traces.set(traceId, (t = new Map()));
    const prev = t.get(spanId);
    if (!prev) this.indexed++;
    t.set(spanId, { parent, agent: agent ?? prev?.agent ?? null, seenAt: now });
    if (this.indexed > this.opts.maxSpans) this.evictOldest();
  }

  private evictOldest(): void {
    // Traces are kept in insertion order; drop the oldest trace without pending spans.
    for (const [traceId, t] of this.traces) {
      let hasPending = false;
      for (const k of this.pending.keys()) if (k.startsWith(traceId + '/')) { hasPending = true; break; }
      if (hasPending) continue;
      this.traces.delete(traceId);
      this.indexed -= t.size;
      this.evicted += t.size;
      if (this.indexed <= this.opts.maxSpans) return;
    }
  }

  /** Walk up from a pending span: a caller, 'entry' (no agent ancestor, all received), or null (still waiting). */
  private callerOf(a: AgentSpan): string | 'entry' | null {
    const t = this.traces.get(a.traceId);
    let p = a.parentSpanId;
    for (let hops = 0; hops < 10_000; hops++) {
      if (p === null) return 'entry';
      const n = t?.get(p);
      if (!n) return null;
      if (n.agent !== null) return n.agent;
      p = n.parent;
    }
    return null;
  }

  private resolvePending(): Receipt[] {
    const out: Receipt[] = [];
    for (const [k, a] of this.pending) {
      const c = this.callerOf(a);
      if (c === null) continue;
      this.pending.delete(k);
      if (c === 'entry' || c === a.agent) continue; // the entry agent; or the same invocation seen from client and server side
      out.push(...callReceipts(a, c));
    }
    return out;
  }

  /** Expire waits that ran out: a gap receipt each. Also forgets traces idle for longer than the wait. */
  expire(now: number): Receipt[] {
    const out: Receipt[] = [];
    for (const [k, a] of this.pending) {
      const t = this.traces.get(a.traceId)?.get(a.spanId);
      if (t && now - t.seenAt < this.opts.waitMs) continue;
      this.pending.delete(k);
      this.expired++;
      out.push(unresolvedGap(a));
    }
    for (const [traceId, t] of this.traces) {
      let newest = 0;
      for (const n of t.values()) if (n.seenAt > newest) newest = n.seenAt;
      if (now - newest >= this.opts.waitMs * 2) {
        let hasPending = false;
        for (const k of this.pending.keys()) if (k.startsWith(traceId + '/')) { hasPending = true; break; }
        if (!hasPending) {
          this.traces.delete(traceId);
          this.indexed -= t.size;
        }
      }
    }
    return out;
  }
}
