// Cluster-mode ingest benchmark (issue 18): one and two auditor instances on one PostgreSQL, beside the embedded
// SQLite store, in one run.
//
//   npm run build && node bench/cluster.mjs --seconds 15 --runs 2        (about 3 min)
//
// Starts one throwaway PostgreSQL cluster (test/helpers/pg-cluster.ts through bench/pg-cluster.mjs: initdb in a
// temp dir, loopback port, fsync on) and, per run, three phases, each on fresh servers and a fresh database:
//   S  one `topology-audit serve` on the embedded SQLite store (the default; WAL, synchronous=FULL)
//   A  one `serve --store postgres://.../r<run>_a --instance auditor-1 --partitions P --lease-ttl T`
//   B  two such instances on another fresh database (CREATE DATABASE), each receiving half the load: the clients
//      are split between them (client k sends to instance k mod 2), so each instance receives half the batches and
//      stores runs it does not own, which their owner folds from the shared store (the cluster's real path).
//   C  (with --phases S,A,B,C) three such instances, clients split k mod 3 (issue 32).
//   S2, S3 (with e.g. --phases S,S2,A,B) two or three independent servers, each on its own SQLite store, clients split
//      k mod n: no shared store and no cluster work at all, only more processes on the same cores. The bound for B and
//      C: what adding a server process costs per span on this machine by itself (issue 35, item 3).
// The load is bench/ingest.mjs's HTTP protobuf traffic: batches of 512 real SDK spans (2.3 MB; 90% content spans
// the auditor drops, 10% agent spans that become 51 receipts in about 3 runs), fresh trace, span and run ids in
// every batch, from --concurrency closed-loop clients in this process: --warmup-seconds, then --seconds measured.
// Run 2 takes the phases in the opposite order (B, A, S), so drift of the shared machine does not favour one.
//
// Checked per phase (a failure is printed and makes the exit code 1): the receipts the servers count as accepted
// (`topology_receipts_total`, summed over the instances) equal the receipts sent, none refused or duplicate; and
// the instances' `topology_live_runs` add up to every run sent (each run held by exactly one owner: the owners
// folded what the other instance stored), with the time that took after the load stopped.
//
// Before the load, each phase reads the CPU of the idle instances and postgres for --idle-seconds (timers: ticks,
// lease renewal, the tail of the shared store), so a fixed cost shows apart from the cost per span.
//
// Reported per phase: spans/s, receipts/s, ack p50/p99; per instance the CPU (user+system from /proc/<pid>/stat
// deltas, all threads) and its main thread's alone, share of the batches, group commits, commit busy (seconds of
// commits in flight per second), peak RSS (VmHWM); auditor CPU in total and spans per auditor CPU-second; the
// PostgreSQL cluster's CPU (postmaster, backends, background workers and reaped children) and spans per
// (auditor + postgres) CPU-second; the busiest PostgreSQL process; what the auditors' backends were doing
// (pg_stat_activity sampled every --sample-ms: on CPU, waiting on a lock, on I/O, idle in transaction, idle); the
// database's transactions per second (pg_stat_database.xact_commit: reads included) and the cluster's WAL syncs per
// second (pg_stat_wal.wal_sync: each an fsync) beside the group commits per second; the
// load generator's CPU and the whole machine's (/proc/stat), so other jobs' share shows. Then the ratios
// B / A and A / S, and the bottleneck as measured. A table, then one JSON line.
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import http from 'node:http';
import pg from 'pg';
import { buildTemplates, checkTemplates, patched } from './ingest.mjs';
import { CLK_TCK, cpuSecondsOf, getText, httpClient, mainThreadCpuSecondsOf, memoryOf, quantile, round, scrape, sleep, startServer } from './otlp-load.mjs';
import { clusterCpuSeconds, cpuByKind, loadPgCluster, postmasterPid } from './pg-cluster.mjs';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '20' },
    'warmup-seconds': { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '8' },
    runs: { type: 'string', default: '1' },
    partitions: { type: 'string', default: '64' },
    'lease-ttl': { type: 'string', default: '10s' },
    'sample-ms': { type: 'string', default: '100' },
    'idle-seconds': { type: 'string', default: '2' },
    phases: { type: 'string', default: 'S,A,B' },
    // Writes a V8 CPU profile of every server process (node --cpu-prof) into this directory, named by phase, and
    // beside each phase's profiles <label>.window.json: the measured interval on the profiles' clock, for
    // `node bench/profile-summary.mjs FILE --window <label>.window.json` (the measured load only, not start-up).
    'cpu-prof': { type: 'string' },
    // Another build (a checkout built in DIR, e.g. main's): every PostgreSQL phase is also run with DIR's server, right
    // after (run 2: right before) this build's, on its own fresh database; ratios of this build / the baseline per
    // phase. The SQLite phases run with this build only (both builds' ratios to SQLite use them).
    baseline: { type: 'string' },
    // After the load: N one-receipt runs posted (NDJSON, split over the instances), then `GET /api/v1/runs?limit=N`
    // timed at the last instance, best of --list-repeat (issue 32: the list of a cluster instance beside SQLite's), with the CPU
    // per list of that instance and PostgreSQL (their idle cost subtracted). 0: skipped.
    'list-runs': { type: 'string', default: '10000' },
    // PostgreSQL phases: the N statements of the phase's database that took the most execution time during the
    // measured interval (pg_stat_statements, loaded for this; timing adds a little to PostgreSQL's CPU), with calls,
    // ms, rows and µs per span. 0: not loaded.
    'pg-statements': { type: 'string', default: '0' },
    // How many timed lists (best, median and CPU per list over them).
    'list-repeat': { type: 'string', default: '5' },
  },
});
const SECONDS = Number(args.seconds);
const WARMUP_SECONDS = Number(args['warmup-seconds']);
const CONCURRENCY = Number(args.concurrency);
const RUNS = Number(args.runs);
const PARTITIONS = Number(args.partitions);
const SAMPLE_MS = Number(args['sample-ms']);
const IDLE_SECONDS = Number(args['idle-seconds']);
const PHASES = args.phases.split(',');
const LIST_RUNS = Number(args['list-runs']);
const PG_STATEMENTS = Number(args['pg-statements']);
const LIST_REPEAT = Math.max(1, Number(args['list-repeat']));
const BASELINE = args.baseline ? resolve(args.baseline) : null;
const INSTANCES = { S: 1, A: 1, B: 2, C: 3, S2: 2, S3: 3 };
/** The phases on SQLite: S, and S2 / S3 (independent servers, each its own SQLite store, sharing nothing). */
const sqlite = (kind) => kind.startsWith('S');
const failures = [];

