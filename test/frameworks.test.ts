/**
 * Real frameworks, real spans: each app below is the real npm package driven by a scripted model (no network),
 * its spans exported over real OTLP/HTTP protobuf to a real `topology-audit serve` child, audited against
 * contracts/supervisor-workers.yaml (or a swarm contract): a conforming run is healthy, a run calling an agent
 * the contract does not allow is forbidden_edge, and no prompt text reaches any byte of the data directory.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { context as otelContext, trace as otelTrace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { CONTENT_MARKER as LG_MARKER, instrumentLangChain, runSupervisor, runSwarm } from './fixtures/frameworks/langgraph.js';
import { until } from './helpers/wait.js';
import { delegateAndReturn } from './helpers/framework-runs.js';
import { allBytes, contractsDir, edgesOf, expectNothingUnmapped, newRuns, otlpProvider, sentText } from './helpers/framework-apps.js';


describe('LangGraph.js + OpenInference (createSupervisor, swarm)', () => {
  let sup: ServerProcess;
  let swarm: ServerProcess;
  const seenSup = new Set<string>();
  const seenSwarm = new Set<string>();
  beforeAll(async () => {
    const dir = contractsDir();
    [sup, swarm] = await Promise.all([
      startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] }),
      startServerProcess({ contracts: dir, args: ['--contract', 'helpdesk-swarm', '--parent-wait', '2s'] }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([sup?.stop(), swarm?.stop()]);
  });

  it('a supervisor run that delegates to each worker in turn is healthy: delegate and return per worker', async () => {
    const provider = otlpProvider(sup);
    instrumentLangChain(provider);
    await runSupervisor({ supervisorScript: [{ tool: 'transfer_to_researcher' }, { tool: 'transfer_to_writer' }, { text: `final ${LG_MARKER}` }] });
    await provider.forceFlush();
    const [run] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'healthy');
    expect(run.verdict).toBe('healthy');
    expect(await edgesOf(sup, run.run)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    expect(run.run).toMatch(/^[0-9a-f]{32}$/); // one run per graph invocation: the trace
    await provider.shutdown();
  }, 60_000);

  it('a supervisor that calls an agent the contract does not allow it to call is forbidden_edge', async () => {
    const provider = otlpProvider(sup);
    instrumentLangChain(provider);
    await runSupervisor({ withPublisher: true, supervisorScript: [{ tool: 'transfer_to_researcher' }, { tool: 'transfer_to_publisher' }, { text: 'final' }] });
    await provider.forceFlush();
    const [run] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'forbidden_edge');
    expect(await edgesOf(sup, run.run)).toContain('supervisor -> publisher : delegate');
    const { body } = await getJson<{ findings: { verdict: string; edge: string }[] }>(`${sup.api}/api/v1/runs/${run.run}`);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge)).toContain('supervisor -> publisher : delegate');
    await provider.shutdown();
  }, 60_000);

  it('swarm handoffs are handoff edges: allowed is healthy, another target is forbidden_edge', async () => {
    const provider = otlpProvider(swarm);
    instrumentLangChain(provider);
    await runSwarm({ triageScript: [{ tool: 'transfer_to_billing' }] });
    await provider.forceFlush();
    const [ok] = await newRuns(swarm, seenSwarm, 1, (v) => v[0] === 'healthy');
    expect(await edgesOf(swarm, ok.run)).toEqual(['triage -> billing : handoff']);
    await runSwarm({ triageScript: [{ tool: 'transfer_to_refunds' }] });
    await provider.forceFlush();
    const [bad] = await newRuns(swarm, seenSwarm, 1, (v) => v[0] === 'forbidden_edge');
    expect(await edgesOf(swarm, bad.run)).toEqual(['triage -> refunds : handoff']);
    await provider.shutdown();
  }, 60_000);

  it('no prompt or reply text reaches the data directory', async () => {
    expect(sentText()).toContain(LG_MARKER); // the prompts were exported (OpenInference records messages)
    expect(sentText()).toContain('langgraph_node'); // inside the metadata JSON the decoder scans
    for (const s of [sup, swarm]) {
      const bytes = allBytes(s.dataDir);
      expect(bytes.length).toBeGreaterThan(0);
      expect(bytes.includes(Buffer.from(LG_MARKER)), 'prompt text in the data dir').toBe(false);
    }
  });

  it('no false alarm: the supervisor and swarm traces that gave receipts are never listed as unmapped nor counted', async () => {
    await expectNothingUnmapped(sup, 2);
    await expectNothingUnmapped(swarm, 2);
  }, 60_000);
});

describe('OpenAI Agents JS (the emitter\'s tracing processor)', () => {
  let server: ServerProcess;
  const seen = new Set<string>();
  beforeAll(async () => {
    server = await startServerProcess({ contracts: contractsDir(), args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('agents as tools are delegate/return, a handoff is a handoff edge: healthy, then forbidden_edge; content-free', async () => {
    const { setTraceProcessors, setTracingDisabled } = await import('@openai/agents');
    const { ReceiptEmitter, OpenAIAgentsReceiptProcessor } = await import('@topology-audit/emitter');
    const { runSupervisorAgents, CONTENT_MARKER } = await import('./fixtures/frameworks/openai-agents.js');
    const emitter = new ReceiptEmitter({ endpoint: server.otlpHttp });
    setTracingDisabled(false);
    setTraceProcessors([new OpenAIAgentsReceiptProcessor(emitter)]);
    await runSupervisorAgents();
    await emitter.flush();
    const [ok] = await newRuns(server, seen, 1, (v) => v[0] === 'healthy');
    expect(ok.run).toMatch(/^trace_[0-9a-f]{32}$/); // one Runner.run, one SDK trace, one run
    expect(await edgesOf(server, ok.run)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    await runSupervisorAgents({ handoffToPublisher: true });
    await emitter.flush();
    const [bad] = await newRuns(server, seen, 1, (v) => v[0] === 'forbidden_edge');
    expect(await edgesOf(server, bad.run)).toContain('supervisor -> publisher : handoff');
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT_MARKER))).toBe(false);
    await emitter.shutdown();
  }, 60_000);
});

describe('no silent drops: an unsupported framework\'s trace', () => {
  /** OpenInference AGENT spans with no graph.node.* (e.g. a crew framework whose instrumentation names agents only in span names). */
  function crewTrace(provider: BasicTracerProvider): void {
    const tracer = provider.getTracer('openinference.instrumentation.crewai');
    const root = tracer.startSpan('Crew.kickoff', { attributes: { 'openinference.span.kind': 'CHAIN', 'input.value': `kick ${LG_MARKER}` } });
    const rootCtx = otelTrace.setSpan(otelContext.active(), root);
    for (const name of ['planner', 'executor']) {
      const s = tracer.startSpan(`${name}._execute_core`, { attributes: { 'openinference.span.kind': 'AGENT', 'input.value': `task ${LG_MARKER}` } }, rootCtx);
      tracer.startSpan('ChatCompletion', { attributes: { 'openinference.span.kind': 'LLM', 'llm.input_messages.0.message.content': LG_MARKER } }, otelTrace.setSpan(rootCtx, s)).end();
      s.end();
    }
    root.end();
  }

  it('explain names each agent-looking span and why nothing came out; the unmapped endpoint and metric list the trace', async () => {
    const { JsonTraceSerializer, ProtobufTraceSerializer } = await import('@opentelemetry/otlp-transformer');
    // 1. A dump of the trace (as the Collector's file exporter or a proxy would capture it), JSON and protobuf.
    const mem = new InMemorySpanExporter();
    const local = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    crewTrace(local);
    const spans = mem.getFinishedSpans();
    const dir = tempDir('ta-explain-');
    writeFileSync(join(dir, 'crew.json'), Buffer.from(JsonTraceSerializer.serializeRequest(spans)!));
    writeFileSync(join(dir, 'crew.pb'), Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!));
    for (const file of ['crew.json', 'crew.pb']) {
      const out = await runCli(['explain', join(dir, file)]);
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout).toContain('UNMAPPED (openinference: no_dialect)');
      for (const name of ['planner._execute_core', 'executor._execute_core']) {
        const line = out.stdout.split('\n').find((l) => l.includes(JSON.stringify(name)));
        expect(line, name).toMatch(/openinference\.span\.kind=AGENT\) that names no agent/);
      }
      expect(out.stdout).not.toContain(LG_MARKER);
    }
    const json = JSON.parse((await runCli(['explain', join(dir, 'crew.json'), '--json'])).stdout);
    expect(json.spans).toHaveLength(5); // kickoff, two agents, two model calls
    expect(json.spans.every((s: { receipts: string[] }) => s.receipts.length === 0)).toBe(true);
    const bad = await runCli(['explain', join(dir, 'missing.json')]);
    expect(bad.code).toBe(2);

    // 2. The same trace sent to a server: no run appears, and the unmapped report says why.
    const server = await startServerProcess({ args: ['--parent-wait', '1s'] });
    try {
      const provider = otlpProvider(server);
      crewTrace(provider);
      await provider.forceFlush();
      const traceId = (await until('an unmapped report', async () => {
        const { body } = await getJson<{ traces: { traceId: string; dialect: string; reason: string; marked: number }[] }>(`${server.api}/api/v1/ingest/unmapped`);
        return body.traces[0];
      })) as { traceId: string; dialect: string; reason: string; marked: number };
      expect(traceId).toMatchObject({ dialect: 'openinference', reason: 'no_dialect', marked: 5 });
      const { body: runs } = await getJson<{ runs: unknown[] }>(`${server.api}/api/v1/runs`);
      expect(runs.runs).toEqual([]);
      const metrics = await (await fetch(`${server.api}/metrics`)).text();
      expect(metrics).toMatch(/topology_unmapped_traces_total\{dialect="openinference",reason="no_dialect"\} 1/);
      expect(JSON.stringify(await getJson(`${server.api}/api/v1/ingest/unmapped`))).not.toContain(LG_MARKER);
      await provider.shutdown();
    } finally {
      await server.stop();
    }
  }, 90_000);
});

