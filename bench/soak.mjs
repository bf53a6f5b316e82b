#!/usr/bin/env node
// Soak benchmark (issue 44): does the auditor run for weeks under real traffic? It measures the capacity first (a
// throwaway server at full speed for --capacity-seconds), then sends a fraction of it (--fraction, default 0.5; or
// --rate-traces N traces/s) to a fresh server for --minutes, and prints one line per minute:
//
//   min  healthz_max_ms  healthz_failed  loop_p99_ms  loop_max_ms  gc_over_100ms  rss_mib  heap_mib  heap_total_mib  external_mib  db_mib  span_log_rows  skeleton_spans  live_runs
//        ack_p99_ms  errors  traces
//
// healthz_max_ms: the slowest of one GET /healthz per second per server; healthz_failed: those not answered 200
// within 5 s (a killed server's, with --kill-at); loop_p99/max: the server's
// nodejs_eventloop_lag_p99/max_seconds over that minute (the histogram is reset at each scrape, one per minute);
// gc_over_100ms: garbage-collection pauses over 100 ms that minute (nodejs_gc_duration_seconds); rss:
// process_resident_memory_bytes; heap, heap_total, external: nodejs_heap_size_used_bytes, nodejs_heap_size_total_bytes,
// nodejs_external_memory_bytes; db: the SQLite files (receipts.db + -wal) or pg_database_size; span_log_rows:
// rows of span_log; skeleton_spans: topology_span_skeleton_spans; live_runs: topology_live_runs (the runs held in
// memory); ack_p99: client-side latency of the exports
// acknowledged that minute; errors: exports not acknowledged (non-200 or failed requests). In --cluster mode
// (two instances on a throwaway PostgreSQL, clients split between them) the server columns are the worse (max) or
// the sum (rss, skeleton, live runs) of the two.
//
// Traffic: realistic multi-agent traces of 5-40 spans (--trace-spans MIN-MAX): an `invoke_agent` supervisor (the run's root, with
// topology.run.id and a pinned contract), `invoke_agent` sub-agents under it, chat spans with 1-4 KB of content and
// tool spans under each agent. About one trace in five is split over two or three requests, and in some of those the
// children are sent before their parents. Each request carries whole traces or parts until about --spans-per-request
// spans. Sent as OTLP/HTTP protobuf (--encoding proto, the default: what the OpenTelemetry Collector's otlphttp
// exporter and the SDKs' -proto exporters send) or OTLP/HTTP JSON (--encoding json).
//
// Every run whose every export was acknowledged must be listed with a verdict: found each minute by paging the run list
// (list_missing: those not found), single instance and cluster alike (a cluster's checks alternate between its two
// instances: each lists every run), so that each is checked before --retention prunes it; with --no-list-check, looked
// up one by one at the end (GET /api/v1/runs/{run}). The count missing is printed and the exit code is 1 when any
// is. Also the pass/fail of the bounds over minutes 10..end: healthz < 1 s, event-loop max < 250 ms, RSS and
// database size within 10% between minute 10 and the last.
//
// --retention DUR, --alert-window DUR (both 5m here; the server's defaults are 24h-class and 1h), --progress-within DUR
// (3m here; the shipped supervisor-workers contract says 15m): shortened so that a 30-minute soak reaches the steady
// state that the defaults reach later. One run in 100 never finishes and turns incomplete at its contract's
// progress_within, then stays in memory (alerting) for the alert window; so the live runs level off from about minute
// 8 (with 15m and 5m, from minute 20, and the minutes 10..30 that the bounds compare were still filling memory; with
// the server's 1h alert window, from minute 75). The servers read a copy of contracts/ with that one value changed.
// --server-cpus LIST: the servers (and the cluster's PostgreSQL) on those cores (taskset), this generator on the rest.
// --node-args '...': node flags for the servers (e.g. --trace-gc with SOAK_SERVER_LOG=FILE, which gets their output).
//
// SOAK_KEEP_DATA=1: the data directory is kept at the end, and its path printed.
//
// --kill-at MIN: at minute MIN the (first) server is killed with SIGKILL and started again on the same data (or
// store); the time until /healthz answers is printed. Exports in flight then fail (not acknowledged, not checked).
//
// Usage (under the bench lock; the lead runs the 30-minute soaks):
//   flock /work/wt/bench.lock node bench/soak.mjs --minutes 30
//   flock /work/wt/bench.lock node bench/soak.mjs --minutes 30 --cluster
//   node bench/soak.mjs --minutes 3 --rate-traces 100 --kill-at 2
import { randomBytes } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, createWriteStream, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { ROOT, quantile, round, sleep } from './otlp-load.mjs';
import { encodeTraceRequest } from './otlp-proto.mjs';

