// Steady traffic against the live caps (issue 50): an AuditEngine with a real ReceiptStore at the default limits
// (--max-live-runs 100000, --idle-evict-after 15m) takes whole multi-agent runs (research-publish@3: start, three
// plan edges, a verified outcome; each run's receipts in two ingests, as a BatchSpanProcessor splits a trace over
// exports), `--per-batch` new runs per ingest, as fast as it can for `--seconds`. Prints per 10 s: runs sent,
// runs refused, runs held live, RSS; then one JSON line.
//
//   npm run build && node bench/live-cap.mjs [--seconds 60] [--per-batch 50] [--root DIR]
//
// `--root DIR`: measure another checkout's dist/ (before/after, side by side, under the same load).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '60' }, 'per-batch': { type: 'string', default: '50' }, root: { type: 'string' } } });
const root = resolve(values.root ?? join(import.meta.dirname, '..'));
const { AuditEngine } = await import(join(root, 'dist/audit/engine.js'));
const { ReceiptStore } = await import(join(root, 'dist/store/index.js'));
const { loadContractDir } = await import(join(root, 'dist/audit/contracts-dir.js'));
const registry = loadContractDir(join(root, 'contracts'));
const seconds = Number(values.seconds);
const perBatch = Number(values['per-batch']);
const dir = mkdtempSync(join(os.tmpdir(), 'ta-livecap-'));
const store = ReceiptStore.open(dir);
const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000, maxLiveRuns: 100_000, maxLiveReceipts: 2_000_000, idleEvictMs: 15 * 60_000 });
engine.restore(Date.now());
const iso = (t) => new Date(t).toISOString();
function firstHalf(run, t) {
  return [
    { run, event: 'start', at: iso(t), type: 'run.start', contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
    { run, event: 'e1', at: iso(t + 1), type: 'edge', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    { run, event: 'e2', at: iso(t + 2), type: 'edge', from: 'researcher', to: 'verifier', kind: 'handoff' },
  ];
}
function secondHalf(run, t) {
  return [
    { run, event: 'e3', at: iso(t + 3), type: 'edge', from: 'verifier', to: 'orchestrator', kind: 'return' },
    { run, event: 'out', at: iso(t + 4), type: 'outcome', verified: true, from: 'orchestrator' },
  ];
}
let sent = 0;
let refusedRuns = 0;
let refusedRequests = 0;
let n = 0;
const t0 = Date.now();
const rows = [];
let nextReport = t0 + 10_000;
let pending = []; // the second halves of the previous batch: sent with the next one (split exports)
while (Date.now() - t0 < seconds * 1000) {
  const now = Date.now();
  const batch = [...pending];
  pending = [];
  for (let i = 0; i < perBatch; i++, n++) {
    const run = `soak-${n}`;
    batch.push(...firstHalf(run, now));
    pending.push(...secondHalf(run, now));
  }
  sent += perBatch;
  try {
    const out = await engine.ingest(batch, 'bench', now);
    if (out.refused) {
      refusedRuns += out.refused.runs.size;
      refusedRequests++;
    }
  } catch (e) {
    if (e.constructor?.name !== 'LiveLimitError') throw e;
    refusedRequests++;
    refusedRuns += new Set(batch.map((r) => r.run)).size;
  }
  engine.tick(now);
  if (Date.now() >= nextReport) {
    nextReport += 10_000;
    const row = { s: Math.round((Date.now() - t0) / 1000), sent, refusedRuns, refusedRequests, live: engine.liveRuns, rssMB: Math.round(process.memoryUsage().rss / 1048576) };
    rows.push(row);
    console.log(JSON.stringify(row));
  }
}
const elapsed = (Date.now() - t0) / 1000;
console.log(JSON.stringify({ root, seconds: elapsed, newRunsPerSecond: Math.round(sent / elapsed), sent, refusedRuns, refusedRequests, live: engine.liveRuns, rssMB: Math.round(process.memoryUsage().rss / 1048576), rows }));
store.close();
rmSync(dir, { recursive: true, force: true });
