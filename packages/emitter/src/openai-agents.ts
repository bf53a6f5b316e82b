/**
 * OpenAI Agents SDK (@openai/agents, JS): a tracing processor that turns the SDK's own trace spans into
 * receipts (the SDK has agent, handoff, function, generation spans in its tracing API, but no OTLP export).
 * Register it with `addTraceProcessor(new OpenAIAgentsReceiptProcessor(emitter))` (or `setTraceProcessors`).
 *
 * What it reads, and only this (the span data also holds tool inputs, outputs and model text: never read):
 * - `agent` spans (`spanData.name`): an agent running. The Runner runs agents one after another as siblings
 *   (after a handoff the next agent span is a new child of the trace); an agent used as a tool
 *   (`agent.asTool()`) runs in an agent span nested beneath the caller's: a `delegate` at its start and, unless
 *   it failed, a `return` at its end;
 * - `handoff` spans (`from_agent`, `to_agent`, set by the SDK when the handoff happens): a `handoff` edge;
 * - the SDK trace id (`trace_...`) is the run: one `Runner.run` is one unit of work.
 * An agent name that is not an id, or a handoff with an end missing, becomes a `gap` receipt (the run is
 * uncertain), never a guessed edge. Optionally a `run.start` pins each run to a contract.
 *
 * The processor is typed structurally (no runtime dependency on the SDK): the SDK calls it duck-typed.
 */
import { AGENT_ID_PATTERN } from '@topology-audit/receipt';
import type { ReceiptEmitter } from './emitter.js';
import { agentId, runId, type ContractId, type PhaseId, type ContractVersion } from './ids.js';

/** The parts of the SDK's Trace this processor reads. */
export interface SdkTrace {
  traceId: string;
}
/** The parts of the SDK's Span this processor reads. */
export interface SdkSpan {
  traceId: string;
  spanId: string;
  parentId: string | null;
  spanData: { type: string; name?: string; from_agent?: string; to_agent?: string };
  startedAt: string | null;
  endedAt: string | null;
  error: unknown;
}

export interface OpenAIAgentsProcessorOptions {
  /** Pin every run (SDK trace) with a `run.start` receipt. */
  pin?: { contract: ContractId; phase?: PhaseId; version?: ContractVersion };
  /** Bound on spans remembered across open traces; the oldest trace is forgotten past it. */
  maxSpans?: number;
}

interface Known {
  parent: string | null;
  agent: string | null;
}

const isId = (s: string | undefined): s is string => s !== undefined && AGENT_ID_PATTERN.test(s);
const dateOf = (s: string | null): Date | undefined => {
  if (s === null) return undefined;
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? undefined : d;
};

export class OpenAIAgentsReceiptProcessor {
  private readonly traces = new Map<string, Map<string, Known>>();
  private spans = 0;
  private readonly maxSpans: number;

  constructor(
    private readonly emitter: ReceiptEmitter,
    private readonly opts: OpenAIAgentsProcessorOptions = {},
  ) {
    this.maxSpans = opts.maxSpans ?? 100_000;
  }

  private run(traceId: string) {
    return runId(traceId);
  }

  async onTraceStart(trace: SdkTrace): Promise<void> {
    if (!this.traces.has(trace.traceId)) this.traces.set(trace.traceId, new Map());
    if (this.opts.pin) this.emitter.runStart(this.run(trace.traceId), { contract: this.opts.pin.contract, phase: this.opts.pin.phase, version: this.opts.pin.version });
  }

  async onTraceEnd(trace: SdkTrace): Promise<void> {
    const t = this.traces.get(trace.traceId);
    if (t) this.spans -= t.size;
    this.traces.delete(trace.traceId);
  }

  async onSpanStart(span: SdkSpan): Promise<void> {
    let t = this.traces.get(span.traceId);
    if (!t) this.traces.set(span.traceId, (t = new Map()));
    const d = span.spanData;
    t.set(span.spanId, { parent: span.parentId, agent: d.type === 'agent' && typeof d.name === 'string' ? d.name : null });
    this.spans++;
    while (this.spans > this.maxSpans && this.traces.size > 0) {
      const [oldest, m] = this.traces.entries().next().value as [string, Map<string, Known>];
      this.spans -= m.size;
      this.traces.delete(oldest);
    }
  }

  /** The nearest agent above `parent` (the agent span itself excluded), or null. */
  private callerOf(traceId: string, parent: string | null): string | null {
    const t = this.traces.get(traceId);
    let p = parent;
    for (let hops = 0; p !== null && t && hops < 10_000; hops++) {
      const k = t.get(p);
      if (!k) return null;
      if (k.agent !== null) return k.agent;
      p = k.parent;
    }
    return null;
  }

  async onSpanEnd(span: SdkSpan): Promise<void> {
    const d = span.spanData;
    const run = this.run(span.traceId);
    const failed = span.error !== null && span.error !== undefined;
    if (d.type === 'agent') {
      const caller = this.callerOf(span.traceId, span.parentId);
      if (caller === null) return; // a Runner turn (entry agent, or a handoff target: the edge is on the handoff span)
      if (!isId(caller) || !isId(d.name)) {
        this.emitter.gap(run, { reason: 'agent_id_invalid', at: dateOf(span.startedAt) });
        return;
      }
      this.emitter.edge(run, agentId(caller), agentId(d.name), 'delegate', { at: dateOf(span.startedAt) });
      if (!failed) this.emitter.edge(run, agentId(d.name), agentId(caller), 'return', { at: dateOf(span.endedAt) });
      return;
    }
    if (d.type === 'handoff') {
      const from = d.from_agent ?? this.callerOf(span.traceId, span.parentId) ?? undefined;
      const to = d.to_agent;
      if (!isId(from) || !isId(to)) {
        this.emitter.gap(run, { reason: from === undefined || to === undefined ? 'handoff_agent_unknown' : 'handoff_agent_invalid', at: dateOf(span.startedAt), from: isId(from) ? agentId(from) : undefined, to: isId(to) ? agentId(to) : undefined });
        return;
      }
      this.emitter.edge(run, agentId(from), agentId(to), 'handoff', { at: dateOf(span.startedAt), status: failed ? 'error' : undefined });
    }
  }

  async shutdown(): Promise<void> {
    await this.emitter.flush();
  }

  async forceFlush(): Promise<void> {
    await this.emitter.flush();
  }
}
