// The append statement of the PostgreSQL store, this build's beside another build's (issue 35, item 3): the same
// groups (a batch's worth: 51 receipts in 3 runs and 500 logged spans in 5 trace entries, as bench/cluster.mjs's
// HTTP batches produce; each build's span log body format: ~70 KB in format 1, ~7 KB in format 2) appended one commit at a time through each build's PgStore, each into its own fresh database
// of one throwaway PostgreSQL, in alternating rounds. Reported per build: PostgreSQL's CPU per commit (every process
// of the cluster, from /proc: only these appends run), this process's CPU per commit while appending through that
// build (the client side: serialisation, the protocol), and the ratio of the two builds per round. Deterministic
// work, so less at the mercy of a shared machine than the cluster bench's spans per CPU-second.
//
//   npm run build && node bench/pg-append.mjs --baseline DIR [--rounds 6] [--commits 200]
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import os from 'node:os';
import { ROOT, median, round } from './otlp-load.mjs';
import { clusterCpuSeconds, loadPgCluster, postmasterPid } from './pg-cluster.mjs';

const { values: args } = parseArgs({ options: { baseline: { type: 'string' }, rounds: { type: 'string', default: '6' }, commits: { type: 'string', default: '200' } } });
if (!args.baseline) throw new Error('--baseline DIR is required (another build, e.g. main built in DIR)');
const ROUNDS = Number(args.rounds);
const COMMITS = Number(args.commits);

/** A build's PgStore and its span log body encoder (format 2, src/ingest/span-log.ts; a build without it: format 1). */
async function buildOf(root) {
  const { PgStore } = await import(pathToFileURL(join(root, 'dist', 'store', 'pg-store.js')).href);
  const codec = join(root, 'dist', 'ingest', 'span-log.js');
  const encode = existsSync(codec) ? (await import(pathToFileURL(codec).href)).encodeLoggedSpans : (spans) => JSON.stringify(spans);
  return { PgStore, encode };
}
const builds = [
  ['this', await buildOf(ROOT)],
  ['baseline', await buildOf(resolve(args.baseline))],
];

/**
 * Group `n`: 51 edge receipts over 3 runs, and 5 span log entries of 100 plain logged spans each (10 children a
 * parent, as the cluster bench's batches: 512 spans under ~51 parents), the body in `encode`'s format (~14 KB each in
 * format 1).
 */
function group(label, n, encode) {
  const items = [];
  for (let i = 0; i < 51; i++) {
    const run = `${label}-run-${n}-${i % 3}`;
    const receipt = { v: 1, run, event: `e-${n}-${i}`, type: 'edge', at: new Date(1_700_000_000_000 + i).toISOString(), from: `agent-${i % 7}`, to: `agent-${(i + 1) % 7}`, kind: 'delegate', evidence: { span: `${n.toString(16).padStart(8, '0')}${i.toString(16).padStart(8, '0')}`, trace: `${n.toString(16).padStart(32, '0')}` } };
    items.push({ receipt, source: 'tok', receivedAt: 1_700_000_000_000 + n });
  }
  const spanLog = [];
  for (let t = 0; t < 5; t++) {
    const traceId = `${label}${n.toString(16).padStart(24, '0')}${t.toString(16).padStart(6, '0')}`.slice(-32);
    const spans = Array.from({ length: 100 }, (_, s) => ({ t: traceId, s: `${t}${s}`.padStart(16, '0'), p: s >= 10 ? `${t}${Math.floor(s / 10)}`.padStart(16, '0') : null, src: 'tok', op: 'span' }));
    spanLog.push({ traceId, loggedAt: 1_700_000_000_000 + n, body: encode(spans) });
  }
  return { items, spanLog };
}

const { startPgCluster } = await loadPgCluster();
const db = await startPgCluster();
const postmaster = postmasterPid(join(db.dir, 'data'));
const stores = [];
for (const [name, { PgStore, encode }] of builds) stores.push([name, await PgStore.open(await db.database(`append_${name}`), { instance: 'bench' }), encode]);
const rows = [];
try {
  for (let round_ = 1; round_ <= ROUNDS; round_++) {
    const order = round_ % 2 ? stores : [...stores].reverse();
    const r = { round: round_ };
    for (const [name, store, encode] of order) {
      const groups = Array.from({ length: COMMITS }, (_, i) => group(name.slice(0, 1), round_ * 100_000 + i, encode));
      const spanLogBytes = groups.reduce((a, g) => a + g.spanLog.reduce((b, e) => b + e.body.length, 0), 0) / COMMITS;
      const pg0 = clusterCpuSeconds(postmaster).seconds;
      const me0 = process.cpuUsage();
      const t0 = performance.now();
      for (const g of groups) {
        const res = await store.append(g.items, g.spanLog);
        if (res.accepted !== g.items.length) throw new Error(`${name}: ${res.accepted} of ${g.items.length} accepted`);
      }
      const wall = (performance.now() - t0) / 1000;
      const me = process.cpuUsage(me0);
      const pg = clusterCpuSeconds(postmaster).seconds - pg0;
      r[name] = { pgMsPerCommit: round((pg * 1000) / COMMITS, 2), clientMsPerCommit: round((me.user + me.system) / 1000 / COMMITS, 2), commitsPerSec: round(COMMITS / wall, 1), spanLogBytesPerCommit: Math.round(spanLogBytes) };
    }
    r.pgThisVsBaseline = round(r.this.pgMsPerCommit / r.baseline.pgMsPerCommit, 3);
    r.clientThisVsBaseline = round(r.this.clientMsPerCommit / r.baseline.clientMsPerCommit, 3);
    rows.push(r);
    console.log(`round ${round_}: PostgreSQL ms per commit this ${r.this.pgMsPerCommit} / baseline ${r.baseline.pgMsPerCommit} (${r.pgThisVsBaseline}); client ms per commit ${r.this.clientMsPerCommit} / ${r.baseline.clientMsPerCommit} (${r.clientThisVsBaseline}); commits/s ${r.this.commitsPerSec} / ${r.baseline.commitsPerSec}; span log bytes per commit ${r.this.spanLogBytesPerCommit} / ${r.baseline.spanLogBytesPerCommit}`);
  }
} finally {
  for (const [, s] of stores) await s.close();
  await db.stop();
}
const summary = { pgThisVsBaselineMedian: median(rows.map((r) => r.pgThisVsBaseline)), clientThisVsBaselineMedian: median(rows.map((r) => r.clientThisVsBaseline)) };
console.log(`median over ${ROUNDS} rounds, this build / baseline: PostgreSQL CPU per commit ${summary.pgThisVsBaselineMedian}, client CPU per commit ${summary.clientThisVsBaselineMedian}; load ${round(os.loadavg()[0], 2)}`);
console.log(JSON.stringify({ bench: 'pg-append', commits: COMMITS, rounds: rows, ...summary, loadavg1m: round(os.loadavg()[0], 2) }));