/** The servers' temporary log files (removed at exit). */
const tempLogs = new Set();
process.on('exit', () => {
  for (const f of tempLogs) rmSync(f, { force: true });
});

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    fraction: { type: 'string', default: '0.5' },
    'rate-traces': { type: 'string' },
    'capacity-seconds': { type: 'string', default: '20' },
    clients: { type: 'string', default: '4' },
    'spans-per-request': { type: 'string', default: '400' },
    'trace-spans': { type: 'string', default: '5-40' },
    cluster: { type: 'boolean', default: false },
    'kill-at': { type: 'string' },
    'server-args': { type: 'string', default: '' },
    retention: { type: 'string', default: '5m' },
    'alert-window': { type: 'string', default: '5m' },
    'progress-within': { type: 'string', default: '3m' },
    'no-list-check': { type: 'boolean', default: false },
    'node-args': { type: 'string', default: '' },
    'server-cpus': { type: 'string' },
    encoding: { type: 'string', default: 'proto' },
  },
});
const MINUTES = Number(args.minutes);
const CLIENTS = Number(args.clients);
const SPANS_PER_REQUEST = Number(args['spans-per-request']);
/** Spans per trace, drawn uniformly from --trace-spans MIN-MAX (5 at least: a supervisor, two agents and their returns). */
const [TRACE_SPANS_MIN, TRACE_SPANS_MAX] = args['trace-spans'].split('-').map(Number);
if (!(TRACE_SPANS_MIN >= 5 && TRACE_SPANS_MAX >= TRACE_SPANS_MIN)) throw new Error('--trace-spans takes MIN-MAX with 5 <= MIN <= MAX');
const KILL_AT = args['kill-at'] !== undefined ? Number(args['kill-at']) : null;
/** contracts/ with supervisor-workers' progress_within set to --progress-within (a temporary copy, removed at exit). */
const CONTRACTS = (() => {
  if (!/^\d+(ms|s|m|h)$/.test(args['progress-within'])) throw new Error('--progress-within takes a duration such as 3m');
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-soak-contracts-'));
  for (const f of readdirSync(join(ROOT, 'contracts'))) {
    const text = readFileSync(join(ROOT, 'contracts', f), 'utf8');
    const changed = f === 'supervisor-workers.yaml' ? text.replace(/progress_within: 15m/, `progress_within: ${args['progress-within']}`) : text;
    if (f === 'supervisor-workers.yaml' && changed === text && args['progress-within'] !== '15m') throw new Error('contracts/supervisor-workers.yaml: no `progress_within: 15m` to shorten');
    writeFileSync(join(dir, f), changed);
  }
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
})();
const EXTRA = ['--retention', args.retention, '--alert-window', args['alert-window'], ...(args['server-args'] ? args['server-args'].split(' ').filter(Boolean) : [])];
const NODE_ARGS = args['node-args'] ? args['node-args'].split(' ').filter(Boolean) : [];
// --server-cpus LIST (taskset's, e.g. 0): the servers (and the cluster's PostgreSQL) run on those cores only, and this
// load generator on the others, so that neither takes the other's core (and other work on the machine can be kept
// off the servers' core with taskset too).
const SERVER_CPUS = args['server-cpus'] ?? null;
if (SERVER_CPUS !== null) {
  if (!/^[0-9,-]+$/.test(SERVER_CPUS)) throw new Error('--server-cpus takes a CPU list such as 0 or 0-1');
  const all = os.cpus().map((_, i) => i);
  const mine = all.filter((c) => !cpuList(SERVER_CPUS).includes(c));
  if (mine.length) execFileSync('taskset', ['-a', '-p', '-c', mine.join(','), String(process.pid)], { stdio: 'ignore' });
}

