// Memory per live run: a single instance (AuditEngine over the embedded SQLite ReceiptStore) beside a cluster
// instance (AuditEngine over the cluster's engine store, src/cluster/engine-store.ts, on a throwaway PostgreSQL:
// test/helpers/pg-cluster.ts through bench/pg-cluster.mjs). Each in a fresh process with --expose-gc: N runs of
// M receipts each are ingested, then the V8 heap (after a full GC) is compared with the heap before the first
// ingest; the difference divided by N is the heap bytes per live run.
//
//   npm run build && node bench/cluster-memory.mjs [--runs 20000] [--receipts 20] [--root DIR]
//
// --root: the checkout whose dist/ is measured (default: this one), e.g. another worktree for a before/after.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { receiptOf } from './receipt-shape.mjs';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '20000' }, receipts: { type: 'string', default: '20' }, root: { type: 'string' }, child: { type: 'string' }, url: { type: 'string' }, dir: { type: 'string' } } });
const ROOT = resolve(args.root ?? fileURLToPath(new URL('..', import.meta.url)));
const RUNS = Number(args.runs);
const PER_RUN = Number(args.receipts);


function heap() {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
}

async function child(kind) {
  const { AuditEngine } = await import(join(ROOT, 'dist/audit/engine.js'));
  const { loadContractDir } = await import(join(ROOT, 'dist/audit/contracts-dir.js'));
  const registry = loadContractDir(join(ROOT, 'contracts'));
  let store;
  let close;
  let owns;
  if (kind === 'sqlite') {
    const { ReceiptStore } = await import(join(ROOT, 'dist/store/index.js'));
    store = ReceiptStore.open(args.dir);
    close = async () => store.close();
  } else {
    const { PgStore } = await import(join(ROOT, 'dist/store/index.js'));
    const { ClusterEngineStore } = await import(join(ROOT, 'dist/cluster/engine-store.js'));
    const pg = await PgStore.open(args.url, { instance: 'bench-memory' });
    const parts = Array.from({ length: 64 }, (_, i) => i);
    store = new ClusterEngineStore(pg, () => parts);
    owns = () => true;
    close = async () => {
      await store.sync();
      await pg.close();
    };
  }
  const engine = new AuditEngine(registry, store, { retentionMs: 7 * 86_400_000, owns });
  const before = heap();
  const t0 = Date.now() - 86_400_000;
  let batch = [];
  for (let i = 0; i < RUNS; i++) {
    for (let k = 0; k < PER_RUN; k++) batch.push(receiptOf(`mem-${i}`, k, t0 + i));
    if (batch.length >= 5000) {
      await engine.ingest(batch, 'bench', Date.now());
      batch = [];
    }
  }
  if (batch.length) await engine.ingest(batch, 'bench', Date.now());
  await store.sync();
  const after = heap();
  const verdicts = {};
  for (const g of engine.gauge()) verdicts[g.verdict] = (verdicts[g.verdict] ?? 0) + g.count;
  console.log(JSON.stringify({ kind, runs: engine.liveRuns, liveReceipts: engine.liveReceipts, heapBytesPerRun: Math.round((after - before) / RUNS), heapMiB: Math.round((after - before) / 2 ** 20), verdicts }));
  await close();
}

async function main() {
  if (args.child) return child(args.child);
  const { loadPgCluster } = await import('./pg-cluster.mjs');
  const { startPgCluster } = await loadPgCluster();
  const db = await startPgCluster();
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-bench-mem-'));
  try {
    const run = (kind, extra) => {
      const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', kind, '--runs', String(RUNS), '--receipts', String(PER_RUN), '--root', ROOT, ...extra], { encoding: 'utf8', maxBuffer: 1 << 24 });
      if (r.status !== 0) throw new Error(`${kind}: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop());
    };
    const single = run('sqlite', ['--dir', dir]);
    const cluster = run('cluster', ['--url', db.url]);
    console.log(`${ROOT}: runs ${RUNS} x ${PER_RUN} receipts`);
    for (const r of [single, cluster]) console.log(`${r.kind.padEnd(8)} heap ${String(r.heapMiB).padStart(5)} MiB  ${String(r.heapBytesPerRun).padStart(6)} B/run  live runs ${r.runs}  verdicts ${JSON.stringify(r.verdicts)}`);
    console.log(JSON.stringify({ runs: RUNS, receiptsPerRun: PER_RUN, single, cluster }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await db.stop();
  }
}

await main();
