/**
 * LangGraph's supersteps order a graph's nodes: `metadata.langgraph_step` is kept (a plain integer, nothing else of
 * the metadata), logged and replayed with the span, and the reading orders a level's nodes by it when every node
 * carries one and the steps never go back, so a node's end recorded late (a background callback on a loaded host)
 * does not read as parallel nodes; nodes of one superstep are parallel whatever their times.
 */
import fc from 'fast-check';
import { ProtobufTraceSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../src/otlp/index.js';
import { langgraphFieldsOf, MAX_STEP } from '../src/otlp/metadata.js';
import { parseLoggedSpan, SpanPipeline } from '../src/ingest/pipeline.js';
import { decodeLoggedSpans, encodeLoggedSpans } from '../src/ingest/span-log.js';
import type { SpanRecord } from '../src/otlp/types.js';

const SECRET = 'SECRET-step-51c0';

function exported(metadata: string) {
  const mem = new InMemorySpanExporter();
  const p = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
  p.getTracer('@arizeai/openinference-instrumentation-langchain').startSpan('researcher', { attributes: { metadata, 'openinference.span.kind': 'CHAIN', 'input.value': SECRET } }).end();
  const spans = mem.getFinishedSpans();
  return { pb: ProtobufTraceSerializer.serializeRequest(spans)!, json: new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)!) };
}
const stepOf = (meta: string) => {
  const { pb, json } = exported(meta);
  const a = decodeExportTraceRequest(pb).spans[0].attrs['metadata.langgraph_step'];
  const b = decodeExportTraceJson(json).spans[0].attrs['metadata.langgraph_step'];
  expect(b, meta).toEqual(a);
  return a;
};

describe('metadata: langgraph_step', () => {
  it('keeps a plain non-negative integer step beside the node (protobuf and JSON, real serializers), no other text', () => {
    for (const step of [0, 1, 7, 123456, MAX_STEP]) expect(stepOf(JSON.stringify({ thread_id: SECRET, langgraph_step: step, langgraph_node: 'researcher' }))).toBe(step);
    const { pb } = exported(JSON.stringify({ langgraph_step: 4, langgraph_node: 'researcher', tags: [SECRET] }));
    expect(JSON.stringify(decodeExportTraceRequest(pb).spans)).not.toContain(SECRET);
  });

  it('keeps no step that is not plain digits up to MAX_STEP, nor one without a node', () => {
    for (const v of ['-1', '1.5', '1e3', '"3"', 'true', 'null', '[1]', '{"a":1}', String(MAX_STEP + 1), '99999999999', '007x']) {
      expect(stepOf(`{"langgraph_node":"researcher","langgraph_step":${v}}`), v).toBeUndefined();
    }
    expect(stepOf('{"nested":{"langgraph_step":3},"langgraph_node":"researcher"}')).toBeUndefined();
    expect(stepOf('{"langgraph_step":3}')).toBeUndefined();
  });

  it('agrees with JSON.parse on arbitrary metadata objects', () => {
    const value = fc.oneof(fc.integer({ min: -5, max: 2 * MAX_STEP }), fc.double(), fc.string(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }));
    fc.assert(
      fc.property(fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constant('langgraph_step')), value, { maxKeys: 6 }), (obj) => {
        const text = JSON.stringify(obj);
        const bytes = new TextEncoder().encode(text);
        const v = (JSON.parse(text) as Record<string, unknown>).langgraph_step;
        const plain = typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_STEP && /^\d+$/.test(JSON.stringify(v));
        expect(langgraphFieldsOf(bytes, 0, bytes.length).step).toBe(plain ? (v as number) + 0 : null); // -0 reads as 0
      }),
      { numRuns: 2000 },
    );
  });
});

let n = 0;
const id = (len: number) => (++n).toString(16).padStart(len, '0');
function rec(o: Partial<SpanRecord> & { name: string; traceId: string }): SpanRecord {
  return { spanId: id(16), parentSpanId: null, kind: 1, startMs: 1000, endMs: 2000, statusCode: 0, attrs: {}, events: [], links: [], ...o };
}
const node = (traceId: string, parent: string, name: string, startMs: number, endMs: number, step?: number) =>
  rec({ traceId, parentSpanId: parent, name, startMs, endMs, attrs: { 'openinference.span.kind': 'CHAIN', 'metadata.langgraph_node': name, ...(step === undefined ? {} : { 'metadata.langgraph_step': step }) } });
