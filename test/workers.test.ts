/**
 * `serve --workers N` (src/server/worker-pool.ts): the real server with decode workers stores the same receipts and
 * reaches the same verdicts as `--workers 0` from the real OpenTelemetry exporters, refuses bad input with exactly
 * the same statuses and messages, and a worker that dies fails only its own request and is replaced.
 */
import http2 from 'node:http2';
import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Receipt } from '../src/core/types.js';
import { ConsumeError } from '../src/audit/consumer.js';
import { DecodePool } from '../src/server/worker-pool.js';
import { getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { OTLPTraceExporter as HttpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { emitReceiptsAsSpans, exporterFor, providerFor, type Transport } from './helpers/otel.js';

/** The real exporters, plus the two with gzip on (inflated in the workers): `http-protobuf-gzip`, `grpc-gzip`. */
type Sent = Transport | 'http-protobuf-gzip' | 'grpc-gzip';
function exporterOf(t: Sent, srv: ServerProcess): SpanExporter {
  if (t === 'http-protobuf-gzip') return new HttpProtoExporter({ url: `${srv.otlpHttp}/v1/traces`, compression: 'gzip' as never });
  if (t === 'grpc-gzip') return new GrpcExporter({ url: srv.otlpGrpc, compression: 'gzip' as never });
  return exporterFor(t, srv);
}
import { until } from './helpers/wait.js';
import { shiftedDrift } from './helpers/drift.js';


/** One OTLP/HTTP request on a connection of its own: status, content type and body text. */
function postHttp(base: string, body: Uint8Array, headers: Record<string, string>): Promise<{ status: number; type: string; body: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}/v1/traces`, { method: 'POST', agent: false, headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      let text = '';
      res.setEncoding('latin1');
      res.on('data', (d) => (text += d));
      res.on('end', () => (req.destroy(), resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: text, retryAfter: res.headers['retry-after'] as string | undefined })));
    });
    req.on('error', reject);
    // An oversize body is declared, not sent: the server answers 413 from its content-length before reading it.
    if (body.length > 20 * 1024 * 1024) req.flushHeaders();
    else req.end(body);
  });
}

/** One gRPC Export call over node:http2 with a raw length-prefixed message: its grpc-status and grpc-message. */
function grpcExport(base: string, message: Buffer, opts: { compressed?: boolean; encoding?: string } = {}): Promise<{ status: string; message: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(base);
    session.on('error', reject);
    const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc', te: 'trailers' };
    if (opts.encoding) headers['grpc-encoding'] = opts.encoding;
    const stream = session.request(headers);
    let status = '';
    let msg = '';
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
      if (h['grpc-message'] !== undefined) msg = decodeURIComponent(String(h['grpc-message']));
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('error', () => {});
    stream.resume();
    stream.on('close', () => {
      session.close();
      resolve({ status, message: msg });
    });
    const prefix = Buffer.alloc(5);
    prefix[0] = opts.compressed ? 1 : 0;
    prefix.writeUInt32BE(message.length, 1);
    stream.end(Buffer.concat([prefix, message]));
  });
}

/** A protobuf ExportTraceServiceRequest of `n` minimal spans (ids only) in one ResourceSpans/ScopeSpans. */
function manySpans(n: number): Buffer {
  const span = Buffer.concat([Buffer.from([0x0a, 16]), Buffer.alloc(16, 0xab), Buffer.from([0x12, 8]), Buffer.alloc(8, 0xcd)]);
  const len = (k: number) => {
    const out: number[] = [];
    while (k > 0x7f) {
      out.push((k & 0x7f) | 0x80);
      k >>>= 7;
    }
    out.push(k);
    return Buffer.from(out);
  };
  const spans = Buffer.concat(Array.from({ length: n }, () => Buffer.concat([Buffer.from([0x12]), len(span.length), span])));
  const scope = Buffer.concat([Buffer.from([0x12]), len(spans.length), spans]);
  return Buffer.concat([Buffer.from([0x0a]), len(scope.length), scope]);
}

const runView = (body: { verdict: string; pin: unknown; receipts: Receipt[] }) => ({
  verdict: body.verdict,
  pin: body.pin,
  receipts: body.receipts.map((r) => JSON.stringify(r)).sort(),
});

describe('serve --workers: decode workers beside the single writer', () => {
  let single: ServerProcess;
  let pooled: ServerProcess;
  beforeAll(async () => {
    [single, pooled] = await Promise.all([startServerProcess({ args: ['--workers', '0'] }), startServerProcess({ args: ['--workers', '2'] })]);
  });
  afterAll(async () => {
    expect(await single.stop()).toBe(0);
    expect(await pooled.stop()).toBe(0);
  });

  it('stores the same receipts and verdicts as --workers 0 from the real HTTP/JSON, HTTP/protobuf and gRPC exporters (gzip too)', async () => {
    // 'gzip-length': gzipped protobuf with a content-length (as collectors send it; the exporters' gzip is chunked):
    // read straight into the decode pool's shared memory (DecodePool.take).
    const transports: (Sent | 'gzip-length')[] = ['http-json', 'http-protobuf', 'grpc', 'http-protobuf-gzip', 'grpc-gzip', 'gzip-length'];
    const all: Receipt[] = [];
    for (const t of transports) {
      const receipts = shiftedDrift(`w-${t}`);
      all.push(...receipts);
      // The same spans (same ids) through each real exporter to both servers, in batches of several spans.
      const memory = new InMemorySpanExporter();
      const recorder = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
      await emitReceiptsAsSpans(recorder, receipts);
      const spans = memory.getFinishedSpans();
      for (const srv of [single, pooled]) {
        if (t === 'gzip-length') {
          for (let i = 0; i < spans.length; i += 7) {
            const body = gzipSync(ProtobufTraceSerializer.serializeRequest(spans.slice(i, i + 7))!);
            const r = await postHttp(srv.otlpHttp, body, { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' });
            expect(r.status, r.body).toBe(200);
          }
          continue;
        }
        const exporter = exporterOf(t, srv);
        for (let i = 0; i < spans.length; i += 7) {
          const result = await new Promise<{ code: number; error?: Error }>((resolve) => exporter.export(spans.slice(i, i + 7), resolve));
          expect(result.code, `${t}: ${result.error?.message}`).toBe(ExportResultCode.SUCCESS);
        }
        await exporter.shutdown();
      }
    }
    const runs = [...new Set(all.map((r) => r.run))];
    expect(runs).toHaveLength(54);
    for (const run of runs) {
      const want = all.filter((x) => x.run === run).length;
      const [a, b] = await Promise.all(
        [single, pooled].map((srv) =>
          until(`${run} stored whole`, async () => {
            const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
            return r.status === 200 && r.body.receipts.length === want ? r.body : undefined;
          }),
        ),
      );
      expect(runView(b), run).toEqual(runView(a));
    }
    // The server's own counters agree too: every span became a receipt on both.
    const spans = async (srv: ServerProcess) => {
      const text = await (await fetch(`${srv.api}/metrics`)).text();
      return text.split('\n').filter((l) => l.startsWith('topology_otlp_spans_total{') || l.startsWith('topology_receipts_total{')).sort();
    };
    expect(await spans(pooled)).toEqual(await spans(single));
  });

  it('refuses malformed protobuf and JSON, gzip bombs and oversize bodies exactly as --workers 0 does', async () => {
    const bomb = gzipSync(Buffer.alloc(200 * 1024 * 1024));
    const cases: [string, Uint8Array, Record<string, string>, number][] = [
      ['malformed protobuf', new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]), { 'content-type': 'application/x-protobuf' }, 400],
      ['malformed JSON', Buffer.from('{"resourceSpans": ['), { 'content-type': 'application/json' }, 400],
      ['gzip of malformed protobuf', gzipSync(Buffer.from([0x0a, 0x05, 0x01])), { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }, 400],
      ['not gzip', Buffer.from('plainly not gzip'), { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }, 400],
      ['gzip bomb', bomb, { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }, 413],
      ['oversize body', new Uint8Array(21 * 1024 * 1024), { 'content-type': 'application/x-protobuf' }, 413],
    ];
    for (const [what, body, headers, status] of cases) {
      const [a, b] = [await postHttp(single.otlpHttp, body, headers), await postHttp(pooled.otlpHttp, body, headers)];
      expect(a.status, what).toBe(status);
      expect(b, what).toEqual(a);
    }
    const grpcBomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
    const grpcCases: [string, Buffer, { compressed?: boolean; encoding?: string }, string][] = [
      ['malformed protobuf', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]), {}, '3'],
      ['not gzip', Buffer.from('plainly not gzip'), { compressed: true, encoding: 'gzip' }, '13'],
      ['gzip bomb', grpcBomb, { compressed: true, encoding: 'gzip' }, '8'],
      ['compressed without grpc-encoding', Buffer.from([0x0a, 0x00]), { compressed: true }, '13'],
      ['oversize message', Buffer.alloc(5 * 1024 * 1024), {}, '8'],
    ];
    for (const [what, msg, opts, status] of grpcCases) {
      const [a, b] = [await grpcExport(single.otlpGrpc, msg, opts), await grpcExport(pooled.otlpGrpc, msg, opts)];
      expect(a.status, what).toBe(status);
      expect(b, what).toEqual(a);
    }
    // A valid export still lands on the pooled server after all that.
    const provider = providerFor(exporterFor('grpc', pooled));
    await emitReceiptsAsSpans(provider, shiftedDrift('w-after-bad').filter((r) => r.run.endsWith('drift-current')));
    await provider.shutdown();
    const r = await until('the run after the bad bodies', async () => {
      const x = await getJson(`${pooled.api}/api/v1/runs/w-after-bad-drift-current`);
      return x.status === 200 ? x : undefined;
    });
    expect(r.body.verdict).toBe('working');
  });
});

describe('DecodePool: a worker that dies', () => {
  it('fails only the requests it had in flight (both, retryable) and is replaced', async () => {
    // A real worker with a small heap, given a real body whose decoded spans do not fit in it: V8 stops that worker
    // (ERR_WORKER_OUT_OF_MEMORY); nothing in the worker or the pool is there for the test.
    const lost: { exitCode: number; failed: boolean }[] = [];
    const pool = new DecodePool(1, { resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 }, onWorkerLost: (w) => lost.push(w) });
    try {
      const small = manySpans(3);
      expect((await pool.decode('protobuf', 'identity', small, 1 << 30)).spanCount).toBe(3);
      const huge = manySpans(600_000);
      // Two in flight on the one worker (the second a gzip body, inflating while the first is decoded), one queued.
      const settled = Promise.allSettled([
        pool.decode('protobuf', 'identity', huge, 1 << 30),
        pool.decode('protobuf', 'gzip', gzipSync(small), 1 << 30),
        pool.decode('protobuf', 'identity', small, 1 << 30),
      ]);
      expect(pool.queueDepth).toBe(1);
      const [killed, second, after] = await settled;
      for (const r of [killed, second]) {
        expect(r.status).toBe('rejected');
        expect((r as PromiseRejectedResult).reason).toBeInstanceOf(ConsumeError);
        expect((r as PromiseRejectedResult).reason.kind).toBe('worker_lost');
      }
      // The request queued behind them is decoded by the replacement.
      expect(after.status).toBe('fulfilled');
      expect((after as PromiseFulfilledResult<{ spanCount: number }>).value.spanCount).toBe(3);
      expect(pool.replaced).toBe(1);
      expect(lost).toEqual([{ exitCode: 1, failed: true }]);
      expect((await pool.decode('protobuf', 'identity', small, 1 << 30)).spanCount).toBe(3);
    } finally {
      await pool.close();
    }
  });

  it('refuses past its bounded queue as saturated, and decodes again once it drains', async () => {
    const pool = new DecodePool(1, { maxQueued: 2 });
    try {
      const body = manySpans(20_000);
      const jobs = Array.from({ length: 5 }, () => pool.decode('protobuf', 'identity', body, 1 << 30).then((d) => d.spanCount, (e: ConsumeError) => e.kind));
      // Two in flight on the worker, two waiting, the fifth refused.
      expect(await Promise.all(jobs)).toEqual([20_000, 20_000, 20_000, 20_000, 'saturated']);
      expect((await pool.decode('protobuf', 'identity', body, 1 << 30)).spanCount).toBe(20_000);
    } finally {
      await pool.close();
    }
  });
});

describe('DecodePool: two jobs in flight on one worker', () => {
  it('answers them correctly and in the order posted, and refuses a gzip bomb among them as too large without harming the others', async () => {
    const pool = new DecodePool(1);
    try {
      // A large body first, a small one second: the small one inflates sooner, but answers come in the order posted.
      const large = gzipSync(manySpans(200_000));
      const small = gzipSync(manySpans(7));
      const bomb = gzipSync(Buffer.alloc(40 * 1024 * 1024)); // 40 MiB of zeros in ~40 KB
      const alone = await pool.decode('protobuf', 'gzip', large, 1 << 30);
      expect(alone.spanCount).toBe(200_000);
      expect(await pool.decode('protobuf', 'gzip', small, 1 << 30)).toEqual(await pool.decode('protobuf', 'identity', manySpans(7), 1 << 30));
      for (const second of [small, bomb]) {
        const order: number[] = [];
        const jobs = [large, second, small].map((b, i) =>
          pool.decode('protobuf', 'gzip', b, 16 * 1024 * 1024).then(
            (d) => (order.push(i), d),
            (e: ConsumeError | Error) => (order.push(i), e),
          ),
        );
        // Both first jobs are with the worker (none waits in the pool's queue), the third waits.
        expect(pool.queueDepth).toBe(1);
        const [a, b, c] = await Promise.all(jobs);
        expect(order).toEqual([0, 1, 2]);
        expect(a).toEqual(alone);
        if (second === bomb) {
          expect(b).toBeInstanceOf(Error);
          expect((b as { kind?: string }).kind).toBe('too_large');
        } else {
          expect((b as { spanCount: number }).spanCount).toBe(7);
        }
        expect((c as { spanCount: number }).spanCount).toBe(7);
      }
      expect(pool.replaced).toBe(0);
    } finally {
      await pool.close();
    }
  });
});

describe('DecodePool: bodies read into its shared memory', () => {
  it('decodes a body read into memory it lent exactly as a copied one, and takes that memory back only once answered', async () => {
    const pool = new DecodePool(1, { maxQueued: 1 });
    try {
      const gz = gzipSync(manySpans(5_000));
      const copied = await pool.decode('protobuf', 'gzip', gz, 1 << 30);
      // Read into the pool's memory (as readBodyInto does with DecodePool.take), then decoded there.
      const a = pool.take(gz.length);
      gz.copy(a.buf);
      const decoding = pool.decode('protobuf', 'gzip', a.buf, 1 << 30);
      a.release(); // the job holds the memory now: this gives nothing back
      const b = pool.take(gz.length);
      expect(b.buf.buffer).not.toBe(a.buf.buffer);
      b.release();
      expect(await decoding).toEqual(copied);
      // Answered: the memory is free again and lent once more (the pool reuses warm memory).
      const c = pool.take(gz.length);
      expect([a.buf.buffer, b.buf.buffer]).toContain(c.buf.buffer);
      // Refused (the queue is full): the caller's release gives it back, and a later lease gets it.
      // Two in flight on the worker, one queued.
      const busy = [pool.decode('protobuf', 'gzip', gz, 1 << 30), pool.decode('protobuf', 'gzip', gz, 1 << 30), pool.decode('protobuf', 'gzip', gz, 1 << 30)];
      gz.copy(c.buf);
      const refused = await pool.decode('protobuf', 'gzip', c.buf, 1 << 30).then(() => 'decoded', (e: ConsumeError) => e.kind);
      expect(refused).toBe('saturated');
      c.release();
      await Promise.all(busy);
      const d = pool.take(gz.length);
      expect([a.buf.buffer, b.buf.buffer]).toContain(d.buf.buffer);
      d.release();
    } finally {
      await pool.close();
    }
  });
});

describe('serve --workers: validation', () => {
  it('refuses a count that is not an integer from 0 to 256, naming the flag', async () => {
    for (const bad of ['-1', '1.5', 'two', '257', '']) {
      const r = await runCli(['serve', `--workers=${bad}`, '--data', tempDir('ta-workers-'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0']);
      expect(r.code, bad).toBe(2);
      expect(r.stderr, bad).toContain('--workers: expected an integer from 0 to 256');
    }
  });
});
