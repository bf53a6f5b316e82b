/**
 * Issue 32: a cluster of three `serve` processes on one real PostgreSQL under the faults real clusters see: an instance
 * killed with spans pending, an instance paused inside an append transaction, an instance paused past its lease, a
 * question to an instance that does not hold the run, instances given different token files, PostgreSQL restarted.
 * In every test: every acknowledged receipt is stored, none twice, and the verdicts equal one embedded instance's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { partitionOf } from '../src/store/pg-store.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { until } from './helpers/wait.js';
import { startThree } from './helpers/three-instances.js';
import { shiftedDrift } from './helpers/drift.js';
import { exporterFor } from './helpers/otel.js';

const PARTITIONS = 16;
const iso = (ms: number) => new Date(ms).toISOString();
const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Rec = { run: string; event: string; [k: string]: unknown };

async function post(srv: ServerProcess, rs: readonly object[], token?: string): Promise<Response> {
  return fetch(`${srv.api}/v1/receipts`, {
    method: 'POST',
    body: ndjson(rs),
    headers: { 'content-type': 'application/x-ndjson', ...(token ? { authorization: `Bearer ${token}` } : {}) },
  });
}

async function postOk(srv: ServerProcess, rs: readonly object[], token?: string): Promise<void> {
  const res = await post(srv, rs, token);
  expect(res.status, await res.clone().text()).toBe(200);
  await res.arrayBuffer();
}

async function metricsOf(srv: ServerProcess) {
  return parseExposition(await (await fetch(`${srv.api}/metrics`)).text(), 'prometheus').samples;
}

/** Sum of a family's samples by the given labels over instances, zero series dropped, keys sorted. */
function sumBy(samples: { name: string; labels: Record<string, string>; value: number }[][], name: string, labels: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const list of samples) for (const s of list) if (s.name === name) out[labels.map((l) => s.labels[l] ?? '').join('|')] = (out[labels.map((l) => s.labels[l] ?? '').join('|')] ?? 0) + s.value;
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== 0).sort(([x], [y]) => (x < y ? -1 : 1)));
}

const cluster = async (srv: ServerProcess) => (await getJson(`${srv.api}/api/v1/cluster`)).body;

