import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TRACE_SERVICE } from '../src/server/otlp-grpc.js';
import { credentials, makeGenericClientConstructor, status } from '@grpc/grpc-js';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { getJson, startServerProcess, tempDir } from './helpers/server.js';
import { exporterFor, receiptAttributes, type Transport } from './helpers/otel.js';

function batches(prefix: string, count: number, size: number): ReadableSpan[][] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('faults');
  const out: ReadableSpan[][] = [];
  for (let b = 0; b < count; b++) {
    memory.reset();
    for (let i = 0; i < size; i++) {
      tracer
        .startSpan('edge', { attributes: receiptAttributes({ run: `${prefix}-${b % 5}`, event: 'x', type: 'edge', at: '', from: 'orchestrator', to: 'doc-search', kind: 'delegate' }) })
        .end();
    }
    out.push([...memory.getFinishedSpans()]);
  }
  return out;
}

async function storedEvents(api: string, prefix: string): Promise<Set<string>> {
  const runs = (await getJson(`${api}/api/v1/runs?limit=10000`)).body.runs.filter((r: { run: string }) => r.run.startsWith(prefix + '-'));
  const events = new Set<string>();
  for (const r of runs) for (const x of (await getJson(`${api}/api/v1/runs/${r.run}`)).body.receipts) events.add(`${r.run}/${x.event}`);
  return events;
}

const GrpcClient = makeGenericClientConstructor(TRACE_SERVICE, 'TraceService');
function grpcExport(port: number, body: Buffer): Promise<number> {
  const client = new GrpcClient(`127.0.0.1:${port}`, credentials.createInsecure());
  // A deadline so that an answer the server never sends fails this test instead of hanging the suite (seen once in
  // CI: node:http2 left an admitted export's answer unsent until the next I/O; src/server/otlp-grpc-h2.ts wakeLoop).
  const deadline = new Date(Date.now() + 60_000);
  return new Promise((res) =>
    (client as any).Export(body, { deadline }, (err: { code: number } | null) => {
      client.close();
      res(err ? err.code : status.OK);
    }),
  );
}

const vmHwmKiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

