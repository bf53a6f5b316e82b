import { describe, expect, it } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { getJson, startServerProcess } from './helpers/server.js';
import { exporterFor, receiptAttributes, type Transport } from './helpers/otel.js';

function makeBatches(count: number, size: number): ReadableSpan[][] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('crash');
  const batches: ReadableSpan[][] = [];
  for (let b = 0; b < count; b++) {
    memory.reset();
    for (let i = 0; i < size; i++) {
      const s = tracer.startSpan('edge', {
        attributes: receiptAttributes({ run: `crash-${b % 7}`, event: 'x', type: 'edge', at: '', from: 'orchestrator', to: 'web-search', kind: 'delegate' }),
      });
      s.end();
    }
    batches.push([...memory.getFinishedSpans()]);
  }
  return batches;
}

describe('durability: SIGKILL while an exporter is sending', () => {
  it('finds every receipt whose export had been acknowledged after a restart on the same data directory', async () => {
    const batches = makeBatches(400, 50);
    const srv = await startServerProcess();
    const acked = new Map<string, Set<string>>();
    const transports: Transport[] = ['http-protobuf', 'grpc'];
    const exporters = transports.map((t) => exporterFor(t, srv));
    let killed = false;
    const senders = exporters.map(async (exp, k) => {
      for (let b = k; b < batches.length && !killed; b += exporters.length) {
        const code = await new Promise<number>((res) => exp.export(batches[b], (r) => res(r.code)));
        if (code !== ExportResultCode.SUCCESS) continue;
        for (const s of batches[b]) {
          const run = String(s.attributes['topology.run.id']);
          if (!acked.has(run)) acked.set(run, new Set());
          acked.get(run)!.add(s.spanContext().spanId);
        }
      }
    });
    // Let some exports land, then kill -9 mid-stream.
    const start = Date.now();
    while ([...acked.values()].reduce((n, s) => n + s.size, 0) < 2000 && Date.now() - start < 20_000) await new Promise((r) => setTimeout(r, 20));
    killed = true;
    srv.child.kill('SIGKILL');
    await srv.stop();
    await Promise.race([Promise.all(senders), new Promise((r) => setTimeout(r, 15_000))]);
    await Promise.all(exporters.map((e) => e.shutdown().catch(() => undefined)));
    const total = [...acked.values()].reduce((n, s) => n + s.size, 0);
    expect(total).toBeGreaterThanOrEqual(2000);

    const again = await startServerProcess({ dataDir: srv.dataDir });
    try {
      let found = 0;
      for (const [run, events] of acked) {
        const r = await getJson(`${again.api}/api/v1/runs/${run}`);
        expect(r.status).toBe(200);
        const stored = new Set<string>(r.body.receipts.map((x: { event: string }) => x.event));
        for (const e of events) if (stored.has(e)) found++;
        // none duplicated
        expect(r.body.receipts.length).toBe(stored.size);
      }
      expect(found).toBe(total);
    } finally {
      await again.stop();
    }
  });
});
