/**
 * Issue 30.7: the gRPC TLS port closes a connection that never finishes its TLS handshake after --headers-timeout
 * (as the HTTPS ports do), and holds at most --max-connections connections.
 */
import { execFileSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

function serverPki(): { cert: string; key: string } {
  const dir = tempDir('ta-grpc-tls-');
  execFileSync('/usr/bin/openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { cert: join(dir, 'c.pem'), key: join(dir, 'k.pem') };
}

const open = (port: number) =>
  new Promise<Socket>((res) => {
    const s = connect(port, '127.0.0.1', () => res(s));
    s.on('error', () => res(s));
  });
const closed = (s: Socket) => new Promise<void>((res) => (s.destroyed || s.closed ? res() : s.once('close', () => res())));

describe('gRPC over TLS: handshake timeout and connection cap', () => {
  let srv: ServerProcess;
  let capped: ServerProcess;
  beforeAll(async () => {
    const pki = serverPki();
    srv = await startServerProcess({ args: ['--tls-cert', pki.cert, '--tls-key', pki.key, '--headers-timeout', '1s'] });
    capped = await startServerProcess({ args: ['--tls-cert', pki.cert, '--tls-key', pki.key, '--headers-timeout', '50s', '--max-connections', '20'] });
  });
  afterAll(async () => {
    await srv?.stop();
    await capped?.stop();
  });

  it('an idle TCP connection (no ClientHello) is closed after --headers-timeout', async () => {
    const s = await open(srv.ports.otlpGrpc);
    s.resume();
    await closed(s); // waits for the server to close it (the test's own timeout would fail it otherwise)
    expect(s.destroyed || s.closed).toBe(true);
  });

  it('past --max-connections, connections are closed at accept', async () => {
    const socks: Socket[] = [];
    for (let i = 0; i < 40; i++) socks.push(await open(capped.ports.otlpGrpc));
    for (const s of socks) s.resume();
    // the 20 past the cap are closed at accept (the handshake timeout is 50 s here)
    await until('connections past the cap closed', async () => socks.filter((s) => s.destroyed || s.closed).length >= 20);
    expect(socks.slice(0, 20).filter((s) => s.destroyed || s.closed)).toHaveLength(0);
    for (const s of socks) s.destroy();
  });
});
