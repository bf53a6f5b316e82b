/**
 * A live auditor for the emitter's tests: the `topology-audit` package this one depends on (the workspace link),
 * started through its own bin as users do, with its shipped contracts, on free loopback ports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** The installed `topology-audit` package (resolved like any dependency, not by a path into the repo). */
export const AUDITOR_ROOT = dirname(createRequire(import.meta.url).resolve('topology-audit/package.json'));
const BIN = join(AUDITOR_ROOT, 'bin', 'topology-audit.js');

export interface ServerProcess {
  child: ChildProcess;
  api: string;
  otlpHttp: string;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Start `topology-audit serve`; resolves once it prints its `{"listening": ...}` line. */
export async function startServerProcess(): Promise<ServerProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ta-emitter-'));
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--contracts', join(AUDITOR_ROOT, 'contracts'), '--data', dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const listening = await new Promise<{ api: number; otlpHttp: number }>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`server did not start: ${err}`)), 20_000);
    child.stdout!.on('data', () => {
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) {
        clearTimeout(t);
        res(JSON.parse(line).listening);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      rej(new Error(`server exited with ${code}: ${err}`));
    });
  });
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      rmSync(dataDir, { recursive: true, force: true });
      r(code);
    }),
  );
  return {
    child,
    api: `http://127.0.0.1:${listening.api}`,
    otlpHttp: `http://127.0.0.1:${listening.otlpHttp}`,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

export async function getJson<T = any>(url: string): Promise<{ status: number; body: T }> {
  const r = await fetch(url);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
