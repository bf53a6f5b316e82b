// Export bodies are read into reused buffers (src/server/body.ts): concurrent requests must never see each
// other's bytes, gzip and undeclared lengths still work, and released memory is reused.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyBuffers, readBodyInto } from '../src/server/body.js';
import { httpRefusal } from '../src/server/refusal.js';

const pool = new BodyBuffers(2, 1 << 20);
let server: Server;
let port = 0;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    try {
      const { body, release } = await readBodyInto(req, 4 << 20, pool);
      // As the OTLP receiver does: use the bytes at once, then hand them back.
      const digest = createHash('sha256').update(body).digest('hex');
      release();
      res.end(JSON.stringify({ digest, length: body.length }));
    } catch (e) {
      res.statusCode = httpRefusal(e, 1).status;
      res.end(JSON.stringify({ error: (e as Error).message }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function post(body: Buffer, headers: Record<string, string | number> = {}, chunked = false): Promise<{ status: number; json: { digest?: string; length?: number } }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: chunked ? headers : { 'content-length': body.length, ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    if (chunked) {
      // write in pieces, without a declared length
      for (let i = 0; i < body.length; i += 7000) req.write(body.subarray(i, i + 7000));
      req.end();
    } else req.end(body);
  });
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('request bodies in reused buffers', () => {
  it('concurrent bodies of different sizes (pooled, too large to pool, chunked, gzip) each arrive intact', async () => {
    const bodies = Array.from({ length: 40 }, (_, i) => randomBytes([10, 70_000, 300_000, 900_000, 1_500_000][i % 5] + i));
    const answers = await Promise.all(
      bodies.map((b, i) =>
        i % 7 === 3 ? post(gzipSync(b), { 'content-encoding': 'gzip' }) : i % 7 === 5 ? post(b, {}, true) : post(b),
      ),
    );
    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      expect(a.json.length).toBe(bodies[i].length);
      expect(a.json.digest).toBe(sha(bodies[i]));
    });
  });

  it('hands released memory to the next body and keeps at most the bound', () => {
    const p = new BodyBuffers(1, 1 << 20);
    const a = p.take(1000);
    const memory = a.buf.buffer;
    a.release();
    a.release(); // once only
    const b = p.take(500);
    expect(b.buf.length).toBe(500);
    expect(b.buf.buffer).toBe(memory);
    const c = p.take(500); // the pooled one is taken: a new allocation
    expect(c.buf.buffer).not.toBe(memory);
    b.release();
    c.release(); // over the bound of one: dropped
    expect(p.take(10).buf.buffer).toBe(memory);
    expect(p.take(2 << 20).buf.length).toBe(2 << 20); // beyond the pooled size: its own allocation
  });
});
