/**
 * Runs the real Alertmanager (Debian package `prometheus-alertmanager`: /usr/bin/prometheus-alertmanager and amtool)
 * on a loopback port with its own temporary config and storage, clustering off. It can be stopped and started again
 * on the same port and storage (silences survive, as in production; alerts are held in memory only).
 * A webhook receiver in the test process collects the notifications.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  /** Stops the process (SIGTERM); the port and storage stay reserved for start(). */
  stop(): Promise<void>;
  /** Starts it again on the same port and storage; resolves when ready. */
  start(): Promise<void>;
  /** Stops and removes its directory. */
  dispose(): Promise<void>;
  log(): string;
}

export async function startAlertmanager(configYaml: string): Promise<RunningAlertmanager> {
  requireAlertmanager();
  const dir = await mkdtemp(join(tmpdir(), 'topology-audit-alertmanager-'));
  const configFile = join(dir, 'alertmanager.yml');
  await writeFile(configFile, configYaml);
  const port = await freeLoopbackPort();
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let log = '';
  const start = async () => {
    const c = spawn(
      ALERTMANAGER_BIN,
      [`--config.file=${configFile}`, `--storage.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--cluster.listen-address=', '--log.level=warn'],
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
        return (await fetch(`${url}/-/ready`)).ok;
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
      const res = await fetch(`${url}${path}`);
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res.json();
    },
    async post(path, body) {
      const res = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res.json();
    },
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