// ---------------------------------------------------------------------------------------------------------
// Readings

/** Busy, steal and total CPU seconds of the whole machine (the first line of /proc/stat). */
function machineCpu() {
  const f = readFileSync('/proc/stat', 'latin1').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = f;
  return { busy: (user + nice + system + irq + softirq) / CLK_TCK, steal: steal / CLK_TCK, idle: (idle + iowait) / CLK_TCK };
}

/**
 * A process's read and write system calls (/proc/<pid>/io, all threads) and its main thread's context switches
 * (voluntary: it waited, e.g. for the event loop's next event; involuntary: preempted), for the system calls and
 * wake-ups per batch: what a less busy instance may pay more of per span.
 */
function syscallsOf(pid) {
  const io = readFileSync(`/proc/${pid}/io`, 'latin1');
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'latin1');
  const n = (text, name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { reads: n(io, 'syscr'), writes: n(io, 'syscw'), waits: n(status, 'voluntary_ctxt_switches'), preempted: n(status, 'nonvoluntary_ctxt_switches') };
}

/** Everything read at the start and at the end of a measured interval. */
async function reading(servers, postmaster) {
  const instances = await Promise.all(
    servers.map(async (s) => ({ cpu: cpuSecondsOf(s.pid), main: mainThreadCpuSecondsOf(s.pid), sys: syscallsOf(s.pid), metrics: await scrape(s.ports.api) })),
  );
  const self = process.cpuUsage();
  return {
    instances,
    postgres: postmaster ? clusterCpuSeconds(postmaster) : null,
    loadgen: (self.user + self.system) / 1e6,
    loadgenMain: mainThreadCpuSecondsOf(process.pid),
    machine: machineCpu(),
  };
}

/**
 * What the auditors' PostgreSQL backends are doing, sampled every SAMPLE_MS from pg_stat_activity (application
 * name `topology-audit/<instance>`): per state, the mean number of backends in it.
 */
