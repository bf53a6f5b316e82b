import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'topology-audit.js');

export interface ServerProcess {
  child: ChildProcess;
  api: string;
  otlpHttp: string;
  otlpGrpc: string;
  ports: { api: number; otlpHttp: number; otlpGrpc: number };
  dataDir: string;
  stdout: () => string;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function tempDir(prefix = 'ta-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Start `topology-audit serve` as a child process on free loopback ports, as users do. */
export async function startServerProcess(opts: { dataDir?: string; args?: string[]; contracts?: string } = {}): Promise<ServerProcess> {
  const dataDir = opts.dataDir ?? tempDir('ta-data-');
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--contracts', opts.contracts ?? join(ROOT, 'contracts'), '--data', dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', ...(opts.args ?? [])],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT },
  );
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  // Waits on a condition, not a clock: the listening line, or the process's exit (a busy machine only makes it slower).
  const listening = await new Promise<{ api: number; otlpHttp: number; otlpGrpc: number }>((res, rej) => {
    const check = () => {
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) res(JSON.parse(line).listening);
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => rej(new Error(`server exited with ${code} before listening: ${err}`)));
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    dataDir,
    ports: listening,
    api: `http://127.0.0.1:${listening.api}`,
    otlpHttp: `http://127.0.0.1:${listening.otlpHttp}`,
    otlpGrpc: `http://127.0.0.1:${listening.otlpGrpc}`,
    stdout: () => out,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/** Run the CLI and capture its exit code and output. */
export function runCli(args: string[], opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('exit', (code) => {
      clearTimeout(t);
      res({ code, stdout, stderr });
    });
  });
}

export async function getJson<T = any>(url: string): Promise<{ status: number; body: T }> {
  const r = await fetch(url);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** GET /healthz on a connection of its own (no keep-alive race with the server's idle timer): the status. */
export const healthz = (port: number) =>
  new Promise<number>((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    }).on('error', reject);
  });