describe('faults survived', () => {
  it('overload: 3x the admission limit gets 429/UNAVAILABLE with Retry-After; the real exporters retry and deliver everything', async () => {
    const srv = await startServerProcess({ args: ['--max-inflight', '3', '--group-commit-delay', '50ms'] });
    try {
      // Raw requests first: beyond the limit the answer is 429 with Retry-After, never an unbounded queue.
      const body = readFileSync(join(import.meta.dirname, 'fixtures', 'otlp', 'agents.pb'));
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => fetch(`${srv.otlpHttp}/v1/traces`, { method: 'POST', body, headers: { 'content-type': 'application/x-protobuf' } })),
      );
      const saturated = answers.filter((a) => a.status === 429);
      expect(saturated.length).toBeGreaterThan(0);
      expect(saturated.every((a) => a.headers.get('retry-after') === '1')).toBe(true);
      expect(answers.every((a) => a.status === 200 || a.status === 429)).toBe(true);

      // gRPC beyond the limit: UNAVAILABLE (the gRPC exporter of this OpenTelemetry JS line does not retry it itself;
      // a Collector's retry_on_failure does).
      const grpcCodes = await Promise.all(Array.from({ length: 30 }, () => grpcExport(srv.ports.otlpGrpc, body)));
      expect(grpcCodes.filter((c) => c === status.UNAVAILABLE).length).toBeGreaterThan(0);
      expect(grpcCodes.every((c) => c === status.OK || c === status.UNAVAILABLE)).toBe(true);

      // Then nine concurrent real HTTP exporters (three times the limit of three in flight): their retries honour
      // Retry-After and deliver everything.
      const transports: Transport[] = ['http-protobuf', 'http-json', 'http-protobuf'];
      const work = batches('overload', 18, 40);
      const acked: string[] = [];
      await Promise.all(
        Array.from({ length: 9 }, async (_, k) => {
          const exporter = exporterFor(transports[k % 3], srv);
          for (let b = k; b < work.length; b += 9) {
            const code = await new Promise<number>((res) => exporter.export(work[b], (r) => res(r.code)));
            if (code === ExportResultCode.SUCCESS) for (const s of work[b]) acked.push(`${s.attributes['topology.run.id']}/${s.spanContext().spanId}`);
          }
          await exporter.shutdown();
        }),
      );
      const stored = await storedEvents(srv.api, 'overload');
      // Every export was eventually acknowledged (after retries), and every acknowledged receipt is stored.
      expect(acked.length).toBe(18 * 40);
      for (const a of acked) expect(stored.has(a)).toBe(true);
      const metrics = await (await fetch(`${srv.api}/metrics`)).text();
      const refused = [...metrics.matchAll(/topology_ingest_rejected_requests_total\{transport="(\w+)",reason="saturated"\} (\d+)/g)];
      expect(refused.reduce((n, m) => n + Number(m[2]), 0)).toBeGreaterThan(saturated.length);
      // Memory stays bounded: admission refuses instead of queueing.
      expect(vmHwmKiB(srv.child.pid!)).toBeLessThan(400 * 1024);
    } finally {
      expect(await srv.stop()).toBe(0);
    }
  });

  it('disk full: exports are refused (not acknowledged), readiness turns false, and the server recovers when space returns', async () => {
    const mnt = tempDir('ta-tmpfs-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]);
    const dataDir = join(mnt, 'data');
    mkdirSync(dataDir);
    const srv = await startServerProcess({ dataDir });
    try {
      const post = (run: string, n: number) =>
        fetch(`${srv.api}/v1/receipts`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-ndjson' },
          body: Array.from({ length: n }, (_, i) => JSON.stringify({ run, event: `e${i}`, type: 'edge', at: new Date().toISOString(), from: 'orchestrator', to: 'doc-search', kind: 'delegate' })).join('\n'),
        });
      expect((await post('disk-before', 10)).status).toBe(200);
      // Fill the file system.
      const filler = join(mnt, 'filler');
      try {
        writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
      } catch {
        /* ENOSPC: the disk is now full */
      }
      let refused: Response | null = null;
      for (let i = 0; i < 40 && !refused; i++) {
        const r = await post(`disk-full-${i}`, 200);
        if (r.status === 503) refused = r;
        else expect(r.status).toBe(200);
      }
      expect(refused).not.toBeNull();
      expect(refused!.headers.get('retry-after')).toBe('1');
      const ready = await fetch(`${srv.api}/readyz`);
      expect(ready.status).toBe(503);
      expect((await ready.json()).reasons).toContain('store cannot commit');
      // OTLP is refused too, and not acknowledged.
      const otlp = await fetch(`${srv.otlpHttp}/v1/traces`, { method: 'POST', body: readFileSync(join(import.meta.dirname, 'fixtures', 'otlp', 'agents.pb')), headers: { 'content-type': 'application/x-protobuf' } });
      expect(otlp.status).toBe(503);
      // Space returns: the next export lands and readiness recovers.
      rmSync(filler, { force: true });
      const again = await post('disk-after', 10);
      expect(again.status).toBe(200);
      expect((await again.json()).accepted).toBe(10);
      expect((await fetch(`${srv.api}/readyz`)).status).toBe(200);
      expect((await getJson(`${srv.api}/api/v1/runs/disk-before`)).body.receipts).toHaveLength(10);
    } finally {
      await srv.stop();
      execFileSync('umount', ['-l', mnt]);
    }
  });

  it('SIGTERM stops accepting, commits in-flight exports, then exits 0', async () => {
    const srv = await startServerProcess({ args: ['--group-commit-delay', '200ms'] });
    const lines = Array.from({ length: 50 }, (_, i) => JSON.stringify({ run: 'term-run', event: `e${i}`, type: 'edge', at: new Date().toISOString(), from: 'orchestrator', to: 'doc-search', kind: 'delegate' })).join('\n');
    const inflight = fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: lines });
    await new Promise((r) => setTimeout(r, 50));
    const code = srv.stop('SIGTERM');
    const answer = await inflight;
    expect(answer.status).toBe(200);
    expect((await answer.json()).accepted).toBe(50);
    expect(await code).toBe(0);
    const again = await startServerProcess({ dataDir: srv.dataDir });
    try {
      expect((await getJson(`${again.api}/api/v1/runs/term-run`)).body.receipts).toHaveLength(50);
    } finally {
      await again.stop();
    }
  });
});
