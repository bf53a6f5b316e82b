/**
 * Per-run alerts to an HA pair of real Alertmanagers (Debian prometheus-alertmanager 0.25, two processes on loopback,
 * clustering off) serving their API over TLS with basic auth (Alertmanager's --web.config.file), the auditor started
 * with --alertmanager-url twice, --alertmanager-ca-file and --alertmanager-basic-auth-user/-password-file:
 * every alert reaches both; with one member down the other takes the alerts, its silences show on the run, and the
 * member that comes back gets the alerts at the next resend. An auditor with a wrong password or without the CA is
 * refused (logged with the reason only), and its bounded queue drops the oldest and counts them. The bearer token
 * option is checked against a node:https endpoint (Alertmanager's web config has no bearer tokens).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { AlertmanagerClient } from '../src/alerting/client.js';
import { ROOT, startServerProcess, tempDir, getJson, type ServerProcess } from './helpers/server.js';
import { forbiddenRun, startAlertmanager, startWebhook, testConfig, type RunningAlertmanager, type Webhook } from './helpers/alertmanager.js';
import { waitFor } from './helpers/prometheus.js';

const SHIPPED = join(ROOT, 'collector', 'alertmanager', 'alertmanager.yml');
const RESEND_S = 3;
const EXTERNAL = 'http://auditor.test:9464';
const USER = 'auditor';
const PASSWORD = 'am-test-password';
/** bcrypt of PASSWORD (cost 5), made with `perl -e 'print crypt("am-test-password", q($2b$05$topologyauditalertman))'`. */
const PASSWORD_BCRYPT = '$2b$05$topologyauditalertmanOlPhM.t9.LBii9dUJOVcE1TYQhiKQeQm';

function makePki(dir: string) {
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync('/usr/bin/openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', '/CN=topology-audit test CA');
  ssl('req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=alertmanager');
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-out', f('server.crt'), '-extfile', f('server.ext'));
  return { caFile: f('ca.crt'), ca: readFileSync(f('ca.crt')), cert: f('server.crt'), key: f('server.key') };
}