const show = (rs: { type: string; from?: string; to?: string; kind?: string; reason?: string }[]) => rs.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.reason}`)).sort();
const rootOf = (t: string) => rec({ traceId: t, name: 'LangGraph', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });

describe('LangGraph reading: supersteps order the nodes', () => {
  it('consecutive steps whose spans overlap in time (ends recorded late) are a sequence, not parallel nodes', () => {
    const t = id(32);
    const root = rootOf(t);
    const spans = [node(t, root.spanId, 'planner', 1, 15, 1), node(t, root.spanId, 'researcher', 12, 30, 2), node(t, root.spanId, 'writer', 25, 40, 3), root];
    const out = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 }).process(spans, 0);
    expect(show(out.receipts)).toEqual(['planner->researcher:handoff', 'researcher->writer:handoff']);
    // Without the steps the same times read as parallel nodes (the reading before): a gap, never a guessed edge.
    const bare = [node(t, root.spanId, 'planner', 1, 15), node(t, root.spanId, 'researcher', 12, 30), node(t, root.spanId, 'writer', 25, 40), root].map((s) => ({ ...s, traceId: id(32) }));
    const broot = bare[3];
    const bout = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 }).process(bare.map((s, i) => (i < 3 ? { ...s, traceId: broot.traceId, parentSpanId: broot.spanId } : s)), 0);
    expect(show(bout.receipts)).toContain('gap:langgraph_parallel_nodes');
  });

  it("one superstep's nodes are parallel (a gap each but the first) even when their times do not overlap", () => {
    const t = id(32);
    const root = rootOf(t);
    const spans = [node(t, root.spanId, 'planner', 1, 10, 1), node(t, root.spanId, 'a', 11, 20, 2), node(t, root.spanId, 'b', 21, 30, 2), node(t, root.spanId, 'c', 31, 40, 3), root];
    const out = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 }).process(spans, 0);
    expect(show(out.receipts)).toEqual(['gap:langgraph_parallel_nodes', 'planner->a:handoff']);
  });

  it('steps that go back (the same graph run twice beneath one task) or a node without a step: the times order them', () => {
    for (const steps of [[1, 2, 1, 2], [1, 2, undefined, 4]]) {
      const t = id(32);
      const root = rootOf(t);
      const spans = [node(t, root.spanId, 'a', 1, 10, steps[0]), node(t, root.spanId, 'b', 11, 20, steps[1]), node(t, root.spanId, 'c', 21, 30, steps[2]), node(t, root.spanId, 'd', 31, 40, steps[3]), root];
      const out = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 }).process(spans, 0);
      expect(show(out.receipts), String(steps)).toEqual(['a->b:handoff', 'b->c:handoff', 'c->d:handoff']);
    }
  });

  it('the step is logged with a waiting span and read back from the span log (a replay reads the same sequence)', () => {
    const t = id(32);
    const root = rootOf(t);
    const nodes = [node(t, root.spanId, 'planner', 1, 15, 1), node(t, root.spanId, 'researcher', 12, 30, 2)];
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const logged = p.process(nodes, 0, 'src-graph').pendingLog.flatMap((e) => e.spans);
    expect(logged.map((l) => l.stp)).toEqual([1, 2]);
    const back = JSON.parse(JSON.stringify(logged)).map(parseLoggedSpan);
    expect(back).toEqual(logged);
    // Through the span log entry's body as the stores keep it (format 2) and back.
    expect(decodeLoggedSpans(t, encodeLoggedSpans(logged))).toEqual(logged);
    for (const bad of [-1, 1.5, '2', MAX_STEP + 1]) expect(parseLoggedSpan({ ...logged[0], stp: bad }), String(bad)).toBeNull();
    const fresh = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    expect(fresh.replay(back, 0).receipts).toEqual([]);
    expect(show(fresh.process([root], 0, 'src-graph').receipts)).toEqual(['planner->researcher:handoff']);
  });
});

describe('real LangGraph.js through OpenInference: the steps arrive and keep the sequence when ends overlap', () => {
  it("a supervisor graph's node spans carry increasing steps; with every end moved past the next start, the same edges and no gap", async () => {
    const { instrumentLangChain, runSupervisor } = await import('./fixtures/frameworks/langgraph.js');
    const mem = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    instrumentLangChain(provider);
    await runSupervisor({ supervisorScript: [{ tool: 'transfer_to_researcher' }, { tool: 'transfer_to_writer' }, { text: 'done' }] });
    await provider.forceFlush();
    const decoded = decodeExportTraceRequest(ProtobufTraceSerializer.serializeRequest(mem.getFinishedSpans())!).spans;
    const root = decoded.find((s) => s.parentSpanId === null)!;
    const nodes = decoded.filter((s) => s.parentSpanId === root.spanId && s.name === s.attrs['metadata.langgraph_node'] && s.name !== '__start__').sort((a, b) => a.startMs - b.startMs);
    expect(nodes.map((s) => s.name)).toEqual(['supervisor', 'researcher', 'supervisor', 'writer', 'supervisor']);
    const steps = nodes.map((s) => s.attrs['metadata.langgraph_step'] as number);
    for (let i = 1; i < steps.length; i++) expect(steps[i]).toBeGreaterThan(steps[i - 1]);
    const read = (spans: SpanRecord[]) => show(new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 }).process(spans, 0).receipts.filter((r) => r.type === 'edge' || r.type === 'gap'));
    const asSent = read(decoded);
    expect(asSent).toEqual(['researcher->supervisor:return', 'supervisor->researcher:delegate', 'supervisor->writer:delegate', 'writer->supervisor:return']);
    // Each node's end recorded late, past the next node's start (a loaded host's background callbacks): same reading.
    const late = decoded.map((s) => {
      const i = nodes.indexOf(s);
      return i >= 0 && i + 1 < nodes.length ? { ...s, endMs: nodes[i + 1].startMs + 5 } : s;
    });
    expect(read(late)).toEqual(asSent);
    // The same late ends without the steps: the times alone read parallel nodes (what a loaded host gave before).
    const noSteps = late.map((s) => {
      const { 'metadata.langgraph_step': _, ...attrs } = s.attrs;
      return { ...s, attrs };
    });
    expect(read(noSteps)).toContain('gap:langgraph_parallel_nodes');
    await provider.shutdown();
  }, 60_000);
});
