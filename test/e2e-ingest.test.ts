import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { type Receipt } from '../src/core/index.js';
import { replayReceipts } from '../src/cli/replay.js';
import { ROOT, getJson, runCli, startServerProcess, type ServerProcess } from './helpers/server.js';
import { emitReceiptsAsSpans, exporterFor, providerFor, receiptAttributes, type Transport } from './helpers/otel.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { drift, expectedVerdicts, shiftedDrift, treeBytes } from './helpers/drift.js';

const registry = loadContractDir(join(ROOT, 'contracts'));
const expected = expectedVerdicts;
const shifted = shiftedDrift;

async function waitFor<T>(fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}


describe('OTLP ingest end to end with the real OpenTelemetry exporters', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess();
  });
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  it('replays the nine drift cases over HTTP/JSON, HTTP/protobuf and gRPC; API verdicts equal replay verdicts', async () => {
    const transports: Transport[] = ['http-json', 'http-protobuf', 'grpc'];
    const all: Receipt[] = [];
    for (const t of transports) {
      const receipts = shifted(t);
      all.push(...receipts);
      const provider = providerFor(exporterFor(t, srv));
      await emitReceiptsAsSpans(provider, receipts);
      await provider.shutdown();
    }
    const runs = [...new Set(all.map((r) => r.run))];
    expect(runs).toHaveLength(27);
    const { verdicts } = replayReceipts(all, registry, { now: Date.now() });
    for (const v of verdicts) {
      const api = await waitFor(async () => {
        const r = await getJson(`${srv.api}/api/v1/runs/${v.run}`);
        const want = all.filter((x) => x.run === v.run).length;
        return r.status === 200 && r.body.receipts.length === want ? r.body : undefined;
      });
      expect(api.verdict, v.run).toBe(v.verdict);
      expect(api.naive, v.run).toBe('green');
      const base = v.run.replace(/^(http-json|http-protobuf|grpc)-/, '');
      expect(api.verdict, v.run).toBe(expected[base]);
      expect(api.pin).toEqual({ contract: 'research-publish', version: '3', phase: 'research' });
    }
    const healthy = await runCli(['gate', 'grpc-drift-complete', '--server', srv.api, '--timeout', '5s']);
    expect(healthy.code, healthy.stderr).toBe(0);
    expect(healthy.stdout).toContain('healthy');
    const forbidden = await runCli(['gate', 'http-protobuf-drift-direct-route', '--server', srv.api, '--timeout', '5s']);
    expect(forbidden.code).toBe(1);
    expect(forbidden.stdout).toContain('forbidden_edge');
    const working = await runCli(['gate', 'http-json-drift-current', '--server', srv.api, '--timeout', '1s']);
    expect(working.code).toBe(75);
    const listed = await getJson(`${srv.api}/api/v1/runs?verdict=forbidden_edge&limit=50`);
    expect(listed.body.runs.map((r: { run: string }) => r.run).sort()).toEqual(['grpc-drift-direct-route', 'http-json-drift-direct-route', 'http-protobuf-drift-direct-route']);
  });

  it('sending the same OTLP batch twice leaves receipt counts and verdicts unchanged', async () => {
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
    await emitReceiptsAsSpans(provider, shifted('twice'));
    const spans = memory.getFinishedSpans();
    const exporter = exporterFor('http-protobuf', srv);
    const send = () => new Promise<number>((res) => exporter.export(spans, (r) => res(r.code)));
    expect(await send()).toBe(ExportResultCode.SUCCESS);
    const snapshot = async () => {
      const rows = (await getJson(`${srv.api}/api/v1/runs?limit=1000`)).body.runs.filter((r: { run: string }) => r.run.startsWith('twice-'));
      const detail = await Promise.all(rows.map((r: { run: string }) => getJson(`${srv.api}/api/v1/runs/${r.run}`)));
      return detail.map((d) => ({ run: d.body.run, verdict: d.body.verdict, receipts: d.body.receipts.length, findings: d.body.findings.length })).sort((a, b) => (a.run < b.run ? -1 : 1));
    };
    const before = await snapshot();
    expect(before).toHaveLength(9);
    expect(before.reduce((n, r) => n + r.receipts, 0)).toBe(drift.length);
    expect(await send()).toBe(ExportResultCode.SUCCESS);
    expect(await snapshot()).toEqual(before);
    const metrics = await (await fetch(`${srv.api}/metrics`)).text();
    expect(metrics).toMatch(/topology_receipts_total\{type="edge",result="duplicate"\} [1-9]/);
    await exporter.shutdown();
  });

  it('never stores, logs, exposes or answers span content (byte-level check)', async () => {
    const marker = 'SECRET-MARKER-7f3a9c1e';
    const provider = providerFor(exporterFor('http-protobuf', srv));
    const tracer = provider.getTracer('content');
    const now = Date.now();
    const content = {
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: `summarise ${marker}` }] }]),
      'gen_ai.output.messages': `the answer is ${marker}`,
      'gen_ai.tool.call.arguments': JSON.stringify({ path: `/home/user/${marker}.txt` }),
      'gen_ai.system_instructions': `you are ${marker}`,
      'api.key': marker,
    };
    const start = tracer.startSpan('run', { startTime: new Date(now - 1000), attributes: { ...receiptAttributes({ run: 'content-run', event: 'x', type: 'run.start', at: '', contract: 'research-publish', version: '3', phase: 'research' }), ...content } });
    start.end();
    const agent = tracer.startSpan('invoke_agent researcher', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', 'topology.run.id': 'content-run', ...content } });
    agent.addEvent('gen_ai.content', { 'gen_ai.output.messages': marker });
    agent.end();
    const edge = tracer.startSpan('edge', { attributes: { ...receiptAttributes({ run: 'content-run', event: 'x', type: 'edge', at: '', from: 'orchestrator', to: 'researcher', kind: 'delegate', version: '3' }), ...content } });
    edge.end();
    await provider.forceFlush();
    await provider.shutdown();
    const run = await waitFor(async () => {
      const r = await getJson(`${srv.api}/api/v1/runs/content-run`);
      return r.status === 200 && r.body.receipts.length >= 2 ? r : undefined;
    });
    const answers = [JSON.stringify(run.body), await (await fetch(`${srv.api}/api/v1/runs?limit=1000`)).text(), await (await fetch(`${srv.api}/metrics`)).text(), await (await fetch(`${srv.api}/metrics`, { headers: { accept: 'application/openmetrics-text' } })).text()];
    for (const a of answers) expect(a).not.toContain(marker);
    expect(srv.stdout() + srv.stderr()).not.toContain(marker);
    // Give the store's group commit a moment, then check every byte of the data directory (db, WAL, shm).
    await new Promise((r) => setTimeout(r, 300));
    const bytes = treeBytes(srv.dataDir);
    expect(bytes.length).toBeGreaterThan(0);
    expect(bytes.includes(Buffer.from(marker))).toBe(false);
    expect(bytes.includes(Buffer.from('content-run'))).toBe(true); // the receipts themselves are there
  });

  it('refuses bad input with the specified statuses and keeps serving', async () => {
    const url = `${srv.otlpHttp}/v1/traces`;
    const post = (body: Uint8Array | string, headers: Record<string, string>) => fetch(url, { method: "POST", body: body as BodyInit, headers });
    const garbage = await post(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]), { 'content-type': 'application/x-protobuf' });
    expect(garbage.status).toBe(400);
    expect(garbage.headers.get('content-type')).toBe('application/x-protobuf');
    const badJson = await post('{"resourceSpans": [', { 'content-type': 'application/json' });
    expect(badJson.status).toBe(400);
    expect(badJson.headers.get('content-type')).toBe('application/json');
    expect((await post('hello', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await fetch(url)).status).toBe(405);
    const big = await post(new Uint8Array(30 * 1024 * 1024), { 'content-type': 'application/x-protobuf' }).catch((e) => e);
    // The server answers 413 before reading everything; fetch may see the answer or a reset connection.
    if (big instanceof Response) expect(big.status).toBe(413);
    const bomb = gzipSync(Buffer.alloc(200 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    // On a connection of its own: the 30 MiB refusal above may have left fetch's pooled socket closing.
    const bombStatus = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'content-length': bomb.length } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(bomb);
    });
    expect(bombStatus).toBe(413);
    const health = await fetch(`${srv.api}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${srv.api}/readyz`);
    expect(ready.status).toBe(200);
    // A valid export still lands after all that.
    const provider = providerFor(exporterFor('http-json', srv));
    await emitReceiptsAsSpans(provider, shifted('after-bad').filter((r) => r.run.endsWith('drift-current')));
    await provider.shutdown();
    const r = await waitFor(async () => {
      const x = await getJson(`${srv.api}/api/v1/runs/after-bad-drift-current`);
      return x.status === 200 ? x : undefined;
    });
    expect(r.body.verdict).toBe('working');
  });
});