function activitySampler(adminUrl, database) {
  const client = new pg.Client({ connectionString: adminUrl, application_name: 'bench-sampler' });
  client.on('error', () => {});
  const tally = new Map();
  let samples = 0;
  let timer = null;
  let busy = false;
  const classify = (r) => {
    if (r.state === 'idle') return 'idle';
    if (r.state === 'idle in transaction') return 'idleInTx';
    if (r.wait_event_type === null) return 'cpu';
    if (r.wait_event_type === 'Lock') return r.wait_event === 'advisory' ? 'advisoryLock' : 'lock';
    if (r.wait_event_type === 'IO') return `io:${r.wait_event}`;
    if (r.wait_event_type === 'LWLock') return `lwlock:${r.wait_event}`;
    return `${r.wait_event_type}:${r.wait_event}`;
  };
  const sample = async () => {
    if (busy) return;
    busy = true;
    try {
      const res = await client.query(`SELECT state, wait_event_type, wait_event FROM pg_stat_activity WHERE application_name LIKE 'topology-audit%'`);
      samples++;
      for (const r of res.rows) tally.set(classify(r), (tally.get(classify(r)) ?? 0) + 1);
    } catch {
      // a missed sample
    } finally {
      busy = false;
    }
  };
  // Transactions committed in the phase's database and WAL syncs (fsyncs) of the cluster: counters, read twice.
  const counters = async () => {
    const res = await client.query(
      'SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1) AS xacts, (SELECT wal_sync FROM pg_stat_wal) AS syncs',
      [database],
    );
    return { xacts: Number(res.rows[0].xacts), syncs: Number(res.rows[0].syncs) };
  };
  let first;
  let t0;
  return {
    start: async () => {
      await client.connect();
      first = await counters();
      t0 = performance.now();
      timer = setInterval(sample, SAMPLE_MS);
    },
    stop: async () => {
      clearInterval(timer);
      while (busy) await sleep(5);
      const last = await counters();
      const seconds = (performance.now() - t0) / 1000;
      await client.end().catch(() => {});
      const out = {};
      for (const [k, n] of [...tally].sort((a, b) => b[1] - a[1])) out[k] = round(n / Math.max(1, samples), 2);
      return { samples, meanBackends: out, transactionsPerSec: round((last.xacts - first.xacts) / seconds, 1), walSyncsPerSec: round((last.syncs - first.syncs) / seconds, 1) };
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Load

let seq = 1;

/**
 * Closed loop for `seconds`: CONCURRENCY clients, client k sending to target k mod targets.length, each batch a
 * template with send number `seq`'s fresh ids. Per target: batches, spans, receipts and runs sent.
 */
async function drive(targets, templates, seconds) {
  const sent = targets.map(() => ({ batches: 0, spans: 0, receipts: 0, runs: 0 }));
  const latencies = [];
  const deadline = performance.now() + seconds * 1000;
  const client = async (k) => {
    const i = k % targets.length;
    while (performance.now() < deadline) {
      const n = seq++;
      const t = templates[n % templates.length];
      const body = patched(t, n);
      const at = performance.now();
      await targets[i].client.send(body);
      latencies.push(performance.now() - at);
      sent[i].batches++;
      sent[i].spans += t.spans;
      sent[i].receipts += t.receipts;
      sent[i].runs += t.runs;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, k) => client(k)));
  return { sent, latencies, wall: (performance.now() - t0) / 1000 };
}

const total = (list, f) => list.reduce((a, x) => a + f(x), 0);

/** CPU per second of each instance and of postgres between two readings without load. */
function idleCores(a, b, seconds) {
  return {
    instances: a.instances.map((x, i) => round((b.instances[i].cpu.user + b.instances[i].cpu.system - x.cpu.user - x.cpu.system) / seconds, 3)),
    postgres: a.postgres ? round((b.postgres.seconds - a.postgres.seconds) / seconds, 3) : null,
  };
}

/** Accepted receipts (summed over the instances) against those sent; a mismatch is a failure of the phase. */
function checkReceipts(phase, what, before, after, sent) {
  const delta = (f) => total(after.instances, f) - total(before.instances, f);
  const accepted = delta((i) => i.metrics.accepted);
  const duplicates = delta((i) => i.metrics.duplicates);
  const notAccepted = delta((i) => i.metrics.notAccepted);
  const receipts = total(sent, (s) => s.receipts);
  const ok = accepted === receipts && duplicates === 0 && notAccepted === 0;
  if (!ok) failures.push(`${phase} ${what}: sent ${receipts} receipts, servers accepted ${accepted} (${duplicates} duplicates, ${notAccepted} refused)`);
  return { sent: receipts, accepted, ok };
}

// ---------------------------------------------------------------------------------------------------------
// Phases

async function startInstances(kind, storeUrl, label, root) {
  const n = INSTANCES[kind];
  const clusterArgs = (i) => ['--store', storeUrl, '--instance', `auditor-${i + 1}`, '--partitions', String(PARTITIONS), '--lease-ttl', args['lease-ttl']];
  const prof = (i) => (args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', args['cpu-prof'], '--cpu-prof-name', `${label}-${i + 1}.cpuprofile`] : []);
  const servers = await Promise.all(Array.from({ length: n }, (_, i) => startServer(storeUrl ? clusterArgs(i) : [], prof(i), root)));
  if (storeUrl) {
    // Load only once the instances hold a fair share each (partitions / instances).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const views = await Promise.all(servers.map(async (s) => JSON.parse(await getText(s.ports.api, '/api/v1/cluster'))));
      // Each at most ceil(partitions / n) (e.g. 22/22/20 of 64 for three), every partition held.
      if (views.every((v) => v.owned > 0 && v.owned <= Math.ceil(PARTITIONS / n) && v.liveInstances === n) && views.reduce((k, v) => k + v.owned, 0) === PARTITIONS) break;
      if (Date.now() > deadline) throw new Error(`${kind}: partitions not split evenly within 30 s: ${JSON.stringify(views.map((v) => v.owned))}`);
      await sleep(100);
    }
  }
  return servers;
}

/** Until the instances' live runs add up to `runs` (every run sent, held once by its owner): ms waited, or null. */
async function folded(servers, runs, timeoutMs) {
  const t0 = performance.now();
  for (;;) {
    const live = total(await Promise.all(servers.map((s) => scrape(s.ports.api))), (m) => m.liveRuns);
    if (live === runs) return { ms: Math.round(performance.now() - t0), live };
    if (performance.now() - t0 > timeoutMs) return { ms: null, live };
    await sleep(50);
  }
}

/** POST a body to a path of the API port; resolves with the status (the body is read and dropped). */
function post(port, path, body, contentType) {
  return new Promise((res, rej) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': contentType } }, (r) => {
      r.resume();
      r.on('end', () => res(r.statusCode));
    });
    req.on('error', rej);
    req.end(body);
  });
}

/**
 * The list of LIST_RUNS runs: that many one-receipt runs posted (2,000 per request, request k to instance k mod n),
 * then `GET /api/v1/runs?limit=LIST_RUNS` at the last instance (on a cluster, one that holds only its share) until
 * every run is listed, then timed --list-repeat times: the best and the median, and the bytes.
 */
