#!/usr/bin/env node
// The pending-span index: per-operation cost as the number of pending traces grows, the resolver before the
// split (main's src/ingest/callers.ts, transpiled from git into a temp dir) beside the current one.
// Usage: npm run build && node bench/pending.mjs [--sizes 1000,10000,100000] [--budget-ms 250]
// Prints a table, then one JSON line. Each figure: ns per operation (median of 3 timed rounds within the budget).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const SIZES = arg('sizes', '1000,10000,100000').split(',').map(Number);
const BUDGET = Number(arg('budget-ms', '250'));
/** The old eviction scan is O(pending traces^2) per eviction: above this many pending traces it is not run (it would take minutes). */
const OLD_EVICT_MAX = 10_000;

// ---- the old resolver, from git ----
const tmp = mkdtempSync(join(tmpdir(), 'bench-pending-'));
let OldResolver = null;
try {
  const src = execFileSync('git', ['show', 'main:src/ingest/callers.ts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  let js = ts.transpileModule(src, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  js = js.replace(/from '(\.\.?\/[^']+)'/g, (_, p) => `from '${pathToFileURL(resolve(root, 'dist/ingest', p)).href}'`);
  const file = join(tmp, 'callers-old.mjs');
  writeFileSync(file, js);
  OldResolver = (await import(pathToFileURL(file).href)).CallerResolver;
} catch (e) {
  console.error(`old resolver unavailable (${e.message.split('\n')[0]}): new figures only`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const { CallerResolver: NewResolver } = await import(pathToFileURL(join(root, 'dist/ingest/callers.js')).href);
const { PendingIndex } = await import(pathToFileURL(join(root, 'dist/ingest/pending-index.js')).href);

const agent = (traceId, spanId, parentSpanId) => ({ run: traceId, traceId, spanId, parentSpanId, agent: 'worker', startMs: 1, endMs: 2, statusCode: 0 });

/** A resolver holding `n` traces, each with one agent span waiting for a parent that never comes. */
function loaded(Resolver, n, maxSpans) {
  const r = new Resolver({ waitMs: 1e12, maxSpans });
  const spans = [];
  for (let i = 0; i < n; i++) spans.push(agent(`p${i}`, 's', 'missing'));
  r.addBatch(spans, spans, 0); // one batch: one resolution pass
  if (r.stats().pending !== n) throw new Error(`expected ${n} pending, got ${r.stats().pending}`);
  return r;
}

/** ns per op: `op(i)` repeated in rounds until the budget is spent (at least `minOps` ops), median of 3 rounds. */
function time(op, minOps = 1) {
  const rounds = [];
  let i = 0;
  for (let round = 0; round < 3; round++) {
    const t0 = process.hrtime.bigint();
    let ops = 0;
    let el = 0;
    do {
      op(i++);
      ops++;
      el = Number(process.hrtime.bigint() - t0) / 1e6;
    } while (el < BUDGET / 3 || ops < minOps);
    rounds.push((el * 1e6) / ops);
  }
  return rounds.sort((a, b) => a - b)[1];
}

const rows = [];
for (const n of SIZES) {
  const row = { pendingTraces: n };
  for (const [label, R] of [['old', OldResolver], ['new', NewResolver]]) {
    if (!R) continue;
    // 1. isPending (the pipeline asks it per idle unmapped trace): a waiting trace, and one that is not
    const r = loaded(R, n, n * 4);
    let sink = 0;
    row[`${label}IsPendingNs`] = time((i) => {
      sink += r.isPending(`p${(i * 7919) % n}`) ? 1 : 0;
      sink += r.isPending(`q${i}`) ? 1 : 0;
    }) / 2;
    if (sink === 0) throw new Error('isPending never true');
    // 2. a batch that forces one eviction: a new idle trace arrives while the index is full of waiting traces
    if (label === 'new' || n <= OLD_EVICT_MAX) {
      const e = loaded(R, n, n + 1);
      // One idle trace fills the index: each timed batch evicts the oldest idle one, never a waiting trace
      // (those go only when no idle trace is left; docs/pending-index.md).
      e.addBatch([], [], 1, { relays: [{ traceId: 'idle', spanId: 'x', parentSpanId: null }] });
      const before = e.stats().evicted;
      row[`${label}EvictBatchNs`] = time((i) => {
        e.addBatch([], [], 1, { relays: [{ traceId: `r${i}`, spanId: 'x', parentSpanId: null }] });
      });
      if (e.stats().evicted <= before) throw new Error('no eviction happened');
      if (e.stats().pending !== n) throw new Error('a waiting trace was evicted');
    }
  }
  // 3. the index alone: index a span of a new trace (evicting the oldest idle one), and hasPending
  const ix = new PendingIndex({ maxSpans: n + 1 }, () => null);
  for (let i = 0; i < n; i++) {
    ix.index(`p${i}`, 's', 'missing', null, 0);
    ix.addAgent({ traceId: `p${i}`, spanId: 's' });
  }
  row.indexEvictNs = time((i) => ix.index(`r${i}`, 'x', null, null, 1));
  if (ix.stats().evicted === 0 || ix.stats().pending !== n) throw new Error('index: eviction not exercised');
  let s2 = 0;
  row.indexHasPendingNs = time((i) => (s2 += ix.hasPending(`p${(i * 7919) % n}`) ? 1 : 0));
  rows.push(row);
}

const f = (x) => (x === undefined ? '—' : x >= 1e6 ? `${(x / 1e6).toFixed(2)} ms` : x >= 1e3 ? `${(x / 1e3).toFixed(2)} µs` : `${x.toFixed(0)} ns`);
console.log(`pending traces | isPending old | isPending new | evicting batch old | evicting batch new | index: evict | index: hasPending`);
for (const r of rows) {
  console.log(`${String(r.pendingTraces).padStart(14)} | ${f(r.oldIsPendingNs).padStart(13)} | ${f(r.newIsPendingNs).padStart(13)} | ${f(r.oldEvictBatchNs).padStart(18)} | ${f(r.newEvictBatchNs).padStart(18)} | ${f(r.indexEvictNs).padStart(12)} | ${f(r.indexHasPendingNs).padStart(17)}`);
}
console.log(`(old eviction not run above ${OLD_EVICT_MAX} pending traces: O(n^2) per eviction. An "evicting batch" of the old resolver also retries every waiting span; the new one retries only the traces the batch touched.)`);
console.log(JSON.stringify({ bench: 'pending', node: process.version, budgetMs: BUDGET, rows }));
