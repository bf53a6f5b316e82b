/**
 * Test helpers that run the real Prometheus tools (Debian package `prometheus`: /usr/bin/prometheus and promtool).
 * Missing binaries are a failure with an install hint, never a skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
export const PROMTOOL_BIN = process.env.PROMTOOL_BIN ?? 'promtool';
const INSTALL_HINT = 'install the Debian package "prometheus" (apt-get update && apt-get install -y prometheus)';

/** Throws a clear error when the binary cannot be run. */
export function requireBinary(bin: string): void {
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(`${bin} is not available (${probe.error?.message ?? `exit ${probe.status}`}): ${INSTALL_HINT}`);
  }
}

export interface ToolResult {
  code: number | null;
  output: string;
}

/** Runs promtool with the arguments; output is stdout and stderr together. */
export function runPromtool(args: readonly string[], cwd?: string): ToolResult {
  requireBinary(PROMTOOL_BIN);
  const r = spawnSync(PROMTOOL_BIN, args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Runs promtool with text on stdin (e.g. `check metrics`). */
export function runPromtoolWithInput(args: readonly string[], input: string): ToolResult {
  requireBinary(PROMTOOL_BIN);
  const r = spawnSync(PROMTOOL_BIN, args, { input, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

export async function waitFor<T>(
  probe: () => Promise<T | undefined | false>,
  { timeoutMs = 20_000, intervalMs = 200, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface StartPrometheusOptions {
  /** The /metrics URL to scrape, e.g. http://127.0.0.1:9464/metrics. */
  scrapeUrl: string;
  rulesFiles: readonly string[];
  /** Rule evaluation interval (default 1s). */
  evalInterval?: string;
  /** Scrape job name (default topology-audit, the name the alert rules expect). */
  jobName?: string;
  /** Extra command-line flags, e.g. --enable-feature=exemplar-storage. */
  extraArgs?: readonly string[];
}

export interface RunningPrometheus {
  url: string;
  /** Instant query; returns the API's `data` ({resultType, result}). */
  query(q: string): Promise<any>;
  /** Active alerts (pending and firing), as /api/v1/alerts returns them. */
  alerts(): Promise<any[]>;
  /** GET on any API path (e.g. /api/v1/targets); returns `data`. */
  api(path: string): Promise<any>;
  stop(): Promise<void>;
}

async function apiGet(base: string, path: string): Promise<any> {
  const res = await fetch(`${base}${path}`);
  const body = (await res.json()) as { status: string; data?: unknown; error?: string };
  if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? res.status}`);
  return body.data;
}

function prometheusConfig(opts: StartPrometheusOptions): string {
  const target = new URL(opts.scrapeUrl);
  const evalInterval = opts.evalInterval ?? '1s';
  return stringify({
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: evalInterval },
    rule_files: opts.rulesFiles.map((f) => resolve(f)),
    scrape_configs: [
      {
        job_name: opts.jobName ?? 'topology-audit',
        scheme: target.protocol.replace(':', ''),
        metrics_path: target.pathname,
        static_configs: [{ targets: [target.host] }],
      },
    ],
  });
}

function launch(args: string[]): { child: ChildProcess; log: () => string; exited: Promise<number | null> } {
  const child = spawn(PROMETHEUS_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString('utf8')).slice(-16_384);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, log: () => log, exited };
}

/**
 * Starts /usr/bin/prometheus on a free loopback port with a temporary config (scrape and evaluation every 1s)
 * and a temporary TSDB, and waits until it is ready. Always call stop().
 * Expect the first scrape about 5 s after start: Prometheus applies target updates on a fixed 5 s tick
 * (2.42 has no flag to shorten it), so allow that in waits.
 */
export async function startPrometheus(opts: StartPrometheusOptions): Promise<RunningPrometheus> {
  requireBinary(PROMETHEUS_BIN);
  const dir = await mkdtemp(join(tmpdir(), 'topology-audit-prometheus-'));
  const configFile = join(dir, 'prometheus.yml');
  await writeFile(configFile, prometheusConfig(opts));

  let lastLog = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freeLoopbackPort();
    const url = `http://127.0.0.1:${port}`;
    const proc = launch([
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
      ...(opts.extraArgs ?? []),
    ]);
    let exitCode: number | null | undefined;
    void proc.exited.then((c) => {
      exitCode = c;
    });
    try {
      await waitFor(
        async () => {
          if (exitCode !== undefined) throw new Error(`prometheus exited with ${exitCode}`);
          const res = await fetch(`${url}/-/ready`);
          return res.ok;
        },
        { timeoutMs: 30_000, intervalMs: 100, what: 'prometheus /-/ready' },
      );
    } catch (err) {
      lastLog = `${String(err)}\n${proc.log()}`;
      proc.child.kill('SIGKILL');
      await proc.exited;
      continue; // e.g. the port was taken between probing and binding: try another one
    }

    const stop = async (): Promise<void> => {
      if (exitCode === undefined) {
        proc.child.kill('SIGTERM');
        const timer = setTimeout(() => proc.child.kill('SIGKILL'), 5_000);
        await proc.exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    };
    return {
      url,
      query: (q) => apiGet(url, `/api/v1/query?query=${encodeURIComponent(q)}`),
      alerts: async () => ((await apiGet(url, '/api/v1/alerts')) as { alerts: any[] }).alerts,
      api: (path) => apiGet(url, path),
      stop,
    };
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(`prometheus did not start:\n${lastLog}`);
}
