/**
 * Resource attacks on a real server (child processes on free loopback ports, except the event-stream test which
 * needs a small per-stream buffer and runs the server in-process on a real socket): aborted long-polls, an NDJSON
 * flood of invalid lines, slow bodies, half-open connections, a stalled event-stream reader, the live-run cap,
 * a listener that cannot bind, two servers on one data directory and an unreadable row at start-up.
 */
import { request, type ClientRequest } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS, startServer } from '../src/server/serve.js';
import { createUiRoutes } from '../src/ui/routes.js';
import { ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const line = (o: object) => JSON.stringify(o) + '\n';
const startLine = (run: string, event = 's') => line({ run, event, type: 'run.start', at: new Date().toISOString(), contract: 'research-publish', version: '3', phase: 'research' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function metric(srv: { api: string }, pattern: RegExp): Promise<number | null> {
  const text = await (await fetch(`${srv.api}/metrics`)).text();
  const m = pattern.exec(text);
  return m ? Number(m[1]) : null;
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function postNdjson(api: string, body: string) {
  return fetch(`${api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
}

/** A raw connection that sends `head` and then whatever the test writes; resolves when connected. */
function rawSocket(port: number, head = ''): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => {
      if (head) s.write(head);
      resolve(s);
    });
    s.on('error', () => {});
    s.once('error', reject);
  });
}

/** Resolves when the server has closed the connection (reads, so that the end of the stream is seen). */
const closed = (s: Socket) =>
  new Promise<void>((r) => {
    if (s.destroyed || s.closed) return r();
    s.once('close', () => r());
    s.resume();
  });

const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop('SIGKILL');
});
async function serve(args: string[] = [], dataDir?: string): Promise<ServerProcess> {
  const s = await startServerProcess({ args, dataDir });
  servers.push(s);
  return s;
}

describe('long-polls', () => {
  it('an aborted long-poll releases its listener and timer at once', async () => {
    const srv = await serve(['--max-connections', '4000', '--max-long-polls', '4000']);
    expect((await postNdjson(srv.api, startLine('slow-run'))).status).toBe(200);
    const N = 2000;
    const reqs: ClientRequest[] = [];
    for (let i = 0; i < N; i++) {
      const r = request({ host: '127.0.0.1', port: srv.ports.api, path: '/api/v1/runs/slow-run/verdict?wait=300', agent: false });
      r.on('error', () => {});
      r.end();
      reqs.push(r);
    }
    await until('every long-poll waiting', async () => (await metric(srv, /^topology_api_long_polls (\d+)$/m)) === N, 60_000);
    for (const r of reqs) r.destroy();
    await until('every aborted long-poll released', async () => (await metric(srv, /^topology_api_long_polls (\d+)$/m)) === 0, 30_000);
    // Ingest still answers promptly after the storm.
    expect((await postNdjson(srv.api, startLine('after-polls'))).status).toBe(200);
  }, 120_000);
});

describe('NDJSON flood of invalid lines', () => {
  it('answers with a bounded list and counts, and /healthz answers while the body is parsed', async () => {
    const srv = await serve(['--max-body', '8MiB']);
    const bad = line({ run: 'x', event: 'e', type: 'edge', at: 'not a time', from: 7, to: [], kind: { a: 1 } });
    const lines = Math.floor((4 * 1024 * 1024) / bad.length);
    const body = bad.repeat(lines);
    const t0 = performance.now();
    let postDone = 0;
    const posting = postNdjson(srv.api, body).then(async (r) => {
      const text = await r.text();
      postDone = performance.now();
      return { status: r.status, text };
    });
    const health: { sent: number; took: number }[] = [];
    while (!postDone) {
      const sent = performance.now();
      const r = await fetch(`${srv.api}/healthz`);
      expect(r.status).toBe(200);
      await r.text();
      if (!postDone) health.push({ sent, took: performance.now() - sent });
      await sleep(20);
    }
    const { status, text } = await posting;
    expect(status).toBe(200);
    expect(text.length).toBeLessThan(100 * 1024);
    const out = JSON.parse(text);
    expect(out.accepted).toBe(0);
    expect(out.rejected).toHaveLength(100);
    expect(out.rejected[0].line).toBe(1);
    expect(out.rejectedCount).toBe(lines);
    expect(out.rejectedTruncated).toBe(true);
    const postMs = postDone - t0;
    // /healthz kept answering during the parse: several answers, none waiting for most of the request.
    expect(health.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...health.map((h) => h.took))).toBeLessThan(Math.max(1000, postMs / 2));
  }, 120_000);
});

describe('slow bodies and half-open connections', () => {
  it('slow bodies hold no admission slot: a normal client still gets 200 on both HTTP ports', async () => {
    const srv = await serve(['--max-inflight', '4']);
    const slow: Socket[] = [];
    for (let i = 0; i < 24; i++) {
      slow.push(await rawSocket(srv.ports.api, `POST /v1/receipts HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-ndjson\r\ncontent-length: 100000\r\n\r\n{"run":`));
      slow.push(await rawSocket(srv.ports.otlpHttp, `POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"resourceSpans":`));
    }
    await sleep(500);
    expect((await postNdjson(srv.api, startLine('fine'))).status).toBe(200);
    const r = await fetch(`${srv.otlpHttp}/v1/traces`, { method: 'POST', body: '{"resourceSpans":[]}', headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(200);
    for (const s of slow) s.destroy();
  }, 60_000);

  it('cuts a body that takes longer than --request-timeout and a silent connection after --headers-timeout', async () => {
    const srv = await serve(['--headers-timeout', '1s', '--request-timeout', '2s']);
    const silent = await rawSocket(srv.ports.otlpHttp);
    const slowBody = await rawSocket(srv.ports.api, `POST /v1/receipts HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-ndjson\r\ncontent-length: 1000\r\n\r\n{`);
    const trickle = setInterval(() => slowBody.writable && slowBody.write(' '), 200);
    const t0 = Date.now();
    await Promise.all([closed(silent), closed(slowBody)]);
    clearInterval(trickle);
    expect(Date.now() - t0).toBeLessThan(15_000);
  }, 30_000);

  it('refuses connections past --max-connections per listener and counts them', async () => {
    const srv = await serve(['--max-connections', '8']);
    const held: Socket[] = [];
    for (let i = 0; i < 20; i++) held.push(await rawSocket(srv.ports.otlpHttp));
    await until('connections over the limit closed', () => held.filter((s) => s.destroyed || s.closed).length >= 12, 10_000);
    expect(await metric(srv, /^topology_connections_dropped_total\{listener="otlp_http"\} (\d+)$/m)).toBeGreaterThanOrEqual(12);
    for (const s of held) s.destroy();
  }, 30_000);
});

describe('event streams', () => {
  it('closes a stalled reader once its unsent output passes the bound, and caps open streams', async () => {
    const registry = loadContractDir(join(ROOT, 'contracts'));
    const dropped: string[] = [];
    let open = 0;
    const srv = await startServer(registry, {
      ...DEFAULTS,
      port: 0,
      otlpHttpPort: 0,
      otlpGrpcPort: 0,
      dataDir: tempDir('ta-sse-'),
      log: () => undefined,
      version: 'test',
      extraRoutes: (engine) =>
        createUiRoutes(engine, { flushMs: 10, maxBatch: 1000, maxStreams: 2, maxStreamBufferBytes: 64 * 1024, onStreamDropped: (why) => dropped.push(why), onStreams: (n) => (open = n) }),
    });
    const api = `http://127.0.0.1:${srv.ports.api}`;
    try {
      const stalled = await rawSocket(srv.ports.api, 'GET /ui/events HTTP/1.1\r\nhost: x\r\n\r\n');
      stalled.pause(); // never reads again
      const second = await rawSocket(srv.ports.api, 'GET /ui/events HTTP/1.1\r\nhost: x\r\n\r\n');
      await until('two streams open', () => open === 2, 10_000);
      const third = await fetch(`${api}/ui/events`);
      expect(third.status).toBe(503);
      expect(third.headers.get('retry-after')).toBeTruthy();
      await third.text();
      expect(dropped).toContain('too_many');
      second.destroy();
      await until('second stream closed', () => open === 1, 10_000);
      // Changed runs are pushed to the stalled reader until its buffers fill and the bound is passed.
      let batch = 0;
      const deadline = Date.now() + 90_000;
      while (!dropped.includes('slow_reader') && Date.now() < deadline) {
        let body = '';
        for (let i = 0; i < 400; i++) body += startLine(`sse-${batch}-${i}-${'x'.repeat(100)}`);
        expect((await postNdjson(api, body)).status).toBe(200);
        batch++;
        await sleep(15);
      }
      expect(dropped).toContain('slow_reader');
      expect(open).toBe(0);
      stalled.destroy();
    } finally {
      await srv.close();
    }
  }, 120_000);
});

describe('live-state caps', () => {
  it('--max-live-runs refuses the receipts of new runs per run (the rest of the request is stored) and counts it; known runs still ingest', async () => {
    const srv = await serve(['--max-live-runs', '3']);
    expect((await postNdjson(srv.api, startLine('a') + startLine('b') + startLine('c'))).status).toBe(200);
    // one request: a receipt of the known run a and the first of a new run d; d is refused by line, a is stored
    const known = line({ run: 'a', event: 'e2', type: 'edge', at: new Date().toISOString(), version: '3', from: 'researcher', to: 'publisher', kind: 'delegate' });
    const refused = await postNdjson(srv.api, known + startLine('d'));
    expect(refused.status).toBe(200);
    const body = (await refused.json()) as { accepted: number; rejectedCount: number; rejected: { line: number; error: string }[] };
    expect(body.accepted).toBe(1);
    expect(body.rejectedCount).toBe(1);
    expect(body.rejected[0].line).toBe(2);
    expect(body.rejected[0].error).toMatch(/--max-live-runs/);
    expect((await fetch(`${srv.api}/api/v1/runs/d`)).status).toBe(404);
    expect(((await (await fetch(`${srv.api}/api/v1/runs/a`)).json()) as { receipts: unknown[] }).receipts).toHaveLength(2);
    expect(await metric(srv, /^topology_live_limit_refusals_total\{limit="runs",transport="ndjson"\} (\d+)$/m)).toBe(1);
    expect((await fetch(`${srv.api}/healthz`)).status).toBe(200);
  }, 60_000);
});

describe('live caps over OTLP', () => {
  /** One OTLP/JSON export: per run, an orchestrator invocation and a publisher invocation under it (delegate, return: allowed, the run goes on). */
  const exportOf = (runs: string[], salt: number) => {
    const ns = BigInt(Date.now() - 5_000) * 1_000_000n;
    const attrs = (agent: string, run: string) => [
      { key: 'gen_ai.operation.name', value: { stringValue: 'invoke_agent' } },
      { key: 'gen_ai.agent.name', value: { stringValue: agent } },
      { key: 'topology.run.id', value: { stringValue: run } },
    ];
    const spans = runs.flatMap((run, i) => {
      const traceId = (salt * 1000 + i + 1).toString(16).padStart(32, '0');
      const parent = (salt * 1000 + i + 1).toString(16).padStart(16, 'a');
      const child = (salt * 1000 + i + 1).toString(16).padStart(16, 'b');
      return [
        { traceId, spanId: parent, name: 'invoke_agent orchestrator', kind: 1, startTimeUnixNano: String(ns), endTimeUnixNano: String(ns + 3_000_000n), attributes: attrs('orchestrator', run) },
        { traceId, spanId: child, parentSpanId: parent, name: 'invoke_agent publisher', kind: 1, startTimeUnixNano: String(ns + 1_000_000n), endTimeUnixNano: String(ns + 2_000_000n), attributes: attrs('publisher', run) },
      ];
    });
    return JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 'caps' }, spans }] }] });
  };

  it('a run past --max-live-runs is refused by a partial success (rejected spans, the reason); the other runs of the export are stored', async () => {
    const srv = await serve(['--max-live-runs', '1', '--contract', 'research-publish']);
    const post = async (body: string) => {
      const r = await fetch(`${srv.otlpHttp}/v1/traces`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      return { status: r.status, body: (await r.json()) as { partialSuccess?: { rejectedSpans?: string | number; errorMessage?: string } } };
    };
    const first = await post(exportOf(['otlp-a'], 1));
    expect(first.status).toBe(200);
    expect(first.body.partialSuccess).toBeUndefined();
    // one export: more of the live run otlp-a, and a new run otlp-b past the cap
    const second = await post(exportOf(['otlp-a', 'otlp-b'], 2));
    expect(second.status).toBe(200);
    expect(Number(second.body.partialSuccess?.rejectedSpans)).toBeGreaterThanOrEqual(1);
    expect(second.body.partialSuccess?.errorMessage).toMatch(/--max-live-runs/);
    expect((await fetch(`${srv.api}/api/v1/runs/otlp-b`)).status).toBe(404);
    expect((await fetch(`${srv.api}/api/v1/runs/otlp-a`)).status).toBe(200);
    expect(await metric(srv, /^topology_live_limit_refusals_total\{limit="runs",transport="http"\} (\d+)$/m)).toBe(1);
  }, 60_000);
});

