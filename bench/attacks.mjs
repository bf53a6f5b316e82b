// Resource attacks against a real `serve` child process, for before/after figures.
//
//   node bench/attacks.mjs [ROOT] [--only name,name]
//
// ROOT is a checkout with bin/topology-audit.js and a built dist/ (default: this repository). Run it once against a
// build of the old code and once against this one. Attacks: aborted long-polls, an NDJSON flood of invalid lines,
// slow bodies, half-open connections, a stalled event-stream reader, many live runs. For each: wall time, the
// server's peak RSS (VmHWM), response sizes and what a normal client saw. Prints a table and one JSON line.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const args = process.argv.slice(2);
const onlyIdx = args.indexOf('--only');
const only = onlyIdx >= 0 ? new Set(args[onlyIdx + 1].split(',')) : null;
const ROOT = resolve(args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--only') ?? join(import.meta.dirname, '..'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const line = (o) => JSON.stringify(o) + '\n';
const startLine = (run) => line({ run, event: 's', type: 'run.start', at: new Date().toISOString(), contract: 'research-publish', version: '3', phase: 'research' });

async function serve(extra = [], env = process.env, dataDir = undefined) {
  const data = dataDir ?? mkdtempSync(join(tmpdir(), 'ta-attack-'));
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'topology-audit.js'), 'serve', '--contracts', join(ROOT, 'contracts'), '--data', data, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const ports = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`no start: ${err}`)), 30_000);
    child.stdout.on('data', () => {
      const l = out.split('\n').find((x) => x.startsWith('{"listening"'));
      if (l) {
        clearTimeout(t);
        res(JSON.parse(l).listening);
      }
    });
    child.once('exit', (c) => rej(new Error(`exited ${c}: ${err.slice(-500)}`)));
  });
  const status = (k) => {
    try {
      return Number(/^(?:Vm[A-Z]+):\s+(\d+)/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(k)) ?? '')?.[1] ?? NaN) / 1024;
    } catch {
      return NaN;
    }
  };
  return {
    child,
    data,
    ports,
    api: `http://127.0.0.1:${ports.api}`,
    rssMiB: () => status('VmRSS'),
    peakMiB: () => status('VmHWM'),
    alive: () => child.exitCode === null && child.signalCode === null,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

const post = async (api, body) => {
  const t = performance.now();
  const r = await fetch(`${api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
  const text = await r.text();
  return { status: r.status, bytes: Buffer.byteLength(text), ms: performance.now() - t, retryAfter: r.headers.get('retry-after') };
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const raw = (port, head = '') =>
  new Promise((res) => {
    const s = connect(port, '127.0.0.1', () => {
      if (head) s.write(head);
      res(s);
    });
    s.on('error', () => {});
  });

const attacks = {
  // 20,000 long-polls on an unsettled run, aborted at once: does ingest (batches touching 200 runs) stay as fast?
  async longpolls() {
    const srv = await serve((await supports('--max-connections')) ? ['--max-connections', '30000'] : []);
    try {
      await post(srv.api, startLine('slow-run'));
      const lat = async () => {
        const xs = [];
        for (let i = 0; i < 15; i++) {
          let body = '';
          for (let k = 0; k < 200; k++) body += startLine(`lp-${Math.random()}`);
          xs.push((await post(srv.api, body)).ms);
        }
        return median(xs);
      };
      const before = await lat();
      const t0 = performance.now();
      const N = 20000;
      const reqs = [];
      for (let i = 0; i < N; i++) {
        const r = request({ host: '127.0.0.1', port: srv.ports.api, path: '/api/v1/runs/slow-run/verdict?wait=300', agent: false });
        r.on('error', () => {});
        r.end();
        reqs.push(r);
        if (i % 500 === 499) await sleep(50);
      }
      await sleep(2000);
      for (const r of reqs) r.destroy();
      await sleep(2000);
      const after = await lat();
      const waiting = /^topology_api_long_polls (\d+)$/m.exec(await (await fetch(`${srv.api}/metrics`)).text())?.[1] ?? 'n/a';
      return { aborted: N, waitingAfterAbort: waiting, ingestMedianMsBefore: +before.toFixed(1), ingestMedianMsAfter: +after.toFixed(1), slowdown: +(after / before).toFixed(2), wallS: +((performance.now() - t0) / 1000).toFixed(1), peakRssMiB: Math.round(srv.peakMiB()) };
    } finally {
      await srv.stop();
    }
  },

  // 4 MB of invalid NDJSON lines: response size, time, /healthz latency during it, peak RSS.
  async ndjson() {
    const srv = await serve(['--max-body', '8MiB']);
    try {
      const bad = line({ run: 'x', event: 'e', type: 'edge', at: 'not a time', from: 7, to: [], kind: { a: 1 } });
      const body = bad.repeat(Math.floor((4 * 1024 * 1024) / bad.length));
      let done = false;
      const p = post(srv.api, body).finally(() => (done = true));
      const health = [];
      while (!done) {
        const t = performance.now();
        await (await fetch(`${srv.api}/healthz`)).text();
        health.push(performance.now() - t);
        await sleep(20);
      }
      const r = await p;
      return { status: r.status, responseBytes: r.bytes, ms: Math.round(r.ms), healthzAnswered: health.length, healthzMaxMs: Math.round(Math.max(...health)), peakRssMiB: Math.round(srv.peakMiB()) };
    } finally {
      await srv.stop();
    }
  },

  // 300 slow bodies on the API port (admission 256 by default): what does a normal client get?
  async slowbodies() {
    const srv = await serve();
    try {
      const socks = [];
      for (let i = 0; i < 300; i++) socks.push(await raw(srv.ports.api, 'POST /v1/receipts HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-ndjson\r\ncontent-length: 1000000\r\n\r\n{'));
      await sleep(1000);
      const normal = await post(srv.api, startLine('normal'));
      const t0 = Date.now();
      const open = () => socks.filter((s) => !s.destroyed && !s.closed && s.readyState === 'open').length;
      for (const s of socks) s.resume();
      while (open() > 0 && Date.now() - t0 < 75_000) await sleep(500);
      const heldS = open() > 0 ? '>75' : ((Date.now() - t0) / 1000).toFixed(1);
      for (const s of socks) s.destroy();
      return { slowBodies: 300, normalClientStatus: normal.status, slowBodiesHeldForS: heldS, peakRssMiB: Math.round(srv.peakMiB()) };
    } finally {
      await srv.stop();
    }
  },

  // 5,000 connections that send nothing: how many does the server accept and keep?
  async halfopen() {
    const srv = await serve();
    try {
      const socks = [];
      for (let i = 0; i < 5000; i++) {
        socks.push(await raw(srv.ports.otlpHttp));
      }
      await sleep(1000);
      const open = () => socks.filter((s) => !s.destroyed && s.readyState === 'open').length;
      for (const s of socks) s.resume();
      await sleep(200);
      const openAt1s = open();
      const serverFdsAt1s = countFds(srv.child.pid);
      await sleep(15_000);
      const openAt16s = open();
      const normal = await post(srv.api, startLine('normal'));
      for (const s of socks) s.destroy();
      return { connections: 5000, openAt1s, serverFdsAt1s, openAt16s, normalClientStatus: normal.status, peakRssMiB: Math.round(srv.peakMiB()) };
    } finally {
      await srv.stop();
    }
  },

  // One event-stream reader that never reads, while 160 batches of 150 new runs arrive (each batch one event batch).
  async sse() {
    const srv = await serve();
    try {
      const s = await raw(srv.ports.api, 'GET /ui/events HTTP/1.1\r\nhost: x\r\n\r\n');
      s.pause();
      await sleep(500);
      const rss0 = srv.rssMiB();
      for (let b = 0; b < 160; b++) {
        let body = '';
        for (let i = 0; i < 150; i++) body += startLine(`sse-${b}-${i}-${'x'.repeat(100)}`);
        await post(srv.api, body);
        await sleep(200);
      }
      await sleep(1000);
      const rss1 = srv.rssMiB();
      const m = await (await fetch(`${srv.api}/metrics`)).text();
      s.destroy();
      return { runs: 24000, rssGrowthMiB: Math.round(rss1 - rss0), readerDropped: /topology_ui_event_streams_dropped_total\{reason="slow_reader"\} [1-9]/.test(m), peakRssMiB: Math.round(srv.peakMiB()) };
    } finally {
      await srv.stop();
    }
  },

  // Issue 30.3: one NDJSON post to a pinned run whose edges name N distinct unknown agents: how long is the answer,
  // and how long does /healthz wait meanwhile (probed every 20 ms)?
  async agents() {
    const out = {};
    for (const n of [2000, 20000]) {
      const srv = await serve(['--max-body', '16MiB']);
      try {
        const t0 = Date.parse('2026-01-01T00:00:00Z');
        let body = line({ run: 'wide', event: 's', type: 'run.start', at: new Date(t0).toISOString(), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' });
        for (let i = 0; i < n; i++) body += line({ run: 'wide', event: `e${i}`, type: 'edge', at: new Date(t0 + i + 1).toISOString(), from: 'orchestrator', to: `unknown-${i}`, kind: 'delegate' });
        let done = false;
        const p = post(srv.api, body).finally(() => (done = true));
        const health = [];
        while (!done) {
          const t = performance.now();
          await (await fetch(`${srv.api}/healthz`)).text();
          health.push(performance.now() - t);
          await sleep(20);
        }
        const r = await p;
        const v = await (await fetch(`${srv.api}/api/v1/runs/wide/verdict`)).json();
        out[n] = { status: r.status, ms: Math.round(r.ms), verdict: v.verdict, healthzMaxMs: Math.round(Math.max(0, ...health)) };
      } finally {
        await srv.stop();
      }
    }
    return out;
  },

  // 40,000 new runs with a 96 MiB heap: with --max-live-runs 20000 (new code) the rest get 503 and the server lives.
  async liverun() {
    const capped = await supports('--max-live-runs');
    const srv = await serve(capped ? ['--max-live-runs', '20000'] : [], { ...process.env, NODE_OPTIONS: '--max-old-space-size=96' });
    try {
      const statuses = {};
      const t0 = performance.now();
      for (let b = 0; b < 100 && srv.alive(); b++) {
        let body = '';
        for (let i = 0; i < 400; i++) body += startLine(`live-${b}-${i}`);
        const r = await post(srv.api, body).catch(() => ({ status: 'connection failed' }));
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      }
      const alive = srv.alive();
      const peak = Math.round(srv.peakMiB());
      await srv.stop();
      // Restart on the same data directory with the same heap: does the restore fit?
      let restart;
      try {
        const again = await serve(capped ? ['--max-live-runs', '20000'] : [], { ...process.env, NODE_OPTIONS: '--max-old-space-size=96' }, srv.data);
        await sleep(2000);
        const h = await fetch(`${again.api}/healthz`).then((r) => r.status, () => 'no answer');
        restart = { healthz: h, alive: again.alive(), liveRuns: Number(/^topology_live_runs (\d+)$/m.exec(await (await fetch(`${again.api}/metrics`)).text())?.[1]), peakRssMiB: Math.round(again.peakMiB()) };
        await again.stop();
      } catch (e) {
        restart = { failed: e.message.replace(/\s+/g, ' ').slice(0, 160) };
      }
      return { capped, batchesOf400: statuses, wallS: +((performance.now() - t0) / 1000).toFixed(1), alive, peakRssMiB: peak, restart };
    } finally {
      await srv.stop();
    }
  },
};

/** Whether the build in ROOT knows an integer flag of serve (an old build refuses it as unknown). */
function supports(flag) {
  return new Promise((res) => {
    const c = spawn(process.execPath, [join(ROOT, 'bin', 'topology-audit.js'), 'serve', flag, 'x'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let e = '';
    c.stderr.on('data', (d) => (e += d));
    c.on('exit', () => res(e.includes(`${flag}: expected`)));
  });
}

function countFds(pid) {
  return readdirSync(`/proc/${pid}/fd`).length;
}

const results = {};
for (const [name, run] of Object.entries(attacks)) {
  if (only && !only.has(name)) continue;
  try {
    results[name] = await run();
  } catch (e) {
    results[name] = { error: e.message.slice(0, 200) };
  }
  console.log(name.padEnd(12), JSON.stringify(results[name]));
}
console.log(JSON.stringify({ root: ROOT, node: process.version, results }));
process.exit(0);
