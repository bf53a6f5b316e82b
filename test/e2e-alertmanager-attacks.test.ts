/**
 * Third-round attacks from Alertmanager's side (issue 47, item 2), against a real server: a silence a real
 * Alertmanager (RE2) accepts, `edge=~"(.+)+X"`, must not freeze the auditor when a run is read; silences are bounded
 * in length; an Alertmanager that trickles its answer a byte at a time, or never answers, holds no run read and is cut
 * off at the total deadline; a silence without `comment` or `createdBy` is skipped and counted, never a 500.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forbiddenRun, startAlertmanager, startWebhook, testConfig, type RunningAlertmanager, type Webhook } from './helpers/alertmanager.js';
import { startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

/** A read that may hang: aborted after a while, so `until` counts it as "not yet" and tries again. */
const read = async (url: string, init: RequestInit = {}) => {
  const r = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
  return { status: r.status, body: (await r.json()) as any };
};
const post = async (srv: ServerProcess, body: string) => {
  const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
  expect(r.status).toBe(200);
};
const metric = async (srv: ServerProcess, series: string) => {
  const text = await (await fetch(`${srv.api}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.slice(series.length + 1));
};

describe('a real Alertmanager with a silence JavaScript would backtrack on', () => {
  let am: RunningAlertmanager;
  let hook: Webhook;
  let srv: ServerProcess;
  beforeAll(async () => {
    hook = await startWebhook();
    am = await startAlertmanager(testConfig(hook.url));
    srv = await startServerProcess({ args: ['--alertmanager-url', am.url, '--external-url', 'http://auditor.test:9464'] });
  }, 60_000);
  afterAll(async () => {
    await srv?.stop('SIGKILL');
    await am?.dispose();
    await hook?.close();
  });

  it('edge=~"(.+)+X" (accepted by Alertmanager) does not freeze the run read or /healthz', async () => {
    await post(srv, forbiddenRun('ama-1'));
    const now = Date.now();
    const window = { startsAt: new Date(now - 1000).toISOString(), endsAt: new Date(now + 3_600_000).toISOString() };
    await am.post('/api/v2/silences', { matchers: [{ name: 'edge', value: '(.+)+X', isRegex: true, isEqual: true }], ...window, createdBy: 'mallory', comment: 'backtrack' });
    await am.post('/api/v2/silences', { matchers: [{ name: 'run', value: 'ama-1', isRegex: false, isEqual: true }], ...window, createdBy: 'sre', comment: 'known' });
    // Once the auditor has read both silences, the run shows the one that matches it; the other was matched too.
    const run = await until('the run page with its silence', async () => {
      const r = await read(`${srv.api}/api/v1/runs/ama-1`);
      return r.status === 200 && r.body.silence ? r.body : undefined;
    });
    expect(run.silence).toMatchObject({ createdBy: 'sre' });
    expect((await read(`${srv.api}/healthz`)).status).toBe(200);
    // The edge pattern does match an edge with X (it is matched, not ignored).
    expect((await read(`${srv.api}/api/v1/runs/ama-1`)).body.silence.createdBy).toBe('sre');
  }, 180_000);

  it('a silence longer than --alertmanager-max-silence (default 7d) is refused (no 100-year silence)', async () => {
    await post(srv, forbiddenRun('ama-2'));
    const r = await read(`${srv.api}/api/v1/runs/ama-2/ack?by=oncall&silence=36500d`, { method: 'POST' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(/at most 7d/);
    const silences = (await am.api('/api/v2/silences')) as any[];
    expect(silences.filter((s) => s.matchers.some((m: any) => m.value === 'ama-2'))).toEqual([]);
    expect((await read(`${srv.api}/api/v1/runs/ama-2`)).body.ack).toBeNull();
    expect((await read(`${srv.api}/api/v1/runs/ama-2/ack?by=oncall&silence=2d`, { method: 'POST' })).status).toBe(200);
  }, 60_000);
});

/** An Alertmanager that misbehaves: `answer` handles every request. */
async function hostileAlertmanager(answer: (path: string, res: ServerResponse) => void): Promise<{ url: string; server: Server; timers: Set<NodeJS.Timeout> }> {
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    req.resume();
    answer(req.url ?? '/', res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server, timers };
}

describe('hostile Alertmanagers', () => {
  const servers: ServerProcess[] = [];
  const ams: { server: Server; timers: Set<NodeJS.Timeout> }[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGKILL')));
    for (const a of ams) {
      for (const t of a.timers) clearInterval(t);
      a.server.closeAllConnections();
      a.server.close();
    }
  });

  it('one that trickles a byte every 500 ms holds no run read, and is cut off at the total deadline', async () => {
    const am = await hostileAlertmanager((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const t = setInterval(() => res.write(' '), 500);
      am.timers.add(t);
      res.on('close', () => clearInterval(t));
    });
    ams.push(am);
    const srv = await startServerProcess({ args: ['--alertmanager-url', am.url, '--external-url', 'http://auditor.test:9464', '--alertmanager-timeout', '2s'] });
    servers.push(srv);
    await post(srv, forbiddenRun('hostile-1'));
    const r = await until('the run page while Alertmanager trickles', async () => {
      const x = await read(`${srv.api}/api/v1/runs/hostile-1`);
      return x.status === 200 ? x.body : undefined;
    });
    expect(r.silence).toBeNull();
    // The silences read ends at the 2 s total deadline (an idle timeout would wait for ever: a byte comes every 500 ms).
    await until('the silences read cut off at its deadline', async () => /"alertmanager_silences_failed".*timeout after 2000 ms/.test(srv.stdout() + srv.stderr()));
  }, 180_000);

  it('a silence without comment or createdBy is skipped and counted, the run page answers', async () => {
    const now = Date.now();
    const base = { status: { state: 'active' }, startsAt: new Date(now - 1000).toISOString(), endsAt: new Date(now + 3_600_000).toISOString(), matchers: [{ name: 'run', value: 'hostile-2', isRegex: false, isEqual: true }] };
    const am = await hostileAlertmanager((path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(path.startsWith('/api/v2/silences') ? JSON.stringify([{ id: 's1', ...base, createdBy: 'x' }, { id: 's2', ...base, comment: 'y' }]) : '{}');
    });
    ams.push(am);
    const srv = await startServerProcess({ args: ['--alertmanager-url', am.url, '--external-url', 'http://auditor.test:9464'] });
    servers.push(srv);
    await post(srv, forbiddenRun('hostile-2'));
    await until('the malformed silences counted', async () => (await metric(srv, 'topology_alertmanager_silences_skipped{reason="malformed"}')) === 2);
    const r = await read(`${srv.api}/api/v1/runs/hostile-2`);
    expect(r.status).toBe(200);
    expect(r.body.silence).toBeNull();
  }, 180_000);
});
