/**
 * Third-round attack on memory (issue 47, item 3): connections that each send most of a large body and stall. Every
 * body being read takes its declared length from one budget shared by the HTTP listeners (--max-body-total); past it a
 * request is refused at once with 503 + Retry-After, before a byte of it is read, on either listener, and the budget
 * comes back when the stalled connections go.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const BODY = 16 * 1024 * 1024;

describe('a total byte budget for bodies being read', () => {
  let srv: ServerProcess;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    // --max-body-total is left at its default: 4 x --max-body (64 MiB here).
    srv = await startServerProcess({ args: ['--max-body', '16MiB'] });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await srv?.stop();
  });

  /** A POST that declares 16 MiB, sends all but the last byte, and waits. */
  const stall = (port: number) =>
    new Promise<Socket>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => {
        s.write(`POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${BODY}\r\n\r\n`);
        s.write(Buffer.alloc(BODY - 1, 0x20), () => resolve(s));
      });
      s.on('error', reject);
      sockets.push(s);
    });
  const small = (url: string, path: string, contentType: string, body: string) => fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body });

  it('four stalled 16 MiB bodies hold the 64 MiB budget: the next body is refused 503 + Retry-After on both listeners, unread', async () => {
    for (let i = 0; i < 4; i++) await stall(srv.ports.otlpHttp);
    const refused = await until('a body refused by the budget', async () => {
      const r = await small(srv.otlpHttp, '/v1/traces', 'application/json', '{}');
      return r.status === 503 ? r : undefined;
    });
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await refused.text()).toMatch(/--max-body-total/);
    // The API listener shares the budget.
    const receipts = await small(srv.api, '/v1/receipts', 'application/x-ndjson', '{}\n');
    expect(receipts.status).toBe(503);
    expect(receipts.headers.get('retry-after')).toMatch(/^\d+$/);
    const metrics = await (await fetch(`${srv.api}/metrics`)).text();
    expect(metrics).toMatch(/^topology_ingest_rejected_requests_total\{transport="http",reason="body_budget"\} [1-9]/m);
    expect((await fetch(`${srv.api}/healthz`)).status).toBe(200);
    // The stalled connections go: the budget comes back.
    for (const s of sockets.splice(0)) s.destroy();
    await until('a body read again', async () => (await small(srv.otlpHttp, '/v1/traces', 'application/json', '{}')).status === 200);
  }, 180_000);
});
