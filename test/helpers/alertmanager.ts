/**
 * Runs the real Alertmanager (Debian package `prometheus-alertmanager`: /usr/bin/prometheus-alertmanager and amtool)
 * on a loopback port with its own temporary config and storage, clustering off. It can be stopped and started again
 * on the same port and storage (silences survive, as in production; alerts are held in memory only).
 * A webhook receiver in the test process collects the notifications.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { ROOT } from './server.js';
import { freeLoopbackPort, waitFor } from './prometheus.js';

export const ALERTMANAGER_BIN = process.env.ALERTMANAGER_BIN ?? '/usr/bin/prometheus-alertmanager';
export const AMTOOL_BIN = process.env.AMTOOL_BIN ?? 'amtool';
const INSTALL_HINT = 'install the Debian package "prometheus-alertmanager" (apt-get update && apt-get install -y prometheus-alertmanager)';

export function requireAlertmanager(bin = ALERTMANAGER_BIN): void {
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) throw new Error(`${bin} is not available (${probe.error?.message ?? `exit ${probe.status}`}): ${INSTALL_HINT}`);
}

export function runAmtool(args: readonly string[]): { code: number | null; output: string } {
  requireAlertmanager(AMTOOL_BIN);
  const r = spawnSync(AMTOOL_BIN, args, { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

export interface RunningAlertmanager {
  url: string;
  /** GET on API v2 (e.g. /api/v2/alerts?filter=run="x"); returns the parsed body. */
  api(path: string): Promise<any>;
  post(path: string, body: unknown): Promise<any>;
  /** The status of a GET without the test's credentials (e.g. 401 from an Alertmanager behind basic auth). */
  status(path: string): Promise<number>;
  /** Stops the process (SIGTERM); the port and storage stay reserved for start(). */
  stop(): Promise<void>;
  /** Starts it again on the same port and storage; resolves when ready. */
  start(): Promise<void>;
  /** Stops and removes its directory. */
  dispose(): Promise<void>;
  log(): string;
}

/** Serving Alertmanager's API over TLS and/or with basic auth (its --web.config.file). */
export interface AlertmanagerWebOptions {
  /** The web config file's YAML (tls_server_config, basic_auth_users). */
  webConfigYaml: string;
  /** CA the test trusts for https (the server's certificate chain). */
  ca?: Buffer;
  /** Authorization header the test sends (e.g. Basic ...). */
  authorization?: string;
}

/** A request to the test's Alertmanager (http or https with the given CA and credentials); status and body. */
function amRequest(url: string, method: 'GET' | 'POST', web: AlertmanagerWebOptions | undefined, body?: string): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  const headers: Record<string, string> = {};
  if (web?.authorization) headers.authorization = web.authorization;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(u, { method, headers, ...(u.protocol === 'https:' ? { ca: web?.ca } : {}) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export async function startAlertmanager(configYaml: string, web?: AlertmanagerWebOptions): Promise<RunningAlertmanager> {
  requireAlertmanager();
  const dir = await mkdtemp(join(tmpdir(), 'topology-audit-alertmanager-'));
  const configFile = join(dir, 'alertmanager.yml');
  await writeFile(configFile, configYaml);
  const webFile = join(dir, 'web.yml');
  if (web) await writeFile(webFile, web.webConfigYaml);
  const port = await freeLoopbackPort();
  const url = `${web?.ca ? 'https' : 'http'}://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let log = '';
  const start = async () => {
    const c = spawn(
      ALERTMANAGER_BIN,
      [`--config.file=${configFile}`, `--storage.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--cluster.listen-address=', '--log.level=warn', ...(web ? [`--web.config.file=${webFile}`] : [])],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = c;
    let code: number | null | undefined;
    exited = new Promise((r) =>
      c.once('exit', (x) => {
        code = x;
        r();
      }),
    );
    const keep = (d: Buffer) => (log = (log + d.toString('utf8')).slice(-16_384));
    c.stdout?.on('data', keep);
    c.stderr?.on('data', keep);
    await waitFor(
      async () => {
        if (code !== undefined) throw new Error(`alertmanager exited with ${code}: ${log}`);
        return (await amRequest(`${url}/-/ready`, 'GET', web)).status === 200;
      },
      { timeoutMs: 30_000, intervalMs: 50, what: 'alertmanager /-/ready' },
    );
  };
  const stop = async () => {
    if (child && child.exitCode === null) {
      const c = child;
      c.kill('SIGTERM');
      const t = setTimeout(() => c.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    }
    child = null;
  };
  await start();
  return {
    url,
    async api(path) {
      const res = await amRequest(`${url}${path}`, 'GET', web);
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
      return JSON.parse(res.text);
    },
    async post(path, body) {
      const res = await amRequest(`${url}${path}`, 'POST', web, JSON.stringify(body));
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
      return JSON.parse(res.text);
    },
    status: async (path) => (await amRequest(`${url}${path}`, 'GET', web && { ...web, authorization: undefined })).status,
    stop,
    start,
    async dispose() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
    log: () => log,
  };
}

/** A webhook receiver: every notification Alertmanager POSTs, with the path it came to. */
export interface Webhook {
  url: string;
  notifications: { path: string; body: any }[];
  close(): Promise<void>;
}

export async function startWebhook(): Promise<Webhook> {
  const notifications: { path: string; body: any }[] = [];
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      try {
        notifications.push({ path: req.url ?? '', body: JSON.parse(text) });
      } catch {
        notifications.push({ path: req.url ?? '', body: text });
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    notifications,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const SHIPPED_CONFIG = join(ROOT, 'collector', 'alertmanager', 'alertmanager.yml');

/** The drift fixture's direct-route run (researcher -> publisher is not allowed), as run `run`, ending now. */
export function forbiddenRun(run: string): string {
  const lines = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"run":"drift-direct-route"'))
    .map((l) => JSON.parse(l));
  const latest = Math.max(...lines.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 1000 - latest;
  return lines.map((r) => JSON.stringify({ ...r, run, at: new Date(Date.parse(r.at) + delta).toISOString() })).join('\n') + '\n';
}

/** The shipped config, webhooks pointed at the test's receiver (same paths), group timers in seconds. */
export function testConfig(webhook: string): string {
  const cfg = parse(readFileSync(SHIPPED_CONFIG, 'utf8'));
  cfg.route.group_wait = '1s';
  cfg.route.group_interval = '1s';
  for (const r of cfg.receivers) for (const w of r.webhook_configs ?? []) w.url = webhook + new URL(w.url).pathname;
  return stringify(cfg);
}
