// The append statement of the PostgreSQL store, this build's beside another build's (issue 35, item 3): the same
// groups (a batch's worth: 51 receipts in 3 runs and 500 logged spans in 5 trace entries, as bench/cluster.mjs's
// HTTP batches produce; each build's span log body format: ~70 KB in format 1, ~7 KB in format 2) appended one commit at a time through each build's PgStore, each into its own fresh database
// of one throwaway PostgreSQL, in alternating rounds. Reported per build: PostgreSQL's CPU per commit (every process
// of the cluster, from /proc: only these appends run), this process's CPU per commit while appending through that
// build (the client side: serialisation, the protocol), and the ratio of the two builds per round. Deterministic
// work, so less at the mercy of a shared machine than the cluster bench's spans per CPU-second.
//
// The floor (--floor, default on; issue 35 round 4): the cheapest durable write of the same rows in the same-sized
// transactions, in the same rounds, through a plain pg client: this build's receipt rows (compact JSON bodies), one
// runs row per run and the span log entries (this build's body format), one autocommit statement per commit (three
// INSERTs from unnest'ed typed arrays, no lock, no ON CONFLICT), synchronous_commit as the store has it (the server's
// default, on). Two floors, each its own database: "floor-pk", tables with their primary keys only; "floor-key", the
// receipts' unique (run, event, variant) key too, the one index a store that refuses a row twice cannot do without.
// And "floor-commit": one durable commit of one small row (a PK-only table) per commit, the fixed cost of a commit.
// Per span = per commit / 512 (a commit here is one of the cluster bench's 512-span batches).
//
//   npm run build && node bench/pg-append.mjs --baseline DIR [--rounds 6] [--commits 200] [--floor false]
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import os from 'node:os';
import { ROOT, median, round } from './otlp-load.mjs';
import { clusterCpuSeconds, loadPgCluster, postmasterPid } from './pg-cluster.mjs';

const { values: args } = parseArgs({ options: { baseline: { type: 'string' }, rounds: { type: 'string', default: '6' }, commits: { type: 'string', default: '200' }, floor: { type: 'string', default: 'true' } } });
if (!args.baseline) throw new Error('--baseline DIR is required (another build, e.g. main built in DIR)');
const ROUNDS = Number(args.rounds);
const COMMITS = Number(args.commits);
const FLOOR = args.floor !== 'false';
const SPANS_PER_COMMIT = 512;

/** A build's PgStore and its span log body encoder (format 2, src/ingest/span-log.ts; a build without it: format 1). */
async function buildOf(root) {
  const { PgStore, partitionOf } = await import(pathToFileURL(join(root, 'dist', 'store', 'pg-store.js')).href);
  const { compactReceiptJson } = await import(pathToFileURL(join(root, 'dist', 'core', 'canonical.js')).href);
  const codec = join(root, 'dist', 'ingest', 'span-log.js');
  const encode = existsSync(codec) ? (await import(pathToFileURL(codec).href)).encodeLoggedSpans : (spans) => JSON.stringify(spans);
  return { PgStore, encode, compactReceiptJson, partitionOf };
}

/**
 * The floor's "store": tables with their primary keys only (and, `key`, the receipts' unique key), the same columns
 * as the store's; `append` writes a group's rows in one autocommit statement (one round trip, one COMMIT).
 */