async function listRuns(servers, label, idle, postmaster) {
  const at = new Date(Date.now() - 1000).toISOString();
  for (let i = 0, k = 0; i < LIST_RUNS; i += 2000, k++) {
    const lines = [];
    for (let j = i; j < Math.min(LIST_RUNS, i + 2000); j++) lines.push(JSON.stringify({ run: `${label}-list-${j}`, event: 'e1', type: 'edge', at, from: 'orchestrator', to: 'researcher', kind: 'delegate' }));
    const status = await post(servers[k % servers.length].ports.api, '/v1/receipts', lines.join('\n') + '\n', 'application/x-ndjson');
    if (status !== 200) failures.push(`${label}: list set-up post answered ${status}`);
  }
  const port = servers[servers.length - 1].ports.api;
  const path = `/api/v1/runs?limit=${LIST_RUNS}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const listed = JSON.parse(await getText(port, path)).runs.length;
    if (listed >= LIST_RUNS) break;
    if (Date.now() > deadline) {
      failures.push(`${label}: ${listed} runs listed of ${LIST_RUNS}`);
      return null;
    }
    await sleep(200);
  }
  const times = [];
  let bytes = 0;
  // CPU per list, less load-dependent than the time on a shared machine: the listing instance's (and PostgreSQL's)
  // CPU over the timed lists, less their idle cost over that wall time (timers), per list.
  const lister = servers[servers.length - 1];
  const cpuOf = () => ({ auditor: ((c) => c.user + c.system)(cpuSecondsOf(lister.pid)), postgres: postmaster ? clusterCpuSeconds(postmaster).seconds : 0, at: performance.now() });
  const c0 = cpuOf();
  for (let i = 0; i < LIST_REPEAT; i++) {
    const t0 = performance.now();
    bytes = (await getText(port, path)).length;
    times.push(performance.now() - t0);
  }
  const c1 = cpuOf();
  const wall = (c1.at - c0.at) / 1000;
  const perList = (used, idleCores) => Math.max(0, Math.round(((used - (idleCores ?? 0) * wall) * 1000) / LIST_REPEAT));
  times.sort((a, b) => a - b);
  return {
    runs: LIST_RUNS,
    bestMs: Math.round(times[0]),
    medianMs: Math.round(times[Math.floor(times.length / 2)]),
    bytes,
    auditorCpuMs: perList(c1.auditor - c0.auditor, idle.instances[servers.length - 1]),
    postgresCpuMs: postmaster ? perList(c1.postgres - c0.postgres, idle.postgres) : 0,
  };
}

/**
 * pg_stat_statements of one database over an interval: created in the cluster (postgres database) and reset now;
 * `top(n)`: the n statements of `database` with the most execution time since, one line of text each.
 */
async function statementStats(adminUrl, database) {
  const client = new pg.Client({ connectionString: adminUrl, application_name: 'bench-statements' });
  await client.connect();
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await client.query('SELECT pg_stat_statements_reset()');
  return {
    async top(n) {
      try {
        const res = await client.query(
          `SELECT s.calls, s.total_exec_time AS ms, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) AS query
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT $2`,
          [database, n],
        );
        return res.rows.map((r) => ({ calls: Number(r.calls), ms: round(Number(r.ms), 1), rows: Number(r.rows), query: r.query }));
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

async function runPhase(kind, label, templates, db, root) {
  const storeUrl = sqlite(kind) ? null : await db.database(label);
  const postmaster = sqlite(kind) ? null : postmasterPid(join(db.dir, 'data'));
  const servers = await startInstances(kind, storeUrl, label, root);
  process.stderr.write(`${label}: ${servers.length} instance(s), pids ${servers.map((s) => s.pid).join(' ')}${postmaster ? `, postmaster ${postmaster}` : ''}\n`);
  const targets = servers.map((s) => ({ client: httpClient(s.ports.otlpHttp, 'application/x-protobuf', Math.ceil(CONCURRENCY / servers.length)) }));
  let result;
  try {
    // Idle cost first (timers: ticks, lease renewal, the tail of the shared store), to tell it from the cost per span.
    const i0 = await reading(servers, postmaster);
    await sleep(IDLE_SECONDS * 1000);
    const idle = idleCores(i0, await reading(servers, postmaster), IDLE_SECONDS);
    const w0 = await reading(servers, postmaster);
    const warm = await drive(targets, templates, WARMUP_SECONDS);
    const before = await reading(servers, postmaster);
    const warmCheck = checkReceipts(label, 'warm-up', w0, before, warm.sent);
    const sampler = storeUrl ? activitySampler(await db.database('postgres'), label) : null;
    if (sampler) await sampler.start();
    const statements = storeUrl && PG_STATEMENTS > 0 ? await statementStats(await db.database('postgres'), label) : null;
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    const load = await drive(targets, templates, SECONDS);
    const after = await reading(servers, postmaster);
    const topStatements = statements ? await statements.top(PG_STATEMENTS) : null;
    if (args['cpu-prof']) writeFileSync(join(args['cpu-prof'], `${label}.window.json`), JSON.stringify({ fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }));
    const activity = sampler ? await sampler.stop() : null;
    const check = checkReceipts(label, 'measured', before, after, load.sent);
    const runsSent = total([...warm.sent, ...load.sent], (s) => s.runs);
    const fold = await folded(servers, runsSent, 30_000);
    if (fold.ms === null) failures.push(`${label}: the instances hold ${fold.live} live runs, ${runsSent} were sent`);
    result = summarise(kind, label, servers, load, before, after, activity, idle, { warmUp: warmCheck, measured: check, runsSent, foldMs: fold.ms, liveRuns: fold.live });
    if (topStatements && result.postgres) {
      const spans = result.spans;
      result.postgres.statements = topStatements.map((t) => ({ ...t, usPerSpan: round((t.ms * 1000) / spans, 3) }));
      for (const t of result.postgres.statements) process.stderr.write(`${label}: pg ${String(t.ms).padStart(8)} ms ${String(t.usPerSpan).padStart(6)} µs/span ${String(t.calls).padStart(6)} calls ${String(t.rows).padStart(7)} rows  ${t.query}\n`);
    }
    if (LIST_RUNS > 0) result.list = await listRuns(servers, label, idle, postmaster);
  } finally {
    for (const t of targets) t.client.close();
    const peaks = servers.map((s) => memoryOf(s.pid).hwmMiB);
    const codes = await Promise.all(servers.map((s) => s.stop()));
    codes.forEach((code, i) => {
      if (code !== 0) failures.push(`${label}: instance ${i + 1} exited with ${code}: ${servers[i].stderr().slice(-1000)}`);
    });
    if (result) result.instances.forEach((inst, i) => (inst.peakRssMiB = round(peaks[i], 1)));
  }
  process.stderr.write(`${label}: ${JSON.stringify(result)}\n`);
  return result;
}

function summarise(kind, label, servers, load, before, after, activity, idle, checks) {
  const wall = load.wall;
  const spans = total(load.sent, (s) => s.spans);
  const batches = total(load.sent, (s) => s.batches);
  const instances = servers.map((s, i) => {
    const b = before.instances[i];
    const a = after.instances[i];
    const cpu = a.cpu.user + a.cpu.system - b.cpu.user - b.cpu.system;
    const commits = a.metrics.commits - b.metrics.commits;
    return {
      name: sqlite(kind) ? (kind === 'S' ? 'sqlite' : `sqlite-${i + 1}`) : `auditor-${i + 1}`,
      batchShare: round(load.sent[i].batches / batches, 3),
      cpuSeconds: round(cpu, 2),
      cores: round(cpu / wall, 2),
      idleCores: idle.instances[i],
      mainThreadCores: round((a.main - b.main) / wall, 2),
      // Per batch this instance received: read and write system calls, main-thread waits (wake-ups) and preemptions.
      perBatch: Object.fromEntries(['reads', 'writes', 'waits', 'preempted'].map((k) => [k, round((a.sys[k] - b.sys[k]) / Math.max(1, load.sent[i].batches), 1)])),
      commits,
      receiptsPerCommit: commits ? round((a.metrics.committedReceipts - b.metrics.committedReceipts) / commits, 1) : 0,
      commitMeanMs: commits ? round(((a.metrics.commitSeconds - b.metrics.commitSeconds) / commits) * 1000, 1) : 0,
      commitBusy: round((a.metrics.commitSeconds - b.metrics.commitSeconds) / wall, 2),
    };
  });
  const auditorCpu = total(instances, (i) => i.cpuSeconds);
  let postgres = null;
  if (before.postgres) {
    const cpu = after.postgres.seconds - before.postgres.seconds;
    let busiest = { pid: 0, cores: 0 };
    for (const [pid, s] of after.postgres.byPid) {
      const cores = (s - (before.postgres.byPid.get(pid) ?? 0)) / wall;
      if (cores > busiest.cores) busiest = { pid, cores: round(cores, 2) };
    }
    postgres = { cpuSeconds: round(cpu, 2), cores: round(cpu / wall, 2), idleCores: idle.postgres, busiestProcessCores: busiest.cores, cpuSecondsByKind: cpuByKind(before.postgres, after.postgres), activity };
  }
  const pgCpu = postgres?.cpuSeconds ?? 0;
  const loadgen = after.loadgen - before.loadgen;
  const machineBusy = after.machine.busy - before.machine.busy;
  return {
    phase: kind,
    database: sqlite(kind) ? null : label,
    instances,
    batches,
    spans,
    receipts: checks.measured.accepted,
    wallSeconds: round(wall, 2),
    spansPerSec: Math.round(spans / wall),
    receiptsPerSec: Math.round(checks.measured.accepted / wall),
    ackP50Ms: round(quantile(load.latencies, 0.5), 1),
    ackP99Ms: round(quantile(load.latencies, 0.99), 1),
    auditorCpuSeconds: round(auditorCpu, 2),
    auditorCores: round(auditorCpu / wall, 2),
    spansPerAuditorCpuSec: Math.round(spans / auditorCpu),
    postgres,
    spansPerAuditorPlusPostgresCpuSec: Math.round(spans / (auditorCpu + pgCpu)),
    loadgenCores: round(loadgen / wall, 2),
    loadgenMainThreadCores: round((after.loadgenMain - before.loadgenMain) / wall, 2),
    machineBusyCores: round(machineBusy / wall, 2),
    otherJobsCores: round((machineBusy - auditorCpu - pgCpu - loadgen) / wall, 2),
    stealCores: round((after.machine.steal - before.machine.steal) / wall, 2),
    checks,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Bottleneck

const SATURATED = 0.85;

/**
 * The limit of a phase as measured: a thread at a core; the group commit always in flight (acknowledgements wait on
 * its round trips, and with two instances on the ordering lock as well); the machine's cores all busy, and whose.
 */
function bottleneck(r, nproc) {
  const threads = [
    ...r.instances.map((i) => [`${i.name} main thread`, i.mainThreadCores]),
    ['load generator main thread', r.loadgenMainThreadCores],
    ...(r.postgres ? [['busiest postgres process', r.postgres.busiestProcessCores]] : []),
  ].sort((a, b) => b[1] - a[1]);
  const parts = [];
  const saturatedThreads = threads.filter(([, c]) => c >= SATURATED);
  if (saturatedThreads.length) parts.push(`saturated thread: ${saturatedThreads.map(([n, c]) => `${n} ${c} cores`).join(', ')}`);
  const activity = r.postgres?.activity?.meanBackends ?? {};
  const wal = round(Object.entries(activity).filter(([k]) => /WAL/.test(k)).reduce((a, [, v]) => a + v, 0), 2);
  const backends = r.postgres
    ? `; postgres backends on average: ${activity.idleInTx ?? 0} idle in transaction (waiting for the auditor), ${activity.advisoryLock ?? 0} waiting on the ordering lock, ${wal} on WAL write/sync, ${activity.cpu ?? 0} on CPU`
    : '';
  const each = (f) => r.instances.map(f).join('/');
  const limit = r.instances.some((i) => i.commitBusy >= SATURATED) ? ' (the limit: acknowledgements wait on it)' : '';
  parts.push(`group commit in flight ${each((i) => i.commitBusy)} of the time (mean ${each((i) => i.commitMeanMs)} ms for ${each((i) => i.receiptsPerCommit)} receipts)${limit}${backends}`);
  const shares = [['auditors', r.auditorCores], ['postgres', r.postgres?.cores ?? 0], ['load generator', r.loadgenCores], ['other jobs', r.otherJobsCores]];
  const where = `${r.machineBusyCores} of ${nproc} cores busy: ${shares.map(([n, c]) => `${n} ${c}`).join(', ')}`;
  parts.push(r.machineBusyCores >= SATURATED * nproc ? `machine CPU-bound (${where})` : `busiest thread ${threads[0][0]} ${threads[0][1]} cores; ${where}`);
  return parts.join('; ');
}

const span = (xs) => {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo === hi ? `${lo}` : `${lo}-${hi}`;
};

/** One line over every phase and run: which process (if any) saturates a core, the machine, and the commit path. */
function overall(results, nproc) {
  const most = (xs) => (xs.length ? Math.max(...xs) : 0);
  const threads = [
    ['an auditor main thread', most(results.flatMap((r) => r.instances.map((i) => i.mainThreadCores)))],
    ['the load generator main thread', most(results.map((r) => r.loadgenMainThreadCores))],
    ['a postgres process', most(results.filter((r) => r.postgres).map((r) => r.postgres.busiestProcessCores))],
  ].sort((a, b) => b[1] - a[1]);
  const saturated = threads.filter(([, c]) => c >= SATURATED);
  const parts = [
    saturated.length
      ? `${saturated.map(([n, c]) => `${n} (${c} cores)`).join(' and ')} saturates a core`
      : `no process saturates a core (at most: ${threads.map(([n, c]) => `${n} ${c}`).join(', ')} cores)`,
    `the machine's ${nproc} cores were ${span(results.map((r) => r.machineBusyCores))} busy, other jobs ${span(results.map((r) => r.otherJobsCores))} of them, so every round trip waits for a core`,
  ];
  const one = results.filter((r) => r.phase === 'A');
  const two = results.filter((r) => r.phase === 'B');
  if (one.length && two.length) {
    const mean = (r, k) => r.postgres.activity.meanBackends[k] ?? 0;
    parts.push(
      `on postgres the acknowledgements wait on the group commit (in flight ${span([...one, ...two].flatMap((r) => r.instances.map((i) => i.commitBusy)))} of the time; ` +
        `${span(one.map((r) => mean(r, 'idleInTx')))} backends idle in transaction waiting for the auditor with 1 instance); ` +
        `with 2 instances ${span(two.map((r) => mean(r, 'advisoryLock')))} backends wait on the ordering lock and ${span(two.map((r) => mean(r, 'idleInTx')))} hold it idle in transaction: ` +
        `the instances commit one at a time, ${span(two.flatMap((r) => r.instances.map((i) => i.receiptsPerCommit)))} receipts per commit against ${span(one.map((r) => r.instances[0].receiptsPerCommit))} for 1 instance`,
    );
  }
  return parts.join('; ');
}

