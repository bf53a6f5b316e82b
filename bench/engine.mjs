// The classifier and the live engine alone (no server, no network), on the drift contract
// (contracts/research-publish.yaml, research-publish@3).
//
//   npm run build && node bench/engine.mjs [--runs 100000] [--rss-receipts 1000000] [--part rss] [--contracts DIR]
//
// Four measurements, each printed as a line, then one JSON line of everything:
//   classifier   receipts/s folding receipts into 100,000 live RunStates and re-evaluating the touched runs the
//                way the engine ingests them: per batch, add every receipt, then evaluate each touched run once.
//                Batches like one OTLP export of bench/ingest.mjs: 51 receipts over 3 runs. Also the same stream
//                with one evaluation per receipt (the worst case), and a full re-evaluation of every live run.
//                Throughput per CPU-second of this process (user + system). The RunStates are made as the engine
//                makes them: over a receipt source (the store, read only for a conflict's rebuild or the events of an
//                unknown agent or foreign version; this stream has none, and the bench fails if it were read), so
//                they hold no receipt; each keeps its last verdict (the engine keeps every live run's verdict).
//                Beside it, its floor: the same loop over the same batches reading each receipt's fields, no fold.
//                And its ceiling: a minimal stand-in classifier (time, edge count, waits; no ids, findings or text)
//                over the same batches, parsing the times and given them as numbers (see minimalClassifier).
//   incremental  one new receipt in a run of 1,000 receipts: RunState.add + evaluate, microseconds (p50/p99).
//                Only the new receipt is folded; nothing re-reads the run.
//   deadlines    an AuditEngine (dist/audit/engine.js) with a real ReceiptStore in a temp dir holds 100,000
//                live runs, each `waiting` on a plan step whose deadline falls after the setup (its duration is
//                estimated first by timing a tenth of it; the deadlines are spread over 4 s);
//                engine.tick runs every 200 ms as serve does (with the per-tick gauge serve computes). For every
//                `waiting` -> `incomplete` transition: how late after its deadline it appeared (p50/p99/max).
//   rss          peak RSS (VmHWM) of a fresh process whose AuditEngine holds 1,000,000 live receipts (ingested
//                through a real ReceiptStore), and the V8 heap they take; then every run's receipts read back
//                through AuditEngine.get (as the API reads them: from the store) and counted. Then a second fresh
//                process restores the same store (AuditEngine.restore, as serve does on start): its peak RSS.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { receiptOf } from './receipt-shape.mjs';
import { RunState, evaluate, resolvePin } from '../dist/core/classify.js';
import { millisOf } from '../dist/core/time.js';
import { AuditEngine } from '../dist/audit/engine.js';
import { ReceiptStore } from '../dist/store/index.js';
import { prng } from './payloads.mjs';
import { loadContractDir } from '../dist/audit/contracts-dir.js';

const ROOT = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    part: { type: 'string', default: 'all' },
    runs: { type: 'string', default: '100000' },
    'stream-receipts': { type: 'string', default: '510000' },
    'run-size': { type: 'string', default: '1000' },
    'deadline-runs': { type: 'string', default: '100000' },
    'rss-receipts': { type: 'string', default: '1000000' },
    'rss-dir': { type: 'string' },
    // Another contract directory (e.g. the shipped contracts of an earlier commit, to tell a change of the verdicts
    // from a change of the engine); research-publish@3 must be in it.
    contracts: { type: 'string' },
  },
});
const RUNS = Number(args.runs);
const STREAM = Number(args['stream-receipts']);
const RUN_SIZE = Number(args['run-size']);
const DEADLINE_RUNS = Number(args['deadline-runs']);
const RSS_RECEIPTS = Number(args['rss-receipts']);

const registry = loadContractDir(args.contracts ? resolve(args.contracts) : join(ROOT, 'contracts'));
const CONTRACT = 'research-publish';
const iso = (ms) => new Date(ms).toISOString();
const round = (x, d = 0) => Math.round(x * 10 ** d) / 10 ** d;
const quantile = (xs, q) => {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const cpuSeconds = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e6;
};
function memory() {
  const status = readFileSync('/proc/self/status', 'latin1');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  return { hwmMiB: round(kb('VmHWM') / 1024, 1), rssMiB: round(kb('VmRSS') / 1024, 1) };
}