/** The CPUs of a taskset list ("0,2-3" -> [0, 2, 3]). */
function cpuList(list) {
  return list.split(',').flatMap((part) => {
    const [a, b = a] = part.split('-').map(Number);
    return Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
}
if (!(MINUTES > 0) || !(CLIENTS > 0)) throw new Error('--minutes and --clients must be positive');

// ---- traffic -----------------------------------------------------------------------------------------------------

const WORDS = 'the agent should review the quarterly report and summarise risks for the board then draft an email'.split(' ');
const words = (bytes) => {
  let s = '';
  while (s.length < bytes) s += WORDS[(Math.random() * WORDS.length) | 0] + ' ';
  return s;
};
const hex = (n) => randomBytes(n).toString('hex');
const str = (key, v) => ({ key, value: { stringValue: v } });
const int = (key, v) => ({ key, value: { intValue: String(v) } });
/**
 * One multi-agent trace: --trace-spans (5-40) spans, its run id, and its spans in the order an exporter would send them. The run is
 * pinned to the shipped supervisor-workers contract: the supervisor (`invoke_agent`, the run's root) delegates to a
 * researcher and a writer, each returns (a short span of its own), chat spans with 1-4 KB of content and tool calls
 * under each agent. Most runs finish the plan (healthy, settled: they leave live memory); one in 100 never calls the
 * writer (working until the contract's progress_within, --progress-within, then incomplete) and one in 500 also calls
 * the publisher directly (forbidden_edge: alerting, held for the alert window).
 */
function multiAgentTrace() {
  const traceId = hex(16);
  const run = `soak-${hex(8)}`;
  const t0 = BigInt(Date.now()) * 1_000_000n;
  const spans = [];
  const span = (name, parent, attributes, offsetMs, kind = 1) => {
    const s = { traceId, spanId: hex(8), ...(parent ? { parentSpanId: parent.spanId } : {}), name, kind, startTimeUnixNano: String(t0 + BigInt(offsetMs) * 1_000_000n), endTimeUnixNano: String(t0 + BigInt(offsetMs + 5) * 1_000_000n), attributes };
    spans.push(s);
    return s;
  };
  const root = span('invoke_agent supervisor', null, [
    str('gen_ai.operation.name', 'invoke_agent'), str('gen_ai.agent.name', 'supervisor'), str('gen_ai.agent.id', 'agent-supervisor'),
    str('topology.run.id', run), str('topology.event.type', 'run.start'), str('topology.contract.id', 'supervisor-workers'), str('topology.contract.version', '1'), str('topology.phase', 'work'),
  ], 0);
  const total = TRACE_SPANS_MIN + ((Math.random() * (TRACE_SPANS_MAX - TRACE_SPANS_MIN + 1)) | 0);
  const unfinished = Math.random() < 0.01;
  const forbidden = Math.random() < 0.002;
  // An unfinished run stops after the researcher returns: `supervisor -> writer` is due with no `within`, so nothing
  // explains the stall and the phase's progress_within (--progress-within) makes it incomplete. (Stopping before the writer's
  // return would keep it working for that edge's `within: 30m`, past a 30-minute soak.)
  const agents = forbidden ? ['researcher', 'writer', 'publisher'] : unfinished ? ['researcher'] : ['researcher', 'writer'];
  // The content spans, shared out among the agents; each agent's delegate first, its return last.
  const per = Math.max(0, total - 1 - 2 * agents.length);
  let t = 0;
  agents.forEach((name, k) => {
    const agent = span(`invoke_agent ${name}`, root, [
      str('gen_ai.operation.name', 'invoke_agent'), str('gen_ai.agent.name', name), str('gen_ai.agent.id', `agent-${name}`), str('gen_ai.conversation.id', run),
      str('topology.run.id', run), str('topology.event.type', 'edge'), str('topology.edge.from', 'supervisor'), str('topology.edge.to', name), str('topology.edge.kind', 'delegate'),
    ], (t += 20));
    const mine = Math.floor(per / agents.length) + (k < per % agents.length ? 1 : 0);
    for (let i = 0; i < mine; i++) {
      if (Math.random() < 0.7) {
        const bytes = 1024 + ((Math.random() * 3072) | 0);
        span('chat gpt-4o', agent, [
          str('gen_ai.operation.name', 'chat'), str('gen_ai.request.model', 'gpt-4o'), int('gen_ai.usage.input_tokens', 1000), int('gen_ai.usage.output_tokens', 200),
          str('gen_ai.input.messages', JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: words(bytes) }] }])),
        ], (t += 20), 3);
      } else {
        span('execute_tool web_search', agent, [
          str('gen_ai.operation.name', 'execute_tool'), str('gen_ai.tool.name', 'web_search'), str('gen_ai.tool.call.id', `call_${k}_${i}`),
          str('gen_ai.tool.call.arguments', JSON.stringify({ query: words(120) })),
        ], (t += 20));
      }
    }
    if (name === 'publisher') return;
    span(`return ${name}`, agent, [str('topology.run.id', run), str('topology.event.type', 'edge'), str('topology.edge.from', name), str('topology.edge.to', 'supervisor'), str('topology.edge.kind', 'return')], (t += 20));
  });
  // About one in five is split over two or three requests; in half of those the children go first.
  if (Math.random() >= 0.2) return { run, parts: [spans] };
  const n = 2 + ((Math.random() * 2) | 0);
  const parts = Array.from({ length: n }, () => []);
  spans.forEach((s, i) => parts[Math.min(n - 1, Math.floor((i * n) / spans.length))].push(s));
  if (Math.random() < 0.5) parts.reverse();
  return { run, parts: parts.filter((p) => p.length) };
}

if (!['proto', 'json'].includes(args.encoding)) throw new Error('--encoding is proto or json');
const body = (spans) => {
  const req = { resourceSpans: [{ resource: { attributes: [str('service.name', 'soak-agents')] }, scopeSpans: [{ scope: { name: 'soak' }, spans }] }] };
  return args.encoding === 'proto' ? encodeTraceRequest(req) : JSON.stringify(req);
};

