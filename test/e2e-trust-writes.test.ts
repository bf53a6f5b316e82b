/**
 * Third-round attacks on writes (issue 47, items 1 and 6), each from outside against a real server: an
 * acknowledgement is a write, so it needs write rights (an ingest token where only those exist, an API token of scope
 * `write` where API tokens exist), acts as the token's name, and a page on another site cannot make one with a form
 * post; a tokens file that lists one token twice is refused with the line.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forbiddenRun } from './helpers/alertmanager.js';
import { runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

const INGEST = 'ingest-token-0123456789abcdef';
const READER = 'reader-token-0123456789abcdef';
const WRITER = 'writer-token-0123456789abcdef';

const ackOf = async (srv: ServerProcess, run: string, headers: Record<string, string> = {}) =>
  (await (await fetch(`${srv.api}/api/v1/runs/${run}`, { headers })).json()).ack as { by: string | null } | null;

describe('acknowledgements need write rights', () => {
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });
  const post = (srv: ServerProcess, body: string, token?: string) =>
    fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson', ...(token ? { authorization: `Bearer ${token}` } : {}) } });

  it('with --ingest-tokens and no --api-tokens, a client without a token cannot acknowledge; an ingest token acts as its name', async () => {
    const dir = tempDir('ta-w1-');
    writeFileSync(join(dir, 'ingest'), `${INGEST}\n`);
    const srv = await startServerProcess({ args: ['--ingest-tokens', join(dir, 'ingest')] });
    servers.push(srv);
    expect((await post(srv, forbiddenRun('w1-run'), INGEST)).status).toBe(200);
    const anon = await fetch(`${srv.api}/api/v1/runs/w1-run/ack?by=mallory`, { method: 'POST' });
    expect(anon.status).toBe(401);
    expect(await ackOf(srv, 'w1-run')).toBeNull();
    // The ingest token acknowledges, as its content-free name (token-LINE-HASH), not as whatever `by` says.
    expect((await fetch(`${srv.api}/api/v1/runs/w1-run/ack?by=someone-else`, { method: 'POST', headers: { authorization: `Bearer ${INGEST}` } })).status).toBe(400);
    const ok = await fetch(`${srv.api}/api/v1/runs/w1-run/ack`, { method: 'POST', headers: { authorization: `Bearer ${INGEST}` } });
    expect(ok.status).toBe(200);
    expect((await ackOf(srv, 'w1-run'))?.by).toMatch(/^token-1-[0-9a-f]{8}$/);
  });

  it('a read token cannot acknowledge; a write token acknowledges as its name only', async () => {
    const dir = tempDir('ta-w2-');
    writeFileSync(join(dir, 'api'), `${READER}\n${WRITER} write oncall-bot\n`);
    const srv = await startServerProcess({ args: ['--api-tokens', join(dir, 'api')] });
    servers.push(srv);
    expect((await post(srv, forbiddenRun('w2-run'))).status).toBe(200);
    const auth = (t: string) => ({ authorization: `Bearer ${t}` });
    const read = await fetch(`${srv.api}/api/v1/runs/w2-run/ack?by=ceo`, { method: 'POST', headers: auth(READER) });
    expect(read.status).toBe(403);
    expect((await read.json()).error).toMatch(/scope write/);
    expect(await ackOf(srv, 'w2-run', auth(READER))).toBeNull();
    // The read token still reads (the gate's use).
    expect((await fetch(`${srv.api}/api/v1/runs/w2-run`, { headers: auth(READER) })).status).toBe(200);
    expect((await fetch(`${srv.api}/api/v1/runs/w2-run/ack?by=ceo`, { method: 'POST', headers: auth(WRITER) })).status).toBe(400);
    const cli = await runCli(['ack', 'w2-run', '--server', srv.api, '--token', WRITER]);
    expect(cli.code, cli.stderr).toBe(0);
    expect((await ackOf(srv, 'w2-run', auth(READER)))?.by).toBe('oncall-bot');
  });

  it('a page on another site cannot acknowledge with a form post, nor post receipts (default loopback server)', async () => {
    const srv = await startServerProcess();
    servers.push(srv);
    expect((await post(srv, forbiddenRun('w3-run'))).status).toBe(200);
    // What a browser sends for <form method=post action="http://127.0.0.1:PORT/api/v1/runs/w3-run/ack?by=x"> on evil.example.
    const form = { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://evil.example', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' };
    const ack = await fetch(`${srv.api}/api/v1/runs/w3-run/ack?by=x`, { method: 'POST', headers: form, body: 'a=b' });
    expect(ack.status).toBe(403);
    expect(await ackOf(srv, 'w3-run')).toBeNull();
    // Origin alone (a browser without Sec-Fetch-Site), and an opaque origin, are refused too.
    expect((await fetch(`${srv.api}/api/v1/runs/w3-run/ack`, { method: 'POST', headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect((await fetch(`${srv.api}/api/v1/runs/w3-run/ack`, { method: 'POST', headers: { origin: 'null' } })).status).toBe(403);
    const receipts = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'text/plain', origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }, body: forbiddenRun('w3-planted') });
    expect(receipts.status).toBe(403);
    expect((await fetch(`${srv.api}/api/v1/runs/w3-planted`)).status).toBe(404);
    // The same origin (the web view itself) and clients that are not browsers still acknowledge.
    const same = await fetch(`${srv.api}/api/v1/runs/w3-run/ack?by=alice`, { method: 'POST', headers: { origin: srv.api, 'sec-fetch-site': 'same-origin' } });
    expect(same.status).toBe(200);
    expect((await ackOf(srv, 'w3-run'))?.by).toBe('alice');
  });
});

describe('token files', () => {
  it('a token listed twice (bound on one line, unbound on another) stops serve with the line', async () => {
    const dir = tempDir('ta-dup-');
    writeFileSync(join(dir, 'ingest'), `# tokens\n${INGEST} researcher\n${WRITER}\n${INGEST}\n`);
    const r = await runCli(['serve', '--data', join(dir, 'data'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--ingest-tokens', join(dir, 'ingest')], { timeoutMs: 60_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, 'ingest')}:4: this token is already listed on line 2`);
    expect(r.stderr).not.toContain(INGEST);
  });
});