async function metric(srv: ServerProcess, name: string): Promise<number> {
  const text = await (await fetch(`${srv.api}/metrics`)).text();
  return Number(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

async function post(srv: ServerProcess, body: string): Promise<void> {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
  expect(res.status).toBe(200);
}

const failureLines = (srv: ServerProcess) =>
  srv
    .stderr()
    .split('\n')
    .filter((l) => l.includes('"alertmanager_send_failed"'))
    .map((l) => JSON.parse(l));

describe('per-run alerts to an HA pair of real Alertmanagers over TLS with basic auth', () => {
  const dir = tempDir('ta-am-ha-');
  let pki: ReturnType<typeof makePki>;
  let hook: Webhook;
  let am: RunningAlertmanager[] = [];
  let srv: ServerProcess;
  const others: ServerProcess[] = [];
  const passwordFile = join(dir, 'password');
  const runAlert = async (a: RunningAlertmanager, run: string) => ((await a.api('/api/v2/alerts')) as any[]).find((x) => x.labels.run === run);

  beforeAll(async () => {
    pki = makePki(dir);
    writeFileSync(passwordFile, `${PASSWORD}\n`);
    hook = await startWebhook();
    const web = {
      webConfigYaml: stringify({ tls_server_config: { cert_file: pki.cert, key_file: pki.key }, basic_auth_users: { [USER]: PASSWORD_BCRYPT } }),
      ca: pki.ca,
      authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`,
    };
    am = [await startAlertmanager(testConfig(hook.url), web), await startAlertmanager(testConfig(hook.url), web)];
    srv = await startServerProcess({
      args: [
        ...am.flatMap((a) => ['--alertmanager-url', a.url]),
        '--external-url', EXTERNAL,
        '--alertmanager-resend', `${RESEND_S}s`,
        '--alertmanager-ca-file', pki.caFile,
        '--alertmanager-basic-auth-user', USER,
        '--alertmanager-basic-auth-password-file', passwordFile,
      ],
    });
  }, 60_000);
  afterAll(async () => {
    for (const s of [srv, ...others]) await s?.stop();
    for (const a of am) await a.dispose();
    await hook?.close();
  });

  it('both Alertmanagers serve https only to the right credentials', async () => {
    for (const a of am) {
      expect(a.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
      expect(await a.status('/api/v2/status')).toBe(401);
      expect((await a.api('/api/v2/status')).cluster.status).toBe('disabled');
    }
  });

  it('every alert reaches both members of the pair', async () => {
    await post(srv, forbiddenRun('ha-1'));
    for (const a of am) {
      const alert = await waitFor(() => runAlert(a, 'ha-1'), { what: `the run alert in ${a.url}` });
      expect(alert.labels).toMatchObject({ alertname: 'TopologyForbiddenEdge', run: 'ha-1', contract: 'research-publish' });
      expect(alert.status.state).toBe('active');
    }
    await waitFor(async () => (await metric(srv, 'topology_alertmanager_alerts_sent_total{result="success"}')) >= 2 || undefined, { what: 'two successful sends' });
    expect(await metric(srv, 'topology_alertmanager_alerts_sent_total{result="failure"}')).toBe(0);
  });

  it('with one member down the other takes the alerts and its silences show; the member back gets them at the next resend', async () => {
    await am[0].stop();
    await post(srv, forbiddenRun('ha-2'));
    const alert = await waitFor(() => runAlert(am[1], 'ha-2'), { what: 'the alert in the member that is up' });
    expect(alert.status.state).toBe('active');
    // Delivered when one member took it: the queue drains although am[0] refuses every attempt.
    await waitFor(async () => (await metric(srv, 'topology_alertmanager_queue_length')) === 0 || undefined, { what: 'the queue drained' });
    const failures = await waitFor(
      async () => {
        const l = failureLines(srv).filter((x) => x.alertmanager === am[0].url);
        return l.length ? l : undefined;
      },
      { what: 'a failure line for the member that is down' },
    );
    await waitFor(async () => failureLines(srv).some((x) => x.alertmanager === am[0].url && x.reason === 'ECONNREFUSED'), { what: 'ECONNREFUSED from the member that is down' });
    for (const f of failures) expect(f.retryInMs).toBeUndefined(); // not retried: the other member took the batch
    for (const l of failureLines(srv)) expect(JSON.stringify(l)).not.toMatch(/ha-|research|forbidden|publisher|password/);
    // A silence on the member that is up shows on the run (silences read from the first Alertmanager that answers).
    const now = Date.now();
    await am[1].post('/api/v2/silences', {
      matchers: [{ name: 'run', value: 'ha-2', isRegex: false, isEqual: true }],
      startsAt: new Date(now).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      createdBy: 'sre-ha',
      comment: 'silenced on the second member',
    });
    const run = await waitFor(async () => (await getJson(`${srv.api}/api/v1/runs/ha-2`)).body.silence ?? undefined, { what: 'the silence on the run' });
    expect(run).toMatchObject({ createdBy: 'sre-ha', comment: 'silenced on the second member' });
    // The member back (empty: Alertmanager holds alerts in memory) gets both alerts again with the resends.
    await am[0].start();
    for (const r of ['ha-1', 'ha-2']) {
      const back = await waitFor(() => runAlert(am[0], r), { what: `${r} back in the restarted member` });
      expect(Date.parse(back.endsAt)).toBeGreaterThan(Date.now());
    }
  }, 90_000);

  it('a wrong password is refused with HTTP 401 and a missing CA with a TLS error; the bounded queue drops the oldest and counts them', async () => {
    const wrong = join(dir, 'wrong-password');
    writeFileSync(wrong, 'not-the-password\n');
    const common = [...am.flatMap((a) => ['--alertmanager-url', a.url]), '--external-url', EXTERNAL, '--alertmanager-basic-auth-user', USER, '--alertmanager-queue-capacity', '2'];
    const badAuth = await startServerProcess({ args: [...common, '--alertmanager-ca-file', pki.caFile, '--alertmanager-basic-auth-password-file', wrong] });
    others.push(badAuth);
    const noCa = await startServerProcess({ args: [...common, '--alertmanager-basic-auth-password-file', passwordFile] });
    others.push(noCa);
    await post(badAuth, ['bad-0', 'bad-1', 'bad-2'].map(forbiddenRun).join(''));
    await post(noCa, forbiddenRun('noca-0'));
    const reason = async (s: ServerProcess) => (await waitFor(async () => failureLines(s)[0], { what: 'a failure line' })).reason as string;
    expect(await reason(badAuth)).toBe('HTTP 401');
    expect(await reason(noCa)).toMatch(/CERT|SIGNATURE|ISSUER/);
    // Three alerts into a queue of two: the oldest dropped and counted; nothing delivered.
    await waitFor(async () => (await metric(badAuth, 'topology_alertmanager_alerts_dropped_total')) === 1 || undefined, { what: 'one alert dropped' });
    expect(await metric(badAuth, 'topology_alertmanager_queue_length')).toBe(2);
    expect(await metric(badAuth, 'topology_alertmanager_alerts_sent_total{result="success"}')).toBe(0);
    expect(await metric(badAuth, 'topology_alertmanager_alerts_sent_total{result="failure"}')).toBeGreaterThan(0);
    for (const a of am) expect(await runAlert(a, 'bad-2')).toBeUndefined();
    for (const s of [badAuth, noCa]) for (const l of failureLines(s)) expect(JSON.stringify(l)).not.toMatch(/bad-|noca-|research|forbidden|password/);
  }, 90_000);
});

describe('the bearer token option (node:https endpoint)', () => {
  let server: Server | undefined;
  afterAll(() => new Promise<void>((r) => (server ? (server.closeAllConnections(), server.close(() => r())) : r())));

  it('sends Authorization: Bearer from the file over TLS with the CA given; skip-verify without it', async () => {
    const dir = tempDir('ta-am-bearer-');
    const pki = makePki(dir);
    const seen: (string | undefined)[] = [];
    server = createServer({ cert: readFileSync(pki.cert), key: readFileSync(pki.key) }, (req, res) => {
      seen.push(req.headers.authorization);
      req.resume();
      req.on('end', () => res.writeHead(req.headers.authorization === 'Bearer tok-123' ? 200 : 401).end('[]'));
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const url = new URL(`https://127.0.0.1:${(server.address() as { port: number }).port}`);
    const token = join(dir, 'token');
    writeFileSync(token, 'tok-123\n');
    const ok = new AlertmanagerClient(url, { timeoutMs: 10_000, tls: { caFile: pki.caFile, insecureSkipVerify: false }, auth: { bearerTokenFile: token } });
    await ok.postAlerts([]);
    expect(seen).toEqual(['Bearer tok-123']);
    const untrusted = new AlertmanagerClient(url, { timeoutMs: 10_000, tls: { insecureSkipVerify: false }, auth: { bearerTokenFile: token } });
    await expect(untrusted.postAlerts([])).rejects.toMatchObject({ reason: expect.stringMatching(/CERT|SIGNATURE|ISSUER/) });
    expect(seen).toHaveLength(1); // refused before any request reached the endpoint
    const skip = new AlertmanagerClient(url, { timeoutMs: 10_000, tls: { insecureSkipVerify: true }, auth: { bearerTokenFile: token } });
    await skip.postAlerts([]);
    const noToken = new AlertmanagerClient(url, { timeoutMs: 10_000, tls: { caFile: pki.caFile, insecureSkipVerify: false } });
    await expect(noToken.postAlerts([])).rejects.toMatchObject({ reason: 'HTTP 401' });
    expect(seen).toEqual(['Bearer tok-123', 'Bearer tok-123', undefined]);
  });
});