describe('Google ADK JS: a run per turn, not per session', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ contracts: contractsDir(), args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('two user turns in one session are two healthy runs (agents as AgentTools: delegate and return); content-free', async () => {
    const { context, trace } = await import('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const provider = otlpProvider(server);
    trace.setGlobalTracerProvider(provider);
    // ADK bundles its own @opentelemetry/api copy and takes its tracer at import: register the provider first.
    const { runAdkSession, CONTENT_MARKER } = await import('./fixtures/frameworks/adk.js');
    await runAdkSession(2, 'sess-two-turns');
    await provider.forceFlush();
    const runs = await newRuns(server, new Set(), 2, (v) => v.every((x) => x === 'healthy'));
    expect(runs).toHaveLength(2);
    for (const r of runs) {
      expect(r.run).toMatch(/^[0-9a-f]{32}$/); // the trace of one Runner.runAsync, not the session id
      expect(await edgesOf(server, r.run)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    }
    expect(sentText()).toContain('sess-two-turns'); // the session id was on the spans, and named no run
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);
});

describe('serve --run-key', () => {
  it('refuses an unknown key with a usage error naming the allowed ones', async () => {
    const r = await runCli(['serve', '--run-key', 'explicit,session', '--data', tempDir('ta-runkey-'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--run-key: "session" is not one of explicit, invocation, trace, conversation');
  });
});
