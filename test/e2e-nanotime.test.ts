/**
 * Time exact to the nanosecond through the whole server (semantics 2a): NDJSON -> SQLite store -> API keeps the
 * fraction the receipt had (also across a restart that reloads the store), and OTLP spans from the real
 * exporters 300 ns apart keep their order and their lateness.
 */
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpanStatusCode, type HrTime } from '@opentelemetry/api';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { exporterFor, providerFor, type Transport } from './helpers/otel.js';

const CONTRACTS = join(ROOT, 'test', 'fixtures', 'nanotime', 'contracts');
const REPRODUCER = readFileSync(join(ROOT, 'test', 'fixtures', 'nanotime', 'reproducer.ndjson'), 'utf8');

async function waitFor<T>(fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const runWith = (api: string, run: string, receipts: number) =>
  waitFor(async () => {
    const r = await getJson(`${api}/api/v1/runs/${encodeURIComponent(run)}`);
    return r.status === 200 && r.body.receipts.length === receipts ? r.body : undefined;
  });

describe('nanosecond instants through the server', () => {
  const dataDir = tempDir('ta-nanotime-');
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ dataDir, contracts: CONTRACTS });
  }, 60_000);
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  it('NDJSON -> store -> API keeps .0004Z, before and after a restart; the verdicts are the reproducer\'s', async () => {
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: REPRODUCER, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    const check = async (api: string) => {
      const late = await runWith(api, 'late-sub-ms', 2);
      expect(late.verdict).toBe('incomplete');
      expect(late.receipts.map((r: { at: string }) => r.at)).toContain('2026-11-30T11:02:00.0004Z');
      expect(late.findings.find((f: { code: string }) => f.code === 'late_edge').message).toContain('400µs after its deadline');
      // the next step is due at the late observation's instant, printed at full precision
      expect(JSON.stringify(late.findings)).toContain('2026-11-30T11:02:00.0004Z');
      const conflict = await runWith(api, 'conflict-sub-ms', 3);
      expect(conflict.verdict).toBe('uncertain');
      expect(conflict.receipts.map((r: { at: string }) => r.at).sort()).toEqual(['2026-11-30T11:00:00Z', '2026-11-30T11:01:00.0004Z', '2026-11-30T11:01:00Z']);
    };
    await check(srv.api);
    // the store round trip: a new server on the same data directory rebuilds the runs from SQLite
    expect(await srv.stop()).toBe(0);
    srv = await startServerProcess({ dataDir, contracts: CONTRACTS });
    await check(srv.api);
  }, 120_000);

  it('OTLP spans 300 ns apart keep their order and lateness (real exporters, HTTP protobuf, HTTP JSON, gRPC)', async () => {
    const base = Date.parse('2026-11-30T11:00:00Z') / 1000; // whole seconds
    const hr = (secondsAfter: number, ns: number): HrTime => [base + secondsAfter, ns];
    for (const t of ['http-protobuf', 'http-json', 'grpc'] as Transport[]) {
      const provider = providerFor(exporterFor(t, srv));
      const tracer = provider.getTracer('nanotime-test');
      const span = (run: string, start: HrTime, attrs: Record<string, string>) => {
        const s = tracer.startSpan(`topology ${attrs['topology.event.type']}`, { startTime: start, attributes: { 'topology.run.id': run, ...attrs } });
        s.setStatus({ code: SpanStatusCode.OK });
        s.end(start);
      };
      const start = { 'topology.event.type': 'run.start', 'topology.contract.id': 'escalation', 'topology.contract.version': '1', 'topology.phase': 'escalate' };
      const handoff = { 'topology.event.type': 'edge', 'topology.edge.from': 'router', 'topology.edge.to': 'escalation', 'topology.edge.kind': 'handoff' };
      const delegate = { 'topology.event.type': 'edge', 'topology.edge.from': 'dispatcher', 'topology.edge.to': 'archiver', 'topology.edge.kind': 'delegate' };
      // late: the run starts at 11:00:00.000000100, the handoff comes 300 ns after its deadline 11:02:00.000000100
      span(`${t}-late`, hr(0, 100), start);
      span(`${t}-late`, hr(120, 400), handoff);
      // on time: the same handoff exactly at the deadline; two run.ends 300 ns apart, the later one sent first:
      // the earlier (completed) one is the run's end
      span(`${t}-order`, hr(0, 100), start);
      span(`${t}-order`, hr(120, 100), handoff);
      span(`${t}-order`, hr(130, 0), delegate);
      span(`${t}-order`, hr(200, 300), { 'topology.event.type': 'run.end', 'topology.run.result': 'failed' });
      span(`${t}-order`, hr(200, 0), { 'topology.event.type': 'run.end', 'topology.run.result': 'completed' });
      await provider.forceFlush();
      await provider.shutdown();

      const late = await runWith(srv.api, `${t}-late`, 2);
      expect(late.verdict, t).toBe('incomplete');
      const lateEdge = late.findings.find((f: { code: string }) => f.code === 'late_edge');
      expect(lateEdge.message, t).toContain('came 300ns after its deadline 2026-11-30T11:02:00.0000001Z');
      expect(late.receipts.map((r: { at: string }) => r.at).sort(), t).toEqual(['2026-11-30T11:00:00.0000001Z', '2026-11-30T11:02:00.0000004Z']);

      const order = await runWith(srv.api, `${t}-order`, 5);
      expect(order.verdict, t).toBe('healthy');
      expect(order.receipts.map((r: { at: string }) => r.at), t).toContain('2026-11-30T11:03:20.0000003Z');
    }
  }, 180_000);
});
