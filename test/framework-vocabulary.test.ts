/**
 * Issue 45: an agent is an agent in any vocabulary, and a trace with agent signals is never left to the coverage counts.
 * Synthetic spans recorded through the real OpenTelemetry SDK and the real OTLP serializers (protobuf and JSON), decoded
 * by the auditor's decoders, for the shapes nobody names:
 * - agent spans typed in a framework's own namespace (`<ns>.observation.type = agent`, `<ns>:metadata:subtype = agent`,
 *   `<ns>_span_kind = AGENT`), the agent named by the namespace's id/key attribute, its name attribute or the span name,
 *   a sub-agent's tool span (named after the callee) between two agents;
 * - LangChain's prebuilt agent (`createAgent`) with sub-agents called as tools, traced by OpenInference: every graph
 *   level holds only `model_request` / `tools`, the agent named only in `metadata.lc_agent_name` (or the root's name);
 * - the same application through a tracing SDK's LangChain callback handler: `<ns>.observation.metadata.lc_agent_name`;
 * - a trace with agent-like keys but no identity: listed at /api/v1/ingest/unmapped with the keys seen, `explain` agreeing.
 * Each shape gives its exact edges in the pipeline, and (over real OTLP to a real `serve` child with the
 * supervisor-workers contract) a healthy run and a `forbidden_edge` naming `supervisor -> publisher : delegate`.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT_CONTEXT, trace, type Attributes, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainSpans, explanationText } from '../src/ingest/explain.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../src/otlp/index.js';
import { decodeLoggedSpans, encodeLoggedSpans } from '../src/ingest/span-log.js';
import type { SpanRecord } from '../src/otlp/types.js';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';
import { allBytes, delegateAndReturn, newRun, runView } from './helpers/framework-runs.js';

const CONTENT = 'CONTENT-MARKER-45c0ffee';
const T0 = Date.parse('2026-03-02T09:00:00Z');

/** A span tree: name, attributes, children; started and ended in order on a clock of 10 ms steps. */
interface Node {
  name: string;
  attrs?: Attributes;
  children?: Node[];
}

function record(tracer: Tracer, n: Node, clock: { t: number }, parent = ROOT_CONTEXT): void {
  const span = tracer.startSpan(n.name, { startTime: T0 + (clock.t += 10), attributes: n.attrs, root: parent === ROOT_CONTEXT }, parent);
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  for (const c of n.children ?? []) record(tracer, c, clock, ctx);
  span.end(T0 + (clock.t += 10));
}

/** The spans of `roots` as both transports decode them (export order: children first). */
function decoded(roots: Node[], scope = 'some-agent-framework'): { protobuf: SpanRecord[]; json: SpanRecord[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer(scope);
  const clock = { t: 0 };
  for (const r of roots) record(tracer, r, clock);
  const finished = exporter.getFinishedSpans();
  const protobuf = finished.flatMap((s) => decodeExportTraceRequest(ProtobufTraceSerializer.serializeRequest([s])!).spans);
  const json = finished.flatMap((s) => decodeExportTraceJson(new TextDecoder().decode(JsonTraceSerializer.serializeRequest([s])!)).spans);
  return { protobuf, json };
}

/** The receipts of `spans` through the pipeline (every wait run out), as edge lines in time order. */
function edgesOf(spans: SpanRecord[]): string[] {
  const p = new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 });
  const now = spans.reduce((m, s) => Math.max(m, s.endMs), 0);
  const rs = [...p.process(spans, now).receipts, ...p.expire(now + 10_000)];
  rs.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.event < b.event ? -1 : 1));
  return rs.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : r.type === 'gap' ? `gap ${r.reason}` : r.type));
}

/** Both transports give the same edges. */
function edgesBoth(roots: Node[]): string[] {
  const { protobuf, json } = decoded(roots);
  const a = edgesOf(protobuf);
  expect(edgesOf(json)).toEqual(a);
  return a;
}

// ---- shape 1: agent spans typed in the framework's own vocabulary -------------------------------------------------

interface Vocabulary {
  what: string;
  /** The attributes of an agent span of `agent` (typed agent, its identity where this vocabulary puts it). */
  agent: (agent: string) => Attributes;
  /** The span name of that agent span. */
  spanName: (agent: string) => string;
  /** The attributes of a tool or model span (of `agent`'s run, for a model span). */
  other: (kind: 'tool' | 'generation', agent: string) => Attributes;
  /** What `explain` says the identity came from. */
  from: RegExp;
}

