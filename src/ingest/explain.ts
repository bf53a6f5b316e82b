/**
 * `topology-audit explain FILE`: runs an OTLP dump through the same decoder and pipeline as `serve` and says,
 * span by span (names and ids only), which dialect claimed it and which receipts came out, or why none did;
 * then per trace, whether it gave receipts or would be reported unmapped (and why).
 */
import type { Receipt } from '../core/types.js';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../otlp/index.js';
import type { SpanRecord } from '../otlp/types.js';
import { SpanPipeline, type SpanObservation } from './pipeline.js';
import type { RunKeyPart } from './runkey.js';
import { agentSignal, type UnmappedTrace } from './unmapped.js';
import { TYPED_DIALECT, typedIdentityOf } from './dialects/typed.js';
import { LC_AGENT_NAME, LC_AGENT_NAME_KEY } from '../otlp/typed.js';
import { isSharedId, type AgentIdentity } from './identity.js';

/**
 * Per trace, the agent ids shared by agent spans with different names (identity.ts): id -> names. Read from what
 * each dialect made of its agent spans (id and other names), so it holds for every dialect, not one attribute.
 */
function sharedIds(observed: readonly SpanObservation[]): Map<string, Map<string, string[]>> {
  const byTrace = new Map<string, AgentIdentity[]>();
  for (const o of observed) {
    if (!o.identity || o.identity.names.length < 2) continue;
    const list = byTrace.get(o.span.traceId) ?? [];
    list.push({ id: o.identity.id, names: o.identity.names });
    byTrace.set(o.span.traceId, list);
  }
  const out = new Map<string, Map<string, string[]>>();
  for (const [traceId, list] of byTrace) {
    const m = new Map<string, string[]>();
    for (const a of list) if (isSharedId(a.id, list)) m.set(a.id, [...new Set(list.filter((x) => x.id === a.id).map((x) => x.names[1]))]);
    if (m.size > 0) out.set(traceId, m);
  }
  return out;
}

/** Why a span's name is its identity: its id is shared by differently named agents in its trace (GenAI attribute names when it has them). */
function identityNote(o: SpanObservation, names: string[]): string {
  const id = o.identity!.id;
  const name = o.identity!.names[1];
  const genai = o.span.attrs['gen_ai.agent.id'] === id && o.span.attrs['gen_ai.agent.name'] === name;
  const [nameKey, idKey] = genai ? ['gen_ai.agent.name', 'gen_ai.agent.id'] : [`agent name (${o.claimedBy})`, 'agent id'];
  return `${nameKey} ${JSON.stringify(name)}: ${idKey} ${JSON.stringify(id)} is shared by ${names.length} names in this trace (${names.join(', ')})`;
}

export interface SpanExplanation {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  dialect: string | null;
  receipts: string[];
  why: string | null;
  /** For an agent span whose id attribute is shared by differently named agents in its trace: why its name is its identity. */
  identity?: string;
  /** For a span read by the general rules (`typed`): which attribute typed it an agent and where its identity came from. */
  rule?: string;
}

/** The general rules' reading of a span, for explain: the type key and the identity's source. */
function ruleNote(span: SpanRecord): string | undefined {
  const typed = typedIdentityOf(span);
  if (typed !== null) return `agent by ${String(span.attrs['agent.typed.key'])} = agent; identity from ${typed.from}`;
  if (typeof span.attrs[LC_AGENT_NAME] === 'string') return `agent loop span by ${String(span.attrs[LC_AGENT_NAME_KEY])}; identity from it`;
  return undefined;
}

export interface TraceExplanation {
  traceId: string;
  runs: string[];
  receipts: number;
  /** `keys`: the agent-like keys seen in the trace (never values), when there were any. */
  unmapped: { dialect: string; reason: string; keys?: string[] } | null;
}

export interface Explanation {
  spans: SpanExplanation[];
  traces: TraceExplanation[];
}

/** Decodes a dump: OTLP/JSON (one request, or one per line as the Collector's file exporter writes) or protobuf. */
export function decodeDump(bytes: Uint8Array): SpanRecord[] {
  let i = 0;
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)) i++;
  if (bytes[i] !== 0x7b) return decodeExportTraceRequest(bytes).spans;
  const text = new TextDecoder().decode(bytes);
  try {
    return decodeExportTraceJson(text).spans;
  } catch (e) {
    const lines = text.split('\n').filter((l) => l.trim().length > 0);
    if (lines.length <= 1) throw e;
    return lines.flatMap((l) => decodeExportTraceJson(l).spans);
  }
}

const describe = (r: Receipt): string => {
  if (r.type === 'edge') return `edge ${r.from} -> ${r.to} : ${r.kind}${r.status === 'error' ? ' (error)' : ''} [run ${r.run}]`;
  if (r.type === 'gap') return `gap ${r.reason}${r.from ? ` from ${r.from}` : ''}${r.to ? ` to ${r.to}` : ''} [run ${r.run}]`;
  return `${r.type} [run ${r.run}]`;
};

