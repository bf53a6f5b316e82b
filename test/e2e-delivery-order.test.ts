/**
 * Delivery order must not change a verdict (issue 37), on a real server: a trace of five GenAI spans
 * (`invoke_agent supervisor` -> `execute_tool agent-researcher` -> `invoke_agent researcher`, and the same for
 * `coder`), each span in its own OTLP request from a real exporter, in each of the 120 orders (one trace per order,
 * each request answered before the next): every run is `healthy` with the default parent wait, over OTLP/HTTP and
 * over OTLP/gRPC. And the skeleton survives kill -9: the tool span and the supervisor arrive, the server is killed,
 * the rest arrives after the restart.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProcess } from './helpers/server.js';
import { exporterFor, type Transport } from './helpers/otel.js';
import { until } from './helpers/wait.js';
import { contractsDir, EDGES, edgesOf, fiveSpans, permutations, runOf, sendAlone, shutdownTracer } from './helpers/five-spans.js';

afterAll(() => shutdownTracer());

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
      // The gauge is set by the server's periodic tick: wait for the tick after the last export, not a fixed time.
      const m = await until('the pending-parent gauge reads 0', async () => {
        const text = await (await fetch(`${srv.api}/metrics`)).text();
        return /^topology_pending_parent_spans 0$/m.test(text) ? text : null;
      });
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
      await until('the span log replayed (while serving)', async () => /"event":"span_log_replayed","entries":2,/.test(second.stderr()) || null);
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

describe('the skeleton bound on a real server', () => {
  it('--max-skeleton-spans: a flood of never-completing traces keeps topology_span_skeleton_spans capped, counts the eviction, and the evicted child is a gap', async () => {
    const srv = await startServerProcess({ contracts: contractsDir(), args: ['--contract', 'supervisor-coder', '--max-skeleton-spans', '60', '--max-trace-spans', '20'] });
    try {
      const exporter = exporterFor('http-protobuf', srv);
      // Each trace: the researcher and its tool span arrive, the supervisor (their ancestor) never does.
      const victims: string[] = [];
      for (let i = 0; i < 40; i++) {
        const { run, spans } = fiveSpans();
        await sendAlone(exporter, spans[0]);
        await sendAlone(exporter, spans[1]);
        victims.push(run);
      }
      await exporter.shutdown();
      const samples = await until('the skeleton metrics', async () => {
        const m = await (await fetch(`${srv.api}/metrics`)).text();
        const skeleton = Number(/^topology_span_skeleton_spans (\S+)$/m.exec(m)?.[1]);
        const evicted = Number(/^topology_pending_parent_spans_evicted_total\{limit="total"\} (\S+)$/m.exec(m)?.[1]);
        // 80 spans sent into a 60-span skeleton: at least 20 evicted (the counter follows at the next tick).
        return skeleton > 0 && evicted >= 20 ? { skeleton, evicted } : undefined;
      });
      expect(samples.skeleton).toBeLessThanOrEqual(60);
      // The oldest trace went first: its waiting researcher became a gap at once (the wait is 10 s), never an edge.
      const body = await runOf(srv, victims[0]);
      expect(body.receipts.map((r) => [r.type, r.reason, r.to])).toEqual([['gap', 'caller_unresolved', 'researcher']]);
      expect(body.verdict).toBe('uncertain');
    } finally {
      await srv.stop();
    }
  }, 120_000);
});
