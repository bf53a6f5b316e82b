/**
 * The default gRPC receiver (node:http2, src/server/otlp-grpc-h2.ts) against real clients: the OpenTelemetry OTLP
 * gRPC exporter (gzip, bearer metadata), a raw @grpc/grpc-js client (gzip and deflate message compression,
 * oversized messages, bad tokens, malformed protobuf, unknown methods) and a raw node:http2 client for what
 * grpc-js will not send (a compressed message that inflates past the limit, a non-gRPC content type).
 */
import http2 from 'node:http2';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { Receipt } from '../src/core/types.js';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { receiptAttributes } from './helpers/otel.js';

const TOKEN = 'grpc-h2-token-0123456789abcdef';
const EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
const MAX = 64 * 1024;
const t0 = Date.now() - 60_000;
const THREE = ['edge', 'edge', 'run.start'];
const at = (s: number) => new Date(t0 + s * 1000).toISOString();

function receiptsFor(run: string): Receipt[] {
  return [
    { run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
    { run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    { run, event: 'e2', type: 'edge', at: at(2), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
  ];
}

/** Spans of `receipts` as the SDK ends them (captured, not exported), and their OTLP protobuf encoding. */
function encoded(receipts: Receipt[]): Buffer {
  const spans: Parameters<SpanExporter['export']>[0] = [];
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor({ export: (s, cb) => (spans.push(...s), cb({ code: 0 })), shutdown: async () => {} })] });
  const tracer = provider.getTracer('grpc-h2-test');
  for (const r of receipts) tracer.startSpan(`topology ${r.type}`, { startTime: new Date(r.at), attributes: receiptAttributes(r) }).end(new Date(Date.parse(r.at) + 1));
  return Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
}

const bearer = (token: string) => {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
};

/** A raw grpc-js unary call; resolves to the status code and details. */
function call(port: number, body: Buffer, opts: { token?: string | null; path?: string; compression?: number } = {}): Promise<{ code: number; details: string; reply?: Buffer }> {
  const channelOpts = opts.compression !== undefined ? { 'grpc.default_compression_algorithm': opts.compression } : {};
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), channelOpts);
  const md = opts.token === null ? new grpc.Metadata() : bearer(opts.token ?? TOKEN);
  return new Promise((resolve) => {
    client.makeUnaryRequest(opts.path ?? EXPORT, (b: Buffer) => b, (b: Buffer) => b, body, md, (err, reply) => {
      client.close();
      resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: '', reply });
    });
  });
}

/** A raw HTTP/2 request; resolves to the response headers and trailers. */
function rawH2(port: number, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({ ':method': 'POST', ':path': EXPORT, ...headers });
    let got: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on('response', (h) => (got = h));
    req.on('trailers', (t) => (trailers = t));
    req.on('data', () => {});
    req.on('close', () => {
      session.close();
      resolve({ headers: got, trailers });
    });
    req.on('error', () => {});
    req.end(body);
  });
}

const frame = (flag: number, msg: Buffer) => {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(msg.length, 1);
  return Buffer.concat([head, msg]);
};