// ---------------------------------------------------------------------------------------------------------

function table(results) {
  const cols = [
    ['run/phase', 11, (r) => `${r.run}/${r.phase}${r.build === 'baseline' ? ' base' : ''}`],
    ['inst', 5, (r) => r.instances.length],
    ['spans/s', 9, (r) => r.spansPerSec],
    ['receipts/s', 11, (r) => r.receiptsPerSec],
    ['ack p50/p99', 16, (r) => `${r.ackP50Ms}/${r.ackP99Ms}ms`],
    ['auditor cores', 20, (r) => `${r.auditorCores}${r.instances.length > 1 ? ` (${r.instances.map((i) => i.cores).join('+')})` : ''}`],
    ['main thr', 15, (r) => r.instances.map((i) => i.mainThreadCores).join('/')],
    ['other thr', 10, (r) => round(r.auditorCores - total(r.instances, (i) => i.mainThreadCores), 2)],
    ['spans/aud-CPU-s', 16, (r) => r.spansPerAuditorCpuSec],
    ['pg cores', 9, (r) => r.postgres?.cores ?? '-'],
    ['spans/(aud+pg)-CPU-s', 21, (r) => r.spansPerAuditorPlusPostgresCpuSec],
    ['loadgen', 8, (r) => r.loadgenCores],
    ['machine', 8, (r) => r.machineBusyCores],
    ['others', 7, (r) => r.otherJobsCores],
    ['commit busy', 12, (r) => r.instances.map((i) => i.commitBusy).join('/')],
    ['commits/s', 10, (r) => round(total(r.instances, (i) => i.commits) / r.wallSeconds, 1)],
    ['pg xact/s', 10, (r) => r.postgres?.activity?.transactionsPerSec ?? '-'],
    ['fsync/s', 8, (r) => r.postgres?.activity?.walSyncsPerSec ?? '-'],
    ['commit ms', 12, (r) => r.instances.map((i) => i.commitMeanMs).join('/')],
    ['rcpt/commit', 13, (r) => r.instances.map((i) => i.receiptsPerCommit).join('/')],
    ['reads/wr/waits per batch', 26, (r) => r.instances.map((i) => `${Math.round(i.perBatch.reads)},${Math.round(i.perBatch.writes)},${Math.round(i.perBatch.waits)}`).join(' ')],
    ['idle cores', 19, (r) => r.instances.map((i) => i.idleCores).join('/') + (r.postgres ? `+${r.postgres.idleCores}` : '')],
    ['peak RSS', 12, (r) => r.instances.map((i) => Math.round(i.peakRssMiB)).join('/') + 'MiB'],
    ['received', 10, (r) => `${r.checks.measured.accepted === r.checks.measured.sent && r.checks.warmUp.ok ? 'all' : 'LOST'}`],
    ['fold', 8, (r) => (r.checks.foldMs === null ? 'NO' : `${r.checks.foldMs}ms`)],
    ['list best/med', 15, (r) => (r.list ? `${r.list.bestMs}/${r.list.medianMs}ms` : '-')],
    ['list CPU aud+pg', 16, (r) => (r.list ? `${r.list.auditorCpuMs}+${r.list.postgresCpuMs}ms` : '-')],
  ];
  console.log(cols.map(([h, w], i) => (i === 0 ? h.padEnd(w) : h.padStart(w))).join(''));
  for (const r of results) console.log(cols.map(([, w, f], i) => (i === 0 ? String(f(r)).padEnd(w) : String(f(r)).padStart(w))).join(''));
}