const evaluateState = (state, now) => evaluate(state, resolvePin(state, registry), now, { registry });
/** The live engine's RunStates read their run back from the store only for a conflict or an event listing: never here. */
const noReads = (run) => {
  throw new Error(`bench: RunState of ${run} read its receipts back (a conflict or an event listing in a stream that has none)`);
};

// ---------------------------------------------------------------------------------------------------------

function classifierThroughput() {
  const random = prng(7);
  const t0 = Date.now() - 3_600_000;
  const now = Date.now();
  const states = [];
  const next = new Int32Array(RUNS);
  for (let i = 0; i < RUNS; i++) {
    const s = new RunState(`run-${i}`, noReads);
    s.add(receiptOf(s.run, 0, t0));
    s.add(receiptOf(s.run, 1, t0));
    next[i] = 2;
    states.push(s);
  }
  // Full re-evaluation of every live run (as after a restart), receipts covered per CPU-second.
  let c = cpuSeconds();
  for (const s of states) evaluateState(s, now);
  const fullPassSeconds = cpuSeconds() - c;

  // The stream, built before timing: batches of 51 receipts, 17 for each of 3 random runs.
  const batches = [];
  for (let n = 0; n < STREAM; n += 51) {
    const batch = [];
    for (let j = 0; j < 3; j++) {
      const i = Math.floor(random() * RUNS);
      for (let k = 0; k < 17; k++) batch.push(receiptOf(states[i].run, next[i]++, t0));
    }
    batches.push(batch);
  }
  const byRun = new Map(states.map((s) => [s.run, s]));
  let receipts = 0;
  let evaluations = 0;
  let addWall = 0;
  let evaluateWall = 0;
  c = cpuSeconds();
  for (const batch of batches) {
    const w0 = performance.now();
    const touched = new Set();
    for (const r of batch) {
      const s = byRun.get(r.run);
      s.add(r);
      touched.add(s);
    }
    const w1 = performance.now();
    for (const s of touched) evaluateState(s, now);
    evaluateWall += performance.now() - w1;
    addWall += w1 - w0;
    receipts += batch.length;
    evaluations += touched.size;
  }
  const batchedSeconds = cpuSeconds() - c;
  // The limit of this loop: the same batches, each receipt looked up, its fields read (event, time, type, ends)
  // and its run marked touched, with no fold and no evaluation.
  let sink = 0;
  c = cpuSeconds();
  for (const batch of batches) {
    const touched = new Set();
    for (const r of batch) {
      const s = byRun.get(r.run);
      sink += r.event.length + r.at.charCodeAt(r.at.length - 2) + r.type.length + (r.to === undefined ? 0 : r.to.length) + (r.from === undefined ? 0 : r.from.length);
      touched.add(s);
    }
    sink += touched.size;
  }
  const floorSeconds = cpuSeconds() - c;
  if (sink === 0) throw new Error('bench: the floor loop read nothing');
  const ceiling = minimalClassifier(batches, t0, now);
  // GC work runs partly on helper threads (counted in CPU, not in the wall split below).
  const split = { addUsPerReceipt: round((addWall * 1000) / receipts, 2), evaluateUsPerRun: round((evaluateWall * 1000) / evaluations, 1), wallShareOfCpu: round((addWall + evaluateWall) / 1000 / batchedSeconds, 2) };

  // Worst case: one evaluation per receipt (a fresh stream of 100,000 receipts over random runs).
  const single = [];
  for (let n = 0; n < 100_000; n++) {
    const i = Math.floor(random() * RUNS);
    single.push(receiptOf(states[i].run, next[i]++, t0));
  }
  c = cpuSeconds();
  for (const r of single) {
    const s = byRun.get(r.run);
    s.add(r);
    evaluateState(s, now);
  }
  const singleSeconds = cpuSeconds() - c;
  let held = 0;
  for (const s of states) held += s.size;
  return {
    liveRuns: RUNS,
    receiptsHeld: held,
    batched: {
      receipts,
      evaluations,
      receiptsPerBatch: 51,
      runsPerBatch: 3,
      receiptsPerCpuSec: Math.round(receipts / batchedSeconds),
      floorReceiptsPerCpuSec: Math.round(receipts / floorSeconds),
      minimalReceiptsPerCpuSec: ceiling.receiptsPerCpuSec,
      minimalGivenTimesReceiptsPerCpuSec: ceiling.givenTimesReceiptsPerCpuSec,
      evaluationsPerCpuSec: Math.round(evaluations / batchedSeconds),
      ...split,
    },
    perReceipt: { receipts: single.length, receiptsPerCpuSec: Math.round(single.length / singleSeconds) },
    fullPass: { runs: RUNS, receipts: RUNS * 2, runsPerCpuSec: Math.round(RUNS / fullPassSeconds), receiptsPerCpuSec: Math.round((RUNS * 2) / fullPassSeconds) },
  };
}