describe('gRPC receiver on node:http2', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    const dir = tempDir('ta-grpc-h2-');
    writeFileSync(join(dir, 'ingest'), `${TOKEN}\n`);
    srv = await startServerProcess({ args: ['--ingest-tokens', join(dir, 'ingest'), '--max-grpc-message', String(MAX)] });
  });
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  const receiptsOf = async (run: string) => {
    const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
    // Event ids of span receipts are their span ids: count the receipts and their types.
    return r.status === 200 ? (r.body.receipts as { type: string }[]).map((x) => x.type).sort() : [];
  };

  it('takes exports from the real OTLP gRPC exporter with gzip compression and bearer metadata', async () => {
    const exporter = new GrpcExporter({ url: srv.otlpGrpc, compression: 'gzip' as never, metadata: bearer(TOKEN) as never });
    let code: number | undefined;
    const wrapped: SpanExporter = { export: (spans, cb) => exporter.export(spans, (r) => ((code = r.code), cb(r))), shutdown: () => exporter.shutdown() };
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(wrapped)] });
    const tracer = provider.getTracer('grpc-h2-test');
    for (const r of receiptsFor('h2-exporter')) tracer.startSpan(`topology ${r.type}`, { startTime: new Date(r.at), attributes: receiptAttributes(r) }).end(new Date(Date.parse(r.at) + 1));
    await provider.forceFlush();
    await provider.shutdown();
    expect(code).toBe(ExportResultCode.SUCCESS);
    expect(await receiptsOf('h2-exporter')).toEqual(THREE);
  });

  it('answers a raw grpc-js client: identity, gzip and deflate messages are committed; the reply is an empty ExportTraceServiceResponse', async () => {
    for (const [run, compression] of [['h2-identity', 0], ['h2-deflate', 1], ['h2-gzip', 2]] as const) {
      const r = await call(srv.ports.otlpGrpc, encoded(receiptsFor(run)), { compression });
      expect(r).toMatchObject({ code: grpc.status.OK });
      expect(r.reply!.length).toBe(0);
      expect(await receiptsOf(run)).toEqual(THREE);
    }
  });

  it('refuses bad input with gRPC statuses, stores nothing of it and keeps serving', async () => {
    const good = encoded(receiptsFor('h2-refused'));
    expect((await call(srv.ports.otlpGrpc, good, { token: null })).code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await call(srv.ports.otlpGrpc, good, { token: 'wrong-token-0123456789abcdef' })).code).toBe(grpc.status.UNAUTHENTICATED);
    const malformed = await call(srv.ports.otlpGrpc, Buffer.from([0x0a, 0xff, 0xff, 0x01, 0x02]));
    expect(malformed.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(malformed.details).toMatch(/undecodable protobuf/);
    const oversize = await call(srv.ports.otlpGrpc, Buffer.concat([good, Buffer.alloc(MAX)]));
    expect(oversize.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((await call(srv.ports.otlpGrpc, good, { path: '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export' })).code).toBe(grpc.status.UNIMPLEMENTED);
    expect(await receiptsOf('h2-refused')).toEqual([]);
    // Still serving, on new connections and after the refusals.
    expect((await call(srv.ports.otlpGrpc, encoded(receiptsFor('h2-after')))).code).toBe(grpc.status.OK);
    expect(await receiptsOf('h2-after')).toEqual(THREE);
  });

  it('bounds decompression: a small gzip message inflating past the maximum message size is RESOURCE_EXHAUSTED', async () => {
    const bomb = gzipSync(Buffer.alloc(16 * MAX));
    expect(bomb.length).toBeLessThan(MAX);
    const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/grpc', te: 'trailers' };
    const r = await rawH2(srv.ports.otlpGrpc, { ...auth, 'grpc-encoding': 'gzip' }, frame(1, bomb));
    expect(r.headers['grpc-status'] ?? r.trailers['grpc-status']).toBe('8');
    // An unknown message encoding is refused, and a compressed flag without an encoding too.
    const snappy = await rawH2(srv.ports.otlpGrpc, { ...auth, 'grpc-encoding': 'snappy' }, frame(1, bomb));
    expect(snappy.headers['grpc-status']).toBe('12');
    const noEncoding = await rawH2(srv.ports.otlpGrpc, auth, frame(1, gzipSync(encoded(receiptsFor('h2-noenc')))));
    expect(noEncoding.headers['grpc-status']).toBe('13');
    // A valid gzip message sent raw is committed; the answer has trailers with grpc-status 0.
    const ok = await rawH2(srv.ports.otlpGrpc, { ...auth, 'grpc-encoding': 'gzip' }, frame(1, gzipSync(encoded(receiptsFor('h2-raw')))));
    expect(ok.headers[':status']).toBe(200);
    expect(ok.trailers['grpc-status']).toBe('0');
    expect(await receiptsOf('h2-raw')).toEqual(THREE);
    expect(await receiptsOf('h2-noenc')).toEqual([]);
    // Not gRPC at all: HTTP 415.
    const plain = await rawH2(srv.ports.otlpGrpc, { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, Buffer.from('{}'));
    expect(plain.headers[':status']).toBe(415);
  });

  it('counts requests by gRPC status in the metrics', async () => {
    const text = await (await fetch(`${srv.api}/metrics`)).text();
    expect(text).toMatch(/topology_ingest_requests_total\{transport="grpc",code="OK"\} [1-9]/);
    expect(text).toMatch(/topology_ingest_requests_total\{transport="grpc",code="UNAUTHENTICATED"\} 2/);
    expect(text).toMatch(/topology_ingest_rejected_requests_total\{transport="grpc",reason="too_large"\} 2/);
  });
});

describe('--grpc-impl grpc-js', () => {
  it('still serves TraceService/Export through @grpc/grpc-js', async () => {
    const srv = await startServerProcess({ args: ['--grpc-impl', 'grpc-js'] });
    try {
      expect((await call(srv.ports.otlpGrpc, encoded(receiptsFor('grpcjs-run')))).code).toBe(grpc.status.OK);
      const r = await getJson(`${srv.api}/api/v1/runs/grpcjs-run`);
      expect(r.status).toBe(200);
      expect(r.body.receipts).toHaveLength(3);
    } finally {
      expect(await srv.stop()).toBe(0);
    }
  });
});
