#!/usr/bin/env node
// The WAL's fsync on the event loop (SQLite synchronous=FULL inside COMMIT, before) against in libuv's thread pool
// (src/store/sqlite/wal-sync.ts, now), side by side in one run, alternating, on the embedded store: CLIENTS concurrent
// appenders each appending a group of receipts and waiting for its answer, for SECONDS per round, with and without a
// neighbour writing to the same disk (a child process writing 4 MiB and fdatasyncing, in a loop: what a database or a
// log shipper beside the auditor does). Prints, per mode: appends/s, the event loop's delay p99 and max
// (perf_hooks.monitorEventLoopDelay) and the answer's p99 latency.
//   node bench/wal-sync.mjs [--seconds 10] [--rounds 2] [--clients 8]
// Needs `npm run build`.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { ReceiptStore } from '../dist/store/index.js';

const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, rounds: { type: 'string', default: '2' }, clients: { type: 'string', default: '8' } } });
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const CLIENTS = Number(args.clients);

function neighbour(dir) {
  // A writer on the same file system: 4 MiB, fdatasync, again.
  const code = `const fs=require('fs');const f=fs.openSync(process.argv[1],'w');const b=Buffer.alloc(4<<20,1);for(;;){fs.writeSync(f,b,0,b.length,0);fs.fdatasyncSync(f);}`;
  return spawn(process.execPath, ['-e', code, join(dir, 'neighbour.bin')], { stdio: 'ignore' });
}

async function round(mode, withNeighbour) {
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-walsync-bench-'));
  // before: no WalSync (synchronous 'NORMAL' option) and SQLite's FULL on the connection: the fsync inside COMMIT.
  const store = ReceiptStore.open(dir, mode === 'before' ? { synchronous: 'NORMAL' } : {});
  if (mode === 'before') store.shared.db.pragma('synchronous = FULL');
  const n = withNeighbour ? neighbour(dir) : null;
  const h = monitorEventLoopDelay({ resolution: 5 });
  const lat = [];
  let appends = 0;
  let seq = 0;
  const end = performance.now() + SECONDS * 1000;
  h.enable();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    while (performance.now() < end) {
      const items = Array.from({ length: 20 }, () => {
        const i = seq++;
        return { receipt: { run: `bench-run-${c}-${i >> 4}`, event: `e${i}`, type: 'edge', at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' }, source: 's', receivedAt: Date.now() };
      });
      const t0 = performance.now();
      await store.append(items);
      lat.push(performance.now() - t0);
      appends++;
    }
  }));
  h.disable();
  n?.kill('SIGKILL');
  store.close();
  rmSync(dir, { recursive: true, force: true });
  lat.sort((a, b) => a - b);
  return { appendsPerS: appends / SECONDS, loopP99Ms: h.percentile(99) / 1e6, loopMaxMs: h.max / 1e6, answerP99Ms: lat[Math.floor(lat.length * 0.99)] ?? 0 };
}

const results = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const withNeighbour of [false, true]) {
    for (const mode of r % 2 === 0 ? ['before', 'after'] : ['after', 'before']) {
      const key = `${mode}${withNeighbour ? ' +neighbour' : ''}`;
      (results[key] ??= []).push(await round(mode, withNeighbour));
    }
  }
}
const mean = (xs, k) => xs.reduce((a, x) => a + x[k], 0) / xs.length;
const rows = Object.entries(results).map(([k, xs]) => ({ mode: k, appendsPerS: Math.round(mean(xs, 'appendsPerS')), loopP99Ms: +mean(xs, 'loopP99Ms').toFixed(1), loopMaxMs: +Math.max(...xs.map((x) => x.loopMaxMs)).toFixed(1), answerP99Ms: +mean(xs, 'answerP99Ms').toFixed(1) }));
console.table(rows);
for (const n of ['', ' +neighbour']) {
  const b = rows.find((r) => r.mode === `before${n}`);
  const a = rows.find((r) => r.mode === `after${n}`);
  console.log(JSON.stringify({ neighbour: n !== '', appendsRatio: +(a.appendsPerS / b.appendsPerS).toFixed(2), loopP99Ratio: +(a.loopP99Ms / b.loopP99Ms).toFixed(2), loopMaxRatio: +(a.loopMaxMs / b.loopMaxMs).toFixed(2) }));
}