/**
 * The traffic's bookkeeping: parts of split traces wait for a later request; a run counts as acknowledged once every
 * request that carried a part of it was acknowledged.
 */
class Traffic {
  constructor() {
    this.later = []; // parts still to send: { run, spans }
    this.outstanding = new Map(); // run -> requests not yet acknowledged
    this.failed = new Set(); // runs with a part not acknowledged
    this.acked = []; // runs fully acknowledged
    this.ackedAt = []; // when each was (Date.now(), parallel to acked)
    this.traces = 0;
  }
  /** The next request: earlier parts first, then new traces, up to about SPANS_PER_REQUEST spans. */
  next() {
    const spans = [];
    const runs = new Set();
    const take = (run, part) => {
      spans.push(...part);
      // Once per request: settle() counts a request once per run, also when it carries two parts of one run (the
      // second and third of a split trace, taken together from `later`), which before left such runs never counted
      // as acknowledged, so never checked (about one run in ten).
      if (!runs.has(run)) this.outstanding.set(run, (this.outstanding.get(run) ?? 0) + 1);
      runs.add(run);
    };
    while (this.later.length && spans.length < SPANS_PER_REQUEST) {
      const p = this.later.shift();
      take(p.run, p.spans);
    }
    let traces = 0;
    while (spans.length < SPANS_PER_REQUEST) {
      const t = multiAgentTrace();
      traces++;
      take(t.run, t.parts[0]);
      for (const p of t.parts.slice(1)) this.later.push({ run: t.run, spans: p });
    }
    this.traces += traces;
    return { payload: body(spans), runs, traces, spans: spans.length };
  }
  settle(runs, ok) {
    for (const run of runs) {
      if (!ok) this.failed.add(run);
      const left = this.outstanding.get(run) - 1;
      if (left > 0) this.outstanding.set(run, left);
      else {
        this.outstanding.delete(run);
        if (!this.failed.has(run) && !this.later.some((p) => p.run === run)) (this.acked.push(run), this.ackedAt.push(Date.now()));
      }
    }
  }
}

// ---- servers ---------------------------------------------------------------------------------------------------

function request(port, method, path, payload, timeoutMs = 30_000) {
  return new Promise((res) => {
    const t0 = performance.now();
    const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers: payload ? { 'content-type': typeof payload === 'string' ? 'application/json' : 'application/x-protobuf', 'content-length': Buffer.byteLength(payload) } : {}, timeout: timeoutMs }, (r) => {
      const chunks = [];
      r.on('data', (d) => chunks.push(d));
      r.on('end', () => {
        const raw = Buffer.concat(chunks);
        res({ status: r.statusCode, text: raw.toString('utf8'), raw, ms: performance.now() - t0 });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => res({ status: 0, text: e.message, ms: performance.now() - t0 }));
    if (payload) req.write(payload);
    req.end();
  });
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** `topology-audit serve` on free loopback ports (data dir or --store), restartable on the same data. */
async function startServe(opts) {
  const args = [join(ROOT, 'bin', 'topology-audit.js'), 'serve', '--contracts', CONTRACTS, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'];
  if (opts.store) args.push('--store', opts.store, '--instance', opts.instance);
  else args.push('--data', opts.dataDir);
  // The server's log (stderr: a line per verdict change at the default level) goes to a file, as under journald or a
  // container runtime, not through a pipe this process reads: a load generator busy on its own event loop drains a
  // pipe late, and a server writing to a full pipe blocks (stdio pipes are synchronous on Linux), a stall that is the
  // bench's, not the server's. SOAK_SERVER_LOG=FILE: that file (appended; with stdout), else a temporary one.
  const logFile = process.env.SOAK_SERVER_LOG ?? join(os.tmpdir(), `ta-soak-server-${process.pid}-${opts.instance ?? 'single'}.log`);
  const logFd = openSync(logFile, 'a');
  const argv = [...NODE_ARGS, ...args, ...EXTRA];
  const child = SERVER_CPUS === null
    ? spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', logFd], cwd: ROOT })
    : spawn('taskset', ['-c', SERVER_CPUS, process.execPath, ...argv], { stdio: ['ignore', 'pipe', logFd], cwd: ROOT });
  closeSync(logFd);
  if (!process.env.SOAK_SERVER_LOG) tempLogs.add(logFile);
  let out = '';
  const err = () => {
    try {
      return readFileSync(logFile, 'utf8').slice(-20_000);
    } catch {
      return '';
    }
  };
  const log = process.env.SOAK_SERVER_LOG ? createWriteStream(process.env.SOAK_SERVER_LOG, { flags: 'a' }) : null;
  if (log) child.stdout.on('data', (d) => log.write(d));
  child.stdout.on('data', (d) => (out = (out + d).slice(-100_000)));
  const ports = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`server did not start: ${err()}`)), 120_000);
    child.stdout.on('data', () => {
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) (clearTimeout(t), res(JSON.parse(line).listening));
    });
    child.once('exit', (code) => (clearTimeout(t), rej(new Error(`server exited with ${code}: ${err()}`))));
  });
  const exited = new Promise((r) => child.once('exit', (code, signal) => r(code ?? signal)));
  return { ...opts, child, pid: child.pid, ports, exited, stderr: err };
}