async function floorStore(pool, key, { compactReceiptJson, partitionOf }) {
  if (key === 'commit') {
    await pool.query('CREATE TABLE commits (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n integer NOT NULL)');
    return {
      async append(items) {
        await pool.query({ name: 'floor_commit', text: 'INSERT INTO commits (n) VALUES ($1)', values: [items.length] });
        return { accepted: items.length };
      },
      close: () => pool.end(),
    };
  }
  await pool.query(`
    CREATE TABLE receipts (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run text NOT NULL, event text NOT NULL,
      variant integer NOT NULL, body text NOT NULL, source text NOT NULL, received_at bigint NOT NULL, origin text NOT NULL,
      part integer NOT NULL${key ? ', UNIQUE (run, event, variant)' : ''});
    CREATE TABLE runs (run text PRIMARY KEY, part integer NOT NULL, first_at bigint NOT NULL, updated_at bigint NOT NULL);
    CREATE TABLE span_log (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, trace_id text NOT NULL, part integer NOT NULL,
      origin text NOT NULL, logged_at bigint NOT NULL, body text NOT NULL, forwarded boolean NOT NULL, life text NOT NULL)`);
  const text = `WITH r AS (
      INSERT INTO receipts (run, event, variant, body, source, received_at, origin, part)
      SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[])
    ), u AS (
      INSERT INTO runs (run, part, first_at, updated_at) SELECT * FROM unnest($9::text[], $10::int[], $11::bigint[], $12::bigint[])
    )
    INSERT INTO span_log (trace_id, part, origin, logged_at, body, forwarded, life)
    SELECT * FROM unnest($13::text[], $14::int[], $15::text[], $16::bigint[], $17::text[], $18::boolean[], $19::text[])`;
  return {
    async append(items, spanLog) {
      const runs = new Map();
      for (const { receipt, receivedAt } of items) {
        const r = runs.get(receipt.run);
        if (r) { r[0] = Math.min(r[0], receivedAt); r[1] = Math.max(r[1], receivedAt); } else runs.set(receipt.run, [receivedAt, receivedAt]);
      }
      const runIds = [...runs.keys()];
      await pool.query({
        name: 'floor_append',
        text,
        values: [
          items.map((i) => i.receipt.run), items.map((i) => i.receipt.event), items.map(() => 0), items.map((i) => compactReceiptJson(i.receipt)),
          items.map((i) => i.source), items.map((i) => i.receivedAt), items.map(() => 'bench'), items.map((i) => partitionOf(i.receipt.run, 64)),
          runIds, runIds.map((r) => partitionOf(r, 64)), runIds.map((r) => runs.get(r)[0]), runIds.map((r) => runs.get(r)[1]),
          spanLog.map((e) => e.traceId), spanLog.map((e) => partitionOf(e.traceId, 64)), spanLog.map(() => 'bench'), spanLog.map((e) => e.loggedAt),
          spanLog.map((e) => e.body), spanLog.map(() => false), spanLog.map(() => 'life'),
        ],
      });
      return { accepted: items.length };
    },
    close: () => pool.end(),
  };
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
if (FLOOR) {
  const pg = (await import(pathToFileURL(createRequire(join(ROOT, 'package.json')).resolve('pg')).href)).default;
  for (const [name, key] of [['floor-pk', false], ['floor-key', true], ['floor-commit', 'commit']]) {
    const pool = new pg.Pool({ connectionString: await db.database(`append_${name.replace('-', '_')}`), max: 1 });
    pool.on('error', () => {}); // an idle connection ended by the cluster's stop
    stores.push([name, await floorStore(pool, key, builds[0][1]), builds[0][1].encode]);
  }
}
const rows = [];
try {
  for (let round_ = 1; round_ <= ROUNDS; round_++) {
    const order = round_ % 2 ? stores : [...stores].reverse();
    const r = { round: round_ };
    for (const [name, store, encode] of order) {
      const groups = Array.from({ length: COMMITS }, (_, i) => group(name === 'floor-key' ? 'k' : name === 'floor-commit' ? 'c' : name.slice(0, 1), round_ * 100_000 + i, encode));
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
      r[name] = { pgMsPerCommit: round((pg * 1000) / COMMITS, 2), pgUsPerSpan: round((pg * 1e6) / COMMITS / SPANS_PER_COMMIT, 2), clientMsPerCommit: round((me.user + me.system) / 1000 / COMMITS, 2), commitsPerSec: round(COMMITS / wall, 1), spanLogBytesPerCommit: Math.round(spanLogBytes) };
    }
    r.pgThisVsBaseline = round(r.this.pgMsPerCommit / r.baseline.pgMsPerCommit, 3);
    r.clientThisVsBaseline = round(r.this.clientMsPerCommit / r.baseline.clientMsPerCommit, 3);
    if (FLOOR) {
      r.thisOverFloorPkUsPerSpan = round(r.this.pgUsPerSpan - r['floor-pk'].pgUsPerSpan, 2);
      r.thisOverFloorKeyUsPerSpan = round(r.this.pgUsPerSpan - r['floor-key'].pgUsPerSpan, 2);
    }
    rows.push(r);
    console.log(`round ${round_}: PostgreSQL ms per commit this ${r.this.pgMsPerCommit} / baseline ${r.baseline.pgMsPerCommit} (${r.pgThisVsBaseline}); client ms per commit ${r.this.clientMsPerCommit} / ${r.baseline.clientMsPerCommit} (${r.clientThisVsBaseline}); commits/s ${r.this.commitsPerSec} / ${r.baseline.commitsPerSec}; span log bytes per commit ${r.this.spanLogBytesPerCommit} / ${r.baseline.spanLogBytesPerCommit}`);
    if (FLOOR) console.log(`  PostgreSQL µs per span (commit / ${SPANS_PER_COMMIT}): this ${r.this.pgUsPerSpan}, baseline ${r.baseline.pgUsPerSpan}, floor-pk ${r['floor-pk'].pgUsPerSpan} (ms/commit ${r['floor-pk'].pgMsPerCommit}, commits/s ${r['floor-pk'].commitsPerSec}), floor-key ${r['floor-key'].pgUsPerSpan} (ms/commit ${r['floor-key'].pgMsPerCommit}, commits/s ${r['floor-key'].commitsPerSec}), floor-commit ${r['floor-commit'].pgUsPerSpan} (ms/commit ${r['floor-commit'].pgMsPerCommit}, commits/s ${r['floor-commit'].commitsPerSec})`);
  }
} finally {
  for (const [, s] of stores) await s.close();
  await db.stop();
}
const summary = { pgThisVsBaselineMedian: median(rows.map((r) => r.pgThisVsBaseline)), clientThisVsBaselineMedian: median(rows.map((r) => r.clientThisVsBaseline)) };
if (FLOOR) {
  for (const name of ['this', 'baseline', 'floor-pk', 'floor-key', 'floor-commit']) {
    summary[`pgUsPerSpanMedian_${name}`] = median(rows.map((r) => r[name].pgUsPerSpan));
    summary[`pgMsPerCommitMedian_${name}`] = median(rows.map((r) => r[name].pgMsPerCommit));
  }
  console.log(`median PostgreSQL µs per span (ms per commit): ${['this', 'baseline', 'floor-pk', 'floor-key', 'floor-commit'].map((n) => `${n} ${summary[`pgUsPerSpanMedian_${n}`]} (${summary[`pgMsPerCommitMedian_${n}`]})`).join(', ')}`);
}
console.log(`median over ${ROUNDS} rounds, this build / baseline: PostgreSQL CPU per commit ${summary.pgThisVsBaselineMedian}, client CPU per commit ${summary.clientThisVsBaselineMedian}; load ${round(os.loadavg()[0], 2)}`);
console.log(JSON.stringify({ bench: 'pg-append', commits: COMMITS, rounds: rows, ...summary, loadavg1m: round(os.loadavg()[0], 2) }));
