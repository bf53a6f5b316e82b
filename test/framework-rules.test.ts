/**
 * The general rules every dialect shares (docs/dialects.md "Identity", "Evidence only", "No silent drops"), through
 * the real OpenTelemetry SDK, the real OTLP serializer and the auditor's decoder (and, for the AI SDK, the real `ai`
 * package with a scripted model, exported over OTLP/HTTP to a real `topology-audit serve` child):
 * - the AI SDK's `ai.*` spans: agents used as tools are delegate + return; a call the contract forbids is named;
 * - agents sharing a framework's default `gen_ai.agent.id` are told apart by name (no dropped pair, no lost call);
 * - only a CLIENT span above a span of the same agent is one invocation; an agent calling another instance of
 *   itself is an edge;
 * - an OpenLLMetry agent nested beneath another agent's tool span is called by that agent;
 * - a trace that gave receipts is never reported unmapped; explain and the report agree.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { context, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainSpans } from '../src/ingest/explain.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { decodeExportTraceJson } from '../src/otlp/index.js';
import type { Receipt } from '../src/core/types.js';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';
import { allBytes, newRun, runView, delegateAndReturn } from './helpers/framework-runs.js';
import { CONTENT_MARKER as AI_MARKER, runAiSdkSupervisor } from './fixtures/frameworks/ai-sdk.js';
import { instrumentLangChain, runFunctionalSupervisor } from './fixtures/frameworks/langgraph.js';
import { CONTENT_MARKER, Recorder, SpanKind } from './fixtures/dialects/record.js';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const providerFor = (server: ServerProcess) =>
  new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` }), { scheduledDelayMillis: 20, maxExportBatchSize: 16 })] });

/** supervisor -> (tool) -> worker, every agent span INTERNAL with the framework's default id `agent`. */
function sharedIdTrace(tracer: Tracer, workers: string[]): void {
  const agentAttrs = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.id': 'agent', 'gen_ai.agent.name': name, 'gen_ai.input.messages': `ask ${CONTENT_MARKER}` });
  tracer.startActiveSpan('invoke_agent supervisor', { attributes: agentAttrs('supervisor') }, (sup) => {
    for (const w of workers) {
      tracer.startActiveSpan(`execute_tool ${w}`, { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': w } }, (tool) => {
        tracer.startSpan(`invoke_agent ${w}`, { attributes: agentAttrs(w) }).end();
        tool.end();
      });
    }
    sup.end();
  });
}

/**
 * OpenLLMetry's decorator shape (traceloop `withWorkflow` / `withAgent` / `withTool`: `{name}.workflow`, `{name}.agent`,
 * `{name}.tool` spans with `traceloop.span.kind` and `traceloop.entity.name`): a supervisor agent whose tool spans each
 * run another agent beneath them.
 */
function openllmetryNestedTrace(tracer: Tracer, workers: string[]): void {
  const kind = (k: string, name: string) => ({ 'traceloop.span.kind': k, 'traceloop.entity.name': name, 'traceloop.entity.input': `in ${CONTENT_MARKER}` });
  tracer.startActiveSpan('trip.workflow', { root: true, attributes: kind('workflow', 'trip') }, (root) => {
    tracer.startActiveSpan('supervisor.agent', { attributes: kind('agent', 'supervisor') }, (sup) => {
      for (const w of workers) {
        tracer.startActiveSpan(`ask_${w}.tool`, { attributes: kind('tool', `ask_${w}`) }, (tool) => {
          tracer.startActiveSpan(`${w}.agent`, { attributes: kind('agent', w) }, (agent) => {
            tracer.startSpan('openai.chat', { attributes: { 'gen_ai.prompt.0.content': CONTENT_MARKER, 'llm.request.type': 'chat' } }).end();
            agent.end();
          });
          tool.end();
        });
      }
      sup.end();
    });
    root.end();
  });
}

