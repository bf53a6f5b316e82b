/**
 * The pieces behind the framework support, on real exporter bytes and hand-made span records: the `metadata`
 * scanner (only `langgraph_node` is ever decoded), the LangGraph reading's refusals (parallel nodes, a root
 * that never arrives), and the run key (a run per unit of work; the conversation only when named).
 */
import fc from 'fast-check';
import { ProtobufTraceSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../src/otlp/index.js';
import { langgraphNodeOf, MAX_NODE_BYTES } from '../src/otlp/metadata.js';
import { parseLoggedSpan, SpanPipeline, type LoggedSpan } from '../src/ingest/pipeline.js';
import { isTaskPath } from '../src/ingest/dialects/langgraph.js';
import { derivedBinding, evidenceOf } from '../src/ingest/trust.js';
import { parseRunKey } from '../src/ingest/runkey.js';
import type { SpanRecord } from '../src/otlp/types.js';
import type { Receipt } from '../src/core/types.js';
import type { LooseReceipt } from './helpers/receipt.js';

const SECRET = 'SECRET-metadata-3b9f';

function exported(metadata: string, scope = '@arizeai/openinference-instrumentation-langchain') {
  const mem = new InMemorySpanExporter();
  const p = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
  p.getTracer(scope).startSpan('researcher', { attributes: { metadata, 'openinference.span.kind': 'CHAIN', 'input.value': SECRET } }).end();
  const spans = mem.getFinishedSpans();
  return { pb: ProtobufTraceSerializer.serializeRequest(spans)!, json: new TextDecoder().decode(JSONTraceBytes(spans)) };
}
const JSONTraceBytes = (spans: Parameters<typeof JsonTraceSerializer.serializeRequest>[0]) => JsonTraceSerializer.serializeRequest(spans)!;

describe('metadata: only langgraph_node (with its namespace and step) is kept', () => {
  it('keeps the node (protobuf and JSON, from the real serializers) and nothing else of the metadata', () => {
    const meta = JSON.stringify({ thread_id: SECRET, langgraph_step: 3, checkpoint_ns: `x|${SECRET}`, nested: { langgraph_node: 'evil' }, langgraph_node: 'researcher', tags: [SECRET] });
    const { pb, json } = exported(meta);
    for (const d of [decodeExportTraceRequest(pb), decodeExportTraceJson(json)]) {
      expect(d.spans[0].attrs).toMatchObject({ 'metadata.langgraph_node': 'researcher', 'metadata.langgraph_step': 3, 'openinference.span.kind': 'CHAIN' });
      expect(Object.keys(d.spans[0].attrs).sort()).toEqual(['metadata.langgraph_node', 'metadata.langgraph_step', 'openinference.span.kind']); // service.name is not kept either
      expect(d.spans[0].scope).toBe('@arizeai/openinference-instrumentation-langchain');
      expect(JSON.stringify(d.spans)).not.toContain(SECRET);
    }
  });

  it('keeps langgraph_checkpoint_ns beside the node (both transports); the reading uses it only when every segment is an id', () => {
    const ns = 'supervisor:ab6d731f-16fa-5e72-b4bb-2ffd243b7994|researcher:5bfd3063-90a5-5b50-8da3-043791c462e6';
    const { pb, json } = exported(JSON.stringify({ thread_id: SECRET, langgraph_checkpoint_ns: ns, langgraph_node: 'researcher', checkpoint_ns: SECRET }));
    for (const d of [decodeExportTraceRequest(pb), decodeExportTraceJson(json)]) {
      expect(d.spans[0].attrs['metadata.langgraph_checkpoint_ns']).toBe(ns);
      expect(JSON.stringify(d.spans)).not.toContain(SECRET);
    }
    // an escaped namespace is not decoded; a namespace without a node is not kept
    expect(decodeExportTraceRequest(exported('{"langgraph_node":"researcher","langgraph_checkpoint_ns":"a\\u007cb"}').pb).spans[0].attrs['metadata.langgraph_checkpoint_ns']).toBeUndefined();
    expect(decodeExportTraceRequest(exported(JSON.stringify({ langgraph_checkpoint_ns: ns })).pb).spans[0].attrs['metadata.langgraph_checkpoint_ns']).toBeUndefined();
    expect(isTaskPath(ns)).toBe(true);
    expect(isTaskPath('supervisor')).toBe(true);
    for (const bad of ['', 'a b:1', `x:${SECRET} y`, 'a:1||b:2', 'a:1|'.repeat(40) + 'b', '-x:1']) expect(isTaskPath(bad), bad).toBe(false);
    const base = { t: 'a'.repeat(32), s: 'b'.repeat(16), p: null, src: 'auditor', op: 'langgraph', st: 1, en: 2, sc: 0, node: 'researcher', xfer: null };
    expect(parseLoggedSpan({ ...base, ns })).toMatchObject({ ns });
    expect(parseLoggedSpan({ ...base, ns: 'not an id:1' })).toBeNull();
  });

  it('reads no node from a nested key, an escaped or over-long value, a non-string or malformed JSON', () => {
    for (const meta of [
      JSON.stringify({ nested: { langgraph_node: 'evil' } }),
      '{"langgraph_node":"res\\u0065archer"}',
      JSON.stringify({ langgraph_node: 'x'.repeat(MAX_NODE_BYTES + 1) }),
      JSON.stringify({ langgraph_node: 7 }),
      '{"langgraph_node":"researcher"', // unterminated object still names it: accepted as far as read
      '{"a":"unterminated, "langgraph_node":"x"}',
      '["langgraph_node","researcher"]',
      'not json',
    ]) {
      const { pb } = exported(meta);
      const node = decodeExportTraceRequest(pb).spans[0].attrs['metadata.langgraph_node'];
      if (meta === '{"langgraph_node":"researcher"') expect(node).toBe('researcher');
      else expect(node, meta).toBeUndefined();
    }
  });

  it('agrees with JSON.parse on arbitrary metadata objects', () => {
    const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), fc.string(), { maxKeys: 3 }));
    fc.assert(
      fc.property(fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constant('langgraph_node')), value, { maxKeys: 6 }), (obj) => {
        const text = JSON.stringify(obj);
        const bytes = new TextEncoder().encode(text);
        const v = (JSON.parse(text) as Record<string, unknown>).langgraph_node;
        const plain = typeof v === 'string' && v.length > 0 && !JSON.stringify(v).slice(1, -1).includes('\\') && new TextEncoder().encode(v).length <= MAX_NODE_BYTES;
        expect(langgraphNodeOf(bytes, 0, bytes.length)).toBe(plain ? v : null);
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

describe('LangGraph reading: refusals are gaps, never guesses', () => {
  const node = (traceId: string, parent: string, name: string, startMs: number, endMs: number) =>
    rec({ traceId, parentSpanId: parent, name, startMs, endMs, attrs: { 'openinference.span.kind': 'CHAIN', 'metadata.langgraph_node': name } });

  it('nodes that overlap in time (a fan-out superstep) give a gap, not an edge between them', () => {
    const t = id(32);
    const root = rec({ traceId: t, name: 'LangGraph', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const out = p.process([node(t, root.spanId, 'planner', 1, 10), node(t, root.spanId, 'a', 11, 30), node(t, root.spanId, 'b', 12, 30), root], 0);
    expect(out.receipts.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.type === 'gap' ? r.reason : undefined}`)).sort()).toEqual(['gap:langgraph_parallel_nodes', 'planner->a:handoff']);
  });

  it('tasks inside an entrypoint without a checkpoint namespace: gaps, never a handoff between the sibling tasks', () => {
    const t = id(32);
    const root = rec({ traceId: t, name: 'supervisor', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const out = p.process([node(t, root.spanId, 'researcher', 10, 40), node(t, root.spanId, 'writer', 50, 90), node(t, root.spanId, 'supervisor', 1, 99), root], 0);
    expect(out.receipts.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.type === 'gap' ? `${r.reason}:${r.to}` : 'undefined:undefined'}`)).sort()).toEqual([
      'gap:langgraph_parallel_nodes:researcher',
      'gap:langgraph_parallel_nodes:writer',
    ]);
  });

  it('with the namespace, each task is a call from the entrypoint: delegate + return (one span per batch in export order, or one batch)', () => {
    const t = id(32);
    const root = rec({ traceId: t, name: 'supervisor', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });
    const withNs = (r: SpanRecord, ns: string) => ({ ...r, attrs: { ...r.attrs, 'metadata.langgraph_checkpoint_ns': ns } });
    const spans = [
      withNs(node(t, root.spanId, 'researcher', 10, 40), 'supervisor:1|researcher:2'),
      withNs(node(t, root.spanId, 'writer', 50, 90), 'supervisor:1|writer:3'),
      withNs(node(t, root.spanId, 'supervisor', 1, 99), 'supervisor:1'),
      root,
    ];
    for (const batches of [spans.map((s) => [s]), [[...spans].reverse()]]) {
      const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
      const out = batches.flatMap((b, i) => p.process(b, i).receipts);
      expect(out.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.type === 'gap' ? r.reason : undefined}`)).sort()).toEqual([
        'researcher->supervisor:return',
        'supervisor->researcher:delegate',
        'supervisor->writer:delegate',
        'writer->supervisor:return',
      ]);
    }
  });

  it('a graph whose root never arrives is a gap once the wait ends', () => {
    const t = id(32);
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    expect(p.process([node(t, id(16), 'planner', 1, 10)], 0).receipts).toEqual([]);
    expect(p.expire(500)).toEqual([]);
    expect(p.expire(5000).map((r: LooseReceipt) => [r.type, r.reason, r.run])).toEqual([['gap', 'langgraph_root_unseen', t]]);
  });
});

describe('LangGraph spans carry their source and wait in the span log without content', () => {
  const MARK = 'MARK-lg-unit-77aa';
  const node = (traceId: string, parent: string, name: string, startMs: number, endMs: number) =>
    rec({ traceId, parentSpanId: parent, name, startMs, endMs, attrs: { 'openinference.span.kind': 'CHAIN', 'metadata.langgraph_node': name } });
  function supervisorGraph(worker: string) {
    const t = id(32);
    const root = rec({ traceId: t, name: 'LangGraph', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });
    const n1 = node(t, root.spanId, 'supervisor', 1, 10);
    const xfer = rec({ traceId: t, parentSpanId: n1.spanId, name: `transfer_to_${worker}`, startMs: 5, endMs: 6, attrs: { 'openinference.span.kind': 'TOOL', 'metadata.langgraph_node': 'tools' } });
    return { root, n1, xfer, n2: node(t, root.spanId, worker, 11, 20), n3: node(t, root.spanId, 'supervisor', 21, 30) };
  }
  const show = (rs: { type: string; from?: string; to?: string; kind?: string; reason?: string }[]) => rs.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.reason}`)).sort();

  it("each edge's evidence is the source of the node span naming each end (and of the transfer naming the target)", () => {
    const g = supervisorGraph('researcher');
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    expect(p.process([g.xfer, g.n1, g.n3], 0, 'src-graph').receipts).toEqual([]);
    expect(p.process([g.n2], 0, 'src-other').receipts).toEqual([]);
    const out = p.process([g.root], 0, 'src-graph');
    expect(show(out.receipts)).toEqual(['researcher->supervisor:return', 'supervisor->researcher:delegate']);
    const delegate = out.receipts.find((r) => r.type === 'edge' && r.kind === 'delegate')!;
    expect(evidenceOf(delegate)).toEqual({ from: ['src-graph'], to: ['src-other', 'src-graph'], span: 'src-other' });
    expect(evidenceOf(out.receipts.find((r) => r.type === 'edge' && r.kind === 'return')!)).toMatchObject({ from: ['src-other'], to: ['src-graph'] });
    // Bound sources: `src-other` may speak for `verifier` only, so neither edge passes the binding check.
    const sources = (s: string) => (s === 'src-graph' ? new Set(['supervisor', 'researcher']) : new Set(['verifier']));
    for (const r of out.receipts) expect(derivedBinding(r, evidenceOf(r), sources)).toMatch(/source src-other may not speak for agent "researcher"/);
    const honest = (s: string) => (s === 'src-graph' || s === 'src-other' ? new Set(['supervisor', 'researcher']) : null);
    for (const r of out.receipts) expect(derivedBinding(r, evidenceOf(r), honest)).toBeNull();
  });

  it('logs ids, validated names, times, status and source only; a replay into a new pipeline reads the graph when the root comes', () => {
    const g = supervisorGraph(`Dr ${MARK} the helpful`);
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const out = p.process([g.xfer, g.n1, g.n2, g.n3], 0, 'src-graph');
    expect(p.pendingTraceIds()).toEqual(new Set([g.root.traceId]));
    const logged = out.pendingLog.flatMap((e) => e.spans);
    expect(logged).toHaveLength(4);
    expect(JSON.stringify(out.pendingLog)).not.toContain(MARK);
    expect(logged.every((l) => l.op === 'langgraph' && l.src === 'src-graph')).toBe(true);
    expect(logged.map((l) => [l.node, l.xfer])).toEqual([[null, ''], ['supervisor', null], ['', null], ['supervisor', null]]);
    // Through the store's JSON and back, every record validates; a record holding text where a name goes does not.
    const back = JSON.parse(JSON.stringify(logged)).map(parseLoggedSpan);
    expect(back).toEqual(logged);
    expect(parseLoggedSpan({ ...logged[2], node: `Dr ${MARK}` })).toBeNull();
    expect(parseLoggedSpan({ ...logged[0], xfer: `${MARK} please` })).toBeNull();
    expect(parseLoggedSpan({ ...logged[0], en: undefined })).toBeNull();

    const fresh = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const replayed = fresh.replay(back, 0);
    expect(replayed.receipts).toEqual([]);
    expect(replayed.pendingLog.flatMap((e) => e.spans)).toEqual(logged); // still waiting: logged again
    const done = fresh.process([g.root], 0, 'src-graph');
    const direct = p.process([g.root], 0, 'src-graph');
    expect(show(done.receipts)).toEqual(['gap:agent_id_invalid']);
    expect(done.receipts).toEqual(direct.receipts);
    expect(done.agentIdsRefused).toBe(1);
    expect(fresh.pendingTraceIds().size).toBe(0);
  });

  it('a replayed trace whose root never comes ends as a langgraph_root_unseen gap with the logged source', () => {
    const g = supervisorGraph('researcher');
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    const logged = p.process([g.n1], 0, 'src-graph').pendingLog.flatMap((e) => e.spans);
    const fresh = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    fresh.replay(logged, 10);
    const gaps = fresh.expire(5000);
    expect(show(gaps)).toEqual(['gap:langgraph_root_unseen']);
    expect(evidenceOf(gaps[0])).toEqual({ span: 'src-graph' });
  });
});

describe('run key', () => {
  it('parses the documented forms and refuses others', () => {
    expect(parseRunKey('explicit,invocation,trace')).toEqual(['explicit', 'invocation', 'trace']);
    expect(parseRunKey('explicit,invocation,trace,conversation')).toHaveLength(4);
    expect(() => parseRunKey('explicit,session')).toThrow(/"session" is not one of/);
    expect(() => parseRunKey('trace,trace')).toThrow(/twice/);
  });

  /** Two turns of one conversation: a caller agent span and a callee per trace (ADK-like: the session on every agent span). */
  function twoTurns(): SpanRecord[] {
    const out: SpanRecord[] = [];
    for (const turn of [0, 1]) {
      const t = id(32);
      const a = { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.conversation.id': 'session-1' };
      const caller = rec({ traceId: t, name: 'invoke_agent supervisor', startMs: turn * 100, endMs: turn * 100 + 50, attrs: { ...a, 'gen_ai.agent.name': 'supervisor' } });
      const callee = rec({ traceId: t, parentSpanId: caller.spanId, name: 'invoke_agent researcher', startMs: turn * 100 + 1, endMs: turn * 100 + 9, attrs: { ...a, 'gen_ai.agent.name': 'researcher' } });
      const llm = rec({ traceId: t, parentSpanId: callee.spanId, name: 'call_llm', attrs: { 'gcp.vertex.agent.invocation_id': `e-${turn}` } });
      out.push(llm, callee, caller);
    }
    return out;
  }
  const runsOf = (runKey?: ReturnType<typeof parseRunKey>) => {
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000, runKey });
    const receipts = p.process(twoTurns(), 0).receipts;
    return { runs: new Set(receipts.map((r) => r.run)), edges: receipts.length };
  };

  it('by default each trace (unit of work) is a run; the conversation folds them only when named', () => {
    const byDefault = runsOf();
    expect(byDefault.runs.size).toBe(2);
    expect([...byDefault.runs].every((r) => /^[0-9a-f]{32}$/.test(r))).toBe(true);
    expect(byDefault.edges).toBe(4);
    const folded = runsOf(parseRunKey('explicit,conversation,trace'));
    expect([...folded.runs]).toEqual(['session-1']);
    expect(folded.edges).toBe(4);
  });

  it('an explicit topology.run.id wins over every other key', () => {
    const spans = twoTurns().map((s) => ({ ...s, attrs: { ...s.attrs, 'topology.run.id': 'explicit-run' } }));
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000, runKey: parseRunKey('explicit,conversation,trace') });
    expect(new Set(p.process(spans, 0).receipts.map((r) => r.run))).toEqual(new Set(['explicit-run']));
  });
});