async function untilHealthy(port) {
  for (let i = 0; i < 1200; i++) {
    const r = await request(port, 'GET', '/healthz', null, 2_000);
    if (r.status === 200) return;
    await sleep(100);
  }
  throw new Error('server never answered /healthz');
}

/** The metrics the per-minute line reads (unlabelled samples). */
async function scrapeOf(port) {
  const { text } = await request(port, 'GET', '/metrics', null, 30_000);
  const v = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  // Garbage-collection pauses over 100 ms since the process started (every kind): the count minus the 0.1 s bucket.
  let gcOver100 = 0;
  for (const m of text.matchAll(/^nodejs_gc_duration_seconds_count\{kind="(\w+)"\} (\S+)$/gm)) {
    const under = Number(new RegExp(`^nodejs_gc_duration_seconds_bucket\\{(?:kind="${m[1]}",le="0.1"|le="0.1",kind="${m[1]}")\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    gcOver100 += Number(m[2]) - under;
  }
  return {
    p99: v('nodejs_eventloop_lag_p99_seconds') * 1000,
    max: v('nodejs_eventloop_lag_max_seconds') * 1000,
    rss: v('process_resident_memory_bytes') / 2 ** 20,
    heap: v('nodejs_heap_size_used_bytes') / 2 ** 20,
    heapTotal: v('nodejs_heap_size_total_bytes') / 2 ** 20,
    external: v('nodejs_external_memory_bytes') / 2 ** 20,
    gcOver100,
    skeleton: v('topology_span_skeleton_spans'),
    liveRuns: v('topology_live_runs'),
  };
}

// ---- the database ----------------------------------------------------------------------------------------------

const requireRoot = createRequire(join(ROOT, 'package.json'));
function sqliteProbe(dataDir) {
  const Database = requireRoot('better-sqlite3');
  return {
    async size() {
      let bytes = 0;
      for (const f of ['receipts.db', 'receipts.db-wal']) {
        try {
          bytes += statSync(join(dataDir, f)).size;
        } catch {}
      }
      return bytes / 2 ** 20;
    },
    async spanLogRows() {
      const db = new Database(join(dataDir, 'receipts.db'), { readonly: true, fileMustExist: true });
      try {
        db.pragma('busy_timeout = 5000');
        return db.prepare('SELECT count(*) AS n FROM span_log').get().n;
      } finally {
        db.close();
      }
    },
    close() {},
  };
}
async function pgProbe(url) {
  const pg = requireRoot('pg');
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  return {
    size: async () => Number((await pool.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n) / 2 ** 20,
    spanLogRows: async () => Number((await pool.query('SELECT count(*) AS n FROM span_log')).rows[0].n),
    close: () => pool.end(),
  };
}

// ---- phases ----------------------------------------------------------------------------------------------------

/**
 * Sends traffic to `targets()` (client k to target k mod n) until `until()`; `rate` traces/s (null: full speed).
 * Returns the traffic's bookkeeping and the per-request latencies and errors, bucketed by `bucket()`.
 */
function drive(targets, rate, until, onResult) {
  const traffic = new Traffic();
  const started = performance.now();
  const clients = Array.from({ length: CLIENTS }, async (_, k) => {
    while (!until()) {
      if (rate !== null) {
        // Paced: the traces sent so far may not run ahead of rate x elapsed.
        const ahead = traffic.traces / rate - (performance.now() - started) / 1000;
        if (ahead > 0) {
          await sleep(Math.min(1000, ahead * 1000));
          continue;
        }
      }
      const t = targets();
      const req = traffic.next();
      let r = await request(t[k % t.length].ports.otlpHttp, 'POST', '/v1/traces', req.payload);
      // A kept-alive connection the server closed as it was reused: sent again at once, as exporters do (idempotent).
      if (r.status === 0 && /socket hang up|ECONNRESET/.test(r.text)) r = await request(t[k % t.length].ports.otlpHttp, 'POST', '/v1/traces', req.payload);
      // A partial success (rejected spans: runs refused past the live cap) is a refusal, not an acknowledgement.
      const refused = r.status === 200 && rejectedSpans(r) > 0;
      const ok = r.status === 200 && !refused;
      if (refused) req.refused = true;
      traffic.settle(req.runs, ok);
      req.status = refused ? 'partial_success' : r.status === 0 ? r.text.slice(0, 40) : r.status;
      onResult(ok, r.ms, req);
      if (!ok && r.status === 0) await sleep(200);
    }
  });
  return { traffic, done: Promise.all(clients) };
}

/**
 * The spans an export's answer says were rejected (OTLP partial success): ExportTraceServiceResponse
 * { partial_success (1) { rejected_spans (1) } } in protobuf, `partialSuccess.rejectedSpans` in JSON.
 */
function rejectedSpans(r) {
  if (r.raw[0] === 0x7b) return Number(/"rejectedSpans"\s*:\s*"?(\d+)/.exec(r.text)?.[1] ?? 0);
  if (r.raw[0] !== 0x0a) return 0;
  const b = r.raw;
  let i = 0;
  const varintAt = () => {
    let v = 0;
    for (let shift = 0; i < b.length; shift += 7) {
      const x = b[i++];
      v += (x & 0x7f) * 2 ** shift;
      if (x < 0x80) break;
    }
    return v;
  };
  i = 1;
  const length = varintAt();
  const end = i + length;
  while (i < end) {
    const key = varintAt();
    if (key === 0x08) return varintAt();
    if ((key & 7) === 2) {
      const n = varintAt();
      i += n;
    }
    else if ((key & 7) === 0) varintAt();
    else return 0;
  }
  return 0;
}

/**
 * Every acknowledged run is listed by paging (issue 50): the runs acknowledged since the last check (all of them but
 * the last `holdMs`) are looked for in the run list, paged oldest first (1,000 a page) from a cursor two minutes before
 * the earliest of them. Runs are pruned `--retention` after they settle, so the check runs every minute. Returns
 * { checked, missing, pages }.
 */
function listChecker(traffic, port) {
  let from = 0;
  return async (holdMs) => {
    const cut = Date.now() - holdMs;
    let to = from;
    while (to < traffic.acked.length && traffic.ackedAt[to] <= cut) to++;
    if (to === from) return { checked: 0, missing: 0, pages: 0 };
    const want = new Set(traffic.acked.slice(from, to));
    const checked = want.size;
    const startAt = traffic.ackedAt[from] - 120_000;
    from = to;
    let after = Buffer.from(JSON.stringify([startAt, ''])).toString('base64url');
    let pages = 0;
    for (; pages < 100_000 && want.size > 0; pages++) {
      const r = await request(port(), 'GET', `/api/v1/runs?order=oldest&limit=1000&after=${after}`, null, 60_000);
      if (r.status !== 200) break;
      const page = JSON.parse(r.text);
      for (const row of page.runs) if (row.verdict) want.delete(row.run);
      if (!page.next) break;
      after = page.next;
    }
    return { checked, missing: want.size, pages };
  };
}

/**
 * Capacity: a throwaway deployment of the soak's own kind (one SQLite server; with --cluster, two instances on a
 * throwaway PostgreSQL) driven at full speed for --capacity-seconds; traces acknowledged per second.
 */
async function measureCapacity() {
  const d = await startDeployment(mkdtempSync(join(os.tmpdir(), 'ta-soak-cap-')), 'cap');
  const seconds = Number(args['capacity-seconds']);
  const end = Date.now() + seconds * 1000;
  let traces = 0;
  const t0 = performance.now();
  const { done } = drive(() => d.servers, null, () => Date.now() > end, (ok, _ms, req) => ok && (traces += req.traces));
  await done;
  const rate = traces / ((performance.now() - t0) / 1000);
  for (const s of d.servers) s.child.kill('SIGTERM');
  for (const s of d.servers) await s.exited;
  await d.probe.close?.();
  await d.pgCluster?.stop();
  rmSync(d.dataDir, { recursive: true, force: true });
  return rate;
}

/** The servers under test: one on SQLite in `dataDir`, or (--cluster) two instances on a fresh PostgreSQL. */
async function startDeployment(dataDir, name) {
  if (!args.cluster) {
    const servers = [await startServe({ dataDir })];
    return { servers, probe: sqliteProbe(dataDir), pgCluster: null, dataDir };
  }
  const { loadPgCluster, postmasterPid } = await import('./pg-cluster.mjs');
  const { startPgCluster } = await loadPgCluster();
  const pgCluster = await startPgCluster();
  if (SERVER_CPUS !== null) {
    // PostgreSQL beside the servers: the postmaster and its children now (backends forked later inherit it).
    const pm = postmasterPid(join(pgCluster.dir, 'data'));
    const kids = readdirSync('/proc').filter((e) => /^\d+$/.test(e) && (() => { try { return readFileSync(`/proc/${e}/stat`, 'latin1').split(') ')[1]?.split(' ')[1] === String(pm); } catch { return false; } })());
    for (const pid of [pm, ...kids]) execFileSync('taskset', ['-a', '-p', '-c', SERVER_CPUS, String(pid)], { stdio: 'ignore' });
  }
  const servers = [await startServe({ store: pgCluster.url, instance: `${name}-1` }), await startServe({ store: pgCluster.url, instance: `${name}-2` })];
  return { servers, probe: await pgProbe(pgCluster.url), pgCluster, dataDir };
}

async function main() {
  let rate;
  if (args['rate-traces'] !== undefined) rate = Number(args['rate-traces']);
  else {
    const capacity = await measureCapacity();
    rate = capacity * Number(args.fraction);
    console.log(JSON.stringify({ capacityTracesPerSecond: round(capacity, 1), fraction: Number(args.fraction), rateTracesPerSecond: round(rate, 1) }));
  }

  const deployment = await startDeployment(mkdtempSync(join(os.tmpdir(), 'ta-soak-')), 'soak');
  const { pgCluster, probe } = deployment;
  let servers = deployment.servers;
  console.log(JSON.stringify({ mode: args.cluster ? 'cluster (2 instances, PostgreSQL)' : 'single (SQLite)', minutes: MINUTES, rateTracesPerSecond: round(rate, 1), clients: CLIENTS, spansPerRequest: SPANS_PER_REQUEST, traceSpans: args['trace-spans'], encoding: args.encoding, retention: args.retention, alertWindow: args['alert-window'], progressWithin: args['progress-within'] }));
  console.log('min  healthz_max_ms  healthz_failed  loop_p99_ms  loop_max_ms  gc_over_100ms  rss_mib  heap_mib  heap_total_mib  external_mib  db_mib  span_log_rows  skeleton_spans  live_runs  ack_p99_ms  errors  traces' + (!args['no-list-check'] ? '  list_missing' : ''));

  const endAt = Date.now() + MINUTES * 60_000;
  const errorsByStatus = {};
  let minute = { acks: [], errors: 0, traces: 0, healthMax: 0, healthFailures: 0 };
  const { traffic, done } = drive(() => servers, rate, () => Date.now() > endAt, (ok, ms, req) => {
    if (ok) (minute.acks.push(ms), (minute.traces += req.traces));
    else (minute.errors++, (errorsByStatus[req.status] = (errorsByStatus[req.status] ?? 0) + 1));
  });
  // One /healthz a second at each server: the slowest of the minute.
  let healthStop = false;
  const health = (async () => {
    while (!healthStop) {
      for (const s of servers) {
        const r = await request(s.ports.api, 'GET', '/healthz', null, 5_000);
        if (r.status === 200) minute.healthMax = Math.max(minute.healthMax, r.ms);
        else minute.healthFailures++;
      }
      await sleep(1000);
    }
  })();

  const rows = [];
  // The runs acknowledged are found by paging the run list each minute; a cluster's checks alternate between its
  // instances (each pages the whole cluster's runs).
  let listChecks = 0;
  const listCheck = !args['no-list-check'] ? listChecker(traffic, () => servers[listChecks % servers.length].ports.api) : null;
  const listed = { checked: 0, missing: 0 };
  for (let m = 1; m <= MINUTES; m++) {
    await sleep(Math.max(0, endAt - (MINUTES - m) * 60_000 - Date.now()));
    if (KILL_AT !== null && m === KILL_AT) {
      const s = servers[0];
      s.child.kill('SIGKILL');
      await s.exited;
      const t0 = performance.now();
      const again = await startServe({ dataDir: s.dataDir, store: s.store, instance: s.instance });
      await untilHealthy(again.ports.api);
      servers = [again, ...servers.slice(1)];
      console.log(JSON.stringify({ killedAtMinute: m, restartToHealthzMs: Math.round(performance.now() - t0) }));
    }
    const scrapes = await Promise.all(servers.map((s) => scrapeOf(s.ports.api)));
    // GC pauses over 100 ms this minute (a restarted server counts from zero).
    const gcOver100 = scrapes.reduce((a, x, i) => a + x.gcOver100 - (servers[i].gcSeen ?? 0), 0);
    scrapes.forEach((x, i) => (servers[i].gcSeen = x.gcOver100));
    const cur = minute;
    minute = { acks: [], errors: 0, traces: 0, healthMax: 0, healthFailures: 0 };
    const row = {
      min: m,
      healthzMaxMs: round(cur.healthMax, 1),
      healthzFailed: cur.healthFailures,
      loopP99Ms: round(Math.max(...scrapes.map((x) => x.p99)), 1),
      loopMaxMs: round(Math.max(...scrapes.map((x) => x.max)), 1),
      gcOver100Ms: gcOver100,
      rssMiB: round(scrapes.reduce((a, x) => a + x.rss, 0), 1),
      heapMiB: round(scrapes.reduce((a, x) => a + x.heap, 0), 1),
      heapTotalMiB: round(scrapes.reduce((a, x) => a + x.heapTotal, 0), 1),
      externalMiB: round(scrapes.reduce((a, x) => a + x.external, 0), 1),
      dbMiB: round(await probe.size(), 1),
      spanLogRows: await probe.spanLogRows(),
      skeletonSpans: scrapes.reduce((a, x) => a + x.skeleton, 0),
      liveRuns: scrapes.reduce((a, x) => a + x.liveRuns, 0),
      ackP99Ms: round(quantile(cur.acks, 0.99), 1),
      errors: cur.errors,
      traces: cur.traces,
    };
    if (listCheck) {
      // Runs acknowledged more than 10 s ago: listed by paging with a verdict.
      const c = await listCheck(10_000);
      listChecks++;
      listed.checked += c.checked;
      listed.missing += c.missing;
      row.listMissing = c.missing;
    }
    rows.push(row);
    console.log(Object.values(row).map((v) => String(v).padStart(6)).join('  '));
  }
  await done;
  healthStop = true;
  await health;

  // Every run whose every export was acknowledged is listed with a verdict: by paging (the rest of them), or with
  // --no-list-check run by run.
  if (listCheck) {
    const c = await listCheck(0);
    listed.checked += c.checked;
    listed.missing += c.missing;
  }
  const runs = listCheck ? [] : traffic.acked;
  let missing = 0;
  let i = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (i < runs.length) {
        const run = runs[i++];
        const s = servers[i % servers.length];
        const r = await request(s.ports.api, 'GET', `/api/v1/runs/${encodeURIComponent(run)}`, null, 30_000);
        let verdict = null;
        try {
          verdict = JSON.parse(r.text).verdict ?? null;
        } catch {}
        if (r.status !== 200 || !verdict) missing++;
      }
    }),
  );
  const from = rows.find((r) => r.min === Math.min(10, MINUTES)) ?? rows[0];
  const last = rows[rows.length - 1];
  const tail = rows.filter((r) => r.min >= from.min);
  const within = (a, b) => Math.abs(b - a) <= 0.1 * Math.max(a, b);
  const summary = {
    acknowledgedRuns: listCheck ? listed.checked : runs.length,
    runsMissingAVerdict: listCheck ? listed.missing : missing,
    listedBy: listCheck ? 'paging /api/v1/runs?order=oldest&after= each minute' : 'GET /api/v1/runs/{run}',
    refusals: errorsByStatus.partial_success ?? 0,
    fromMinute: from.min,
    healthzUnder1s: tail.every((r) => r.healthzMaxMs < 1000 && (r.healthzFailed === 0 || r.min === KILL_AT)),
    loopMaxUnder250ms: tail.every((r) => r.loopMaxMs < 250),
    rssWithin10pct: within(from.rssMiB, last.rssMiB),
    dbWithin10pct: within(from.dbMiB, last.dbMiB),
    errors: rows.reduce((a, r) => a + r.errors, 0),
  };
  console.log(JSON.stringify(summary));
  // Per periodic task, over the whole soak: slices over budget and the largest slice bucket reached.
  for (const s of servers) {
    const { text } = await request(s.ports.api, 'GET', '/metrics', null, 30_000);
    const tasks = {};
    for (const m of text.matchAll(/^topology_periodic_slices_over_budget_total\{task="([^"]+)"\} (\S+)$/gm)) tasks[m[1]] = { overBudget: Number(m[2]) };
    for (const m of text.matchAll(/^topology_periodic_slice_seconds_bucket\{task="([^"]+)",le="([^"]+)"\} (\S+)$/gm)) {
      const t = (tasks[m[1]] ??= {});
      const total = Number(new RegExp(`^topology_periodic_slice_seconds_count\\{task="${m[1]}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
      t.slices = total;
      if (t.maxLe === undefined && Number(m[3]) === total) t.maxLe = m[2];
    }
    const verdicts = {};
    for (const m of text.matchAll(/^topology_runs\{[^}]*verdict="([a-z_]+)"\} (\S+)$/gm)) verdicts[m[1]] = (verdicts[m[1]] ?? 0) + Number(m[2]);
    console.log(JSON.stringify({ instance: s.instance ?? 'single', errorsByStatus, runsByVerdict: verdicts, periodic: tasks }));
  }

  for (const s of servers) {
    const t0 = performance.now();
    s.child.kill('SIGTERM');
    const code = await s.exited;
    console.log(JSON.stringify({ instance: s.instance ?? 'single', sigtermExit: code, sigtermMs: Math.round(performance.now() - t0) }));
  }
  await probe.close();
  if (pgCluster) await pgCluster.stop();
  // SOAK_KEEP_DATA=1: the data directory is left for a look at it (e.g. a start-up profile), and named.
  if (process.env.SOAK_KEEP_DATA) console.log(JSON.stringify({ dataDir: deployment.dataDir }));
  else rmSync(deployment.dataDir, { recursive: true, force: true });
  agent.destroy();
  process.exitCode = summary.runsMissingAVerdict > 0 ? 1 : 0;
}

await main();
