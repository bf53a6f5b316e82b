/**
 * Third-round attack on the event loop (issue 47, item 3): one export of 200,000 single-span traces (about 10 MiB of
 * OTLP protobuf) is read by the pipeline in slices of whole traces, with the event loop turning between slices (so
 * /healthz and other requests are answered meanwhile), and gives what it gave in one piece: every receipt stored, the
 * agent trace inside it resolved. The slices are observed, not timed: the pipeline's calls are counted and an
 * immediate callback counts the event-loop turns between them.
 */
import { describe, expect, it } from 'vitest';
import { AuditEngine } from '../src/audit/engine.js';
import { Ingestor, SLICE_SPANS } from '../src/audit/ingestor.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { createAuditMetrics } from '../src/metrics/index.js';
import type { SpanRecord } from '../src/otlp/types.js';
import { ReceiptStore } from '../src/store/index.js';
import { ROOT, tempDir } from './helpers/server.js';
import { join } from 'node:path';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');

function span(trace: number, id: number, parent: number | null, attrs: Record<string, string>, startMs: number): SpanRecord {
  return { traceId: hex(trace, 32), spanId: hex(id, 16), parentSpanId: parent === null ? null : hex(parent, 16), name: 's', kind: 1, startMs, endMs: startMs + 1000, statusCode: 0, attrs, events: [], links: [] };
}

describe('a wide export is ingested in slices that yield', () => {
  it('200,000 single-span traces: the pipeline runs in slices with event-loop turns between them; the agent trace in it resolves', async () => {
    const dir = tempDir('ta-wide-');
    const store = ReceiptStore.open(dir);
    const engine = new AuditEngine(loadContractDir(join(ROOT, 'contracts')), store, { retentionMs: 86_400_000 });
    engine.restore(NOW);
    const pipeline = new SpanPipeline({ waitMs: 10_000, maxSpans: 200_000 });
    const ingestor = new Ingestor(engine, pipeline, createAuditMetrics(), { maxPendingReceipts: 1_000_000, maxInflightRequests: 10 }, () => NOW);

    const spans: SpanRecord[] = [];
    for (let i = 1; i <= 200_000; i++) spans.push(span(i, i, null, {}, NOW - 60_000));
    // One real agent trace in the middle: orchestrator invokes researcher (a delegate edge of research-publish).
    const agent = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name, 'topology.run.id': 'wide-run' });
    spans.splice(100_000, 0, span(900_001, 900_001, null, agent('orchestrator'), NOW - 50_000), span(900_001, 900_002, 900_001, agent('researcher'), NOW - 49_000));

    // Instrumentation only: the pipeline's own process, counted, with the event-loop turns seen at each call.
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const seen: number[] = [];
    const process = pipeline.process.bind(pipeline);
    pipeline.process = (input, now, source, observe) => {
      seen.push(turns);
      return process(input, now, source, observe);
    };
    try {
      const r = await ingestor.consumeSpans({ spans, spanCount: spans.length }, 'http', { source: 'anonymous' });
      expect(r.rejectedSpans).toBe(0);
    } finally {
      counting = false;
    }
    expect(seen.length).toBeGreaterThanOrEqual(Math.floor(200_000 / SLICE_SPANS));
    // The event loop turned while the export was read (between its slices), not only once it was done.
    expect(seen[seen.length - 1]).toBeGreaterThan(seen[0]);
    const stored = store.runReceipts('wide-run');
    expect(stored.some((x) => x.type === 'edge' && x.from === 'orchestrator' && x.to === 'researcher' && x.kind === 'delegate')).toBe(true);
    await store.sync();
    store.close();
  }, 300_000);
});
