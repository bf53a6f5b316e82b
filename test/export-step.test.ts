/**
 * The export step every OTLP receiver shares (src/server/export-step.ts), driven directly over a real Ingestor,
 * engine and SQLite store: what is refused before a byte is read (and drained), that the admission slot and the
 * message's memory always go back, the undecodable refusal named once, and the counting of each outcome.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditEngine } from '../src/audit/engine.js';
import { ConsumeError } from '../src/audit/consumer.js';
import { Ingestor } from '../src/audit/ingestor.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { createAuditMetrics } from '../src/metrics/index.js';
import { decodeExportTraceRequest } from '../src/otlp/index.js';
import { ExportStep, type ExportCall } from '../src/server/export-step.js';
import { grpcRefusal, httpRefusal } from '../src/server/refusal.js';
import { ReceiptStore } from '../src/store/index.js';
import { ROOT, tempDir } from './helpers/server.js';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const open: ReceiptStore[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

function parts(maxInflightRequests = 4) {
  const store = ReceiptStore.open(tempDir('ta-export-step-'));
  open.push(store);
  const engine = new AuditEngine(loadContractDir(join(ROOT, 'contracts')), store, { retentionMs: 86_400_000 });
  engine.restore(NOW);
  const metrics = createAuditMetrics();
  const ingestor = new Ingestor(engine, new SpanPipeline({ waitMs: 10_000, maxSpans: 10_000 }), metrics, { maxPendingReceipts: 100_000, maxInflightRequests }, () => NOW);
  const limits: string[] = [];
  const http = new ExportStep(ingestor, metrics, { transport: 'http', okStatus: 200, refusal: (e) => httpRefusal(e, 7), onLiveLimit: (l) => limits.push(l) });
  const grpc = new ExportStep(ingestor, metrics, { transport: 'grpc', okStatus: 'OK', refusal: grpcRefusal, onLiveLimit: (l) => limits.push(l) });
  return { engine, ingestor, metrics, http, grpc, limits };
}

/** A call whose steps are recorded: read, decode, release and discard. */
function call(body: Uint8Array | (() => Promise<never>), from: ExportCall['from'] = () => ({ source: 'test' })) {
  const seen: string[] = [];
  const c: ExportCall = {
    from,
    what: 'protobuf',
    discard: () => seen.push('discard'),
    read: async () => {
      seen.push('read');
      if (typeof body === 'function') return body();
      return {
        decode: () => {
          seen.push('decode');
          return decodeExportTraceRequest(body);
        },
        release: () => seen.push('release'),
      };
    },
  };
  return { c, seen };
}

const agents = readFileSync(join(ROOT, 'test', 'fixtures', 'otlp', 'agents.pb'));

describe('the export step', () => {
  it('consumes a decodable export, answers its partial success, counts it under the transport status, and gives the slot and the memory back', async () => {
    const { http, ingestor, metrics, engine } = parts(1);
    const { c, seen } = call(agents);
    const out = await http.export(c);
    // The fixture holds one span that cannot become a valid receipt: a partial success.
    expect(out.ok ? out.partial : null).toEqual({ rejectedSpans: 1, errorMessage: expect.stringMatching(/^1 span\(s\) could not become valid receipts; first: edge: /) });
    expect(seen).toEqual(['read', 'decode', 'release']);
    expect(ingestor.saturated).toBe(false); // the one slot went back
    expect(metrics.registry.render()).toMatch(/topology_ingest_requests_total\{transport="http",code="200"\} 1/);
    expect(engine.liveRuns).toBeGreaterThan(0);
  });

  it('refuses an unauthenticated request before reading it, drained, counted with its reason, on both wires', async () => {
    const { http, grpc, metrics } = parts();
    const h = call(agents, () => null);
    const out = await http.export(h.c);
    expect(out.ok).toBe(false);
    if (!out.ok) expect([out.refused.status, out.refused.headers['www-authenticate'], out.refused.message]).toEqual([401, 'Bearer', 'missing or invalid bearer token']);
    expect(h.seen).toEqual(['discard']);
    const g = call(agents, () => null);
    const gout = await grpc.export(g.c);
    expect(gout.ok ? null : gout.refused.status).toBe('UNAUTHENTICATED');
    expect(g.seen).toEqual(['discard']);
    const text = metrics.registry.render();
    expect(text).toMatch(/topology_ingest_rejected_requests_total\{transport="http",reason="unauthenticated"\} 1/);
    expect(text).toMatch(/topology_ingest_requests_total\{transport="grpc",code="UNAUTHENTICATED"\} 1/);
  });

  it("a transport's own header check thrown from `from` is its refusal, the request drained", async () => {
    const { grpc } = parts();
    const { c, seen } = call(agents, () => {
      throw new ConsumeError('bad_content_type', 'unsupported grpc-encoding "br"', { grpcStatus: 'UNIMPLEMENTED' });
    });
    const out = await grpc.export(c);
    expect(out.ok ? null : [out.refused.status, out.refused.message]).toEqual(['UNIMPLEMENTED', 'unsupported grpc-encoding "br"']);
    expect(seen).toEqual(['discard']);
  });

  it('refuses when saturated before reading a byte; once the slot is back it takes the next', async () => {
    const { http, ingestor } = parts(1);
    const release = ingestor.admit();
    const first = call(agents);
    const out = await http.export(first.c);
    expect(out.ok ? null : [out.refused.status, out.refused.headers['retry-after']]).toEqual([429, '7']);
    expect(first.seen).toEqual(['discard']);
    release();
    const second = call(agents);
    expect((await http.export(second.c)).ok).toBe(true);
  });

  it('names an undecodable message the same way on both wires, and releases its memory and the slot', async () => {
    const { http, grpc, ingestor } = parts(1);
    const garbage = Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    const h = call(garbage);
    const out = await http.export(h.c);
    expect(out.ok ? null : [out.refused.status, out.refused.reason]).toEqual([400, 'undecodable']);
    const g = call(garbage);
    const gout = await grpc.export(g.c);
    expect(gout.ok ? null : gout.refused.status).toBe('INVALID_ARGUMENT');
    expect(out.ok || gout.ok ? null : out.refused.message).toBe(gout.ok ? undefined : gout.refused.message);
    expect(gout.ok ? '' : gout.refused.message).toMatch(/^undecodable protobuf: /);
    expect(h.seen).toEqual(['read', 'decode', 'release']);
    expect(g.seen).toEqual(['read', 'decode', 'release']);
    expect(ingestor.saturated).toBe(false);
  });

  it('a read that fails takes no slot; anything unclassified is an internal error', async () => {
    const { http, grpc, ingestor } = parts(1);
    const tooLarge = call(() => Promise.reject(new ConsumeError('too_large', 'body of 9 bytes exceeds the limit of 8 bytes')));
    const out = await http.export(tooLarge.c);
    expect(out.ok ? null : [out.refused.status, out.refused.reason]).toEqual([413, 'too_large']);
    expect(ingestor.saturated).toBe(false);
    const broken = call(() => Promise.reject(new Error('socket torn')));
    const gout = await grpc.export(broken.c);
    expect(gout.ok ? null : [gout.refused.status, gout.refused.message, gout.refused.reason]).toEqual(['INTERNAL', 'internal error', undefined]);
    expect(ingestor.saturated).toBe(false);
  });
});
