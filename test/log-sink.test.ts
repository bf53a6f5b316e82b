/**
 * Issue 49, item 7: logging never kills the process. A `serve` whose log (stderr) cannot be written, a full disk
 * (/dev/full answers every write with ENOSPC) or a pipe whose reader is gone (EPIPE), keeps serving; the failed writes
 * are counted in topology_log_write_errors_total and dropped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, ROOT, tempDir } from './helpers/server.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { until } from './helpers/wait.js';

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

/** Starts `serve` with the given stderr; resolves with its API URL once it says it listens (stdout), or rejects when it exits. */
async function serveWith(stderr: 'pipe' | number): Promise<{ child: ChildProcess; api: string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [BIN, 'serve', '--contracts', join(ROOT, 'contracts'), '--data', tempDir('ta-logsink-'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--log-interval', '100ms'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', stderr],
  });
  children.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let out = '';
  const api = await new Promise<string>((res, rej) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) res(`http://127.0.0.1:${JSON.parse(line).listening.api as number}`);
    });
    child.once('exit', (code, signal) => rej(new Error(`serve exited (code ${code}, signal ${signal}) before listening; stdout: ${out}`)));
  });
  return { child, api, exited };
}

async function writeErrors(api: string): Promise<number> {
  const text = await (await fetch(`${api}/metrics`)).text();
  return parseExposition(text, 'prometheus').samples.filter((s) => s.name === 'topology_log_write_errors_total' && s.labels.stream === 'stderr').reduce((n, s) => n + s.value, 0);
}

const receipt = (run: string, event: string, at: string) => JSON.stringify({ run, event, at, contract: 'research-publish' }) + '\n';

describe('a log that cannot be written', () => {
  it('a full disk (ENOSPC on every line): serve keeps serving, counts the failed lines and drops them', async () => {
    const full = openSync('/dev/full', 'w');
    let srv: Awaited<ReturnType<typeof serveWith>>;
    try {
      srv = await serveWith(full);
    } finally {
      closeSync(full);
    }
    // Lines were logged at start (listening, restored) and fail: counted.
    await until('failed log writes counted', async () => (await writeErrors(srv.api)) > 0, 20_000);
    const before = await writeErrors(srv.api);
    // More lines (the ingest summary every 100 ms, a verdict change): the server answers on, and counts them.
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: receipt('log-sink-1', 'run.start', new Date().toISOString()) });
    expect(res.status, await res.text()).toBe(200);
    await until('later failed writes counted too', async () => (await writeErrors(srv.api)) > before, 20_000);
    expect((await fetch(`${srv.api}/readyz`)).status).toBe(200);
    expect(srv.child.exitCode).toBeNull();
    srv.child.kill('SIGTERM');
    expect(await srv.exited).toBe(0);
  }, 60_000);

  it('a pipe whose reader is gone (EPIPE): serve keeps serving and counts the dropped lines', async () => {
    const srv = await serveWith('pipe');
    srv.child.stderr!.destroy(); // the reader closes its end: the next write fails with EPIPE
    await until('failed log writes counted', async () => (await writeErrors(srv.api)) > 0, 20_000);
    expect((await fetch(`${srv.api}/readyz`)).status).toBe(200);
    expect(srv.child.exitCode).toBeNull();
    srv.child.kill('SIGTERM');
    expect(await srv.exited).toBe(0);
  }, 60_000);
});
