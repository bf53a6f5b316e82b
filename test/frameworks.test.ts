/**
 * Real frameworks, real spans: each app below is the real npm package driven by a scripted model (no network),
 * its spans exported over real OTLP/HTTP protobuf to a real `topology-audit serve` child, audited against
 * contracts/supervisor-workers.yaml (or a swarm contract): a conforming run is healthy, a run calling an agent
 * the contract does not allow is forbidden_edge, and no prompt text reaches any byte of the data directory.
 */
import { readdirSync, readFileSync, statSync, writeFileSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { context as otelContext, trace as otelTrace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { CONTENT_MARKER as LG_MARKER, instrumentLangChain, runFunctionalSupervisor, runHierarchicalTeams, runSupervisor, runSwarm } from './fixtures/frameworks/langgraph.js';
import { until } from './helpers/wait.js';
import { delegateAndReturn } from './helpers/framework-runs.js';

const SWARM_CONTRACT = `contract: helpdesk-swarm
version: "1"
owner: triage
agents: [triage, billing, refunds]
allow:
  - triage -> billing : handoff
phases:
  help:
    outcome: optional
    expect:
      - triage -> billing : handoff
        within: 10m
`;

/** Hierarchical teams: each team node enters its lead, the lead delegates to its workers; `publisher` is not allowed. */
const TEAMS_CONTRACT = `contract: teams
version: "1"
owner: supervisor
agents: [supervisor, research_team, research_lead, researcher, writing_team, writing_lead, writer, publisher]
allow:
  - supervisor -> research_team : delegate
  - research_team -> supervisor : return
  - supervisor -> writing_team : delegate
  - writing_team -> supervisor : return
  - research_team -> research_lead : delegate
  - research_lead -> research_team : return
  - research_lead -> researcher : delegate
  - researcher -> research_lead : return
  - writing_team -> writing_lead : delegate
  - writing_lead -> writing_team : return
  - writing_lead -> writer : delegate
  - writer -> writing_lead : return
phases:
  work:
    outcome: optional
    expect:
      - research_lead -> researcher : delegate
      - writing_lead -> writer : delegate
        within: 30m
`;

function contractsDir(): string {
  const dir = tempDir('ta-fw-contracts-');
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(dir, 'supervisor-workers.yaml'));
  writeFileSync(join(dir, 'helpdesk-swarm.yaml'), SWARM_CONTRACT);
  writeFileSync(join(dir, 'teams.yaml'), TEAMS_CONTRACT);
  return dir;
}

/** Every byte under `dir` (the database, its WAL and journal files). */
function allBytes(dir: string): Buffer {
  const parts: Buffer[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) parts.push(allBytes(p));
    else parts.push(readFileSync(p));
  }
  return Buffer.concat(parts);
}

/** Everything exported, as the app's SDK saw it: proves that the content really was in the spans sent. */
const sentAttributes: string[] = [];
const sent: SpanExporter = {
  export(spans, done) {
    for (const s of spans) sentAttributes.push(JSON.stringify(s.attributes));
    done({ code: 0 });
  },
  async shutdown() {},
};
const sentText = () => sentAttributes.join('\n');

