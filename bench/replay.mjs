#!/usr/bin/env node
/**
 * Replay throughput and classifier scaling, through the built dist (run `npx tsc -p tsconfig.build.json` first).
 *
 *   node bench/replay.mjs [--runs 100000] [--quick]
 *
 * Prints one JSON object:
 * - replay: receipts/s for parse (NDJSON text -> validated receipts), classify (group into runs, fold,
 *   evaluate every run) and end-to-end (parse + classify + one JSON line per run, as `replay --json`),
 *   the verdict mix (checked against what the generator built), and the bench process's peak RSS (it holds
 *   the NDJSON text and two parsed copies at once);
 * - cli: the built CLI (`replay --json`) in a child process on the same input: wall time and its peak RSS;
 * - scaling: one run of 10, 100, 1,000 and 10,000 receipts: fold + evaluate time per receipt;
 * - incremental: one new receipt added to a 1,000-receipt RunState, then `evaluate`, in microseconds.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { RunState, evaluate, parseReceiptFile, resolvePin, verdictJson } from '../dist/core/index.js';
import { replayReceipts } from '../dist/cli/replay.js';
import { DEFAULT_NOW, RECEIPTS_PER_RUN, expectedVerdicts, generateNdjson } from './gen-runs.mjs';
import { loadContractDir } from '../dist/audit/contracts-dir.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const runsArg = args.indexOf('--runs');
const RUNS = runsArg >= 0 ? Number(args[runsArg + 1]) : quick ? 10_000 : 100_000;

const registry = loadContractDir(join(ROOT, 'contracts'));
const NOW = Date.parse(DEFAULT_NOW);
const round = (x, digits = 0) => Number(x.toFixed(digits));
const perSecond = (count, ms) => Math.round((count / ms) * 1000);

function timed(fn) {
  const t0 = performance.now();
  const value = fn();
  return { value, ms: performance.now() - t0 };
}

/** Run `fn` `times` times; the last value, and the best and median durations. */
function repeated(times, fn) {
  const samples = [];
  let value;
  for (let i = 0; i < times; i++) {
    const t = timed(fn);
    value = t.value;
    samples.push(t.ms);
  }
  samples.sort((a, b) => a - b);
  return { value, best: samples[0], median: samples[Math.floor(samples.length / 2)] };
}

const rate = (count, t) => ({ receiptsPerSec: perSecond(count, t.median), bestReceiptsPerSec: perSecond(count, t.best), medianMs: round(t.median), bestMs: round(t.best) });

// ---------------------------------------------------------------------------------------------
// 1. Replay of RUNS runs x 10 receipts.
// ---------------------------------------------------------------------------------------------
function replayBench() {
  const text = generateNdjson(RUNS);
  const receiptsTotal = RUNS * RECEIPTS_PER_RUN;
  const times = quick ? 2 : 3;
  // Warm up the code paths on a small input so the JIT does not dominate the first measurement.
  replayReceipts(parseReceiptFile(generateNdjson(2_000, { prefix: 'warm' }), 'warm.ndjson'), registry, { now: NOW });

  const parse = repeated(times, () => parseReceiptFile(text, 'bench.ndjson'));
  if (parse.value.length !== receiptsTotal) throw new Error(`parsed ${parse.value.length} receipts, expected ${receiptsTotal}`);
  const receipts = parse.value;
  const classify = repeated(times, () => replayReceipts(receipts, registry, { now: NOW }));

  // Check the result: every run has the verdict its case was built for.
  const expected = expectedVerdicts(RUNS);
  const mix = {};
  let wrong = 0;
  for (const v of classify.value.verdicts) {
    mix[v.verdict] = (mix[v.verdict] ?? 0) + 1;
    if (expected[v.run] !== v.verdict) wrong++;
  }
  if (classify.value.verdicts.length !== RUNS || wrong > 0) throw new Error(`${wrong} of ${classify.value.verdicts.length} runs have an unexpected verdict`);
  classify.value = null;

  const endToEnd = repeated(times, () => {
    const { verdicts } = replayReceipts(parseReceiptFile(text, 'bench.ndjson'), registry, { now: NOW });
    let bytes = 0;
    for (const v of verdicts) bytes += JSON.stringify(verdictJson(v)).length + 1;
    return bytes;
  });

  return {
    runs: RUNS,
    receipts: receiptsTotal,
    ndjsonMB: round(Buffer.byteLength(text) / 1e6, 1),
    repetitions: times,
    parse: rate(receiptsTotal, parse),
    classify: { ...rate(receiptsTotal, classify), runsPerSec: perSecond(RUNS, classify.median) },
    endToEnd: { ...rate(receiptsTotal, endToEnd), jsonOutputMB: round(endToEnd.value / 1e6, 1) },
    verdictMix: mix,
  };
}

// ---------------------------------------------------------------------------------------------
// 2. Scaling with receipts per run, and 3. incremental cost.
// ---------------------------------------------------------------------------------------------

const AT0 = NOW - 3_600_000;
const iso = (ms) => new Date(ms).toISOString();
const SEARCH = ['web-search', 'doc-search'];

/**
 * One long run of `n` receipts: run.start and the first two planned edges, then the `filler` mix; each
 * receipt a distinct event.
 */
