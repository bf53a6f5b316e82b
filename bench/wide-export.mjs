// One OTLP/protobuf export of N single-span traces (default 200,000: ~10 MiB) to a fresh `serve`, with /healthz polled
// every 20 ms meanwhile: the export's time and the longest /healthz answer (issue 47: a wide export must not stall the
// event loop). Compare two builds side by side, under the bench lock:
//   flock /work/wt/bench.lock node bench/wide-export.mjs [--root DIR] [--traces N]
// (--root: the checkout whose bin/ and dist/ serve, default this one; PROF=1 writes a CPU profile to /tmp.)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { root: { type: 'string', default: resolve(import.meta.dirname, '..') }, traces: { type: 'string', default: '200000' } } });
const root = values.root;
const n = Number(values.traces);
const data = mkdtempSync(join(tmpdir(), 'ta-wide-bench-'));
const prof = process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${join(tmpdir(), 'ta-wide-prof')}`] : [];
const child = spawn(process.execPath, [...prof, join(root, 'bin', 'topology-audit.js'), 'serve', '--contracts', join(root, 'contracts'), '--data', data, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
// The server goes with this script, whatever ends it (a timeout's SIGTERM included).
const stop = () => {
  child.kill('SIGKILL');
  rmSync(data, { recursive: true, force: true });
  process.exit(1);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
let out = '';
const ports = await new Promise((r) =>
  child.stdout.on('data', (d) => {
    out += d;
    const l = out.split('\n').find((x) => x.startsWith('{"listening"'));
    if (l) r(JSON.parse(l).listening);
  }),
);
// ExportTraceServiceRequest by hand: resource_spans { scope_spans { spans: trace_id, span_id, name, start, end } }.
const varint = (v) => {
  const b = [];
  while (v > 127) {
    b.push((v & 127) | 128);
    v >>>= 7;
  }
  b.push(v);
  return Buffer.from(b);
};
const field = (no, payload) => Buffer.concat([varint((no << 3) | 2), varint(payload.length), payload]);
const fixed64 = (no, big) => {
  const b = Buffer.alloc(9);
  b[0] = (no << 3) | 1;
  b.writeBigUInt64LE(big, 1);
  return b;
};
const t0 = BigInt(Date.now()) * 1000000n;
const spans = [];
for (let i = 0; i < n; i++) {
  const tid = Buffer.alloc(16);
  tid.writeUInt32BE(i + 1, 12);
  const sid = Buffer.alloc(8);
  sid.writeUInt32BE(i + 1, 4);
  spans.push(field(2, Buffer.concat([field(1, tid), field(2, sid), field(5, Buffer.from('s')), fixed64(7, t0), fixed64(8, t0 + 1000n)])));
}
const body = field(1, Buffer.concat([field(1, Buffer.alloc(0)), field(2, Buffer.concat([field(1, field(1, Buffer.from('x'))), ...spans]))]));
let worst = 0;
let polls = 0;
let done = false;
const poll = (async () => {
  while (!done) {
    const s = performance.now();
    await fetch(`http://127.0.0.1:${ports.api}/healthz`, { headers: { connection: 'close' } });
    worst = Math.max(worst, performance.now() - s);
    polls++;
    await new Promise((r) => setTimeout(r, 20));
  }
})();
await new Promise((r) => setTimeout(r, 200));
const s = performance.now();
const r = await fetch(`http://127.0.0.1:${ports.otlpHttp}/v1/traces`, { method: 'POST', body, headers: { 'content-type': 'application/x-protobuf' } });
const took = performance.now() - s;
await new Promise((r) => setTimeout(r, 200));
done = true;
await poll;
console.log(JSON.stringify({ root, traces: n, bodyMiB: +(body.length / 1048576).toFixed(1), status: r.status, exportMs: Math.round(took), healthzWorstMs: Math.round(worst), polls }));
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
rmSync(data, { recursive: true, force: true });
