/**
 * Issue 30.6: the API port cannot be exhausted. Long-polls are bounded (--max-long-polls, 429 + Retry-After past
 * it), so 1,100 of them leave /healthz, reads and NDJSON ingest answered on the API port; and --health-port answers
 * /healthz and /readyz while the API port is full of connections that never finish their headers.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const metric = async (srv: ServerProcess, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${srv.api}/metrics`)).text())?.[1] ?? NaN);

describe('the API port under long-polls and a connection flood', () => {
  let srv: ServerProcess;
  const held: { destroy(): void }[] = [];
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--max-long-polls', '100', '--max-connections', '1024', '--health-port', '0'] });
  });
  afterAll(async () => {
    for (const h of held) h.destroy();
    await srv.stop();
  });

  it('1,100 long-polls: 100 wait, the rest are answered 429; /healthz, reads and ingest answer meanwhile', async () => {
    const start = JSON.stringify({ run: 'slow', event: 's', type: 'run.start', at: new Date().toISOString(), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }) + '\n';
    expect((await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: start })).status).toBe(200);
    const statuses: number[] = [];
    let errors = 0;
    for (let i = 0; i < 1100; i++) {
      const r = request({ host: '127.0.0.1', port: srv.ports.api, path: '/api/v1/runs/slow/verdict?wait=300', agent: false }, (res) => {
        statuses.push(res.statusCode!);
        res.resume();
      });
      r.on('error', () => errors++);
      r.end();
      held.push(r);
    }
    // Each 429 closes its connection, so the few connections past --max-connections at the peak find room on retry
    // (a real client retries); here they may be dropped at accept (errors).
    await until('1,000 long-polls answered 429 or dropped', async () => statuses.length + errors >= 1000);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(900);
    expect(await metric(srv, 'topology_api_long_polls')).toBe(100);
    expect((await fetch(`${srv.api}/healthz`)).status).toBe(200);
    expect((await fetch(`${srv.api}/api/v1/runs/slow`)).status).toBe(200);
    expect((await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: start.replace('"s"', '"s2"').replace('"slow"', '"other"') })).status).toBe(200);
    // the acknowledged receipt is stored
    expect(((await (await fetch(`${srv.api}/api/v1/runs/other`)).json()) as { receipts: { event: string }[] }).receipts.map((r) => r.event)).toEqual(['s2']);
    expect(statuses.filter((s) => s !== 429)).toEqual([]);
  });

  it('1,100 connections that never finish their headers: the health port answers', async () => {
    const health = JSON.parse(srv.stdout().split('\n').find((l) => l.startsWith('{"listening"'))!).listening.health as number;
    expect(health).toBeGreaterThan(0);
    const socks: Socket[] = [];
    for (let i = 0; i < 1100; i++) {
      const s = await new Promise<Socket>((res) => {
        const c = connect(srv.ports.api, '127.0.0.1', () => res(c));
        c.on('error', () => res(c));
      });
      s.write('GET /healthz HTTP/1.1\r\nhost: x\r\n'); // never the blank line that ends the headers
      socks.push(s);
      held.push(s);
    }
    const h = await fetch(`http://127.0.0.1:${health}/healthz`);
    expect(h.status).toBe(200);
    expect((await h.json()).status).toBe('ok');
    expect((await fetch(`http://127.0.0.1:${health}/readyz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${health}/api/v1/runs`)).status).toBe(404);
  });
});