const VOCABULARIES: Vocabulary[] = [
  {
    what: '`.` separators, `acme.observation.type = agent`, the agent in the span name only',
    agent: () => ({ 'acme.observation.type': 'agent', 'acme.observation.input': `ask ${CONTENT}`, 'acme.trace.name': 'trip' }),
    spanName: (a) => a,
    other: (k) => ({ 'acme.observation.type': k, 'acme.observation.output': CONTENT }),
    from: /identity from the span name/,
  },
  {
    what: '`:` separators, `kit:metadata:subtype = agent`, the agent in `kit:key` (another level of the namespace), a display name as span name',
    agent: (a) => ({ 'kit:type': 'action', 'kit:metadata:subtype': 'agent', 'kit:key': a, 'kit:input': CONTENT }),
    spanName: (a) => `Agent ${a.toUpperCase()} run`,
    other: (k) => ({ 'kit:type': 'action', 'kit:metadata:subtype': k === 'tool' ? 'tool' : 'model', 'kit:key': `${k}-x`, 'kit:output': CONTENT }),
    from: /identity from kit:key \(the namespace's id attribute\)/,
  },
  {
    what: '`_` separators, `zed_span_kind = AGENT` (upper case), the agent in `zed_agent_name`',
    agent: (a) => ({ zed_span_kind: 'AGENT', zed_agent_name: a, zed_prompt: CONTENT }),
    spanName: () => 'agent.run',
    other: (k) => ({ zed_span_kind: k.toUpperCase() }),
    from: /identity from zed_agent_name \(the namespace's name attribute\)/,
  },
  {
    what: 'id and name both: `fw.span.type = Agent` with `fw.span.id` (an opaque id) and `fw.span.name`: the id wins',
    agent: (a) => ({ 'fw.span.type': 'Agent', 'fw.span.id': `${a}-v1`, 'fw.span.name': a }),
    spanName: (a) => `invoke ${a}`,
    other: (k) => ({ 'fw.span.type': k, 'fw.span.id': '7f3a', 'fw.span.name': k }),
    from: /identity from fw\.span\.id \(the namespace's id attribute\)/,
  },
  {
    what: 'every span of an agent\'s run typed agent (`vx.entity.kind = agent` on its model span too, `vx.entity.id`): the model span is the agent\'s own step',
    agent: (a) => ({ 'vx.entity.kind': 'agent', 'vx.entity.id': a }),
    spanName: (a) => `run ${a}`,
    other: (k, a) => (k === 'tool' ? { 'vx.entity.kind': 'tool', 'vx.entity.id': 'delegate' } : { 'vx.entity.kind': 'agent', 'vx.entity.id': a, 'vx.span.kind': 'llm' }),
    from: /identity from vx\.entity\.id \(the namespace's id attribute\)/,
  },
];

/** supervisor -> (tool span named after the callee) -> worker agent, for each worker, in vocabulary `v`. */
function typedTrace(v: Vocabulary, workers: string[]): Node {
  const agent = (a: string, children: Node[] = []): Node => ({ name: v.spanName(a), attrs: v.agent(a), children: [{ name: 'llm', attrs: v.other('generation', a) }, ...children] });
  return agent('supervisor', workers.map((w) => ({ name: w, attrs: v.other('tool', 'supervisor'), children: [agent(w)] })));
}

describe('agent spans typed in any namespace', () => {
  for (const v of VOCABULARIES) {
    it(`${v.what}: delegate + return through the tool span, same on both transports; explain says where the identity came from`, () => {
      const edges = edgesBoth([typedTrace(v, ['researcher', 'writer'])]);
      const ids = v.what.includes('the id wins') ? ['researcher-v1', 'writer-v1'] : ['researcher', 'writer'];
      const sup = v.what.includes('the id wins') ? 'supervisor-v1' : 'supervisor';
      expect(edges).toEqual(delegateAndReturn(sup, ids));
      const { protobuf } = decoded([typedTrace(v, ['researcher'])]);
      const e = explainSpans(protobuf, { waitMs: 1000 });
      expect(e.traces[0].unmapped).toBeNull();
      const agentLines = e.spans.filter((s) => s.dialect === 'typed');
      expect(agentLines.length).toBe(v.what.includes('every span') ? 4 : 2);
      for (const s of agentLines) expect(s.rule).toMatch(v.from);
      expect(explanationText(e)).not.toContain(CONTENT);
      expect(JSON.stringify(protobuf)).not.toContain(CONTENT);
    });
  }

  it('a named dialect still wins: a span with GenAI invoke_agent and a typed key is read as GenAI', () => {
    const edges = edgesBoth([
      {
        name: 'invoke_agent supervisor',
        attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'supervisor', 'acme.observation.type': 'agent' },
        children: [{ name: 'researcher', attrs: { 'acme.observation.type': 'tool' }, children: [{ name: 'ignored-span-name', attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', 'acme.observation.type': 'agent' } }] }],
      },
    ]);
    expect(edges).toEqual(delegateAndReturn('supervisor', ['researcher']));
  });

  it('a type key whose value is not `agent`, and id/name keys outside the type key\'s namespace, type nothing', () => {
    const { protobuf } = decoded([
      { name: 'supervisor', attrs: { 'acme.observation.type': 'chain', 'acme.observation.name': 'supervisor' }, children: [{ name: 'researcher', attrs: { 'other.type': 'agent', 'acme.observation.name': 'researcher' } }] },
    ]);
    // `other.type = agent` types its span; its namespace `other` has no id or name: the span name is the agent.
    const inner = protobuf.find((s) => s.name === 'researcher')!;
    expect(inner.attrs['agent.typed.key']).toBe('other.type');
    expect(inner.attrs['agent.typed.name']).toBeUndefined();
    const outer = protobuf.find((s) => s.name === 'supervisor')!;
    expect(Object.keys(outer.attrs).filter((k) => k.startsWith('agent.typed') || k.startsWith('acme'))).toEqual([]);
  });
});

// ---- shape 2: LangChain createAgent with sub-agents as tools, traced by OpenInference ------------------------------

const meta = (m: Record<string, unknown>) => JSON.stringify({ thread_id: CONTENT, ...m });
let taskSeq = 0;
const taskId = () => `00000000-0000-4000-8000-${String(++taskSeq).padStart(12, '0')}`;

/**
 * One run of a prebuilt agent loop (`model_request`, `tools`, ..., `model_request`) beneath its graph span; each
 * `calls` entry is a sub-agent called as a tool from one `tools` step. `lc` names the agent in the metadata (or not).
 */
function agentLoop(agent: string | null, calls: string[], ns: string | null, opts: { lc: boolean }): Node[] {
  const nodes: Node[] = [];
  let step = 0;
  const node = (name: string, children: Node[] = []): Node => {
    const id = taskId();
    const path = ns ? `${ns}|${name}:${id}` : `${name}:${id}`;
    const m: Record<string, unknown> = { langgraph_node: name, langgraph_step: ++step, langgraph_checkpoint_ns: path };
    if (opts.lc && agent) m.lc_agent_name = agent;
    const n: Node = { name, attrs: { 'openinference.span.kind': 'CHAIN', metadata: meta(m) }, children: [{ name: 'ChatModel', attrs: { 'openinference.span.kind': 'LLM', metadata: meta(m), 'llm.input_messages.0.message.content': CONTENT } }, ...children] };
    (n as Node & { path: string }).path = path;
    return n;
  };
  nodes.push(node('model_request'));
  for (const callee of calls) {
    const tools = node('tools');
    const path = (tools as Node & { path: string }).path;
    const toolMeta = { langgraph_node: 'tools', langgraph_step: step, langgraph_checkpoint_ns: path, ...(opts.lc && agent ? { lc_agent_name: agent } : {}) };
    tools.children = [
      { name: callee, attrs: { 'openinference.span.kind': 'TOOL', metadata: meta(toolMeta), 'tool.name': callee, 'input.value': CONTENT }, children: [subAgentGraph(callee, path)] },
    ];
    nodes.push(tools);
    nodes.push(node('model_request'));
  }
  return nodes;
}

/** A named sub-agent's graph invoked from a tool: its graph span (named after it) holding its own loop. */
function subAgentGraph(agent: string, parentNs: string): Node {
  return {
    name: agent,
    attrs: { 'openinference.span.kind': 'CHAIN', metadata: meta({ langgraph_node: 'tools', langgraph_checkpoint_ns: parentNs, lc_agent_name: agent }) },
    children: agentLoop(agent, [], parentNs, { lc: true }),
  };
}

function createAgentTrace(workers: string[], opts: { lc: boolean } = { lc: true }): Node {
  return { name: 'supervisor', attrs: { 'openinference.span.kind': 'CHAIN', metadata: meta({}) }, children: agentLoop('supervisor', workers, null, opts) };
}

describe('LangChain createAgent with sub-agents as tools (OpenInference)', () => {
  it('lc_agent_name names each prebuilt loop: supervisor -> researcher/writer delegate + return', () => {
    expect(edgesBoth([createAgentTrace(['researcher', 'writer'])])).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
  });

  it('without lc_agent_name on the top loop, the graph root span\'s name is its agent', () => {
    expect(edgesBoth([createAgentTrace(['researcher', 'writer'], { lc: false })])).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
  });

  it('a sub-agent that inherits its caller\'s lc_agent_name (unnamed) is folded into the caller: no self-edge, as before', () => {
    const t = createAgentTrace([]);
    const tools = agentLoop('supervisor', ['helper'], null, { lc: true });
    // rename the helper's own loop to the supervisor's name (metadata inherited, the sub-agent has no name)
    const helperGraph = tools[1].children![0].children![0];
    helperGraph.children = agentLoop('supervisor', [], null, { lc: true });
    t.children = tools;
    const edges = edgesBoth([t]);
    expect(edges.filter((e) => e.includes('supervisor -> supervisor'))).toEqual([]);
  });
});

// ---- shape 3: the same application through a tracing SDK's LangChain callback handler -----------------------------

/** Every span carries `<ns>.observation.metadata.lc_agent_name` (the handler flattens the run metadata). */
function callbackTrace(ns: string, sep: string, workers: string[]): Node {
  const k = (s: string) => `${ns}${sep}observation${sep}${s}`;
  const span = (name: string, type: string, agent: string, node: string | null, children: Node[] = []): Node => ({
    name,
    attrs: { [k('type')]: type, [k(`metadata${sep}lc_agent_name`)]: agent, ...(node ? { [k(`metadata${sep}langgraph_node`)]: node } : {}), [k('input')]: CONTENT },
    children,
  });
  const loop = (agent: string, calls: string[]): Node[] => [
    span('model_request', 'chain', agent, 'model_request', [span('ChatModel', 'generation', agent, 'model_request')]),
    ...calls.flatMap((c) => [span('tools', 'chain', agent, 'tools', [span(c, 'tool', agent, 'tools', [span(c, 'chain', c, null, loop(c, []))])]), span('model_request', 'chain', agent, 'model_request')]),
  ];
  return span('supervisor', 'chain', 'supervisor', null, loop('supervisor', workers));
}

describe('LangChain callback-handler metadata (`<ns>.observation.metadata.lc_agent_name`)', () => {
  for (const [ns, sep] of [
    ['acme', '.'],
    ['kit', ':'],
  ] as const) {
    it(`namespace ${ns}, separator ${sep}: supervisor -> researcher/writer delegate + return; the agent's own spans give no edge`, () => {
      expect(edgesBoth([callbackTrace(ns, sep, ['researcher', 'writer'])])).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    });
  }
});

// ---- a restart while a trace waits -------------------------------------------------------------------------------

describe('the span log keeps what the new rules read', () => {
  const shapes: [string, () => Node][] = [
    ['createAgent through OpenInference (metadata.lc_agent_name on logged LangGraph spans)', () => createAgentTrace(['researcher', 'writer'])],
    ['callback-handler metadata (agent spans that are their agent\'s own steps)', () => callbackTrace('acme', '.', ['researcher', 'writer'])],
    ['typed agent spans', () => typedTrace(VOCABULARIES[1], ['researcher', 'writer'])],
  ];
  for (const [what, build] of shapes) {
    it(`${what}: spans logged before a restart and replayed give the same edges once the root arrives`, () => {
      const { protobuf } = decoded([build()]);
      const root = protobuf.find((x) => x.parentSpanId === null)!;
      const rest = protobuf.filter((x) => x !== root);
      const p1 = new SpanPipeline({ waitMs: 10_000, maxSpans: 10_000 });
      const now = root.endMs;
      const out1 = p1.process(rest, now, 'tok');
      const logged = out1.pendingLog.flatMap((e) => decodeLoggedSpans(root.traceId, encodeLoggedSpans(e.spans)) ?? []);
      expect(logged.length).toBe(out1.pendingLog.reduce((n, e) => n + e.spans.length, 0));
      const p2 = new SpanPipeline({ waitMs: 10_000, maxSpans: 10_000 });
      const before = [...out1.receipts, ...p2.replay(logged, now).receipts];
      const after = [...p2.process([root], now, 'tok').receipts, ...p2.expire(now + 100_000)];
      // A receipt derived again on replay has the same event id (the store keeps one): dedupe as the store does.
      const unique = [...new Map([...before, ...after].map((r) => [r.event, r])).values()];
      const lines = unique
        .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.event < b.event ? -1 : 1))
        .map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : r.type));
      expect(lines).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    });
  }
});

// ---- no silent drops ----------------------------------------------------------------------------------------------

/** Agent-like keys (`crew.agent.role`, `team.handoff_count`) but nothing that names an agent. */
const anonymousTrace = (): Node => ({
  name: 'Crew run',
  attrs: { 'crew.agent.role': `planner ${CONTENT}`, 'app.input': CONTENT },
  children: [{ name: 'Task 1', attrs: { 'team.handoff_count': 2 } }],
});

describe('a trace with agent-like keys and no identity', () => {
  it('is reported unmapped (other/no_dialect) with the keys seen, and explain agrees, naming the keys', () => {
    const { protobuf } = decoded([anonymousTrace()]);
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 });
    const now = protobuf.reduce((m, s) => Math.max(m, s.endMs), 0);
    p.process(protobuf, now);
    p.expire(now + 10_000);
    const reports = p.unmapped.snapshot().traces;
    expect(reports.map((r) => [r.dialect, r.reason, r.keys])).toEqual([['other', 'no_dialect', ['crew.agent.role', 'team.handoff_count']]]);
    const e = explainSpans(protobuf, { waitMs: 1000 });
    expect(e.traces[0].unmapped).toEqual({ dialect: 'other', reason: 'no_dialect', keys: ['crew.agent.role', 'team.handoff_count'] });
    const text = explanationText(e);
    expect(text).toContain('UNMAPPED (other: no_dialect; keys seen: crew.agent.role, team.handoff_count)');
    expect(text).toContain('agent-like attribute keys (crew.agent.role) but no agent identity');
    expect(text).not.toContain(CONTENT);
  });

});

// ---- over real OTLP to a real server ------------------------------------------------------------------------------

describe('real exports to a server (supervisor-workers contract)', () => {
  let server: ServerProcess;
  const seen = new Set<string>();
  beforeAll(async () => {
    const dir = tempDir('ta-vocab-contracts-');
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(dir, 'supervisor-workers.yaml'));
    server = await startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '1s'] });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  async function send(root: Node): Promise<void> {
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` }))] });
    record(provider.getTracer('some-agent-framework'), root, { t: 0 });
    await provider.forceFlush();
    await provider.shutdown();
  }

  const shapes: [string, (workers: string[]) => Node][] = [
    ['typed agent spans (`kit:metadata:subtype = agent`, `kit:key`)', (w) => typedTrace(VOCABULARIES[1], w)],
    ['createAgent with sub-agents as tools (OpenInference, lc_agent_name)', (w) => createAgentTrace(w)],
    ['callback-handler metadata (`acme.observation.metadata.lc_agent_name`)', (w) => callbackTrace('acme', '.', w)],
  ];
  for (const [what, build] of shapes) {
    it(`${what}: healthy with the exact edges, then forbidden_edge naming supervisor -> publisher : delegate; content-free`, async () => {
      await send(build(['researcher', 'writer']));
      const ok = await newRun(server, seen, (v) => v === 'healthy');
      expect((await runView(server, ok.run)).edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
      await send(build(['researcher', 'publisher']));
      const bad = await newRun(server, seen, (v) => v === 'forbidden_edge');
      const view = await runView(server, bad.run);
      expect(view.edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'publisher']));
      expect(view.forbidden).toContain('supervisor -> publisher : delegate');
    }, 60_000);
  }

  it('a trace with agent-like keys but no identity is listed at /api/v1/ingest/unmapped with the keys seen', async () => {
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` }))] });
    record(provider.getTracer('crew-like'), anonymousTrace(), { t: 0 });
    await provider.forceFlush();
    await provider.shutdown();
    const listed = await until('the unmapped listing', async () => {
      const { body } = await getJson<{ traces: { traceId: string; dialect: string; reason: string; keys: string[] }[] }>(`${server.api}/api/v1/ingest/unmapped`);
      return body.traces.find((t) => t.keys.includes('crew.agent.role'));
    });
    expect(listed).toMatchObject({ dialect: 'other', reason: 'no_dialect', keys: ['crew.agent.role', 'team.handoff_count'] });
    // No trace that gave receipts is listed.
    const { body } = await getJson<{ traces: { traceId: string }[] }>(`${server.api}/api/v1/ingest/unmapped`);
    expect(body.traces.length).toBe(1);
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT))).toBe(false);
  }, 60_000);
});