async function main() {
  const started = performance.now();
  const templates = buildTemplates();
  checkTemplates(templates);
  const pb = templates.protobuf;
  const { startPgCluster } = await loadPgCluster();
  const db = await startPgCluster(PG_STATEMENTS > 0 ? { settings: ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] } : {});
  const nproc = os.availableParallelism();
  const results = [];
  const ratios = [];
  try {
    for (let run = 1; run <= RUNS; run++) {
      const order = run % 2 === 1 ? PHASES : [...PHASES].reverse();
      const byPhase = {};
      const byBase = {};
      for (const kind of order) {
        // With --baseline: this build then the baseline's (run 2: the baseline first), phase by phase.
        // The SQLite phases run once (this build's): the baseline's ratios use them too.
        const builds = BASELINE && !sqlite(kind) ? (run % 2 === 1 ? ['this', 'baseline'] : ['baseline', 'this']) : ['this'];
        for (const build of builds) {
          const base = build === 'baseline';
          const r = await runPhase(kind, `r${run}_${kind.toLowerCase()}${base ? '_base' : ''}`, pb, db, base ? BASELINE : undefined);
          r.run = run;
          r.build = build;
          r.bottleneck = bottleneck(r, nproc);
          (base ? byBase : byPhase)[kind] = r;
          results.push(r);
        }
      }
      const ratio = (x, y, f) => (x && y ? round(f(x) / f(y), 3) : null);
      const { S, A, B, C } = byPhase;
      const perBuild = (p) => ({
        threeVsOne: ratio(p.C, p.A, (r) => r.spansPerAuditorCpuSec),
        twoVsOne: ratio(p.B, p.A, (r) => r.spansPerAuditorCpuSec),
        postgresVsSqlite: ratio(p.A, p.S, (r) => r.spansPerAuditorCpuSec),
        threeVsOnePlusPostgres: ratio(p.C, p.A, (r) => r.spansPerAuditorPlusPostgresCpuSec),
        twoVsOnePlusPostgres: ratio(p.B, p.A, (r) => r.spansPerAuditorPlusPostgresCpuSec),
        postgresVsSqlitePlusPostgres: ratio(p.A, p.S, (r) => r.spansPerAuditorPlusPostgresCpuSec),
      });
      ratios.push({
        run,
        order: order.join(','),
        ...(BASELINE
          ? {
              // Spans per auditor CPU-second (and per auditor + PostgreSQL CPU-second) of this build / the baseline's, by phase.
              vsBaseline: Object.fromEntries(
                order.filter((k) => byPhase[k] && byBase[k]).map((k) => [k, { auditor: ratio(byPhase[k], byBase[k], (r) => r.spansPerAuditorCpuSec), auditorPlusPostgres: ratio(byPhase[k], byBase[k], (r) => r.spansPerAuditorPlusPostgresCpuSec) }]),
              ),
              // The scaling ratios (spans per auditor CPU-second, and per auditor + PostgreSQL CPU-second) of each build;
              // against this build's SQLite phase.
              thisBuild: perBuild(byPhase),
              baselineBuild: perBuild({ ...byBase, S: byBase.S ?? S }),
            }
          : {}),
        threeVsOne: {
          spansPerSec: ratio(C, A, (r) => r.spansPerSec),
          spansPerAuditorCpuSec: ratio(C, A, (r) => r.spansPerAuditorCpuSec),
          spansPerAuditorPlusPostgresCpuSec: ratio(C, A, (r) => r.spansPerAuditorPlusPostgresCpuSec),
        },
        twoVsOne: {
          spansPerSec: ratio(B, A, (r) => r.spansPerSec),
          spansPerAuditorCpuSec: ratio(B, A, (r) => r.spansPerAuditorCpuSec),
          spansPerAuditorPlusPostgresCpuSec: ratio(B, A, (r) => r.spansPerAuditorPlusPostgresCpuSec),
        },
        listVsSqlite: Object.fromEntries(['A', 'B', 'C'].filter((k) => byPhase[k]?.list && S?.list).map((k) => [k, round(byPhase[k].list.bestMs / S.list.bestMs, 2)])),
        listCpuVsSqlite: Object.fromEntries(
          ['A', 'B', 'C'].filter((k) => byPhase[k]?.list && S?.list?.auditorCpuMs).map((k) => [k, round((byPhase[k].list.auditorCpuMs + byPhase[k].list.postgresCpuMs) / S.list.auditorCpuMs, 2)]),
        ),
        // Independent SQLite servers (no shared work) against one: the cost of more processes on the same cores alone.
        independent: { twoVsOne: ratio(byPhase.S2, S, (r) => r.spansPerAuditorCpuSec), threeVsOne: ratio(byPhase.S3, S, (r) => r.spansPerAuditorCpuSec) },
        postgresVsSqlite: {
          spansPerSec: ratio(A, S, (r) => r.spansPerSec),
          spansPerAuditorCpuSec: ratio(A, S, (r) => r.spansPerAuditorCpuSec),
          spansPerAuditorPlusPostgresCpuSec: ratio(A, S, (r) => r.spansPerAuditorPlusPostgresCpuSec),
        },
      });
    }
  } finally {
    await db.stop();
  }

  const machine = { nproc, cpu: os.cpus()[0]?.model, node: process.version, loadavg1m: round(os.loadavg()[0], 2) };
  const t = pb[0];
  console.log(`machine: ${machine.nproc} cores, ${machine.cpu}, node ${machine.node}, load ${machine.loadavg1m} (shared with other jobs: see "others")`);
  console.log(`payload: HTTP protobuf, ${t.spans} spans/batch, ~${round(total(pb, (x) => x.receipts) / pb.length, 1)} receipts in ~${round(total(pb, (x) => x.runs) / pb.length, 1)} runs, ${(t.body.length / 1e6).toFixed(2)} MB; ${CONCURRENCY} closed-loop clients (split between the instances), ${WARMUP_SECONDS} s warm-up + ${SECONDS} s per phase`);
  console.log('S: embedded SQLite; A: 1 instance on PostgreSQL; B: 2 instances on one PostgreSQL; C: 3 instances. cores = CPU-seconds per second (user+system); "others" = machine busy minus auditors, postgres and load generator');
  table(results);
  for (const r of results) {
    console.log(`run ${r.run} ${r.phase}: ${r.bottleneck}`);
  }
  for (const q of ratios) {
    if (q.vsBaseline) {
      console.log(`run ${q.run}: this build / baseline, spans per auditor CPU-s (per auditor+postgres CPU-s): ${Object.entries(q.vsBaseline).map(([k, v]) => `${k} ${v.auditor} (${v.auditorPlusPostgres})`).join(', ')}`);
      for (const [name, b] of [['this build', q.thisBuild], ['baseline', q.baselineBuild]]) {
        console.log(`run ${q.run} ${name}: spans per auditor CPU-s (per auditor+postgres CPU-s): 1 on postgres / sqlite ${b.postgresVsSqlite} (${b.postgresVsSqlitePlusPostgres}), 2 / 1 instance ${b.twoVsOne} (${b.twoVsOnePlusPostgres}), 3 / 1 instance ${b.threeVsOne} (${b.threeVsOnePlusPostgres})`);
      }
    }
    const a = q.twoVsOne;
    const b = q.postgresVsSqlite;
    if (q.threeVsOne.spansPerSec !== null) console.log(`run ${q.run}: 3 instances / 1 instance: spans/s ${q.threeVsOne.spansPerSec}, spans per auditor CPU-s ${q.threeVsOne.spansPerAuditorCpuSec}, spans per (auditor+postgres) CPU-s ${q.threeVsOne.spansPerAuditorPlusPostgresCpuSec}`);
    if (q.independent.twoVsOne !== null || q.independent.threeVsOne !== null) console.log(`run ${q.run}: independent SQLite servers (nothing shared) / 1, spans per auditor CPU-s: 2 servers ${q.independent.twoVsOne}, 3 servers ${q.independent.threeVsOne}`);
    if (Object.keys(q.listVsSqlite).length) console.log(`run ${q.run}: list of ${LIST_RUNS} runs, best time / SQLite's: ${Object.entries(q.listVsSqlite).map(([k, v]) => `${k} ${v}x`).join(', ')}`);
    if (Object.keys(q.listCpuVsSqlite).length) console.log(`run ${q.run}: list of ${LIST_RUNS} runs, CPU per list (listing instance + PostgreSQL) / SQLite's: ${Object.entries(q.listCpuVsSqlite).map(([k, v]) => `${k} ${v}x`).join(', ')}`);
    console.log(`run ${q.run} (order ${q.order}): 2 instances / 1 instance: spans/s ${a.spansPerSec}, spans per auditor CPU-s ${a.spansPerAuditorCpuSec}, spans per (auditor+postgres) CPU-s ${a.spansPerAuditorPlusPostgresCpuSec}; 1 on postgres / sqlite: spans/s ${b.spansPerSec}, spans per auditor CPU-s ${b.spansPerAuditorCpuSec}, per (auditor+postgres) CPU-s ${b.spansPerAuditorPlusPostgresCpuSec}`);
  }
  console.log(`bottleneck: ${overall(results, nproc)}`);
  console.log(`note: ${nproc} cores are shared by the load generator, every auditor instance, postgres and other jobs, so the 2-instance figure cannot show scale-out of throughput, only the cost per span`);
  for (const f of failures) console.log(`FAILED: ${f}`);
  console.log(`bench took ${round((performance.now() - started) / 1000, 1)} s`);
  console.log(JSON.stringify({ bench: 'cluster', machine, ...(BASELINE ? { baseline: BASELINE } : {}), concurrency: CONCURRENCY, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, partitions: PARTITIONS, results, ratios, bottleneck: overall(results, nproc), failures }));
  if (failures.length) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