/**
 * The ceiling of any classifier in this loop: a stand-in written for this benchmark only (never used to decide),
 * doing the least a classifier of these receipts must do, over its own 100,000 runs seeded like the real ones and
 * the same batches. Per receipt: parse its time, find its edge among the run's (fields compared, as RunState does
 * for a few edges), count it and keep its earliest time, or keep a declared wait's time and deadline. Per touched
 * run and batch: one evaluation that flags edges seen more than once and counts the waits still open at `now`.
 * No event ids (no duplicate check, no event lists), agents, versions, ends, plan, findings or text. Run twice:
 * parsing each receipt's RFC 3339 time, and with the times handed over as numbers (as a decoder that kept the
 * span's nanoseconds could), to show what the time parse alone costs here.
 */
function minimalClassifier(batches, t0, now) {
  class Edge {
    constructor(from, to, kind, at) {
      this.from = from;
      this.to = to;
      this.kind = kind;
      this.count = 1;
      this.at = at;
    }
  }
  class Run {
    edges = [];
    waits = [];
    first = Infinity;
    last = -Infinity;
  }
  const fold = (s, r, at) => {
    if (at < s.first) s.first = at;
    if (at > s.last) s.last = at;
    if (r.type === 'edge') {
      const l = s.edges;
      const { from, to, kind } = r;
      for (let i = 0; i < l.length; i++) {
        const x = l[i];
        if (x.to === to && x.from === from && x.kind === kind) {
          x.count++;
          if (at < x.at) x.at = at;
          return;
        }
      }
      l.push(new Edge(from, to, kind, at));
    } else if (r.type === 'wait') s.waits.push(at, millisOf(r.deadline));
  };
  const evaluateMinimal = (s) => {
    let repeated = 0;
    for (const e of s.edges) if (e.count > 1) repeated++;
    let open = 0;
    for (let i = 1; i < s.waits.length; i += 2) if (s.waits[i] > now) open++;
    return repeated * 1000 + open;
  };
  const times = batches.map((batch) => Float64Array.from(batch, (r) => millisOf(r.at)));
  const result = {};
  for (const given of [false, true]) {
    const runs = new Map();
    for (const batch of batches) {
      for (const r of batch) {
        if (runs.has(r.run)) continue;
        const s = new Run();
        fold(s, receiptOf(r.run, 0, t0), t0);
        fold(s, receiptOf(r.run, 1, t0), t0 + 1000);
        runs.set(r.run, s);
      }
    }
    for (let i = runs.size; i < RUNS; i++) runs.set(`ceiling-${i}`, new Run()); // as many live runs as the real loop
    let receipts = 0;
    let sink = 0;
    const c = cpuSeconds();
    for (let b = 0; b < batches.length; b++) {
      const batch = batches[b];
      const at = times[b];
      const touched = new Set();
      for (let j = 0; j < batch.length; j++) {
        const r = batch[j];
        const s = runs.get(r.run);
        fold(s, r, given ? at[j] : millisOf(r.at));
        touched.add(s);
      }
      for (const s of touched) sink += evaluateMinimal(s);
      receipts += batch.length;
    }
    const seconds = cpuSeconds() - c;
    if (sink === 0) throw new Error('bench: the minimal classifier evaluated nothing');
    result[given ? 'givenTimesReceiptsPerCpuSec' : 'receiptsPerCpuSec'] = Math.round(receipts / seconds);
  }
  return result;
}