function longRun(n, run = `long-${n}`) {
  const rs = [
    { run, event: 's', type: 'run.start', at: iso(AT0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
    { run, event: 'e1', type: 'edge', at: iso(AT0 + 1000), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    { run, event: 'e2', type: 'edge', at: iso(AT0 + 2000), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
  ];
  for (let i = rs.length; i < n; i++) rs.push(filler(run, i));
  return rs.slice(0, n);
}

/**
 * The long-run mix, per 10 receipts: 4 bounded-choice search delegations, 2 researcher -> verifier handoffs,
 * 1 publisher delegation, 1 repeated delegation with status error, 1 unverified outcome, and 1 wait on the
 * search edge (satisfied: the edge is observed before the deadline).
 */
function filler(run, i) {
  const at = iso(AT0 + 3000 + i * 10);
  const base = { run, event: `x${i}`, at, version: '3' };
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3:
      return { ...base, type: 'edge', from: 'orchestrator', to: SEARCH[i % 2], kind: 'delegate' };
    case 4:
    case 5:
      return { ...base, type: 'edge', from: 'researcher', to: 'verifier', kind: 'handoff' };
    case 6:
      return { ...base, type: 'edge', from: 'orchestrator', to: 'publisher', kind: 'delegate' };
    case 7:
      return { ...base, type: 'edge', status: 'error', from: 'orchestrator', to: 'researcher', kind: 'delegate' };
    case 8:
      return { ...base, type: 'outcome', from: 'orchestrator', verified: false };
    default:
      return { ...base, type: 'wait', from: 'researcher', on: 'web-search', edge: 'orchestrator -> [web-search, doc-search] : delegate', deadline: iso(AT0 + 3_000_000 + i) };
  }
}

function foldAndEvaluate(receipts) {
  const s = new RunState(receipts[0].run);
  for (const r of receipts) s.add(r);
  return evaluate(s, resolvePin(s, registry), NOW, { registry });
}

function scalingBench() {
  const sizes = [10, 100, 1_000, 10_000];
  const out = [];
  for (const n of sizes) {
    const receipts = longRun(n);
    // Each size classifies about the same number of receipts in total (at least 10 runs).
    const reps = Math.max(10, Math.round((quick ? 200_000 : 1_000_000) / n));
    for (let i = 0; i < Math.min(reps, 50); i++) foldAndEvaluate(receipts); // warm-up
    const samples = [];
    let verdict;
    for (let i = 0; i < reps; i++) {
      const t0 = performance.now();
      verdict = foldAndEvaluate(receipts).verdict;
      samples.push(performance.now() - t0);
    }
    samples.sort((a, b) => a - b);
    const ns = (ms) => round((ms * 1e6) / n);
    out.push({ receiptsPerRun: n, reps, verdict, medianMsPerRun: round(samples[Math.floor(samples.length / 2)], 4), nsPerReceiptMedian: ns(samples[Math.floor(samples.length / 2)]), nsPerReceiptBest: ns(samples[0]) });
  }
  return out;
}

function incrementalBench() {
  const base = longRun(1_000, 'incremental');
  const state = new RunState('incremental');
  for (const r of base) state.add(r);
  const pinning = resolvePin(state, registry);
  evaluate(state, pinning, NOW, { registry });
  const reps = 2_000;
  const samples = [];
  for (let i = 0; i < reps; i++) {
    const r = filler('incremental', 1_000 + (i % 1_000));
    r.event = `new-${i}`;
    const t0 = performance.now();
    state.add(r);
    evaluate(state, pinning, NOW, { registry });
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  const us = (q) => round(samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] * 1000, 1);
  return { startReceipts: 1_000, endReceipts: state.size, reps, addPlusEvaluateMicros: { p50: us(0.5), p90: us(0.9), p99: us(0.99) } };
}

// ---------------------------------------------------------------------------------------------
// 4. The real CLI in a child process: `topology-audit replay FILE --json`, its wall time and peak RSS.
// ---------------------------------------------------------------------------------------------
function cliBench() {
  const dir = mkdtempSync(join(tmpdir(), 'ta-bench-'));
  try {
    const file = join(dir, 'runs.ndjson');
    writeFileSync(file, generateNdjson(RUNS));
    const script = `
      import { main } from ${JSON.stringify(join(ROOT, 'dist/cli/main.js'))};
      const io = { stdout: () => {}, stderr: (s) => process.stderr.write(s) };
      const t0 = performance.now();
      const code = await main(['replay', ${JSON.stringify(file)}, '--contracts', ${JSON.stringify(join(ROOT, 'contracts'))}, '--now', ${JSON.stringify(DEFAULT_NOW)}, '--json'], io);
      process.stdout.write(JSON.stringify({ code, ms: performance.now() - t0, maxRSS: process.resourceUsage().maxRSS }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (r.status !== 0) throw new Error(`cli replay failed: ${r.stderr}`);
    const { code, ms, maxRSS } = JSON.parse(r.stdout);
    if (code !== 0) throw new Error(`cli replay exit ${code}: ${r.stderr}`);
    return { command: 'topology-audit replay FILE --contracts contracts --now ... --json (output discarded)', ms: round(ms), receiptsPerSec: perSecond(RUNS * RECEIPTS_PER_RUN, ms), peakRssMB: round(maxRSS / 1024) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The small-heap measurements first: the replay of a million receipts leaves a large heap behind.
const scaling = scalingBench();
const incremental = incrementalBench();
const cli = cliBench();
const replay = replayBench();
const usage = process.resourceUsage();
process.stdout.write(
  JSON.stringify(
    {
      node: process.version,
      cpus: (await import('node:os')).cpus().length,
      replay: { ...replay, benchProcessPeakRssMB: round(usage.maxRSS / 1024) },
      cli,
      scaling,
      incremental,
    },
    null,
    2,
  ) + '\n',
);
