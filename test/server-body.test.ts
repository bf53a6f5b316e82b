// Export bodies are read into reused buffers (src/server/body.ts): concurrent requests must never see each
// other's bytes, gzip and undeclared lengths still work, and released memory is reused.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyBuffers, inflateOptions, readBodyInto } from '../src/server/body.js';
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

  it('inflates gzip and deflate whatever the gzip trailer claims, and still stops at the limit', async () => {
    const text = Buffer.from('the agent asked the model to summarise the quarterly report '.repeat(20_000)); // 1.2 MB
    const gz = gzipSync(text);
    const lying = (isize: number) => {
      const b = Buffer.from(gz);
      b.writeUInt32LE(isize >>> 0, b.length - 4); // only the size field: zlib checks it, so the body is refused
      return b;
    };
    // Two gzip members: the trailer gives only the last member's size (a hint too small: more chunks, same bytes).
    const twoMembers = Buffer.concat([gzipSync(text), gzipSync(Buffer.from('tail'))]);
    const answers = await Promise.all([
      post(gz, { 'content-encoding': 'gzip' }),
      post(twoMembers, { 'content-encoding': 'gzip' }),
      post(deflateSync(text), { 'content-encoding': 'deflate' }),
      post(gz, { 'content-encoding': 'gzip' }, true),
      post(lying(10), { 'content-encoding': 'gzip' }),
      post(gzipSync(Buffer.alloc(5 << 20)), { 'content-encoding': 'gzip' }), // inflates past the 4 MiB limit
      post(Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' }),
      post(gz, { 'content-encoding': 'br' }),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 400, 413, 400, 415]);
    expect(answers[0].json.digest).toBe(sha(text));
    expect(answers[1].json.digest).toBe(sha(Buffer.concat([text, Buffer.from('tail')])));
    expect(answers[2].json.digest).toBe(sha(text));
    expect(answers[3].json.digest).toBe(sha(text));
  });

  it('sizes the output chunk from the gzip trailer, bounded by the limit and by what the input could inflate to', () => {
    const text = Buffer.from('x'.repeat(300_000));
    const gz = gzipSync(text);
    expect(inflateOptions(gz, 'gzip', 4 << 20)).toEqual({ maxOutputLength: 4 << 20, chunkSize: 300_001 });
    // A tiny body claiming 3 GB: no more than it could inflate to (deflate's 1032:1), never the claim.
    const claim = Buffer.from(gz.subarray(0, 40));
    claim.writeUInt32LE(3_000_000_000, claim.length - 4);
    expect(inflateOptions(claim, 'gzip', 1 << 30).chunkSize).toBe(64 * 1024);
    const mid = Buffer.concat([gz, Buffer.alloc(2000)]);
    mid.writeUInt32LE(3_000_000_000, mid.length - 4);
    expect(inflateOptions(mid, 'gzip', 1 << 30).chunkSize).toBe(mid.length * 1032 + 1);
    expect(inflateOptions(mid, 'gzip', 1 << 20).chunkSize).toBe((1 << 20) + 1);
    expect(inflateOptions(deflateSync(text), 'deflate', 4 << 20).chunkSize).toBe(64 * 1024);
  });
});
