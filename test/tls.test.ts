/**
 * TLS on every listener: certificates made with openssl at test time; spans exported with the real OpenTelemetry
 * exporters over HTTPS (JSON and protobuf) and gRPC with SSL; plain-text clients and clients that do not trust the
 * CA are refused; with --tls-client-ca, only clients holding a certificate signed by that CA get in.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRACE_SERVICE } from '../src/server/otlp-grpc.js';
import * as grpc from '@grpc/grpc-js';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as HttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as HttpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import type { Receipt } from '../src/core/types.js';
import { runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { receiptAttributes } from './helpers/otel.js';

interface Pki {
  dir: string;
  ca: Buffer;
  serverCert: string;
  serverKey: string;
  caFile: string;
  clientCert: Buffer;
  clientKey: Buffer;
  otherKey: string;
}

/** A throw-away CA, a server certificate for 127.0.0.1/localhost and a client certificate, all signed by the CA. */
function makePki(): Pki {
  const dir = tempDir('ta-tls-');
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync('/usr/bin/openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', '/CN=topology-audit test CA');
  const leaf = (name: string, ext: string) => {
    ssl('req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`);
    writeFileSync(f(`${name}.ext`), ext);
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-out', f(`${name}.crt`), '-extfile', f(`${name}.ext`));
  };
  leaf('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'extendedKeyUsage=clientAuth\n');
  ssl('genpkey', '-algorithm', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', f('other.key'));
  return {
    dir,
    ca: readFileSync(f('ca.crt')),
    caFile: f('ca.crt'),
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    clientCert: readFileSync(f('client.crt')),
    clientKey: readFileSync(f('client.key')),
    otherKey: f('other.key'),
  };
}

interface Answer {
  status: number;
  body: string;
}

/** An HTTPS request with explicit trust (and optionally a client certificate); rejects on any TLS failure. */
function httpsCall(url: string, opts: { ca?: Buffer; cert?: Buffer; key?: Buffer; method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { method: opts.method ?? 'GET', ca: opts.ca, cert: opts.cert, key: opts.key, headers: opts.headers, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(opts.body);
  });
}

const GrpcClient = grpc.makeGenericClientConstructor(TRACE_SERVICE, 'TraceService');

/** One raw gRPC Export (an empty request is a valid, empty ExportTraceServiceRequest): the status code. */
function grpcExportCode(port: number, creds: grpc.ChannelCredentials): Promise<number> {
  const client = new GrpcClient(`127.0.0.1:${port}`, creds);
  return new Promise((res) =>
    (client as any).Export(Buffer.alloc(0), { deadline: Date.now() + 5000 }, (err: { code: number } | null) => {
      client.close();
      res(err ? err.code : grpc.status.OK);
    }),
  );
}

const receiptsFor = (run: string): Receipt[] => {
  const at = (s: number) => new Date(Date.now() - 30_000 + s * 1000).toISOString();
  return [
    { run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
    { run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    { run, event: 'e2', type: 'edge', at: at(2), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
  ];
};

/** Export receipts as spans through a real exporter; resolves with the exporter's result code. */
async function exportSpans(exporter: SpanExporter, receipts: Receipt[]): Promise<number> {
  let code: number | undefined;
  const wrapped: SpanExporter = {
    export: (spans, cb) => exporter.export(spans, (r) => ((code = r.code), cb(r))),
    shutdown: () => exporter.shutdown(),
  };
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(wrapped)] });
  const tracer = provider.getTracer('tls-test');
  for (const r of receipts) {
    const t = new Date(r.at);
    tracer.startSpan(`topology ${r.type}`, { startTime: t, attributes: receiptAttributes(r) }).end(new Date(t.getTime() + 1));
  }
  await provider.forceFlush();
  await provider.shutdown();
  return code!;
}

async function runOver(srv: ServerProcess, run: string, tls: { ca: Buffer; cert?: Buffer; key?: Buffer }): Promise<{ status: number; receipts: number; verdict?: string }> {
  for (let i = 0; i < 50; i++) {
    const r = await httpsCall(`https://127.0.0.1:${srv.ports.api}/api/v1/runs/${run}`, tls);
    if (r.status === 200) {
      const body = JSON.parse(r.body);
      if (body.receipts.length >= 3) return { status: 200, receipts: body.receipts.length, verdict: body.verdict };
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  return { status: 404, receipts: 0 };
}

let pki: Pki;
beforeAll(() => {
  pki = makePki();
});

describe('serve over TLS', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey] });
  });
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  it('announces https endpoints', () => {
    expect(srv.stdout()).toContain(`otlp-http https://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`);
    expect(srv.stdout()).toMatch(/"tls":true/);
  });

  it('takes spans from the real OTLP/HTTP exporters (JSON and protobuf) over HTTPS, trusting the CA', async () => {
    const url = `https://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`;
    const json = new HttpJsonExporter({ url, httpAgentOptions: { ca: pki.ca } });
    const proto = new HttpProtoExporter({ url, httpAgentOptions: { ca: pki.ca } });
    expect(await exportSpans(json, receiptsFor('tls-http-json'))).toBe(ExportResultCode.SUCCESS);
    expect(await exportSpans(proto, receiptsFor('tls-http-proto'))).toBe(ExportResultCode.SUCCESS);
    for (const run of ['tls-http-json', 'tls-http-proto']) {
      const got = await runOver(srv, run, { ca: pki.ca });
      expect(got).toMatchObject({ status: 200, receipts: 3 });
      expect(got.verdict).toBeTypeOf('string');
    }
  });

  it('takes spans from the real OTLP/gRPC exporter with SSL credentials', async () => {
    const exporter = new GrpcExporter({ url: `https://127.0.0.1:${srv.ports.otlpGrpc}`, credentials: grpc.credentials.createSsl(pki.ca) });
    expect(await exportSpans(exporter, receiptsFor('tls-grpc'))).toBe(ExportResultCode.SUCCESS);
    expect(await runOver(srv, 'tls-grpc', { ca: pki.ca })).toMatchObject({ status: 200, receipts: 3 });
  });

  it('refuses plain-text HTTP and gRPC on the TLS ports, and clients that do not trust the CA', async () => {
    const body = JSON.stringify({ resourceSpans: [] });
    await expect(fetch(`http://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`, { method: 'POST', body, headers: { 'content-type': 'application/json' } })).rejects.toThrow();
    await expect(fetch(`http://127.0.0.1:${srv.ports.api}/healthz`)).rejects.toThrow();
    expect(await grpcExportCode(srv.ports.otlpGrpc, grpc.credentials.createInsecure())).toBe(grpc.status.UNAVAILABLE);
    // TLS without trusting the test CA: the certificate does not verify.
    await expect(httpsCall(`https://127.0.0.1:${srv.ports.api}/healthz`)).rejects.toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    expect(await grpcExportCode(srv.ports.otlpGrpc, grpc.credentials.createSsl())).toBe(grpc.status.UNAVAILABLE);
    // The same requests succeed with the CA trusted: the failures above are about transport security only.
    expect((await httpsCall(`https://127.0.0.1:${srv.ports.api}/healthz`, { ca: pki.ca })).status).toBe(200);
    expect(await grpcExportCode(srv.ports.otlpGrpc, grpc.credentials.createSsl(pki.ca))).toBe(grpc.status.OK);
  });
});

