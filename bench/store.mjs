// Receipt store throughput: group commit vs one transaction per append, with 1, 8 and 64 concurrent appenders.
// Build first: npx tsc -p tsconfig.build.json && node bench/store.mjs
// Env: BENCH_SECONDS (per cell, default 1), BENCH_BATCH (receipts per append, default 4),
//      BENCH_SYNC (comma list of FULL,NORMAL; default FULL,NORMAL).
// Prints one JSON document.
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ReceiptStore } from '../dist/store/index.js';
import { storeDeliveries } from './payloads.mjs';

const seconds = Number(process.env.BENCH_SECONDS ?? 1);
const batchSize = Number(process.env.BENCH_BATCH ?? 4);
const syncModes = (process.env.BENCH_SYNC ?? 'FULL,NORMAL').split(',');
const concurrencies = [1, 8, 64];
const modes = [
  { name: 'per-append', options: { groupCommit: false } },
  { name: 'group', options: { groupCommit: true, groupCommitMaxDelayMs: 0 } },
];

const receiptBatch = (appender, seq) => storeDeliveries(appender, seq, batchSize, 50, { version: '2' });

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function cell(mode, synchronous, appenders) {
  const dir = mkdtempSync(join(tmpdir(), 'store-bench-'));
  const store = ReceiptStore.open(dir, { ...mode.options, synchronous });
  const latencies = [];
  let committed = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  // A clock check, not a timer: with one transaction per append every append resolves at once, so the
  // appenders never yield to the event loop and a timer would never fire.
  const worker = async (id) => {
    for (let seq = 0; performance.now() < deadline; seq++) {
      const sent = performance.now();
      const result = await store.append(receiptBatch(id, seq));
      latencies.push(performance.now() - sent);
      committed += result.accepted;
    }
  };
  await Promise.all(Array.from({ length: appenders }, (_, id) => worker(id)));
  const elapsed = (performance.now() - started) / 1000;
  const { commits } = store.commitStats();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
  return {
    mode: mode.name,
    synchronous,
    appenders,
    receiptsPerSec: Math.round(committed / elapsed),
    appendsPerSec: Math.round(latencies.length / elapsed),
    commits,
    receiptsPerCommit: Math.round((committed / commits) * 10) / 10,
    appendLatencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
  };
}

const results = [];
for (const synchronous of syncModes) {
  for (const appenders of concurrencies) {
    for (const mode of modes) results.push(await cell(mode, synchronous, appenders));
  }
}

const speedup = results
  .filter((r) => r.mode === 'group')
  .map((g) => {
    const single = results.find((r) => r.mode === 'per-append' && r.synchronous === g.synchronous && r.appenders === g.appenders);
    return { synchronous: g.synchronous, appenders: g.appenders, groupOverPerAppend: Math.round((g.receiptsPerSec / single.receiptsPerSec) * 100) / 100 };
  });

console.log(JSON.stringify({
  bench: 'store',
  node: process.version,
  cpus: availableParallelism(),
  dataDir: tmpdir(),
  secondsPerCell: seconds,
  receiptsPerAppend: batchSize,
  results,
  speedup,
}, null, 2));
