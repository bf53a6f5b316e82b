/**
 * Delivery order must not change a verdict (issue 37), on a real server: a trace of five GenAI spans
 * (`invoke_agent supervisor` -> `execute_tool agent-researcher` -> `invoke_agent researcher`, and the same for
 * `coder`), each span in its own OTLP request from a real exporter, in each of the 120 orders (one trace per order,
 * each request answered before the next): every run is `healthy` with the default parent wait, over OTLP/HTTP and
 * over OTLP/gRPC. And the skeleton survives kill -9: the tool span and the supervisor arrive, the server is killed,
 * the rest arrives after the restart.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { context, trace } from '@opentelemetry/api';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { exporterFor, type Transport } from './helpers/otel.js';
import { until } from './helpers/wait.js';

/** A test contract: the supervisor delegates to the researcher and the coder, each returns. */
function contractsDir(): string {
  const dir = tempDir('ta-e2e-order-contracts-');
  writeFileSync(
    join(dir, 'supervisor-coder.yaml'),
    [
      'contract: supervisor-coder',
      'version: "1"',
      'retired: false',
      'owner: supervisor',
      'agents: [supervisor, researcher, coder]',
      'allow:',
      '  - supervisor -> researcher : delegate',
      '  - researcher -> supervisor : return',
      '  - supervisor -> coder : delegate',
      '  - coder -> supervisor : return',
      'phases:',
      '  work:',
      '    outcome: optional',
      '    expect:',
      '      - supervisor -> researcher : delegate',
      '      - researcher -> supervisor : return',
      '      - supervisor -> coder : delegate',
      '      - coder -> supervisor : return',
      '',
    ].join('\n'),
  );
  return dir;
}

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
const tracer = provider.getTracer('delivery-order');
afterAll(() => provider.shutdown());

/** One trace of five spans, in the order they end (leaves first); its trace id is the run. */
function fiveSpans(): { run: string; spans: ReadableSpan[] } {
  memory.reset();
  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000);
  const agent = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name });
  const tool = (name: string) => ({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name });
  const sup = tracer.startSpan('invoke_agent supervisor', { startTime: at(0), attributes: agent('supervisor') });
  const inSup = trace.setSpan(context.active(), sup);
  for (const [i, worker] of ['researcher', 'coder'].entries()) {
    const toolSpan = tracer.startSpan(`execute_tool agent-${worker}`, { startTime: at(1 + i * 10), attributes: tool(`agent-${worker}`) }, inSup);
    const w = tracer.startSpan(`invoke_agent ${worker}`, { startTime: at(2 + i * 10), attributes: agent(worker) }, trace.setSpan(context.active(), toolSpan));
    w.end(at(8 + i * 10));
    toolSpan.end(at(9 + i * 10));
  }
  sup.end(at(30));
  const spans = [...memory.getFinishedSpans()];
  expect(spans.map((s) => s.name)).toEqual(['invoke_agent researcher', 'execute_tool agent-researcher', 'invoke_agent coder', 'execute_tool agent-coder', 'invoke_agent supervisor']);
  return { run: sup.spanContext().traceId, spans };
}

function permutations(n: number): number[][] {
  if (n === 0) return [[]];
  const out: number[][] = [];
  for (const p of permutations(n - 1)) for (let i = 0; i <= p.length; i++) out.push([...p.slice(0, i), n - 1, ...p.slice(i)]);
  return out;
}

async function sendAlone(exporter: ReturnType<typeof exporterFor>, span: ReadableSpan): Promise<void> {
  const code = await new Promise<number>((res) => exporter.export([span], (r) => res(r.code)));
  expect(code).toBe(ExportResultCode.SUCCESS);
}

async function runOf(srv: ServerProcess, run: string): Promise<{ verdict: string; receipts: { type: string; reason?: string; from?: string; to?: string; kind?: string }[] }> {
  return until(`run ${run}`, async () => {
    const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
    return r.status === 200 && r.body.receipts.length >= 4 ? r.body : undefined;
  });
}

const EDGES = ['coder -> supervisor : return', 'researcher -> supervisor : return', 'supervisor -> coder : delegate', 'supervisor -> researcher : delegate'];
const edgesOf = (rs: { type: string; from?: string; to?: string; kind?: string }[]) =>
  rs
    .filter((r) => r.type === 'edge')
    .map((r) => `${r.from} -> ${r.to} : ${r.kind}`)
    .sort();

describe('the 120 delivery orders of a five-span trace', () => {
  const contracts = contractsDir();
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ contracts, args: ['--contract', 'supervisor-coder'] });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  for (const transport of ['http-protobuf', 'grpc'] as Transport[]) {
    it(`each span in its own OTLP request (${transport}), every order: healthy, the four edges, no gap`, async () => {
      const exporter = exporterFor(transport, srv);
      const orders = permutations(5);
      expect(orders).toHaveLength(120);
      expect(new Set(orders.map((o) => o.join(''))).size).toBe(120);
      const runs: { run: string; order: number[] }[] = [];
      for (const order of orders) {
        const { run, spans } = fiveSpans();
        for (const i of order) await sendAlone(exporter, spans[i]);
        runs.push({ run, order });
      }
      await exporter.shutdown();
      const bad: string[] = [];
      for (const { run, order } of runs) {
        const body = await runOf(srv, run);
        const gaps = body.receipts.filter((r) => r.type === 'gap').map((r) => r.reason);
        if (body.verdict !== 'healthy' || gaps.length > 0 || edgesOf(body.receipts).join('|') !== EDGES.join('|')) bad.push(`${order.join('')}: ${body.verdict} ${gaps.join(',')}`);
      }
      expect(bad).toEqual([]);
      // Nothing still waits for a caller: every child found its caller through the tool span, whatever came first.
      const m = await (await fetch(`${srv.api}/metrics`)).text();
      expect(m).toMatch(/^topology_pending_parent_spans 0$/m);
      expect(m).toMatch(/^topology_pending_parent_spans_evicted_total\{limit="total"\} 0$/m);
    }, 300_000);
  }
});

describe('the skeleton survives kill -9', () => {
  it('tool span, then supervisor, kill -9; after the restart the researcher walks through the replayed tool span', async () => {
    const contracts = contractsDir();
    const args = ['--contract', 'supervisor-coder'];
    const first = await startServerProcess({ contracts, args });
    const { run, spans } = fiveSpans();
    const [researcher, toolR, coder, toolC, supervisor] = spans;
    const exp1 = exporterFor('http-protobuf', first);
    await sendAlone(exp1, toolR); // the order of the issue: the tool span first, then the supervisor, then the researcher
    await sendAlone(exp1, supervisor);
    await exp1.shutdown();
    first.child.kill('SIGKILL');
    await first.stop();
    const second = await startServerProcess({ dataDir: first.dataDir, contracts, args });
    try {
      expect(second.stderr()).toMatch(/"event":"span_log_replayed","entries":2,/);
      const exp2 = exporterFor('grpc', second);
      for (const s of [researcher, coder, toolC]) await sendAlone(exp2, s);
      await exp2.shutdown();
      const body = await runOf(second, run);
      expect(edgesOf(body.receipts)).toEqual(EDGES);
      expect(body.receipts.filter((r) => r.type === 'gap')).toEqual([]);
      expect(body.verdict).toBe('healthy');
    } finally {
      await second.stop();
    }
  }, 120_000);
});
