/**
 * Issue 33's smaller operator items: serve start failures exit 2 (as --help says), one error prefix, "did you mean"
 * for a mistyped flag, `diff RUN` reading the default server, and a restored run whose verdict changed while the
 * server was down logs verdict_changed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { main, errorLine } from '../src/cli/main.js';
import { closestFlag } from '../src/cli/spec.js';
import { shiftedDrift } from './helpers/drift.js';
import { getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

function capture() {
  let out = '';
  let err = '';
  return { io: { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) }, out: () => out, err: () => err };
}

describe('CLI: errors', () => {
  it('a mistyped flag gets "did you mean", with exit 2', async () => {
    const c = capture();
    expect(await main(['propose', 'x.ndjson', '--contract-di', 'a'], c.io)).toBe(2);
    expect(c.err()).toBe("topology-audit propose: Unknown option '--contract-di'; did you mean --contract-id?; see topology-audit propose --help\n");
    const d = capture();
    expect(await main(['diff', 'r', '--fromat', 'svg'], d.io)).toBe(2);
    expect(d.err()).toContain('did you mean --format?');
    expect(closestFlag('zzzzzz', ['server', 'token'])).toBeNull();
    expect(closestFlag('tokn', ['server', 'token'])).toBe('token');
  });

  it('one prefix: "topology-audit CMD SUB: ...", never doubled', async () => {
    expect(errorLine('contract', 'contract diff: give two versions')).toBe('topology-audit contract diff: give two versions\n');
    expect(errorLine('gate', 'gate: x')).toBe('topology-audit gate: x\n');
    const c = capture();
    expect(await main(['contract', 'diff', 'a@1'], c.io)).toBe(2);
    expect(c.err()).toBe('topology-audit contract diff: give two versions, A@V1 B@V2\n');
  });
});

describe('CLI against a server', () => {
  let srv: ServerProcess | undefined;
  afterAll(async () => {
    await srv?.stop();
  });

  it('serve exits 2 when it cannot start (a data directory another server holds); diff RUN reads $TOPOLOGY_AUDIT_SERVER', async () => {
    srv = await startServerProcess();
    const second = await runCli(['serve', '--data', srv.dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('topology-audit serve: cannot start:');

    const body = shiftedDrift().map((r) => JSON.stringify(r)).join('\n') + '\n';
    expect((await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } })).status).toBe(200);
    const d = await runCli(['diff', 'drift-direct-route'], { env: { ...process.env, TOPOLOGY_AUDIT_SERVER: srv.api } });
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/^(%%|---|flowchart|graph)/m);
    expect(d.stdout).toContain('drift-direct-route: forbidden_edge');
    const unknown = await runCli(['diff', 'no-such-run'], { env: { ...process.env, TOPOLOGY_AUDIT_SERVER: srv.api } });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(`topology-audit diff: server ${srv.api} knows no run "no-such-run"\n`);
  });
});

describe('restart', () => {
  let srv: ServerProcess | undefined;
  afterAll(async () => {
    await srv?.stop();
  });

  it('a run whose verdict changed while the server was down logs verdict_changed when restored', async () => {
    const dataDir = tempDir('ta-restore-');
    srv = await startServerProcess({ dataDir });
    // drift-wait waits on the verifier's return, due within 10 minutes of its handoff: shift that to 20 s from now.
    const receipts = shiftedDrift('', 600_000 - 20_000).filter((r) => r.run === 'drift-wait');
    const deadline = Date.parse(receipts.find((r) => r.type === 'edge' && r.kind === 'handoff')!.at) + 600_000;
    const body = receipts.map((r) => JSON.stringify(r)).join('\n') + '\n';
    expect((await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } })).status).toBe(200);
    await until('waiting', async () => (await getJson(`${srv!.api}/api/v1/runs/drift-wait`)).body?.verdict === 'waiting');
    expect(await srv.stop()).toBe(0);
    expect(Date.now()).toBeLessThan(deadline); // the change happens while the server is down
    await until('the wait deadline passed', async () => Date.now() > deadline + 100);
    srv = await startServerProcess({ dataDir });
    await until('verdict_changed logged', async () => srv!.stderr().includes('"event":"verdict_changed","run":"drift-wait"'));
    const line = JSON.parse(srv.stderr().split('\n').find((l) => l.includes('"event":"verdict_changed","run":"drift-wait"'))!);
    expect(line).toMatchObject({ previous: 'waiting' });
    expect(line.verdict).not.toBe('waiting');
    expect((await getJson(`${srv.api}/api/v1/runs/drift-wait`)).body.verdict).toBe(line.verdict);
  });
});