describe('serve with mutual TLS (--tls-client-ca)', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-client-ca', pki.caFile] });
  });
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  it('refuses clients without a certificate on HTTPS and gRPC', async () => {
    await expect(httpsCall(`https://127.0.0.1:${srv.ports.api}/healthz`, { ca: pki.ca })).rejects.toThrow();
    await expect(
      httpsCall(`https://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`, { ca: pki.ca, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }),
    ).rejects.toThrow();
    expect(await grpcExportCode(srv.ports.otlpGrpc, grpc.credentials.createSsl(pki.ca))).toBe(grpc.status.UNAVAILABLE);
  });

  it('takes spans from exporters holding a client certificate signed by the CA', async () => {
    const client = { ca: pki.ca, cert: pki.clientCert, key: pki.clientKey };
    const http = new HttpProtoExporter({ url: `https://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`, httpAgentOptions: client });
    expect(await exportSpans(http, receiptsFor('mtls-http'))).toBe(ExportResultCode.SUCCESS);
    const viaGrpc = new GrpcExporter({ url: `https://127.0.0.1:${srv.ports.otlpGrpc}`, credentials: grpc.credentials.createSsl(pki.ca, pki.clientKey, pki.clientCert) });
    expect(await exportSpans(viaGrpc, receiptsFor('mtls-grpc'))).toBe(ExportResultCode.SUCCESS);
    expect(await runOver(srv, 'mtls-http', client)).toMatchObject({ status: 200, receipts: 3 });
    expect(await runOver(srv, 'mtls-grpc', client)).toMatchObject({ status: 200, receipts: 3 });
  });
});

describe('TLS flags', () => {
  const serve = (...args: string[]) => runCli(['serve', '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--data', tempDir(), ...args], { timeoutMs: 20_000 });

  it('--tls-cert and --tls-key go together', async () => {
    const r = await serve('--tls-cert', pki.serverCert);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tls-cert and --tls-key go together/);
  });

  it('refuses a key that does not match the certificate, and a file that is not PEM', async () => {
    const mismatch = await serve('--tls-cert', pki.serverCert, '--tls-key', pki.otherKey);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toMatch(/unusable certificate or key/);
    const notPem = join(pki.dir, 'server.ext');
    const bad = await serve('--tls-cert', notPem, '--tls-key', pki.serverKey);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--tls-cert .*server\.ext: not a PEM file/);
  });
});
