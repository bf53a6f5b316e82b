// What the OTLP load benchmarks (bench/ingest.mjs, bench/cluster.mjs) share: a `topology-audit serve` child
// process, its /metrics counters, a keep-alive HTTP client posting /v1/traces, CPU and memory of processes from
// /proc, and small statistics.
import { spawn, execFileSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..');

export const quantile = (xs, q) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
export const median = (xs) => quantile(xs, 0.5);
export const round = (x, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime, stime, cutime, cstime (fields 14 to 17) of a /proc stat file, in seconds, and the parent pid (field 4). */
export function procStat(path) {
  const stat = readFileSync(path, 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const s = (i) => Number(fields[i]) / CLK_TCK;
  return { ppid: Number(fields[1]), user: s(11), system: s(12), childUser: s(13), childSystem: s(14) };
}

/** User and system CPU seconds of a process, all threads (utime, stime: fields 14 and 15 of /proc/<pid>/stat). */
export function cpuSecondsOf(pid) {
  const { user, system } = procStat(`/proc/${pid}/stat`);
  return { user, system };
}

/** CPU seconds (user + system) of a process's main thread alone (a Node process: its event loop, JS and GC pauses). */
export function mainThreadCpuSecondsOf(pid) {
  const { user, system } = procStat(`/proc/${pid}/task/${pid}/stat`);
  return user + system;
}

export function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'latin1');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  return { hwmMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
}

/**
 * Starts `topology-audit serve` (packaged contracts dir, a temp data dir, free loopback ports) as a child process
 * with `extraArgs`; `nodeArgs` go to node before the script; `root` is the build to run (another checkout's, for a
 * baseline). Resolves once it printed its ports.
 */
export async function startServer(extraArgs = [], nodeArgs = [], root = ROOT) {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'ta-bench-ingest-'));
  const child = spawn(
    process.execPath,
    [...nodeArgs, join(root, 'bin', 'topology-audit.js'), 'serve', '--contracts', join(root, 'contracts'), '--data', dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: root },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  if (process.env.BENCH_SERVER_LOG) {
    const log = createWriteStream(process.env.BENCH_SERVER_LOG);
    child.stdout.on('data', (d) => log.write(d));
    child.stderr.on('data', (d) => log.write(d));
  }
  const ports = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`server did not start: ${err}`)), 30_000);
    child.stdout.on('data', () => {
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) {
        clearTimeout(t);
        res(JSON.parse(line).listening);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      rej(new Error(`server exited with ${code}: ${err}`));
    });
  });
  const exited = new Promise((r) => child.once('exit', (code) => r(code)));
  return {
    pid: child.pid,
    ports,
    stderr: () => err,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const code = await exited;
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

/** GET a path of the server's API port; resolves with the body text (any status). */
export function getText(port, path) {
  return new Promise((res, rej) => {
    http.get({ host: '127.0.0.1', port, path }, (r) => {
      let s = '';
      r.setEncoding('utf8');
      r.on('data', (d) => (s += d));
      r.on('end', () => res(s));
    }).on('error', rej);
  });
}

/** The server's receipt, group commit and live-run counters from /metrics. */
export async function scrape(port) {
  const text = await getText(port, '/metrics');
  const sum = (name, match = () => true) => {
    let n = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)/.exec(line);
      if (m && m[1] === name && match(m[2] ?? '')) n += Number(m[3]);
    }
    return n;
  };
  return {
    accepted: sum('topology_receipts_total', (l) => l.includes('result="accepted"')),
    duplicates: sum('topology_receipts_total', (l) => l.includes('result="duplicate"')),
    notAccepted: sum('topology_receipts_total', (l) => !l.includes('result="accepted"') && !l.includes('result="duplicate"')),
    commits: sum('topology_store_commit_batch_size_count'),
    committedReceipts: sum('topology_store_commit_batch_size_sum'),
    liveRuns: sum('topology_live_runs'),
    commitSeconds: sum('topology_store_commit_duration_seconds_sum'),
    commitBuckets: [...text.matchAll(/^topology_store_commit_duration_seconds_bucket\{le="([^"]+)"\} ([0-9.eE+-]+)/gm)].map((m) => [Number(m[1]), Number(m[2])]),
  };
}

/** node:http keep-alive client POSTing bodies to /v1/traces; resolves on a full success, rejects otherwise. */
export function httpClient(port, contentType, maxSockets, extraHeaders = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  // A kept-alive socket that sat idle while other rounds ran may be closed by the server (keep-alive timeout) just
  // as it is reused: that request never reached the server, so it is sent again on a new socket (Node's advice).
  const send = (body) =>
    sendOnce(body).catch((e) => {
      if (e.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE')) return sendOnce(body);
      throw e;
    });
  const sendOnce = (body) =>
    new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, path: '/v1/traces', method: 'POST', agent, headers: { 'content-type': contentType, 'content-length': body.length, ...extraHeaders } },
        (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const answer = Buffer.concat(chunks);
            if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${answer.toString().slice(0, 200)}`));
            // A partial success (rejected spans) is a failure here: every span of these batches is valid.
            if (contentType === 'application/json' ? JSON.parse(answer.toString() || '{}').partialSuccess?.rejectedSpans : answer.length > 0) {
              return reject(new Error(`partial success: ${answer.toString().slice(0, 200)}`));
            }
            resolve();
          });
        },
      );
      req.on('error', (e) => reject(Object.assign(e, { reusedSocket: req.reusedSocket })));
      req.end(body);
    });
  return { send, close: () => agent.destroy(), gzip: extraHeaders['content-encoding'] === 'gzip' };
}