function incrementalReceipt(openWaits) {
  const t0 = Date.now() - 86_400_000;
  const now = Date.now();
  // Warm up on other runs, then measure on 10 runs of RUN_SIZE receipts, 100 new receipts each, one at a time
  // (each run grows from RUN_SIZE to RUN_SIZE + 100 receipts): 1,000 samples.
  // (Warm-up: 3,000 evaluations, until the optimizing compiler has settled; before that a call costs 5-10x more.)
  for (let w = 0; w < 6; w++) {
    const warm = new RunState(`warm-${w}`, noReads);
    for (let k = 0; k < RUN_SIZE + 500; k++) {
      warm.add(receiptOf(warm.run, k, t0, openWaits));
      if (k >= RUN_SIZE) evaluateState(warm, now);
    }
  }
  const times = [];
  let cpu = 0;
  let first;
  for (let n = 0; n < 10; n++) {
    const state = new RunState(`long-run-${n}`, noReads);
    for (let k = 0; k < RUN_SIZE; k++) state.add(receiptOf(state.run, k, t0, openWaits));
    const v = evaluateState(state, now); // a live run is evaluated after every batch
    first ??= v;
    const extra = Array.from({ length: 100 }, (_, j) => receiptOf(state.run, RUN_SIZE + j, t0, openWaits));
    const c = cpuSeconds();
    for (const r of extra) {
      const s = performance.now();
      state.add(r);
      evaluateState(state, now);
      times.push((performance.now() - s) * 1000);
    }
    cpu += cpuSeconds() - c;
  }
  return {
    shape: openWaits ? 'open-waits' : 'returns',
    runReceipts: RUN_SIZE,
    verdict: first.verdict,
    findings: first.findings.length,
    samples: times.length,
    addAndEvaluateP50Us: round(quantile(times, 0.5), 1),
    addAndEvaluateP99Us: round(quantile(times, 0.99), 1),
    addAndEvaluateMeanCpuUs: round((cpu / times.length) * 1e6, 1),
  };
}

/** 100,000 live runs waiting on `verifier -> orchestrator : return`, whose 10m deadlines fall 2 s to 6 s from now. */
/** Wall seconds to ingest `runs` runs of the deadline shape into a scratch engine: how far ahead the deadlines go. */
async function setupEstimate(runs) {
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-bench-engine-'));
  const store = ReceiptStore.open(dir);
  const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000 });
  const t = Date.now();
  const batch = [];
  for (let i = 0; i < runs; i++) {
    const at = t - 600_000;
    batch.push(
      { run: `est-${i}`, event: 'start', type: 'run.start', at: iso(at - 60_000), version: '3', contract: CONTRACT, phase: 'research', from: 'orchestrator' },
      { run: `est-${i}`, event: 'e1', type: 'edge', at: iso(at - 30_000), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run: `est-${i}`, event: 'e2', type: 'edge', at: iso(at), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
    );
    if (batch.length >= 3000) await engine.ingest(batch.splice(0), 'bench', Date.now());
  }
  await engine.ingest(batch.splice(0), 'bench', Date.now());
  await store.sync();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  return (Date.now() - t) / 1000;
}

