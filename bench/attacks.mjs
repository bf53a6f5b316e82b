// Resource attacks against a real `serve` child process, for before/after figures.
//
//   node bench/attacks.mjs [ROOT] [--only name,name]
//
// ROOT is a checkout with bin/topology-audit.js and a built dist/ (default: this repository). Run it once against a
// build of the old code and once against this one. Attacks: aborted long-polls, an NDJSON flood of invalid lines,
// slow bodies, half-open connections, a stalled event-stream reader, many live runs. For each: wall time, the
// server's peak RSS (VmHWM), response sizes and what a normal client saw. Prints a table and one JSON line.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
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
    stderr: () => err,
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
  // and how long does /healthz wait meanwhile (probed every 20 ms; a probe still waiting counts with its age)? An
  // answer not given within AGENTS_CAP_S (default 180) seconds is reported as such (an old build can take minutes).
  // stored: the run's receipts read back after the answer (no acknowledged receipt lost). loopMaxCpuMs: inside the
  // server, the most process CPU time spent between two turns of a 5 ms timer (a preload; all threads, so GC helper
  // threads count too): the longest hold of the event loop in CPU time, which a loaded machine does not inflate as
  // it inflates wall time (loopMaxWallMs). AGENTS_SHAPE=twice names each agent twice, =versions adds 500 versions:
  // the runs whose event lists still need one walk over the run read back from the store.
  async agents() {
    const out = {};
    const cap = Number(process.env.AGENTS_CAP_S ?? 180) * 1000;
    const probe = join(mkdtempSync(join(tmpdir(), 'ta-attack-loop-')), 'loop.mjs');
    writeFileSync(
      probe,
      `let c0 = process.cpuUsage(), t0 = performance.now(), cpu = 0, wall = 0;
setInterval(() => { const c = process.cpuUsage(), t = performance.now(); cpu = Math.max(cpu, (c.user - c0.user + c.system - c0.system) / 1000); wall = Math.max(wall, t - t0); c0 = c; t0 = t; }, 5).unref();
process.on('SIGUSR2', () => { process.stderr.write('LOOP ' + JSON.stringify({ cpu, wall }) + '\\n'); cpu = 0; wall = 0; });
`,
    );
    const loop = async (srv) => {
      const before = srv.stderr().length;
      srv.child.kill('SIGUSR2');
      for (let i = 0; i < 100 && !srv.stderr().slice(before).includes('LOOP '); i++) await sleep(50);
      const m = /LOOP (\{.*\})/.exec(srv.stderr().slice(before));
      return m ? JSON.parse(m[1]) : { cpu: NaN, wall: NaN };
    };
    for (const n of (process.env.AGENTS ?? '2000,20000').split(',').map(Number)) {
      const srv = await serve(['--max-body', '16MiB'], { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${probe}` });
      await loop(srv); // start-up excluded
      try {
        const t0 = Date.parse('2026-01-01T00:00:00Z');
        let body = line({ run: 'wide', event: 's', type: 'run.start', at: new Date(t0).toISOString(), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' });
        // AGENTS_SHAPE=twice: each agent also sends one edge back (named twice); =versions: the edges carry 500 versions
        const shape = process.env.AGENTS_SHAPE ?? 'once';
        for (let i = 0; i < n; i++) {
          body += line({ run: 'wide', event: `e${i}`, type: 'edge', at: new Date(t0 + i + 1).toISOString(), from: 'orchestrator', to: `unknown-${i}`, kind: 'delegate', ...(shape === 'versions' ? { version: `v${i % 500}` } : {}) });
          if (shape === 'twice') body += line({ run: 'wide', event: `f${i}`, type: 'edge', at: new Date(t0 + i + 1).toISOString(), from: `unknown-${i}`, to: 'orchestrator', kind: 'handoff' });
        }
        let done = false;
        const started = performance.now();
        const p = fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } })
          .then(async (r) => ({ status: r.status, accepted: (await r.json()).accepted, ms: performance.now() - started }))
          .finally(() => (done = true));
        p.catch(() => {});
        const health = [];
        let probeAt = performance.now();
        let probeErrors = 0;
        const probes = (async () => {
          while (!done && performance.now() - started < cap) {
            probeAt = performance.now();
            // a connection of its own per probe (no keep-alive race with the server's idle timer); an error counts
            // with its wait
            await new Promise((res) => request({ host: '127.0.0.1', port: srv.ports.api, path: '/healthz', agent: false }, (r) => r.resume().on('end', res)).on('error', () => res(probeErrors++)).end());
            health.push(performance.now() - probeAt);
            await sleep(20);
          }
        })();
        const r = await Promise.race([p, sleep(cap).then(() => null)]);
        if (!r) {
          out[n] = { status: `no answer in ${cap / 1000} s`, healthzProbes: health.length, probeErrors, healthzMaxMs: `>=${Math.round(Math.max(performance.now() - probeAt, ...health))}` };
          continue;
        }
        await probes;
        const held = await loop(srv);
        const run = await (await fetch(`${srv.api}/api/v1/runs/wide`)).json();
        out[n] = { status: r.status, ms: Math.round(r.ms), accepted: r.accepted, stored: run.receipts?.length, verdict: run.verdict, unknownAgents: run.findings?.filter((f) => f.code === 'unknown_agent').length, healthzProbes: health.length, probeErrors, healthzMaxMs: Math.round(Math.max(0, ...health)), loopMaxCpuMs: Math.round(held.cpu), loopMaxWallMs: Math.round(held.wall) };
      } finally {
        await srv.stop();
      }
    }
    return out;
  },

  // Issue 47.3 (third attack): one run with HANDOFFS (100,000) handoff receipts, posted in batches of 1,000 (10
  // receipts per handoff: proposed, admitted, dispatched, running, 4 lease renewals, returned, accepted), then 50
  // more single receipts (second attempts of early handoffs). Each post's time (first and last batch, the singles'
  // median and max) and the longest /healthz wait meanwhile. HANDOFFS_CAP_S (300) bounds the bulk.
  async handoffs() {
    const n = Number(process.env.HANDOFFS ?? 100_000);
    const cap = Number(process.env.HANDOFFS_CAP_S ?? 300) * 1000;
    const srv = await serve(['--max-body', '16MiB']);
    try {
      const t0 = Date.parse('2026-01-01T00:00:00Z');
      const iso = (ms) => new Date(ms).toISOString();
      const lines = [];
      for (let i = 0; lines.length < n; i++) {
        const t = t0 + i * 100;
        const b = { run: 'ho', type: 'handoff', handoff: `h${i}`, attempt: 1, from: 'orchestrator', to: `worker-${i % 7}` };
        lines.push(
          { ...b, event: `h${i}-p`, at: iso(t), state: 'PROPOSED', duplicateKey: `k${i}`, finalOwner: 'orchestrator', onTimeout: 'cancel' },
          { ...b, event: `h${i}-a`, at: iso(t + 1), state: 'ADMITTED', leaseExpiresAt: iso(t + 60_000) },
          { ...b, event: `h${i}-d`, at: iso(t + 2), state: 'DISPATCHED' },
          { ...b, event: `h${i}-r`, at: iso(t + 3), state: 'RUNNING' },
          ...[1, 2, 3, 4].map((k) => ({ ...b, event: `h${i}-hb${k}`, at: iso(t + 3 + k), state: 'RUNNING', leaseExpiresAt: iso(t + 60_000 + k * 1000) })),
          { ...b, event: `h${i}-ret`, at: iso(t + 8), state: 'RETURNED', stateVersion: 7 },
          { ...b, event: `h${i}-acc`, at: iso(t + 9), state: 'ACCEPTED', stateVersion: 7 },
        );
      }
      lines.length = n;
      const health = [];
      let done = false;
      const probes = (async () => {
        while (!done) {
          const at = performance.now();
          await new Promise((res) => request({ host: '127.0.0.1', port: srv.ports.api, path: '/healthz', agent: false }, (r) => r.resume().on('end', res)).on('error', res).end());
          health.push(performance.now() - at);
          await sleep(20);
        }
      })();
      const post = async (batch) => {
        const at = performance.now();
        const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: batch.map((l) => JSON.stringify(l)).join('\n') + '\n', headers: { 'content-type': 'application/x-ndjson' } });
        await r.json();
        return performance.now() - at;
      };
      await post([{ run: 'ho', event: 's', type: 'run.start', at: iso(t0 - 1), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }]);
      const started = performance.now();
      const batches = [];
      for (let k = 0; k < n && performance.now() - started < cap; k += 1000) batches.push(await post(lines.slice(k, k + 1000)));
      const held = Math.min(n, batches.length * 1000);
      const singles = [];
      for (let i = 0; i < 50; i++) singles.push(await post([{ run: 'ho', type: 'handoff', handoff: `h${i}`, attempt: 2, event: `h${i}-2`, at: iso(t0 + i * 100 + 50), state: 'PROPOSED', from: 'orchestrator', to: 'worker-1' }]));
      done = true;
      await probes;
      singles.sort((a, b) => a - b);
      return { held, bulkMs: Math.round(performance.now() - started), firstBatchMs: Math.round(batches[0]), lastBatchMs: Math.round(batches.at(-1)), singleMedianMs: Math.round(singles[25] * 10) / 10, singleMaxMs: Math.round(singles.at(-1) * 10) / 10, healthzProbes: health.length, healthzMaxMs: Math.round(Math.max(0, ...health)) };
    } finally {
      await srv.stop();
    }
  },

  // Issue 30.1-2: forged handoff facts from a non-owner token, and an edge under another source's event id.
  async parties() {
    const dir = mkdtempSync(join(tmpdir(), 'ta-attack-tokens-'));
    const T = { owner: 'owner-token-0123456789abcdef', spec: 'spec-token-0123456789abcdef', rev: 'rev-token-0123456789abcdef', orch: 'orch-token-0123456789abcdef', res: 'res-token-0123456789abcdef' };
    writeFileSync(join(dir, 'ingest'), `${T.owner} fieldops-main\n${T.spec} manual-specialist\n${T.rev} manual-reviewer-a\n${T.orch} orchestrator\n${T.res} researcher\n`);
    const srv = await serve(['--ingest-tokens', join(dir, 'ingest')]);
    const as = (token, body) => fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { authorization: `Bearer ${token}` } }).then((r) => r.json());
    const verdict = async (run) => (await (await fetch(`${srv.api}/api/v1/runs/${run}`)).json()).verdict;
    try {
      const fx = readFileSync(join(ROOT, 'receipts', 'handoffs', 'ho-budget-copied.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const target = (r) => (r.type === 'handoff' && (r.state === 'RUNNING' || r.state === 'RETURNED')) || (r.type === 'edge' && r.from === 'manual-specialist');
      await as(T.owner, fx.filter((r) => !target(r)).map(line).join(''));
      await as(T.spec, fx.filter(target).map(line).join(''));
      await as(T.owner, fx.filter(target).map(line).join('')); // an old build wants the source's token for every receipt
      const rootBefore = await verdict('ho-budget-copied');
      await as(T.rev, line({ run: 'ho-budget-copied', event: 'forged', type: 'handoff', at: '2025-03-14T09:00:00Z', budgetOp: 'root', units: { actions: 100000, contextUnits: 1000000, effects: 9 }, from: 'manual-reviewer-a' }));
      const rootAfter = await verdict('ho-budget-copied');
      const masked = {};
      for (const first of ['orchestrator', 'researcher']) {
        const run = `masked-${first}`;
        const at = new Date().toISOString();
        await as(T.orch, line({ run, event: 's', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }));
        const bad = line({ run, event: 'x1', type: 'edge', at, from: 'orchestrator', to: 'verifier', kind: 'delegate' });
        const ok = line({ run, event: 'x1', type: 'edge', at, from: 'researcher', to: 'verifier', kind: 'handoff' });
        if (first === 'orchestrator') await as(T.orch, bad).then(() => as(T.res, ok));
        else await as(T.res, ok).then(() => as(T.orch, bad));
        masked[first + 'First'] = await verdict(run);
      }
      // The reviewer's CANCELLED for the owner's expired handoff to the specialist (lease_expired_open would go).
      const h = { run: 'forge-cancel', type: 'handoff', handoff: 'h-1', attempt: 1, to: 'manual-specialist', from: 'fieldops-main' };
      await as(T.owner, [
        { run: 'forge-cancel', event: 'e1', type: 'run.start', at: '2025-03-14T10:00:00Z', contract: 'fieldops-manual', version: '1', phase: 'specialist', from: 'fieldops-main' },
        { ...h, event: 'e2', at: '2025-03-14T10:00:01Z', state: 'PROPOSED', leaseExpiresAt: '2025-03-14T10:02:00Z', finalOwner: 'fieldops-main', onTimeout: 'return-ownership' },
        { ...h, event: 'e3', at: '2025-03-14T10:00:02Z', state: 'ADMITTED' },
        { ...h, event: 'e4', at: '2025-03-14T10:00:03Z', state: 'DISPATCHED' },
      ].map(line).join(''));
      const cancelState = async () => {
        const v = await (await fetch(`${srv.api}/api/v1/runs/forge-cancel`)).json();
        return `${v.verdict}${v.findings.some((f) => f.code === 'lease_expired_open') ? ' (lease_expired_open)' : ''}`;
      };
      const cancelBefore = await cancelState();
      const forged = await as(T.rev, line({ ...h, event: 'c1', at: '2025-03-14T10:01:00Z', state: 'CANCELLED', from: 'manual-reviewer-a' }));
      const cancelAfter = await cancelState();
      return { forgedRoot: `${rootBefore} -> ${rootAfter}`, forgedCancel: `${cancelBefore} -> ${cancelAfter} (accepted ${forged.accepted})`, masked };
    } finally {
      await srv.stop();
    }
  },

  // Issue 30.4: 3 HTTP/2 connections x 100 gRPC streams with headers and no message; then NDJSON, OTLP/HTTP, /readyz.
  async h2bodiless() {
    const srv = await serve(['--max-inflight', '256']);
    const sessions = [];
    try {
      for (let c = 0; c < 3; c++) {
        const s = http2.connect(`http://127.0.0.1:${srv.ports.otlpGrpc}`);
        s.on('error', () => {});
        sessions.push(s);
        await new Promise((r) => s.once('remoteSettings', r));
        for (let i = 0; i < 100; i++) s.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 'content-type': 'application/grpc+proto' }, { endStream: false }).on('error', () => {});
        await new Promise((r) => s.ping(r));
      }
      const ndjson = (await post(srv.api, startLine('honest'))).status;
      const otlp = (await fetch(`http://127.0.0.1:${srv.ports.otlpHttp}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"resourceSpans":[]}' })).status;
      const readyz = (await fetch(`${srv.api}/readyz`)).status;
      return { streams: 300, ndjson, otlpHttp: otlp, readyz };
    } finally {
      for (const s of sessions) s.destroy();
      await srv.stop();
    }
  },

  // Issue 30.5: fill --max-live-runs with runs that never settle; is an honest new run accepted later, and after a restart?
  async liveidle() {
    const idle = await supports('--idle-evict-after');
    const args = ['--max-live-runs', '1000', ...(idle ? ['--idle-evict-after', '2s'] : [])];
    const srv = await serve(args);
    try {
      let body = '';
      for (let i = 0; i < 1000; i++) body += line({ run: `flood-${i}`, event: 'e', type: 'edge', at: new Date().toISOString(), from: 'orchestrator', to: 'researcher', kind: 'delegate' });
      await post(srv.api, body);
      const first = (await post(srv.api, startLine('honest-1'))).status;
      await sleep(4000);
      const after4s = (await post(srv.api, startLine('honest-2'))).status;
      await srv.stop();
      const again = await serve(args, process.env, srv.data);
      await sleep(3000);
      const afterRestart = (await post(again.api, startLine('honest-3'))).status;
      await again.stop();
      return { idleEviction: idle, honestAtOnce: first, honestAfter4s: after4s, honestAfterRestart: afterRestart };
    } finally {
      await srv.stop();
    }
  },

  // Issue 30.6: 1,100 long-polls (wait=300) on one run: is /healthz answered, and an NDJSON post?
  async longpollcap() {
    const srv = await serve((await supports('--max-long-polls')) ? ['--max-long-polls', '512'] : []);
    const reqs = [];
    try {
      await post(srv.api, startLine('slow-run'));
      const statuses = {};
      for (let i = 0; i < 1100; i++) {
        const r = request({ host: '127.0.0.1', port: srv.ports.api, path: '/api/v1/runs/slow-run/verdict?wait=300', agent: false }, (res) => {
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          res.resume();
        });
        r.on('error', () => (statuses.error = (statuses.error ?? 0) + 1));
        r.end();
        reqs.push(r);
      }
      await sleep(3000);
      const health = await Promise.race([fetch(`${srv.api}/healthz`).then((r) => r.status, () => 'error'), sleep(5000).then(() => 'no answer in 5 s')]);
      const ingest = await Promise.race([post(srv.api, startLine('x')).then((r) => r.status, () => 'error'), sleep(5000).then(() => 'no answer in 5 s')]);
      return { longPolls: 1100, answered: { ...statuses }, healthz: health, ndjson: ingest };
    } finally {
      for (const r of reqs) r.destroy();
      await srv.stop();
    }
  },

  // Issue 30.6: 1,100 connections on the API port that never finish their headers: is /healthz answered (on
  // --health-port where the build has it, else on the API port)?
  async headerflood() {
    const hp = await supports('--health-port');
    const srv = await serve(hp ? ['--health-port', '0'] : []);
    const socks = [];
    try {
      for (let i = 0; i < 1100; i++) socks.push(await raw(srv.ports.api, 'GET /healthz HTTP/1.1\r\nhost: x\r\n'));
      await sleep(1000);
      const url = hp ? `http://127.0.0.1:${srv.ports.health}/healthz` : `${srv.api}/healthz`;
      const t = performance.now();
      const health = await Promise.race([fetch(url).then((r) => r.status, () => 'error'), sleep(5000).then(() => 'no answer in 5 s')]);
      return { connections: 1100, healthPort: hp, healthz: health, ms: Math.round(performance.now() - t) };
    } finally {
      for (const s of socks) s.destroy();
      await srv.stop();
    }
  },

  // Issue 30.7: an idle TCP connection to the gRPC TLS port: how long does it stay open?
  async grpctls() {
    const dir = mkdtempSync(join(tmpdir(), 'ta-attack-tls-'));
    execFileSync('/usr/bin/openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=localhost'], { stdio: 'ignore' });
    const srv = await serve(['--tls-cert', join(dir, 'c.pem'), '--tls-key', join(dir, 'k.pem')]);
    try {
      const s = await raw(srv.ports.otlpGrpc);
      s.resume();
      const t0 = Date.now();
      const open = await Promise.race([new Promise((r) => s.once('close', () => r(((Date.now() - t0) / 1000).toFixed(1)))), sleep(30_000).then(() => '>30')]);
      s.destroy();
      return { idleConnectionClosedAfterS: open };
    } finally {
      await srv.stop();
    }
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
    c.on("exit", () => res(e.includes(`${flag}:`) && !e.includes("Unknown option")));
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
