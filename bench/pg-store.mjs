// PostgreSQL store throughput: appends/s and receipts per commit with 1 and 2 PgStore instances on one throwaway
// cluster (fsync on unless BENCH_FSYNC=off), the same total number of concurrent appenders in both, run side by side, twice.
// Needs Debian's postgresql (initdb/postgres). Build first: npm run build && node bench/pg-store.mjs
// Env: BENCH_SECONDS (per cell, default 3), BENCH_BATCH (receipts per append, default 4),
//      BENCH_APPENDERS (total concurrent appenders, default 32), BENCH_RUNS (default 2), BENCH_FSYNC (on|off, default on).
// Prints a table, then one JSON line.
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import ts from 'typescript';
import { PgStore } from '../dist/store/index.js';
import { storeDeliveries } from './payloads.mjs';

const seconds = Number(process.env.BENCH_SECONDS ?? 3);
const batchSize = Number(process.env.BENCH_BATCH ?? 4);
const appenders = Number(process.env.BENCH_APPENDERS ?? 32);
const runs = Number(process.env.BENCH_RUNS ?? 2);
const fsync = (process.env.BENCH_FSYNC ?? 'on') !== 'off';
const here = dirname(fileURLToPath(import.meta.url));

/** The test helper (TypeScript) transpiled next to this script for the time of the import, so `pg` resolves. */
async function loadClusterHelper() {
  const source = readFileSync(join(here, '../test/helpers/pg-cluster.ts'), 'utf8');
  const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  const file = join(here, `.pg-cluster-${process.pid}.mjs`);
  writeFileSync(file, js);
  try {
    return await import(file);
  } finally {
    rmSync(file, { force: true });
  }
}

/** CPU seconds (user + system) of the postgres server so far: the postmaster and its live children, from /proc. */
function serverCpuSeconds(dir) {
  const postmaster = Number(readFileSync(join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  let ticks = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(name) !== postmaster && Number(f[1]) !== postmaster) continue;
    ticks += Number(f[11]) + Number(f[12]); // utime, stime
  }
  return ticks / 100; // USER_HZ
}

const receiptBatch = (appender, seq) => storeDeliveries(appender, seq, batchSize, 25);

function percentile(sorted, p) {
  return sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function cell(cluster, instances, label) {
  const url = await cluster.database(`bench_${label}`);
  let commits = 0;
  let committedReceipts = 0;
  const stores = [];
  for (let i = 0; i < instances; i++) {
    stores.push(await PgStore.open(url, {
      instance: `bench-${i}`,
      onCommit: (_s, n) => {
        commits++;
        committedReceipts += n;
      },
    }));
  }
  const latencies = [];
  let appends = 0;
  const cpu0 = process.cpuUsage();
  const server0 = serverCpuSeconds(cluster.dir);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(Array.from({ length: appenders }, async (_, a) => {
    const store = stores[a % instances];
    for (let seq = 0; performance.now() < deadline; seq++) {
      const t = performance.now();
      await store.append(receiptBatch(a, seq));
      latencies.push(performance.now() - t);
      appends++;
    }
  }));
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const clientCpu = (cpu.user + cpu.system) / 1e6;
  const serverCpu = serverCpuSeconds(cluster.dir) - server0;
  for (const s of stores) await s.close();
  latencies.sort((x, y) => x - y);
  return {
    instances,
    appendsPerSec: Math.round(appends / elapsed),
    receiptsPerSec: Math.round((appends * batchSize) / elapsed),
    commitsPerSec: Math.round(commits / elapsed),
    receiptsPerCommit: Number((committedReceipts / Math.max(1, commits)).toFixed(1)),
    ackP50Ms: Number(percentile(latencies, 0.5).toFixed(2)),
    ackP99Ms: Number(percentile(latencies, 0.99).toFixed(2)),
    receiptsPerClientCpuSec: Math.round((appends * batchSize) / clientCpu),
    receiptsPerPostgresCpuSec: Math.round((appends * batchSize) / Math.max(0.01, serverCpu)),
  };
}

const { startPgCluster } = await loadClusterHelper();
const clusterStart = performance.now();
const cluster = await startPgCluster({ fsync });
const startMs = Math.round(performance.now() - clusterStart);
const results = [];
try {
  for (let run = 1; run <= runs; run++) {
    for (const instances of [1, 2]) results.push({ run, ...(await cell(cluster, instances, `r${run}_i${instances}`)) });
  }
} finally {
  await cluster.stop();
}

console.log(`PgStore, ${appenders} concurrent appenders in total, ${batchSize} receipts per append, ${seconds} s per cell, fsync ${fsync ? 'on' : 'off'} (cluster start ${startMs} ms)`);
console.log('run | instances | appends/s | receipts/s | commits/s | receipts/commit | ack p50 / p99 ms | receipts per client CPU-s | receipts per postgres CPU-s | appends/s 2 vs 1');
for (const r of results) {
  const one = results.find((x) => x.run === r.run && x.instances === 1);
  const ratio = r.instances === 2 ? (r.appendsPerSec / one.appendsPerSec).toFixed(2) : '';
  console.log(`${r.run} | ${r.instances} | ${r.appendsPerSec} | ${r.receiptsPerSec} | ${r.commitsPerSec} | ${r.receiptsPerCommit} | ${r.ackP50Ms} / ${r.ackP99Ms} | ${r.receiptsPerClientCpuSec} | ${r.receiptsPerPostgresCpuSec} | ${ratio}`);
}
console.log(JSON.stringify({ bench: 'pg-store', seconds, batchSize, appenders, fsync, clusterStartMs: startMs, results }));