describe('a cluster of three instances on one PostgreSQL, under faults', () => {
  let db: PgCluster;
  const running = new Set<ServerProcess>();

  beforeAll(async () => {
    db = await startPgCluster();
  }, 90_000);

  afterAll(async () => {
    await Promise.all([...running].map((s) => s.stop('SIGKILL')));
    await db?.stop();
  });

  async function start(args: string[]): Promise<ServerProcess> {
    const s = await startServerProcess({ args });
    running.add(s);
    return s;
  }

  async function stop(...servers: ServerProcess[]): Promise<void> {
    for (const s of servers) {
      if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGCONT');
      await s.stop();
      running.delete(s);
    }
  }

  /** Three instances named NAME-a/b/c on a fresh database, settled on their shares of the partitions. */
  const threeOn = (name: string, extra: string[]) => startThree({ db, running }, name, { partitions: PARTITIONS, extra });

  /** Stored receipts as run/event keys; fails if any (run, event) is stored twice. */
  async function storedKeys(client: pg.Client, prefix: string): Promise<Set<string>> {
    const twice = await client.query(`SELECT run, event, count(*) AS n FROM receipts WHERE run LIKE $1 GROUP BY run, event HAVING count(*) > 1`, [`${prefix}%`]);
    expect(twice.rows, 'receipts stored twice').toEqual([]);
    const rows = await client.query('SELECT run, event FROM receipts WHERE run LIKE $1', [`${prefix}%`]);
    return new Set(rows.rows.map((r) => `${r.run as string}/${r.event as string}`));
  }

  /** The verdicts of `runs` at `srv` equal those of the single instance (waited for: owners evaluate within a tail read). */
  async function sameVerdicts(srv: ServerProcess, single: ServerProcess, runs: readonly string[]): Promise<Record<string, string>> {
    const verdicts = async (s: ServerProcess) => Object.fromEntries(await Promise.all(runs.map(async (r) => [r, (await getJson(`${s.api}/api/v1/runs/${r}`)).body?.verdict ?? null])));
    let last: [Record<string, string>, Record<string, string>] = [{}, {}];
    try {
      return await until('verdicts equal to one instance', async () => {
        last = [await verdicts(srv), await verdicts(single)];
        return JSON.stringify(last[0]) === JSON.stringify(last[1]) && Object.values(last[1]).every((v) => v !== null) ? last[1] : null;
      }, 20_000);
    } catch (e) {
      expect(last[0]).toEqual(last[1]);
      throw e;
    }
  }

  it('kill -9 of the instance holding 20 child agent spans, their callers then sent to another: 20/20 edges, no gap (--span-routing any, --parent-wait equal to the lease)', async () => {
    const { srv, client } = await threeOn('pending', ['--span-routing', 'any', '--lease-ttl', '5s', '--parent-wait', '5s']);
    const [a, , c] = srv;
    const single = await start(['--contract', 'research-publish', '--parent-wait', '60s']);
    try {
      const cParts = (await cluster(c)).ownedPartitions as number[];
      const tracer = new BasicTracerProvider().getTracer('pending');
      const pairs: { run: string; parent: ReadableSpan; child: ReadableSpan }[] = [];
      const agent = (name: string, run: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name, 'topology.run.id': run });
      for (let i = 0; pairs.length < 20; i++) {
        const run = `pending-${i}`;
        const parent = tracer.startSpan('invoke_agent orchestrator', { attributes: agent('orchestrator', run) });
        if (!cParts.includes(partitionOf(parent.spanContext().traceId, PARTITIONS))) continue; // C resolves the trace
        const child = tracer.startSpan('invoke_agent researcher', { attributes: agent('researcher', run) }, trace.setSpan(context.active(), parent));
        child.end();
        parent.end();
        pairs.push({ run, parent: parent as unknown as ReadableSpan, child: child as unknown as ReadableSpan });
      }
      const send = async (srvOf: ServerProcess, spans: ReadableSpan[]) => {
        const exp = exporterFor('http-protobuf', srvOf);
        expect(await new Promise<number>((res) => exp.export(spans, (r) => res(r.code)))).toBe(0);
        await exp.shutdown();
      };
      await send(c, pairs.map((p) => p.child));
      await until('C holds the 20 children as pending', async () => /^topology_pending_parent_spans 20$/m.test(await (await fetch(`${c.api}/metrics`)).text()), 10_000);
      c.child.kill('SIGKILL');
      await stop(c);
      // The callers reach A at once: their traces are still C's (its leases have not expired), so A forwards them.
      await send(a, pairs.map((p) => p.parent));
      const edgeOf = (body: any) => (body?.receipts ?? []).filter((x: { type: string }) => x.type === 'edge').map((x: any) => `${x.from} -> ${x.to} : ${x.kind}`);
      await until('20/20 derived edges', async () => {
        const bodies = await Promise.all(pairs.map(async (p) => (await getJson(`${a.api}/api/v1/runs/${p.run}`)).body));
        return bodies.every((b) => edgeOf(b).includes('orchestrator -> researcher : delegate')) ? bodies : null;
      }, 30_000);
      // Past the wait of the adopted children: still no gap anywhere, every edge once.
      await until('nothing pending on A or B', async () => (await Promise.all(srv.slice(0, 2).map(async (s) => (await fetch(`${s.api}/metrics`)).text()))).every((t) => /^topology_pending_parent_spans 0$/m.test(t)), 15_000);
      for (const p of pairs) {
        const body = (await getJson(`${a.api}/api/v1/runs/${p.run}`)).body;
        expect(body.receipts.filter((x: { type: string }) => x.type === 'gap'), p.run).toEqual([]);
        expect(edgeOf(body).filter((e: string) => e === 'orchestrator -> researcher : delegate').length).toBe(1);
      }
      await storedKeys(client, 'pending-');
      // The forwarded records were read and deleted; the adopters' own records of the resolved traces are pruned.
      await until('the shared span log empty', async () => (await client.query('SELECT count(*)::int AS n FROM span_log')).rows[0].n === 0, 20_000);
      await send(single, pairs.map((p) => p.child));
      await send(single, pairs.map((p) => p.parent));
      await sameVerdicts(srv[1], single, pairs.map((p) => p.run));
    } finally {
      await client.end();
      await stop(...srv, single);
    }
  }, 120_000);

  it('SIGSTOP of an instance inside an append transaction for 20 s: the others keep acknowledging (longest stretch without an ack <= 5 s)', async () => {
    const { srv, client } = await threeOn('stall', ['--lease-ttl', '4s']);
    const [a, b, c] = srv;
    const acked: Rec[] = [];
    const ackTimes: number[] = [];
    let stopLoad = false;
    let n = 0;
    const load = async (s: ServerProcess, counted: boolean) => {
      while (!stopLoad) {
        const fresh = Array.from({ length: 20 }, () => ({ run: `stall-${n % 40}`, event: `e${n++}`, type: 'edge', at: iso(Date.now()), from: 'orchestrator', to: 'researcher', kind: 'delegate' }));
        // Each batch carries a redelivery (its first receipt twice): appends take the transaction path, whose session
        // waits for this process between statements. (New receipts alone are one statement that holds the ordering
        // lock only while the database runs it: a pause of the process cannot hold it.)
        const batch = [...fresh, fresh[0]];
        try {
          const res = await post(s, batch);
          await res.arrayBuffer();
          if (res.status === 200) {
            acked.push(...batch);
            if (counted) ackTimes.push(Date.now());
          }
        } catch {
          // a refused connection: not acknowledged
        }
      }
    };
    const loaders = [load(a, true), load(b, true), load(c, false)];
    try {
      await until('acknowledgements flowing', async () => ackTimes.length > 20, 10_000);
      // Stop C at an instant its backend holds the ordering lock, idle in transaction (C waits between statements).
      const holdsLock = async () =>
        Number((await client.query(
          `SELECT count(*) AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
           WHERE a.application_name = $1 AND a.state = 'idle in transaction' AND l.locktype = 'advisory' AND l.granted`,
          ['topology-audit/stall-c'],
        )).rows[0].n) > 0;
      let caught = false;
      for (let tries = 0; tries < 500 && !caught; tries++) {
        c.child.kill('SIGSTOP');
        await pause(20); // the backend finishes the statement in flight
        caught = await holdsLock();
        if (!caught) {
          c.child.kill('SIGCONT');
          await pause(5 + (tries % 7));
        }
      }
      expect(caught, 'C stopped while holding the ordering lock').toBe(true);
      const stoppedAt = Date.now();
      await pause(20_000); // the fault: C stays stopped for 20 s
      const resumedAt = Date.now();
      c.child.kill('SIGCONT');
      const during = [stoppedAt, ...ackTimes.filter((t) => t > stoppedAt && t < resumedAt), resumedAt];
      const longest = Math.max(...during.slice(1).map((t, i) => t - during[i]));
      console.log(JSON.stringify({ stall: { stoppedMs: resumedAt - stoppedAt, acksWhileStopped: during.length - 2, longestWithoutAckMs: longest } }));
      expect(longest).toBeLessThanOrEqual(5_000);
      await until('C acknowledges again', async () => (await post(c, [{ run: 'stall-0', event: 'after', type: 'edge', at: iso(Date.now()), from: 'orchestrator', to: 'researcher', kind: 'delegate' }])).status === 200, 30_000);
      acked.push({ run: 'stall-0', event: 'after' });
      stopLoad = true;
      await Promise.all(loaders);
      // Every acknowledged receipt stored once, and nothing stored that was not acknowledged (C's open transaction was
      // rolled back, its export answered 503).
      const stored = await storedKeys(client, 'stall-');
      expect([...new Set(acked.map((r) => `${r.run}/${r.event}`))].sort()).toEqual([...stored].sort());
      const single = await start(['--contract', 'research-publish']);
      try {
        await postOk(single, acked.filter((r) => r.event !== 'after'));
        await postOk(single, [{ run: 'stall-0', event: 'after', type: 'edge', at: iso(Date.now()), from: 'orchestrator', to: 'researcher', kind: 'delegate' }]);
        await sameVerdicts(a, single, Array.from({ length: 40 }, (_, i) => `stall-${i}`));
      } finally {
        await stop(single);
      }
    } finally {
      stopLoad = true;
      c.child.kill('SIGCONT');
      await Promise.all(loaders);
      await client.end();
      await stop(...srv);
    }
  }, 180_000);

  it('SIGSTOP past the lease, then SIGCONT: the stale owner writes nothing and acts on nothing; verdicts, the runs gauge and the verdict counter summed over the instances equal the truth', async () => {
    const { srv, client } = await threeOn('fence', ['--lease-ttl', '3s']);
    const [a, b, c] = srv;
    const single = await start(['--contract', 'research-publish']);
    try {
      const cParts = (await cluster(c)).ownedPartitions as number[];
      const runs: string[] = [];
      for (let i = 0; runs.length < 8; i++) if (cParts.includes(partitionOf(`fence-${i}`, PARTITIONS))) runs.push(`fence-${i}`);
      const now = Date.now();
      const deadline = now + 6_000;
      const setup = runs.flatMap((run) => [
        { run, event: 'start', type: 'run.start', at: iso(now - 1000), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
        { run, event: 'e1', type: 'edge', at: iso(now - 900), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
        { run, event: 'w1', type: 'wait', at: iso(now - 800), on: 'verifier', edge: 'researcher -> verifier : handoff', deadline: iso(deadline) },
      ]);
      await postOk(c, setup);
      await postOk(single, setup);
      const entered = (srvOf: ServerProcess, run: string, verdict: string, from = 0) =>
        srvOf.stderr().slice(from).split('\n').some((l) => l.includes('"verdict_changed"') && l.includes(`"run":${JSON.stringify(run)}`) && l.includes(`"verdict":"${verdict}"`));
      await until('C holds the runs as waiting', async () => runs.every((r) => entered(c, r, 'waiting')), 10_000);
      // C counts a transition once its state is in the shared table (the next owner counts from there): C's writes landed.
      await until('the shared table holds C\'s waiting', async () => {
        const rows = (await client.query('SELECT verdict FROM runs WHERE run = ANY($1::text[])', [runs])).rows;
        return rows.length === runs.length && rows.every((r) => r.verdict === 'waiting');
      }, 10_000);
      c.child.kill('SIGSTOP');
      // While C is stopped the awaited handoffs arrive at A, before the deadline.
      const handoffs = runs.map((run) => ({ run, event: 'e2', type: 'edge', at: iso(Date.now()), from: 'researcher', to: 'verifier', kind: 'handoff' }));
      await postOk(a, handoffs);
      await postOk(single, handoffs);
      await until('A and B took C\'s partitions over', async () => (await cluster(a)).owned + (await cluster(b)).owned === PARTITIONS, 30_000);
      await until('the deadline passed', async () => Date.now() > deadline + 1_000, 30_000);
      const mark = c.stderr().length;
      c.child.kill('SIGCONT');
      await until('C noticed its leases lapsed', async () => /"event":"leases_lapsed"/.test(c.stderr().slice(mark)), 10_000);
      // The truth: the single instance's verdicts, in the shared table too (written by the new owners only).
      const truth = await sameVerdicts(a, single, runs);
      expect(Object.values(truth).includes('incomplete')).toBe(false);
      await until('the shared table holds the true verdicts', async () => {
        const rows = (await client.query('SELECT run, verdict FROM runs WHERE run = ANY($1::text[])', [runs])).rows;
        return rows.length === runs.length && rows.every((r) => r.verdict === truth[r.run as string]);
      }, 10_000);
      // The stale owner acted on nothing after it resumed: no verdict change, no refused (fenced) write attempted.
      for (const r of runs) expect(entered(c, r, 'incomplete', mark), r).toBe(false);
      expect(c.stderr().slice(mark)).not.toMatch(/"verdict_changed"/);
      // It rejoins, and the counters summed over the instances equal the single instance's.
      await until('C back with a share', async () => (await cluster(c)).owned > 0, 30_000);
      // topology_runs (the runs now, per verdict) and topology_verdicts_total (the transitions) sum to the truth: a new
      // owner counts only the transitions after the verdict the old owner last wrote to the shared table.
      const families = [
        ['topology_runs', ['contract', 'version', 'verdict']],
        ['topology_verdicts_total', ['contract', 'verdict']],
      ] as const;
      await until('counters summed over the instances equal the truth', async () => {
        const [ma, mb, mc, ms] = await Promise.all([a, b, c, single].map(metricsOf));
        return families.every(([name, labels]) => JSON.stringify(sumBy([ma, mb, mc], name, [...labels])) === JSON.stringify(sumBy([ms], name, [...labels])));
      }, 15_000).catch(async (e) => {
        const [ma, mb, mc, ms] = await Promise.all([a, b, c, single].map(metricsOf));
        if (process.env.DEBUG_FENCE) for (const s of [a, b, c]) console.log(s.stderr().split('\n').filter((l) => /verdict_changed|partitions_|leases_lapsed/.test(l)).join('\n'));
        for (const [name, labels] of families) expect(sumBy([ma, mb, mc], name, [...labels]), name).toEqual(sumBy([ms], name, [...labels]));
        throw e;
      });
      const stored = await storedKeys(client, 'fence-');
      expect(stored.size).toBe(setup.length + handoffs.length);
    } finally {
      c.child.kill('SIGCONT');
      await client.end();
      await stop(...srv, single);
    }
  }, 600_000); // a safety net only: every step waits on a condition, and a busy machine may take minutes

  it('any instance answers at once: a verdict long-poll on a non-owner within 1 s of the owner\'s ack; 10,000 runs listed with the same verdicts as the embedded store (time logged)', async () => {
    const { srv, client } = await threeOn('answers', ['--lease-ttl', '4s']);
    const [a, b, c] = srv;
    const single = await start(['--contract', 'research-publish', '--max-live-runs', '100000']);
    try {
      const aParts = (await cluster(a)).ownedPartitions as number[];
      let run = '';
      for (let i = 0; i < 100_000; i++) if (aParts.includes(partitionOf((run = `answers-gate-${i}`), PARTITIONS))) break;
      expect(aParts.includes(partitionOf(run, PARTITIONS)), 'a run in a partition A holds').toBe(true);
      // B does not hold the run, which nobody has seen yet: its long-poll waits, then A acknowledges the run.
      const poll = (async () => {
        const res = await fetch(`${b.api}/api/v1/runs/${run}/verdict?wait=30`);
        return { at: Date.now(), status: res.status, body: (await res.json()) as { verdict: string; settled: boolean } };
      })();
      await until('B holds the long-poll', async () => (await metricsOf(b)).some((s) => s.name === 'topology_api_long_polls' && s.value >= 1), 10_000);
      const complete = shiftedDrift('answers').filter((r) => r.run === 'answers-drift-complete').map((r) => ({ ...r, run }));
      await postOk(a, complete);
      const ackedAt = Date.now();
      await postOk(single, complete);
      const answer = await poll;
      console.log(JSON.stringify({ gate: { answeredAfterAckMs: answer.at - ackedAt } }));
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ verdict: 'healthy', settled: true });
      expect(answer.at - ackedAt).toBeLessThanOrEqual(1_000);

      // 10,000 runs (with the one above) over the three instances, and the same to one embedded instance.
      const bulk = Array.from({ length: 9_999 }, (_, i) => ({ run: `answers-bulk-${i}`, event: 'e1', type: 'edge', at: iso(Date.now() - 1000), from: 'orchestrator', to: 'researcher', kind: 'delegate' }));
      for (let i = 0; i < bulk.length; i += 2_000) {
        await postOk(srv[(i / 2_000) % 3], bulk.slice(i, i + 2_000));
        await postOk(single, bulk.slice(i, i + 2_000));
      }
      const timed = async (s: ServerProcess) => {
        const t0 = performance.now();
        const r = await getJson(`${s.api}/api/v1/runs?limit=10000`);
        return { ms: performance.now() - t0, runs: r.body.runs as { run: string; verdict: string; findings: number; firstFinding: string | null }[] };
      };
      await until('every run listed', async () => (await timed(c)).runs.length === 10_000 || null, 30_000);
      const best = async (s: ServerProcess) => {
        const tries = [await timed(s), await timed(s), await timed(s)];
        return tries.sort((x, y) => x.ms - y.ms)[0];
      };
      const [cl, one] = [await best(c), await best(single)];
      console.log(JSON.stringify({ list10k: { clusterMs: Math.round(cl.ms), singleMs: Math.round(one.ms) } }));
      expect(cl.runs.length).toBe(10_000);
      // Verdicts and findings (their number, the first one's message) as the embedded store lists them: the cluster
      // instance lists the runs the others hold as their owners wrote them (runs.listed), evaluating none.
      const byRun = (rows: { run: string; verdict: string; findings: number; firstFinding: string | null }[]) =>
        Object.fromEntries(rows.map((r) => [r.run, { verdict: r.verdict, findings: r.findings, firstFinding: r.firstFinding }]));
      expect(byRun(cl.runs)).toEqual(byRun(one.runs));
      const listed = await client.query(`SELECT count(*)::int AS n FROM runs WHERE run LIKE 'answers-%' AND listed IS NOT NULL`);
      expect(listed.rows[0].n).toBe(bulk.length + 1);
      // The time of the list beside the embedded store is a figure, not a pass/fail claim here (a busy machine moves it): logged above, reported in docs/scaling.md.
      const stored = await storedKeys(client, 'answers-');
      expect(stored.size).toBe(bulk.length + complete.length);
    } finally {
      await client.end();
      await stop(...srv, single);
    }
  }, 180_000);

  it('instances with a different --ingest-tokens file are refused at start (and say so); 20,000 run.starts in one post are taken without exhausting the pool', async () => {
    const url = await db.database('trust');
    const dir = mkdtempSync(join(tmpdir(), 'ta-cluster-trust-'));
    const ORCH = 'orch-token-0123456789abcdef';
    const [one, two] = [join(dir, 'one'), join(dir, 'two')];
    writeFileSync(one, `${ORCH} orchestrator\nfield-token-0123456789abcdef fieldops-main\n`);
    writeFileSync(two, `${ORCH} orchestrator\nforged-token-0123456789abcdef fieldops-main\n`);
    const args = (n: string, file: string) => ['--store', url, '--instance', `trust-${n}`, '--partitions', String(PARTITIONS), '--contract', 'research-publish', '--lease-ttl', '4s', '--ingest-tokens', file];
    const [a, b] = await Promise.all([start(args('a', one)), start(args('b', one))]);
    try {
      await expect(startServerProcess({ args: args('c', two) })).rejects.toThrow(/"cluster_refused".*differs from the cluster's/);
      // With the same file, a third instance joins.
      const c = await start(args('c', one));
      await until('three instances', async () => (await cluster(c)).liveInstances === 3, 10_000);
      await stop(c);
      // 20,000 run.starts from the owner's token at one instance: pins read 500 runs per query, one group at a time.
      const starts = Array.from({ length: 20_000 }, (_, i) => ({ run: `trust-run-${i}`, event: 'start', type: 'run.start', at: iso(Date.now()), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }));
      const res = await post(a, starts, ORCH);
      const body = await res.json();
      expect(res.status, JSON.stringify(body).slice(0, 300)).toBe(200);
      expect(body.accepted).toBe(20_000);
      expect(a.stderr()).not.toMatch(/"api_error"/);
      expect((await getJson(`${a.api}/readyz`)).status).toBe(200);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        expect((await client.query(`SELECT count(*)::int AS n FROM receipts WHERE run LIKE 'trust-run-%'`)).rows[0].n).toBe(20_000);
      } finally {
        await client.end();
      }
    } finally {
      await stop(a, b);
    }
    // With none of the old instances alive, the cluster may move to a new file: the first to start records it.
    const c = await start(args('c', two));
    expect((await cluster(c)).liveInstances).toBe(1);
    await stop(c);
  }, 180_000);

  it('PostgreSQL killed and restarted with no traffic: every instance reports not ready, and ready again within 2 s of the database', async () => {
    const { srv, client } = await threeOn('ready', ['--lease-ttl', '4s']);
    await client.end();
    try {
      const ready = async () => Promise.all(srv.map(async (s) => (await getJson(`${s.api}/readyz`)).status));
      expect(await ready()).toEqual([200, 200, 200]);
      db.kill();
      await until('every instance not ready', async () => (await ready()).every((s) => s === 503), 15_000);
      await db.restart();
      const up = Date.now();
      const back = await until('every instance ready again', async () => ((await ready()).every((s) => s === 200) ? Date.now() : null), 15_000);
      console.log(JSON.stringify({ readiness: { readyAfterDatabaseMs: back - up } }));
      expect(back - up).toBeLessThanOrEqual(2_000);
      // And they commit again.
      await postOk(srv[0], [{ run: 'ready-1', event: 'e1', type: 'edge', at: iso(Date.now()), from: 'orchestrator', to: 'researcher', kind: 'delegate' }]);
    } finally {
      await stop(...srv);
    }
  }, 120_000);
});