async function deadlineTransitions() {
  // The deadlines must fall after the setup, whose speed depends on the machine's load: time a tenth of it first.
  const pilot = Math.max(1000, Math.floor(DEADLINE_RUNS / 10));
  const estimate = (await setupEstimate(pilot)) * (DEADLINE_RUNS / pilot);
  const offsetMs = Math.max(12_000, Math.ceil(estimate * 1.6 * 1000) + 4000);
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-bench-engine-'));
  const store = ReceiptStore.open(dir);
  const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000 });
  const start = Date.now();
  const deadlineOf = new Map();
  const batch = [];
  let setupReceipts = 0;
  const setupCpu = cpuSeconds();
  for (let i = 0; i < DEADLINE_RUNS; i++) {
    const run = `dl-${i}`;
    const deadline = start + offsetMs + Math.floor((4000 * i) / DEADLINE_RUNS); // spread over 4 s, after setup
    const handoffAt = deadline - 600_000;
    deadlineOf.set(run, deadline);
    batch.push(
      { run, event: 'start', type: 'run.start', at: iso(handoffAt - 60_000), version: '3', contract: CONTRACT, phase: 'research', from: 'orchestrator' },
      { run, event: 'e1', type: 'edge', at: iso(handoffAt - 30_000), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run, event: 'e2', type: 'edge', at: iso(handoffAt), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
    );
    if (batch.length >= 3000) {
      setupReceipts += batch.length;
      await engine.ingest(batch.splice(0), 'bench', Date.now());
    }
  }
  setupReceipts += batch.length;
  await engine.ingest(batch.splice(0), 'bench', Date.now());
  const setup = { receipts: setupReceipts, seconds: round((Date.now() - start) / 1000, 1), receiptsPerCpuSec: Math.round(setupReceipts / (cpuSeconds() - setupCpu)) };
  let waiting = 0;
  for (const run of deadlineOf.keys()) if (engine.verdictOf(run)?.verdict === 'waiting') waiting++;
  if (waiting !== DEADLINE_RUNS) throw new Error(`expected ${DEADLINE_RUNS} waiting runs, found ${waiting} (setup took ${setup.seconds} s; raise the deadline offset)`);

  const lateness = [];
  engine.events.subscribe('runEvaluated', ({ run, verdict }) => {
    if (verdict.verdict === 'incomplete' && deadlineOf.has(run)) lateness.push(Date.now() - deadlineOf.get(run));
  });
  const ticks = [];
  const idleTicks = []; // ticks before the first deadline: the per-tick cost of merely holding the live runs
  const firstDeadline = Math.min(...deadlineOf.values());
  await new Promise((done) => {
    const timer = setInterval(() => {
      const s = performance.now();
      const now = Date.now();
      engine.tick(now);
      engine.gauge(); // serve computes the topology_runs gauge every tick
      (now < firstDeadline ? idleTicks : ticks).push(performance.now() - s);
      if (lateness.length >= DEADLINE_RUNS || now > start + offsetMs + 18_000) {
        clearInterval(timer);
        done();
      }
    }, 200);
  });
  await store.sync();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  return {
    liveRuns: engine.liveRuns,
    setup: { ...setup, deadlinesAfterSeconds: round(offsetMs / 1000, 1) },
    transitions: lateness.length,
    lateP50Ms: quantile(lateness, 0.5),
    lateP99Ms: quantile(lateness, 0.99),
    lateMaxMs: Math.max(...lateness),
    idleTickP50Ms: idleTicks.length ? round(quantile(idleTicks, 0.5), 1) : null,
    tickP99Ms: round(quantile(ticks, 0.99), 1),
    tickMaxMs: round(Math.max(...ticks), 1),
  };
}

/** In a fresh process: an engine holding RSS_RECEIPTS live receipts (runs of 20), then VmHWM; the store is kept in `dir`. */
async function rssChild(dir) {
  const store = ReceiptStore.open(dir);
  const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000 });
  const t0 = Date.now() - 86_400_000;
  const perRun = 20;
  const runs = Math.ceil(RSS_RECEIPTS / perRun);
  const start = performance.now();
  let batch = [];
  for (let i = 0; i < runs; i++) {
    const run = `rss-${i}`;
    for (let k = 0; k < perRun; k++) batch.push(receiptOf(run, k, t0 + i));
    if (batch.length >= 5000) {
      await engine.ingest(batch, 'bench', Date.now());
      batch = [];
    }
  }
  if (batch.length) await engine.ingest(batch, 'bench', Date.now());
  await store.sync();
  const ingestSeconds = (performance.now() - start) / 1000;
  globalThis.gc?.();
  const heap = process.memoryUsage();
  const m = memory();
  // Every run's receipts, as the API reads them (from the store), counted.
  let held = 0;
  for (let i = 0; i < runs; i++) held += engine.get(`rss-${i}`)?.receipts.length ?? 0;
  const afterReads = memory();
  store.close();
  console.log(JSON.stringify({ receipts: held, liveRuns: engine.liveRuns, liveReceipts: engine.liveReceipts, ingestSeconds: round(ingestSeconds, 1), peakRssMiB: m.hwmMiB, rssMiB: m.rssMiB, heapUsedMiB: round(heap.heapUsed / 2 ** 20, 1), externalMiB: round(heap.external / 2 ** 20, 1), peakRssAfterReadsMiB: afterReads.hwmMiB }));
}

/** In a fresh process: restore the engine from the store in `dir` (as serve starts), then VmHWM. */
async function restoreChild(dir) {
  const store = ReceiptStore.open(dir);
  const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000 });
  const start = performance.now();
  const r = engine.restore(Date.now());
  const seconds = (performance.now() - start) / 1000;
  globalThis.gc?.();
  const heap = process.memoryUsage();
  const m = memory();
  store.close();
  console.log(JSON.stringify({ runs: r.runs, receipts: r.receipts, liveReceipts: engine.liveReceipts, restoreSeconds: round(seconds, 1), peakRssMiB: m.hwmMiB, rssMiB: m.rssMiB, heapUsedMiB: round(heap.heapUsed / 2 ** 20, 1) }));
}

