/**
 * Issue 30.4: gRPC streams that send valid headers and no message must not hold the ingest slots. The node:http2
 * receiver takes its admission slot only once the message is complete (as OTLP/HTTP and NDJSON do), so 3
 * connections x 100 bodiless streams (past --max-inflight 256) leave an honest NDJSON post, an OTLP/HTTP export and
 * /readyz answered 200.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { startServerProcess, type ServerProcess } from './helpers/server.js';
import { receiptAttributes } from './helpers/otel.js';
import type { Receipt } from '../src/core/types.js';

const EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
const iso = (ms: number) => new Date(ms).toISOString();

function encoded(receipts: Receipt[]): Buffer {
  const spans: Parameters<SpanExporter['export']>[0] = [];
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor({ export: (s, cb) => (spans.push(...s), cb({ code: 0 })), shutdown: async () => {} })] });
  const tracer = provider.getTracer('h2-admission');
  for (const r of receipts) tracer.startSpan(`topology ${r.type}`, { startTime: new Date(r.at), attributes: receiptAttributes(r) }).end(new Date(Date.parse(r.at) + 1));
  return Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
}

describe('gRPC (node:http2) admission after the message', () => {
  let srv: ServerProcess;
  const sessions: http2.ClientHttp2Session[] = [];
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--max-inflight', '256'] });
  });
  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await srv.stop();
  });

  it('300 streams with headers and no message leave NDJSON, OTLP/HTTP and /readyz answered 200', async () => {
    for (let c = 0; c < 3; c++) {
      const session = http2.connect(srv.otlpGrpc);
      session.on('error', () => {});
      sessions.push(session);
      await new Promise((r) => session.once('remoteSettings', r));
      for (let i = 0; i < 100; i++) {
        const req = session.request({ ':method': 'POST', ':path': EXPORT, 'content-type': 'application/grpc+proto', te: 'trailers' }, { endStream: false });
        req.on('error', () => {});
      }
      // The server answers a PING after it has read every HEADERS frame sent before it: all 100 streams are open there.
      await new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve())));
    }
    const now = Date.now();
    const ndjson = await fetch(`${srv.api}/v1/receipts`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: JSON.stringify({ run: 'honest-ndjson', event: 's', type: 'run.start', at: iso(now), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }) + '\n',
    });
    expect(ndjson.status).toBe(200);
    const otlp = await fetch(`${srv.otlpHttp}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf' },
      body: new Uint8Array(encoded([{ run: 'honest-otlp', event: 's', type: 'run.start', at: iso(now), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }])),
    });
    expect(otlp.status).toBe(200);
    expect((await fetch(`${srv.api}/readyz`)).status).toBe(200);
    // both acknowledged receipts are stored
    for (const run of ['honest-ndjson', 'honest-otlp']) {
      const v = await fetch(`${srv.api}/api/v1/runs/${run}`);
      expect(v.status, run).toBe(200);
      // (the OTLP receipt's event id is its span's id)
      expect(((await v.json()) as { receipts: { type: string }[] }).receipts.map((r) => r.type), run).toEqual(['run.start']);
    }
  });
});