describe('start-up and operations', () => {
  it('exits non-zero naming the port when a listener cannot bind (gRPC or HTTP)', async () => {
    const holder: Server = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const port = (holder.address() as { port: number }).port;
    try {
      for (const flag of ['--otlp-grpc-port', '--otlp-http-port']) {
        const others = ['--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'];
        const i = others.indexOf(flag);
        others[i + 1] = String(port);
        const r = await runCli(['serve', '--contracts', join(ROOT, 'contracts'), '--data', tempDir('ta-bind-'), ...others], { timeoutMs: 30_000 });
        expect(r.code, r.stderr).not.toBe(0);
        expect(r.code).not.toBeNull();
        expect(r.stderr).toContain(`:${port}`);
        expect(r.stderr).toMatch(/EADDRINUSE/);
      }
    } finally {
      holder.close();
    }
  }, 90_000);

  it('a second server on the same data directory refuses, naming the holder pid; a dead holder is stale', async () => {
    const first = await serve();
    const r = await runCli(['serve', '--contracts', join(ROOT, 'contracts'), '--data', first.dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'], { timeoutMs: 30_000 });
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toContain(`pid ${first.child.pid}`);
    expect((await fetch(`${first.api}/healthz`)).status).toBe(200);
    await first.stop('SIGKILL'); // leaves its lock file behind
    const again = await serve([], first.dataDir);
    expect((await fetch(`${again.api}/healthz`)).status).toBe(200);
  }, 90_000);

  it('an unreadable row stops start-up with a message naming its table and row', async () => {
    const srv = await serve();
    expect((await postNdjson(srv.api, startLine('good') + startLine('broken'))).status).toBe(200);
    await srv.stop();
    const db = new Database(join(srv.dataDir, 'receipts.db'));
    const row = db.prepare("SELECT seq FROM receipts WHERE run = 'broken'").get() as { seq: number };
    db.prepare('UPDATE receipts SET body = ? WHERE seq = ?').run('{"run": "broken", trunc', row.seq);
    db.close();
    const r = await runCli(['serve', '--contracts', join(ROOT, 'contracts'), '--data', srv.dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'], { timeoutMs: 30_000 });
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toMatch(/table receipts/);
    expect(r.stderr).toContain(`seq ${row.seq}`);
    expect(r.stderr).toContain('"broken"');
  }, 60_000);
});