describe('real exports to a server: AI SDK 6 agents as tools, agents sharing a default id', () => {
  let server: ServerProcess;
  const seen = new Set<string>();
  beforeAll(async () => {
    const dir = tempDir('ta-rules-contracts-');
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(dir, 'supervisor-workers.yaml'));
    server = await startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('AI SDK 6 (experimental_telemetry): sub-agents as tools are delegate + return, healthy; a call to publisher is forbidden_edge; content-free', async () => {
    const provider = providerFor(server);
    const tracer = provider.getTracer('ai');
    await runAiSdkSupervisor(tracer, ['researcher', 'writer']);
    await provider.forceFlush();
    const ok = await newRun(server, seen, (v) => v === 'healthy');
    expect((await runView(server, ok.run)).edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    await runAiSdkSupervisor(tracer, ['researcher', 'publisher']);
    await provider.forceFlush();
    const bad = await newRun(server, seen, (v) => v === 'forbidden_edge');
    const view = await runView(server, bad.run);
    expect(view.edges).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return', 'supervisor -> publisher : delegate', 'publisher -> supervisor : return']);
    expect(view.forbidden).toContain('supervisor -> publisher : delegate');
    expect(allBytes(server.dataDir).includes(Buffer.from(AI_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);

  it('agents sharing the default id `agent` (INTERNAL, agent -> tool -> agent) are told apart by name: healthy, then forbidden_edge', async () => {
    const provider = providerFor(server);
    const tracer = provider.getTracer('some-agent-framework');
    sharedIdTrace(tracer, ['researcher', 'writer']);
    await provider.forceFlush();
    const ok = await newRun(server, seen, (v) => v === 'healthy');
    expect((await runView(server, ok.run)).edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    sharedIdTrace(tracer, ['publisher']);
    await provider.forceFlush();
    const bad = await newRun(server, seen, (v) => v === 'forbidden_edge');
    expect((await runView(server, bad.run)).forbidden).toContain('supervisor -> publisher : delegate');
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);
  it('an OpenLLMetry agent nested under another agent\'s tool span is called by that agent: healthy with the exact edges, then forbidden_edge; content-free', async () => {
    const provider = providerFor(server);
    const tracer = provider.getTracer('@traceloop/node-server-sdk');
    openllmetryNestedTrace(tracer, ['researcher', 'writer']);
    await provider.forceFlush();
    const ok = await newRun(server, seen, (v) => v === 'healthy');
    expect((await runView(server, ok.run)).edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    openllmetryNestedTrace(tracer, ['researcher', 'publisher']);
    await provider.forceFlush();
    const bad = await newRun(server, seen, (v) => v === 'forbidden_edge');
    const view = await runView(server, bad.run);
    expect(view.edges).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return', 'supervisor -> publisher : delegate', 'publisher -> supervisor : return']);
    expect(view.forbidden).toContain('supervisor -> publisher : delegate');
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);
});

describe('coverage endpoint: an unknown framework shows up by its scope, keys only', () => {
  it('GET /api/v1/ingest/coverage lists the scope name and version, span and trace counts and agent-like keys, never values', async () => {
    const server = await startServerProcess({ args: ['--parent-wait', '1s'] });
    try {
      const provider = providerFor(server);
      const tracer = provider.getTracer('acme-agents', '0.3.1');
      for (let i = 0; i < 2; i++) {
        tracer.startActiveSpan('acme.run', { root: true, attributes: { 'acme.crew.name': `crew ${CONTENT_MARKER}` } }, (root) => {
          tracer.startSpan('acme.step', { attributes: { 'acme.agent.role': `role ${CONTENT_MARKER}`, 'acme.handoff.to': `to ${CONTENT_MARKER}`, 'http.method': 'GET' } }).end();
          root.end();
        });
      }
      await provider.forceFlush();
      const scope = await until('the scope in the coverage report', async () => {
        const { body } = await getJson<{ scopes: { scope: string; version: string; spans: number; traces: number; agentKeys: string[] }[] }>(`${server.api}/api/v1/ingest/coverage`);
        return body.scopes.find((s) => s.scope === 'acme-agents' && s.traces === 2);
      });
      expect(scope).toEqual({ scope: 'acme-agents', version: '0.3.1', spans: 4, traces: 2, agentKeys: ['acme.agent.role', 'acme.crew.name', 'acme.handoff.to'] });
      const text = JSON.stringify((await getJson(`${server.api}/api/v1/ingest/coverage`)).body);
      expect(text).not.toContain(CONTENT_MARKER);
      expect(text).not.toContain('http.method');
      await provider.shutdown();
    } finally {
      await server.stop();
    }
  }, 60_000);
});

/** Receipts of a recording, fed one span per batch (children first), then every wait run out. */
function receiptsOf(rec: Recorder): Receipt[] {
  const p = new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 });
  const out: Receipt[] = [];
  let now = 1_000_000;
  for (const s of rec.records()) out.push(...p.process([s], (now += 10)).receipts);
  out.push(...p.expire(now + 10_000));
  return out;
}
const edgesOf = (rs: Receipt[]) => rs.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : `${r.type} ${r.type === 'gap' ? r.reason : ''}`));

describe('identity and nesting, one rule for every dialect', () => {
  it('an agent calling another instance of itself in process is an edge; a CLIENT span over its own remote side is one invocation', () => {
    const r = new Recorder('app');
    const attrs = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.id': name, 'gen_ai.agent.name': name });
    const planner = r.start('invoke_agent planner', { at: 0, attrs: attrs('planner') });
    const tool = r.start('execute_tool replan', { at: 10, parent: planner, attrs: { 'gen_ai.operation.name': 'execute_tool' } });
    const inner = r.start('invoke_agent planner', { at: 20, parent: tool, attrs: attrs('planner') });
    r.end(inner, 30);
    r.end(tool, 40);
    const client = r.start('invoke_agent searcher', { kind: SpanKind.CLIENT, at: 50, parent: planner, attrs: attrs('searcher') });
    const server = r.start('invoke_agent searcher', { kind: SpanKind.SERVER, at: 51, parent: client, attrs: attrs('searcher') });
    r.end(server, 60);
    r.end(client, 61);
    r.end(planner, 100);
    expect(edgesOf(receiptsOf(r))).toEqual(['planner -> planner : delegate', 'planner -> planner : return', 'planner -> searcher : delegate', 'searcher -> planner : return']);
  });

  it('an OpenLLMetry agent span beneath another agent\'s tool span is called by that agent', () => {
    const r = new Recorder('traceloop');
    const agent = (name: string) => ({ 'traceloop.span.kind': 'agent', 'traceloop.entity.name': name, 'traceloop.entity.input': CONTENT_MARKER });
    const root = r.start('trip.workflow', { at: 0, attrs: { 'traceloop.span.kind': 'workflow', 'traceloop.entity.name': 'trip' } });
    const planner = r.start('planner.agent', { at: 1, parent: root, attrs: agent('planner') });
    const tool = r.start('book_hotel.tool', { at: 2, parent: planner, attrs: { 'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'book_hotel' } });
    const booker = r.start('booker.agent', { at: 3, parent: tool, attrs: agent('booker') });
    r.end(booker, 4);
    r.end(tool, 5);
    r.end(planner, 6);
    r.end(root, 7);
    expect(edgesOf(receiptsOf(r))).toEqual(['planner -> booker : delegate', 'booker -> planner : return']);
  });
});

describe('explain shows the identity choice', () => {
  it('agents sharing a default id: explain says the name is the identity and why', () => {
    const mem = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    sharedIdTrace(provider.getTracer('some-agent-framework'), ['researcher', 'writer']);
    const spans = decodeExportTraceJson(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(mem.getFinishedSpans())!)).spans;
    const e = explainSpans(spans, { waitMs: 1000 });
    const researcher = e.spans.find((s) => s.name === 'invoke_agent researcher')!;
    expect(researcher.identity).toBe('gen_ai.agent.name "researcher": gen_ai.agent.id "agent" is shared by 3 names in this trace (researcher, writer, supervisor)');
    expect(researcher.receipts).toEqual(expect.arrayContaining([expect.stringContaining('edge supervisor -> researcher : delegate')]));
    expect(e.traces[0]).toMatchObject({ receipts: 4, unmapped: null });
  });

  it('the same rule and the same note for any dialect: VoltAgent-shaped agents sharing entity.id', () => {
    const r = new Recorder('@voltagent/core');
    const agent = (name: string) => ({ 'entity.type': 'agent', 'entity.id': 'agent', 'entity.name': name });
    const sup = r.start('supervisor', { at: 0, attrs: agent('supervisor') });
    const tool = r.start('tool.ask', { at: 1, parent: sup, attrs: { ...agent('supervisor'), 'span.type': 'tool' } });
    const worker = r.start('worker', { at: 2, parent: tool, attrs: agent('researcher') });
    r.end(worker, 5);
    r.end(tool, 6);
    r.end(sup, 7);
    const spans = r.records();
    expect(edgesOf(receiptsOf(r))).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return']);
    const e = explainSpans(spans, { waitMs: 1000 });
    expect(e.spans.find((s) => s.name === 'worker')!.identity).toBe('agent name (voltagent) "researcher": agent id "agent" is shared by 2 names in this trace (researcher, supervisor)');
    expect(e.spans.find((s) => s.name === 'tool.ask')!.identity).toBeUndefined();
  });
});

describe('coverage: a trace that gave receipts is never unmapped; explain and the report agree', () => {
  it('a LangGraph functional-API trace read in one batch gives its receipts and no unmapped report', async () => {
    const mem = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    instrumentLangChain(provider);
    await runFunctionalSupervisor({ calls: ['researcher', 'writer'] });
    const spans = decodeExportTraceJson(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(mem.getFinishedSpans())!)).spans;
    const e = explainSpans(spans, { waitMs: 1000 });
    expect(e.traces).toHaveLength(1);
    expect(e.traces[0]).toMatchObject({ receipts: 4, unmapped: null });
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 100_000 });
    p.process(spans, 0);
    p.expire(1_000_000);
    expect(p.unmapped.snapshot().traces).toEqual([]);
  });

  it('an AI SDK trace whose calls name no agent (no functionId) is reported as ai-sdk no_dialect, in explain too', async () => {
    const mem = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    const tracer = provider.getTracer('ai');
    tracer.startActiveSpan('ai.generateText', { attributes: { 'ai.operationId': 'ai.generateText', 'ai.prompt': AI_MARKER } }, (s) => {
      tracer.startSpan('ai.generateText.doGenerate', { attributes: { 'ai.operationId': 'ai.generateText.doGenerate' } }).end();
      s.end();
    });
    const spans = decodeExportTraceJson(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(mem.getFinishedSpans())!)).spans;
    const e = explainSpans(spans, { waitMs: 1000 });
    expect(e.traces[0].unmapped).toEqual({ dialect: 'ai-sdk', reason: 'no_dialect' });
    expect(JSON.stringify(e)).not.toContain(AI_MARKER);
    // The ingest's unmapped report names the same dialect and reason as explain.
    const p = new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 });
    p.process(spans, 0);
    p.expire(1_000_000);
    expect(p.unmapped.snapshot().traces.map((t) => `${t.dialect}/${t.reason}`)).toEqual(['ai-sdk/no_dialect']);
    void trace;
  });
});

/**
 * Frameworks no dialect names, modelled only on the public conventions their instrumentations follow (no package of
 * theirs is installed): the same general rules read them right, or list them with a reason; never an invented edge.
 * For each: the receipts, and the unmapped report of the ingest and of `explain` (they must agree).
 */
function judge(rec: Recorder): { edges: string[]; unmapped: string[]; explained: string[] } {
  const spans = rec.records();
  const p = new SpanPipeline({ waitMs: 1000, maxSpans: 10_000 });
  const out: Receipt[] = [];
  let now = 1_000_000;
  for (const s of spans) out.push(...p.process([s], (now += 10)).receipts);
  out.push(...p.expire(now + 10_000));
  const e = explainSpans(spans, { waitMs: 1000 });
  return {
    edges: edgesOf(out),
    unmapped: p.unmapped.snapshot().traces.map((t) => `${t.dialect}/${t.reason}`),
    explained: e.traces.filter((t) => t.unmapped !== null).map((t) => `${t.unmapped!.dialect}/${t.unmapped!.reason}`),
  };
}

describe('frameworks nobody named: the same rules, mapped right or listed with a reason, never invented', () => {
  const invoke = (id: string | undefined, name: string) => ({
    'gen_ai.operation.name': 'invoke_agent',
    ...(id !== undefined ? { 'gen_ai.agent.id': id } : {}),
    'gen_ai.agent.name': name,
    'gen_ai.input.messages': CONTENT_MARKER,
  });

  it('GenAI invoke_agent with opaque per-agent ids (e.g. GUIDs), an agent used as a plugin/tool: delegate + return between the ids', () => {
    const r = new Recorder('some.kernel');
    const a = '3f2b8c1e-planner';
    const b = '9d41aa07-coder';
    const planner = r.start('invoke_agent planner', { at: 0, attrs: invoke(a, 'planner') });
    const tool = r.start('execute_tool coder_plugin', { at: 5, parent: planner, attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'coder_plugin' } });
    const coder = r.start('invoke_agent coder', { at: 6, parent: tool, attrs: invoke(b, 'coder') });
    r.end(coder, 20);
    r.end(tool, 21);
    r.end(planner, 30);
    const j = judge(r);
    expect(j.edges).toEqual([`${a} -> ${b} : delegate`, `${b} -> ${a} : return`]);
    expect(j.unmapped).toEqual([]);
    expect(j.explained).toEqual([]);
  });

  it('agents run one after another under a workflow span (siblings, no handoff evidence): no edge; listed as genai/no_edges in the report and in explain', () => {
    const r = new Recorder('some.graph');
    const wf = r.start('invoke_workflow pipeline', { at: 0, attrs: { 'gen_ai.operation.name': 'invoke_workflow' } });
    const first = r.start('invoke_agent researcher', { at: 1, parent: wf, attrs: invoke(undefined, 'researcher') });
    r.end(first, 10);
    const second = r.start('invoke_agent writer', { at: 11, parent: wf, attrs: invoke(undefined, 'writer') });
    r.end(second, 20);
    r.end(wf, 21);
    const j = judge(r);
    expect(j.edges).toEqual([]);
    expect(j.unmapped).toEqual(['genai/no_edges']);
    expect(j.explained).toEqual(j.unmapped);
  });

  it('agent spans named only by gen_ai.agent.name with no GenAI operation (an older convention): nothing read, listed as genai/no_dialect in both', () => {
    const r = new Recorder('some.agents');
    const outer = r.start('agent run', { at: 0, attrs: { 'gen_ai.agent.name': 'triage', 'gen_ai.input.messages': CONTENT_MARKER } });
    const tool = r.start('running tool', { at: 1, parent: outer, attrs: { 'gen_ai.tool.name': 'ask_billing' } });
    const inner = r.start('agent run', { at: 2, parent: tool, attrs: { 'gen_ai.agent.name': 'billing' } });
    r.end(inner, 5);
    r.end(tool, 6);
    r.end(outer, 7);
    const j = judge(r);
    expect(j.edges).toEqual([]);
    expect(j.unmapped).toEqual(['genai/no_dialect']);
    expect(j.explained).toEqual(j.unmapped);
  });

  it('OpenInference AGENT spans naming their agent (agent.name), nested through a TOOL span: delegate + return; without agent.name: openinference/no_dialect', () => {
    const r = new Recorder('openinference.instrumentation.someagents');
    const oi = (name?: string) => ({ 'openinference.span.kind': 'AGENT', ...(name ? { 'agent.name': name } : {}), 'input.value': CONTENT_MARKER });
    const mgr = r.start('manager', { at: 0, attrs: oi('manager') });
    const tool = r.start('call_search_agent', { at: 1, parent: mgr, attrs: { 'openinference.span.kind': 'TOOL' } });
    const search = r.start('search_agent', { at: 2, parent: tool, attrs: oi('search_agent') });
    r.end(search, 5);
    r.end(tool, 6);
    r.end(mgr, 7);
    const named = judge(r);
    expect(named.edges).toEqual(['manager -> search_agent : delegate', 'search_agent -> manager : return']);
    expect(named.unmapped).toEqual([]);

    const r2 = new Recorder('openinference.instrumentation.someagents');
    const m2 = r2.start('Manager.run', { at: 0, attrs: oi() });
    const s2 = r2.start('Search.run', { at: 1, parent: m2, attrs: oi() });
    r2.end(s2, 5);
    r2.end(m2, 7);
    const unnamed = judge(r2);
    expect(unnamed.edges).toEqual([]);
    expect(unnamed.unmapped).toEqual(['openinference/no_dialect']);
    expect(unnamed.explained).toEqual(unnamed.unmapped);
  });
});