export function otlpProvider(server: ServerProcess): BasicTracerProvider {
  const exporter = new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` });
  return new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 20, maxExportBatchSize: 16 }), new SimpleSpanProcessor(sent)] });
}


interface RunRow {
  run: string;
  verdict: string;
}

/** The runs the server holds that are not in `seen`, once there are `n` of them with a settled-enough verdict. */
async function newRuns(server: ServerProcess, seen: Set<string>, n: number, accept: (verdicts: string[]) => boolean): Promise<RunRow[]> {
  return until(`${n} new run(s)`, async () => {
    const { body } = await getJson<{ runs: RunRow[] }>(`${server.api}/api/v1/runs?limit=1000`);
    const fresh = body.runs.filter((r) => !seen.has(r.run));
    if (fresh.length < n || !accept(fresh.map((r) => r.verdict))) return null;
    for (const r of fresh) seen.add(r.run);
    return fresh;
  });
}

async function edgesOf(server: ServerProcess, run: string): Promise<string[]> {
  const { body } = await getJson<{ receipts: { type: string; from?: string; to?: string; kind?: string; reason?: string }[] }>(`${server.api}/api/v1/runs/${encodeURIComponent(run)}`);
  return body.receipts.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : `${r.type} ${r.reason ?? ''}`.trim()));
}

/**
 * No false alarm: once the server has judged every trace it followed (none left, at least `traces` judged as having an
 * agent signal), no trace is listed at GET /api/v1/ingest/unmapped and topology_unmapped_traces_total counted none: every
 * one of these LangGraph traces gave receipts.
 */
async function expectNothingUnmapped(server: ServerProcess, traces: number): Promise<void> {
  await until(`${traces} traces judged`, async () => {
    const { body: u } = await getJson<{ following: number }>(`${server.api}/api/v1/ingest/unmapped`);
    const { body: c } = await getJson<{ traces: { withSignal: number }; following: number }>(`${server.api}/api/v1/ingest/coverage`);
    return u.following === 0 && c.following === 0 && c.traces.withSignal >= traces ? true : null;
  });
  const { body } = await getJson<{ traces: unknown[]; totals: unknown[] }>(`${server.api}/api/v1/ingest/unmapped`);
  expect(body.traces).toEqual([]);
  expect(body.totals).toEqual([]);
  const metrics = await (await fetch(`${server.api}/metrics`)).text();
  expect(metrics).not.toMatch(/^topology_unmapped_traces_total\{[^}]*\} [1-9]/m);
}

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

describe('LangGraph.js functional API and nested graphs: edges from evidence only', () => {
  let sup: ServerProcess;
  let teams: ServerProcess;
  const seenSup = new Set<string>();
  const seenTeams = new Set<string>();
  beforeAll(async () => {
    const dir = contractsDir();
    [sup, teams] = await Promise.all([
      startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] }),
      startServerProcess({ contracts: dir, args: ['--contract', 'teams', '--parent-wait', '2s'] }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([sup?.stop(), teams?.stop()]);
  });

  it('an entrypoint calling a task per agent: supervisor -> each worker and back, never a handoff between siblings; a call to publisher is forbidden_edge', async () => {
    const provider = otlpProvider(sup);
    instrumentLangChain(provider);
    await runFunctionalSupervisor({ calls: ['researcher', 'writer'] });
    await provider.forceFlush();
    const [ok] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'healthy');
    expect(await edgesOf(sup, ok.run)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    await runFunctionalSupervisor({ calls: ['researcher', 'publisher'] });
    await provider.forceFlush();
    const [bad] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'forbidden_edge');
    const edges = await edgesOf(sup, bad.run);
    expect(edges).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return', 'supervisor -> publisher : delegate', 'publisher -> supervisor : return']);
    expect(edges.some((e) => e.includes(': handoff'))).toBe(false);
    const { body } = await getJson<{ findings: { verdict: string; edge: string }[] }>(`${sup.api}/api/v1/runs/${bad.run}`);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge)).toContain('supervisor -> publisher : delegate');
    expect(allBytes(sup.dataDir).includes(Buffer.from(LG_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);

  it('hierarchical teams (a supervisor graph inside a node): inner routes are the inner agents\' edges under the team node; healthy, then forbidden_edge naming the inner route', async () => {
    const provider = otlpProvider(teams);
    instrumentLangChain(provider);
    const topScript = [{ tool: 'transfer_to_research_team' }, { tool: 'transfer_to_writing_team' }, { text: `done ${LG_MARKER}` }];
    await runHierarchicalTeams({ topScript, researchLeadScript: [{ tool: 'transfer_to_researcher' }, { text: 'ok' }], writingLeadScript: [{ tool: 'transfer_to_writer' }, { text: 'ok' }] });
    await provider.forceFlush();
    const [ok] = await newRuns(teams, seenTeams, 1, (v) => v[0] === 'healthy');
    expect((await edgesOf(teams, ok.run)).sort()).toEqual(
      [
        'supervisor -> research_team : delegate',
        'research_team -> research_lead : delegate',
        'research_lead -> researcher : delegate',
        'researcher -> research_lead : return',
        'research_lead -> research_team : return',
        'research_team -> supervisor : return',
        'supervisor -> writing_team : delegate',
        'writing_team -> writing_lead : delegate',
        'writing_lead -> writer : delegate',
        'writer -> writing_lead : return',
        'writing_lead -> writing_team : return',
        'writing_team -> supervisor : return',
      ].sort(),
    );
    await runHierarchicalTeams({ topScript, researchLeadScript: [{ tool: 'transfer_to_researcher' }, { text: 'ok' }], writingLeadScript: [{ tool: 'transfer_to_publisher' }, { text: 'ok' }] });
    await provider.forceFlush();
    const [bad] = await newRuns(teams, seenTeams, 1, (v) => v.length === 1 && v[0] !== 'waiting');
    expect(bad.verdict).toBe('forbidden_edge');
    const edges = await edgesOf(teams, bad.run);
    expect(edges).toContain('writing_lead -> publisher : delegate');
    expect(edges.filter((e) => !e.includes(' -> '))).toEqual([]); // no gap: every inner route was read
    const { body } = await getJson<{ findings: { verdict: string; edge: string }[] }>(`${teams.api}/api/v1/runs/${bad.run}`);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge).sort()).toEqual(['publisher -> writing_lead : return', 'writing_lead -> publisher : delegate']);
    expect(allBytes(teams.dataDir).includes(Buffer.from(LG_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);

  it('no false alarm: the functional-API and nested-graph traces that gave receipts are never listed as unmapped nor counted', async () => {
    await expectNothingUnmapped(sup, 2);
    await expectNothingUnmapped(teams, 2);
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