function whyNot(o: SpanObservation): string {
  if (o.claimedBy === 'langgraph') return 'LangGraph span, read with its graph (edges are on the node spans)';
  if (o.claimedBy !== null) {
    if (o.agent) return `agent span (${o.claimedBy}) with no edge of its own: the entry agent, an agent named only for handoffs, or the target of a handoff recorded on the handoff span`;
    return `read by ${o.claimedBy} without an edge of its own`;
  }
  const marker = agentSignal(o.span);
  if (marker === 'other' && o.span.agentKeys?.length) {
    return `agent-like attribute keys (${o.span.agentKeys.join(', ')}) but no agent identity: no agent type (a key ending in type, kind or subtype = agent), gen_ai.*, OpenInference or other dialect attribute names an agent; dropped`;
  }
  const kind = o.span.attrs['openinference.span.kind'];
  const op = o.span.attrs['gen_ai.operation.name'];
  if (marker !== null) {
    const what = kind !== undefined ? `openinference.span.kind=${String(kind)}` : op !== undefined ? `gen_ai.operation.name=${String(op)}` : `scope of ${marker}`;
    if (kind === 'AGENT') return `agent-framework span (${what}) that names no agent: no graph.node.id, gen_ai.agent.* or known span shape`;
    return `agent-framework span (${what}), not an agent interaction in any dialect: dropped`;
  }
  return 'no agent-framework marker (content, model, tool or application span): dropped';
}

/** Explains the spans of a dump. `waitMs` as `serve --parent-wait`. */
export function explainSpans(spans: SpanRecord[], opts: { runKey?: readonly RunKeyPart[]; waitMs?: number } = {}): Explanation {
  const waitMs = opts.waitMs ?? 10_000;
  const pipeline = new SpanPipeline({ waitMs, maxSpans: Math.max(200_000, spans.length * 2), runKey: opts.runKey });
  const now = spans.reduce((m, s) => Math.max(m, s.endMs, s.startMs), 0);
  const observed: SpanObservation[] = [];
  const out = pipeline.process(spans, now, 'auditor', (o) => observed.push(o));
  const receipts = [...out.receipts, ...pipeline.expire(now + waitMs * 3)];
  const reports: UnmappedTrace[] = pipeline.unmapped.snapshot().traces;
  const bySpan = new Map<string, Receipt[]>();
  for (const r of receipts) {
    const id = r.event.slice(0, 16);
    const list = bySpan.get(id);
    if (list) list.push(r);
    else bySpan.set(id, [r]);
  }
  const rejected = new Map(out.rejected.map((r) => [r.spanId, r.reason]));
  const shared = sharedIds(observed);
  const explained: SpanExplanation[] = observed.map((o) => {
    const rs = bySpan.get(o.span.spanId) ?? [];
    const rej = rejected.get(o.span.spanId);
    const names = o.identity && o.identity.names.length > 1 ? shared.get(o.span.traceId)?.get(o.identity.id) : undefined;
    const identity = names ? { identity: identityNote(o, names) } : {};
    const note = o.claimedBy === TYPED_DIALECT ? ruleNote(o.span) : undefined;
    return {
      ...identity,
      ...(note !== undefined ? { rule: note } : {}),
      traceId: o.span.traceId,
      spanId: o.span.spanId,
      parentSpanId: o.span.parentSpanId,
      name: o.span.name,
      dialect: o.claimedBy,
      receipts: rs.map(describe),
      why: rs.length > 0 ? null : rej !== undefined ? (o.claimedBy === 'explicit' ? `explicit receipt refused: ${rej}` : `refused: ${rej}`) : whyNot(o),
    };
  });
  const traces = new Map<string, TraceExplanation>();
  for (const s of spans) if (!traces.has(s.traceId)) traces.set(s.traceId, { traceId: s.traceId, runs: [], receipts: 0, unmapped: null });
  const traceOfSpan = new Map(spans.map((s) => [s.spanId, s.traceId]));
  for (const r of receipts) {
    const t = traces.get(traceOfSpan.get(r.event.slice(0, 16)) ?? '');
    if (!t) continue;
    t.receipts++;
    if (!t.runs.includes(r.run)) t.runs.push(r.run);
  }
  for (const u of reports) {
    const t = traces.get(u.traceId);
    if (t) t.unmapped = { dialect: u.dialect, reason: u.reason, ...(u.keys.length > 0 ? { keys: u.keys } : {}) };
  }
  return { spans: explained, traces: [...traces.values()] };
}

/** Human-readable text of an explanation. */
export function explanationText(e: Explanation): string {
  const lines: string[] = [];
  for (const t of e.traces) {
    lines.push(`trace ${t.traceId}: ${t.receipts} receipt(s)${t.runs.length ? ` in run ${t.runs.join(', ')}` : ''}${t.unmapped ? `; UNMAPPED (${t.unmapped.dialect}: ${t.unmapped.reason}${t.unmapped.keys ? `; keys seen: ${t.unmapped.keys.join(', ')}` : ''})` : ''}`);
    for (const s of e.spans.filter((x) => x.traceId === t.traceId)) {
      const head = `  span ${s.spanId}${s.parentSpanId ? ` (parent ${s.parentSpanId})` : ' (root)'} ${JSON.stringify(s.name)}: ${s.dialect ?? 'no dialect'}`;
      const id = (s.identity ? ` [identity: ${s.identity}]` : '') + (s.rule ? ` [rule: ${s.rule}]` : '');
      if (s.receipts.length) lines.push(`${head}${id} -> ${s.receipts.join('; ')}`);
      else lines.push(`${head}${id}; none: ${s.why}`);
    }
  }
  return lines.join('\n') + '\n';
}
