// Per-run alert latency (issue 36: "a forbidden run is an active alert with its run label within 2 s of its verdict"),
// measured end to end on a real Alertmanager: Debian's prometheus-alertmanager on loopback with the shipped
// collector/alertmanager/alertmanager.yml (clustering off), one `serve --alertmanager-url` child process (default
// --alertmanager-resend), N forbidden runs (the drift fixture's direct-route run, re-timed to now) posted one at a
// time, each after a random pause of 0-1 s so the posts fall at every phase of the auditor's once-a-second look.
// Per run: verdict = the run's updatedAt in GET /api/v1/runs/{run} (when the auditor applied its receipts), received =
// the alert's updatedAt in Alertmanager's GET /api/v2/alerts (when Alertmanager took it), seen = when this script's
// 10 ms poll first saw the alert active with its run label. Both instants are on this machine's clock.
// Usage: npm run build && node bench/alertmanager-latency.mjs [--runs 20]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' }, alertmanager: { type: 'string', default: '/usr/bin/prometheus-alertmanager' } } });
const N = Number(values.runs);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function until(what, probe, ms = 60_000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch {}
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const fixture = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8')
  .split('\n')
  .filter((l) => l.includes('"run":"drift-direct-route"'))
  .map((l) => JSON.parse(l));
function forbiddenRun(run) {
  const latest = Math.max(...fixture.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 1000 - latest;
  return fixture.map((r) => JSON.stringify({ ...r, run, at: new Date(Date.parse(r.at) + delta).toISOString() })).join('\n') + '\n';
}

const dir = mkdtempSync(join(tmpdir(), 'ta-bench-am-'));
const children = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

const amPort = await freePort();
const am = `http://127.0.0.1:${amPort}`;
writeFileSync(join(dir, 'alertmanager.yml'), readFileSync(join(ROOT, 'collector', 'alertmanager', 'alertmanager.yml')));
const amChild = spawn(values.alertmanager, [`--config.file=${join(dir, 'alertmanager.yml')}`, `--storage.path=${join(dir, 'am')}`, `--web.listen-address=127.0.0.1:${amPort}`, '--cluster.listen-address=', '--log.level=error'], { stdio: 'ignore' });
children.push(amChild);
await until('alertmanager ready', async () => (await fetch(`${am}/-/ready`)).ok);

const srv = spawn(process.execPath, [join(ROOT, 'bin', 'topology-audit.js'), 'serve', '--contracts', join(ROOT, 'contracts'), '--data', join(dir, 'data'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--alertmanager-url', am, '--external-url', 'http://auditor.bench'], { stdio: ['ignore', 'pipe', 'ignore'] });
children.push(srv);
let out = '';
srv.stdout.on('data', (d) => (out += d));
const listening = await until('serve listening', async () => {
  const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
  return line && JSON.parse(line).listening;
});
const api = `http://127.0.0.1:${listening.api}`;

const rows = [];
for (let i = 0; i < N; i++) {
  await sleep(Math.random() * 1000);
  const run = `bench-am-${i}`;
  const res = await fetch(`${api}/v1/receipts`, { method: 'POST', body: forbiddenRun(run), headers: { 'content-type': 'application/x-ndjson' } });
  if (res.status !== 200) throw new Error(`POST receipts: ${res.status}`);
  const accepted = Date.now();
  const alert = await until(`${run} in alertmanager`, async () => {
    const list = await (await fetch(`${am}/api/v2/alerts?filter=${encodeURIComponent(`run="${run}"`)}`)).json();
    return list.find((a) => a.labels.run === run && a.status.state === 'active');
  });
  const seen = Date.now();
  const v = await (await fetch(`${api}/api/v1/runs/${run}`)).json();
  if (v.verdict !== 'forbidden_edge') throw new Error(`${run}: verdict ${v.verdict}`);
  const verdictAt = Date.parse(v.updatedAt);
  rows.push({ run, received: Date.parse(alert.updatedAt) - verdictAt, seen: seen - verdictAt, sinceAccepted: seen - accepted });
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0], median: s[Math.floor(s.length / 2)], p95: s[Math.min(s.length - 1, Math.ceil(s.length * 0.95) - 1)], max: s.at(-1) };
};
const received = stats(rows.map((r) => r.received));
const seen = stats(rows.map((r) => r.seen));
console.log(`${N} forbidden runs, verdict -> alert in Alertmanager (ms), load average ${loadavg()[0].toFixed(1)} on ${(await import('node:os')).cpus().length} cores`);
console.log('| | min | median | p95 | max |\n|---|---|---|---|---|');
console.log(`| received by Alertmanager (its updatedAt) | ${received.min} | ${received.median} | ${received.p95} | ${received.max} |`);
console.log(`| seen active by a 10 ms poll | ${seen.min} | ${seen.median} | ${seen.p95} | ${seen.max} |`);
console.log(`within 2 s: ${rows.filter((r) => r.seen <= 2000).length}/${N} (seen), ${rows.filter((r) => r.received <= 2000).length}/${N} (received)`);
console.log(JSON.stringify({ runs: N, receivedMs: received, seenMs: seen, load1: loadavg()[0], rows }));
process.exit(0);