function child(part, dir) {
  const r = spawnSync(process.execPath, ['--expose-gc', new URL(import.meta.url).pathname, '--part', part, '--rss-receipts', String(RSS_RECEIPTS), '--rss-dir', dir, ...(args.contracts ? ['--contracts', args.contracts] : [])], { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`${part} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function rss() {
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-bench-rss-'));
  try {
    const held = child('rss-child', dir);
    const restored = child('restore-child', dir);
    return { ...held, restore: restored };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------

async function main() {
  if (args.part === 'rss-child') return rssChild(args['rss-dir']);
  if (args.part === 'restore-child') return restoreChild(args['rss-dir']);
  const parts = args.part === 'all' ? ['classifier', 'incremental', 'deadlines', 'rss'] : args.part.split(',');
  const results = {};
  const started = performance.now();
  for (const part of parts) {
    if (part === 'classifier') {
      const r = (results.classifier = classifierThroughput());
      console.log(`classifier: ${r.batched.receiptsPerCpuSec} receipts/CPU-s over ${r.liveRuns} live runs (batches of 51 receipts over 3 runs; ${r.batched.evaluationsPerCpuSec} evaluations/CPU-s; wall per receipt add ${r.batched.addUsPerReceipt} µs, per evaluation ${r.batched.evaluateUsPerRun} µs; the loop reading the same receipts without fold or evaluation: ${r.batched.floorReceiptsPerCpuSec} receipts/CPU-s; a minimal classifier's ceiling in the same loop: ${r.batched.minimalReceiptsPerCpuSec}, given the times as numbers ${r.batched.minimalGivenTimesReceiptsPerCpuSec} receipts/CPU-s); one evaluation per receipt: ${r.perReceipt.receiptsPerCpuSec} receipts/CPU-s; full re-evaluation: ${r.fullPass.runsPerCpuSec} runs/CPU-s`);
    } else if (part === 'incremental') {
      const r = (results.incremental = incrementalReceipt(false));
      console.log(`incremental: one new receipt in a run of ${r.runReceipts} receipts (${r.verdict}, ${r.findings} findings): add + evaluate p50 ${r.addAndEvaluateP50Us} µs, p99 ${r.addAndEvaluateP99Us} µs, mean CPU ${r.addAndEvaluateMeanCpuUs} µs`);
      const w = (results.incrementalOpenWaits = incrementalReceipt(true));
      console.log(`incremental, every wait open: one new receipt in a run of ${w.runReceipts} receipts (${w.verdict}, ${w.findings} findings): add + evaluate p50 ${w.addAndEvaluateP50Us} µs, p99 ${w.addAndEvaluateP99Us} µs, mean CPU ${w.addAndEvaluateMeanCpuUs} µs`);
    } else if (part === 'deadlines') {
      const r = (results.deadlines = await deadlineTransitions());
      console.log(`deadlines: ${r.transitions} waiting -> incomplete transitions with ${r.liveRuns} live runs: late by p50 ${r.lateP50Ms} ms, p99 ${r.lateP99Ms} ms, max ${r.lateMaxMs} ms (tick p99 ${r.tickP99Ms} ms, max ${r.tickMaxMs} ms; idle tick ${r.idleTickP50Ms} ms; setup ${r.setup.receipts} receipts in ${r.setup.seconds} s)`);
    } else if (part === 'rss') {
      const r = (results.rss = rss());
      console.log(`rss: ${r.liveReceipts} live receipts in ${r.liveRuns} runs held by the engine: peak RSS ${r.peakRssMiB} MiB (heap ${r.heapUsedMiB} MiB; ingested in ${r.ingestSeconds} s); all ${r.receipts} read back through get: peak ${r.peakRssAfterReadsMiB} MiB; restore of ${r.restore.receipts} receipts in ${r.restore.runs} runs in a fresh process: peak RSS ${r.restore.peakRssMiB} MiB (heap ${r.restore.heapUsedMiB} MiB, ${r.restore.restoreSeconds} s)`);
    } else throw new Error(`unknown part ${part}`);
  }
  const machine = { nproc: os.availableParallelism(), cpu: os.cpus()[0]?.model, node: process.version, loadavg1m: round(os.loadavg()[0], 2) };
  console.log(`machine: ${machine.nproc} cores, ${machine.cpu}, node ${machine.node}, load ${machine.loadavg1m}; took ${round((performance.now() - started) / 1000, 1)} s`);
  console.log(JSON.stringify({ bench: 'engine', machine, results }));
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
