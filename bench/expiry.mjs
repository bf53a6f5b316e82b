// Issue 44: the cost of one `caller_expiry` pass and of one per-run alert look between resends, with a large held
// set and few expiries / changes, at two sizes of what is held: in proportion to what expired the time stays flat
// as the held set grows ten-fold; a full walk grows ten-fold. `--root DIR` measures another build's dist (e.g.
// /work/main) for the side-by-side figures. Prints a table, then one JSON line.
//   node bench/expiry.mjs [--root DIR] [--sizes 10000,100000] [--repeat 20]
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const root = resolve(arg('root', new URL('..', import.meta.url).pathname));
const sizes = arg('sizes', '10000,100000').split(',').map(Number);
const repeat = Number(arg('repeat', '20'));
const load = (p) => import(pathToFileURL(resolve(root, 'dist', p)).href);
const { CallerResolver } = await load('ingest/callers.js');
const { UnmappedTracker } = await load('ingest/unmapped.js');
const { RunAlerts } = await load('alerting/run-alerts.js');

const hex = (n, w) => n.toString(16).padStart(w, '0');
const FEW = 10;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * µs of one pass, median of `repeat`. `n` held, added one per ms (time i), the wait `n` ms: at each pass (now moving
 * on FEW ms) the FEW oldest expire and FEW new ones arrive, so `n` stay held.
 */
function callerPass(n) {
  const r = new CallerResolver({ waitMs: n, maxSpans: n * 4 + 100 });
  const agent = (i) => ({ run: 'r', traceId: hex(i + 1, 32), spanId: hex(i + 1, 16), parentSpanId: 'ffffffffffffffff', agent: 'w', startMs: 0, endMs: 1, statusCode: 0 });
  for (let i = 0; i < n; i++) r.addBatch([agent(i)], [], i);
  const times = [];
  for (let k = 1; k <= repeat; k++) {
    const now = n - 1 + k * FEW;
    const t = process.hrtime.bigint();
    const gaps = r.expire(now);
    times.push(Number(process.hrtime.bigint() - t) / 1000);
    if (gaps.length !== FEW) throw new Error(`expected ${FEW} gaps, got ${gaps.length}`);
    for (let i = 0; i < FEW; i++) r.addBatch([agent(n + (k - 1) * FEW + i)], [], now);
  }
  return median(times);
}

function unmappedPass(n) {
  const u = new UnmappedTracker({ quietMs: n, maxTraces: n * 2 + 100 });
  const span = (i) => ({ traceId: hex(i + 1, 32), spanId: hex(i + 1, 16), parentSpanId: null, name: 'x', kind: 1, startMs: 0, endMs: 0, statusCode: 0, attrs: { 'gen_ai.operation.name': 'chat' }, events: [], links: [] });
  for (let i = 0; i < n; i++) u.span(span(i), i, false, false);
  const times = [];
  for (let k = 1; k <= repeat; k++) {
    const now = n - 1 + k * FEW;
    const t = process.hrtime.bigint();
    const out = u.sweep(now);
    times.push(Number(process.hrtime.bigint() - t) / 1000);
    if (out.length !== FEW) throw new Error(`expected ${FEW} reports, got ${out.length}`);
    for (let i = 0; i < FEW; i++) u.span(span(n + (k - 1) * FEW + i), now, false, false);
  }
  return median(times);
}

/** One per-run alert look between resends with nothing changed: `tick` with an empty change set, else (a build without it) `update`. */
function alertLook(n) {
  let sent = 0;
  const ra = new RunAlerts({ externalUrl: 'https://a.example', runbookUrl: 'https://a.example/rb' }, 3_600_000, (a) => (sent += a.length));
  const members = new Map();
  for (let i = 0; i < n; i++) {
    const run = `r${i}`;
    members.set(run, { verdict: { run, verdict: 'forbidden_edge', settled: true, findings: [], pin: { contract: 'c', version: '1' } }, enteredAt: 0, inWindow: true, stalledAt: null, lastAt: 0 });
  }
  const all = () => members.values();
  const look = (now) => (ra.tick ? ra.tick(now, new Set(), all, (run) => members.get(run)) : ra.update(now, all()));
  look(1000);
  const times = [];
  for (let k = 0; k < repeat; k++) {
    const t = process.hrtime.bigint();
    look(2000 + k * 1000);
    times.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  if (sent !== n) throw new Error(`expected ${n} alerts sent once, got ${sent}`);
  return median(times);
}

const rows = [];
for (const [name, fn] of [['caller_expiry: CallerResolver.expire', callerPass], ['caller_expiry: UnmappedTracker.sweep', unmappedPass], ['alerting: per-run look, nothing changed', alertLook]]) {
  const us = sizes.map((n) => fn(n));
  rows.push({ pass: name, held: sizes, medianUs: us.map((x) => +x.toFixed(1)), ratio: +(us[us.length - 1] / us[0]).toFixed(2) });
}
console.log(`root ${root}; ${FEW} due per pass, median of ${repeat}`);
for (const r of rows) console.log(`${r.pass.padEnd(42)} ${r.held.map((h, i) => `${h} held: ${r.medianUs[i]} µs`).join('   ')}   ratio ${r.ratio}`);
console.log(JSON.stringify({ root, rows }));