describe('cluster with --span-routing any: a graph split between instances is read by its resolver once every node is there', () => {
  const node = (traceId: string, parent: string, name: string, startMs: number, endMs: number) =>
    rec({ traceId, parentSpanId: parent, name, startMs, endMs, attrs: { 'openinference.span.kind': 'CHAIN', 'metadata.langgraph_node': name } });
  /** A supervisor graph's spans in end (so export) order: transfer, supervisor, worker, supervisor again, root last. */
  function graph() {
    const t = id(32);
    const root = rec({ traceId: t, name: 'LangGraph', startMs: 0, endMs: 100, attrs: { 'openinference.span.kind': 'CHAIN' } });
    const n1 = node(t, root.spanId, 'supervisor', 1, 10);
    const xfer = rec({ traceId: t, parentSpanId: n1.spanId, name: 'transfer_to_researcher', startMs: 5, endMs: 6, attrs: { 'openinference.span.kind': 'TOOL', 'metadata.langgraph_node': 'tools' } });
    return [xfer, n1, node(t, root.spanId, 'researcher', 11, 20), node(t, root.spanId, 'supervisor', 21, 30), root];
  }
  const show = (rs: { type: string; from?: string; to?: string; kind?: string; reason?: string }[]) => rs.map((r) => (r.type === 'edge' ? `${r.from}->${r.to}:${r.kind}` : `${r.type}:${r.reason}`)).sort();
  const EXPECTED = ['researcher->supervisor:return', 'supervisor->researcher:delegate'];

  it('one instance alone reads it when the root arrives', () => {
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 });
    expect(show(graph().flatMap((s) => p.process([s], 0).receipts))).toEqual(EXPECTED);
  });

  it('every split of the exports between the resolver and a forwarding instance, with any timing of its span log reads, gives the same edges and no gap', () => {
    const flags = fc.array(fc.boolean(), { minLength: 5, maxLength: 5 });
    fc.assert(
      fc.property(flags, flags, flags, (forwarded, startRead, finishRead) => {
        const owner = new SpanPipeline({ waitMs: 60_000, maxSpans: 1000, deferLangGraphRoots: true });
        const other = new SpanPipeline({ waitMs: 60_000, maxSpans: 1000 });
        const shared: string[] = []; // the shared span log: forwarded records as stored (JSON), in commit order
        const receipts: Receipt[] = [];
        let clock = 0;
        // A read of the shared span log by the resolver sees what was committed when it began; exports may arrive
        // while it runs; when it is done, the roots that arrived before it began are read.
        let read: { began: number; seen: string[] } | null = null;
        const begin = () => {
          read = { began: ++clock, seen: shared.splice(0) };
        };
        const finish = () => {
          const r = read!;
          read = null;
          for (const body of r.seen) {
            const spans = (JSON.parse(body) as unknown[]).map(parseLoggedSpan);
            expect(spans.every((x) => x !== null)).toBe(true);
            receipts.push(...owner.replay(spans as LoggedSpan[], ++clock).receipts);
          }
          receipts.push(...owner.readLangGraphRoots(r.began).receipts);
        };
        graph().forEach((span, i) => {
          // One export at a time (an SDK's batch processor): acknowledged (committed) before the next is sent.
          if (forwarded[i]) {
            const out = other.forward([span], 'src-b');
            expect(out.receipts).toEqual([]);
            for (const e of out.forwardLog) shared.push(JSON.stringify(e.spans));
          } else receipts.push(...owner.process([span], ++clock, 'src-a').receipts);
          if (read !== null && finishRead[i]) finish();
          if (read === null && startRead[i]) begin();
        });
        if (read !== null) finish();
        for (let k = 0; k < 2; k++) {
          begin();
          finish();
        }
        expect(show(receipts)).toEqual(EXPECTED);
        expect(owner.langgraph.waiting).toBe(0);
        expect(owner.langgraph.deferredRoots).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('forwards node, transfer and root records with ids and validated names only; a root record needs a valid run', () => {
    const MARK = 'MARK-lg-forward-5e1c';
    const [xfer, n1, , , root] = graph();
    const prose = { ...n1, name: `Dr ${MARK}`, attrs: { ...n1.attrs, 'metadata.langgraph_node': `Dr ${MARK}` } };
    const out = new SpanPipeline({ waitMs: 1000, maxSpans: 1000 }).forward([xfer, prose, root], 'src-b');
    const logged = out.forwardLog.flatMap((e) => e.spans);
    expect(JSON.stringify(out.forwardLog)).not.toContain(MARK);
    expect(logged.map((l) => [l.op, l.node ?? null, l.xfer ?? null])).toEqual([['langgraph', null, 'researcher'], ['langgraph', '', null], ['lgroot', null, null]]);
    expect(logged[2].run).toBe(root.traceId);
    expect(out.dropped).toBe(0);
    expect(JSON.parse(JSON.stringify(logged)).map(parseLoggedSpan)).toEqual(logged);
    expect(parseLoggedSpan({ ...logged[2], run: `${MARK} and more prose` })).toBeNull();
    expect(parseLoggedSpan({ ...logged[2], run: undefined })).toBeNull();
    expect(parseLoggedSpan({ ...logged[2], st: -1 })).toBeNull();
  });

  it('a deferred root with no node beneath it is forgotten; nodes whose root never comes still end as a gap', () => {
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 1000, deferLangGraphRoots: true });
    const [, n1, , , root] = graph();
    const chain = rec({ traceId: id(32), name: 'RunnableSequence', startMs: 0, endMs: 5, attrs: { 'openinference.span.kind': 'CHAIN' } });
    p.process([chain], 0);
    expect(p.langgraph.deferredRoots).toBe(1);
    expect(p.readLangGraphRoots(1).receipts).toEqual([]);
    expect(p.langgraph.deferredRoots).toBe(0);
    // A root read before its nodes arrived gives nothing and is gone: the nodes wait, then become a gap.
    p.process([root], 10);
    expect(p.readLangGraphRoots(11).receipts).toEqual([]);
    p.process([n1], 12);
    expect(show(p.expire(5000))).toEqual(['gap:langgraph_root_unseen']);
  });
});
