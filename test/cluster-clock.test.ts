/**
 * Issue 49, item 6: one clock for verdicts in a cluster. Two embedded instances on one PostgreSQL, one whose wall
 * clock is 30 s ahead (the `wallClock` test hook of ServeConfig): leases never depended on it, and now its verdicts do
 * not either. It measures the offset with each heartbeat (exported as topology_cluster_clock_offset_seconds) and times
 * deadlines on the database's clock: a run it owns turns `incomplete` no sooner than its deadline (before: 20-31 s
 * early), with the same verdict as the other instance answers. An instance past --max-clock-offset holds no partition.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { join } from 'node:path';
import pg from 'pg';
import { DEFAULTS, startServer, type RunningServer } from '../src/server/serve.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { partitionOf } from '../src/store/pg-store.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { ROOT, getJson, tempDir } from './helpers/server.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { until } from './helpers/wait.js';

const PARTITIONS = 8;
const SKEW_MS = 30_000;
const iso = (ms: number) => new Date(ms).toISOString();
const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

interface Instance {
  srv: RunningServer;
  api: string;
  /** verdict_changed events as logged, with the real time they were logged at. */
  changes: { run: string; verdict: string; at: number }[];
}

describe('one clock for verdicts in a cluster', () => {
  let db: PgCluster;
  const started: Instance[] = [];

  beforeAll(async () => {
    db = await startPgCluster();
  }, 90_000);

  afterAll(async () => {
    for (const i of started) await i.srv.close().catch(() => {});
    await db?.stop();
  });

  async function instance(url: string, name: string, wallClock?: () => number): Promise<Instance> {
    const changes: Instance['changes'] = [];
    const srv = await startServer(loadContractDir(join(ROOT, 'contracts')), {
      ...DEFAULTS,
      port: 0,
      otlpHttpPort: 0,
      otlpGrpcPort: 0,
      dataDir: tempDir('ta-clock-'),
      storeUrl: url,
      instance: name,
      partitions: PARTITIONS,
      leaseTtlMs: 3_000,
      defaultContract: 'research-publish',
      version: 'test',
      log: (event, fields) => {
        if (event === 'verdict_changed') changes.push({ run: String(fields?.run), verdict: String(fields?.verdict), at: Date.now() });
      },
      ...(wallClock ? { wallClock } : {}),
    });
    const inst = { srv, api: `http://127.0.0.1:${srv.ports.api}`, changes };
    started.push(inst);
    return inst;
  }

  it('an instance 30 s ahead: offset measured and exported, deadlines fire on the database clock, verdicts equal to the other instance', async () => {
    const url = await db.database('clock_ahead');
    const ahead = await instance(url, 'ahead', () => Date.now() + SKEW_MS);
    const right = await instance(url, 'right');
    await until('both share the partitions', async () => {
      const st = await Promise.all([ahead, right].map(async (i) => (await getJson(`${i.api}/api/v1/cluster`)).body));
      return st.every((s) => s.liveInstances === 2 && s.owned > 0) && st[0].owned + st[1].owned === PARTITIONS;
    }, 30_000);
    const st = (await getJson(`${ahead.api}/api/v1/cluster`)).body;
    // The database's clock is 30 s behind this host's (loopback: within a second, whatever the machine's load).
    expect(Math.abs(st.clockOffsetMs + SKEW_MS)).toBeLessThan(1_000);
    const exported = parseExposition(await (await fetch(`${ahead.api}/metrics`)).text(), 'prometheus').samples.find((x) => x.name === 'topology_cluster_clock_offset_seconds');
    expect(Math.abs(exported!.value + SKEW_MS / 1000)).toBeLessThan(1);

    // A run held by the instance ahead, waiting on a deadline 5 s from now (real time).
    const aheadParts = new Set<number>(st.ownedPartitions as number[]);
    let run = '';
    // Bounded: partitions read after the wait above may have moved (then it fails, never spins).
    for (let k = 0; k < 100_000; k++) {
      run = `clock-wait-${k}`;
      if (aheadParts.has(partitionOf(run, PARTITIONS))) break;
    }
    expect(aheadParts.has(partitionOf(run, PARTITIONS)), 'a run in a partition the instance ahead holds').toBe(true);
    const now = Date.now();
    const deadline = now + 5_000;
    const receipts = [
      { run, event: 'start', type: 'run.start', at: iso(now - 1000), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
      { run, event: 'e1', type: 'edge', at: iso(now - 900), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run, event: 'w1', type: 'wait', at: iso(now - 800), on: 'verifier', edge: 'researcher -> verifier : handoff', deadline: iso(deadline) },
    ];
    const res = await fetch(`${right.api}/v1/receipts`, { method: 'POST', body: ndjson(receipts), headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status, await res.text()).toBe(200);
    const turned = await until('the owner turns the run incomplete', async () => ahead.changes.find((c) => c.run === run && c.verdict === 'incomplete'), 30_000);
    // Never before the deadline (before issue 49: at once, its clock being 30 s past it). Tolerance: the offset's
    // uncertainty (half a loopback round trip) and the instant the log line is taken.
    expect(turned.at).toBeGreaterThanOrEqual(deadline - 250);
    expect(ahead.changes.filter((c) => c.run === run).map((c) => c.verdict)).toEqual(['waiting', 'incomplete']);
    // The stored verdict (the other instance answers from it) is the owner's.
    await until('the other instance answers incomplete', async () => (await getJson(`${right.api}/api/v1/runs/${run}`)).body?.verdict === 'incomplete', 10_000);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      expect((await client.query('SELECT verdict FROM runs WHERE run = $1', [run])).rows[0].verdict).toBe('incomplete');
    } finally {
      await client.end();
    }
  }, 120_000);

  it('an instance 10 min ahead (past the 60 s bound) holds no partition; the other holds them all', async () => {
    const url = await db.database('clock_far');
    const right = await instance(url, 'right');
    const far = await instance(url, 'far', () => Date.now() + 10 * 60_000);
    await until('the other instance holds every partition, the far one none', async () => {
      const [f, r] = await Promise.all([far, right].map(async (i) => (await getJson(`${i.api}/api/v1/cluster`)).body));
      return f.liveInstances === 2 && f.clockRefused === true && f.owned === 0 && r.owned === PARTITIONS;
    }, 30_000);
  }, 120_000);
  it('API reads of a run another instance holds: an instance whose host clock is 30 s ahead answers as the owner (timed on the database clock)', async () => {
    const url = await db.database('clock_reads');
    // This host's clock 30 s ahead for the whole process (as libfaketime would set it): every Date.now(), the API's
    // included. The owner is given the right clock through the wallClock hook.
    const realNow = Date.now.bind(Date);
    const skewed = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + SKEW_MS);
    const [ahead, owner] = [await instance(url, 'reads-ahead'), await instance(url, 'reads-owner', realNow)];
    try {
      const st = await until('both share the partitions, the offset measured', async () => {
        const [a, o] = await Promise.all([ahead, owner].map(async (i) => (await getJson(`${i.api}/api/v1/cluster`)).body));
        // Both hold partitions (the owner must hold one for the run below), and the skew is measured.
        return a.liveInstances === 2 && o.liveInstances === 2 && a.owned > 0 && o.owned > 0 && a.owned + o.owned === PARTITIONS && Math.abs(a.clockOffsetMs + SKEW_MS) < 1_000 ? o : null;
      }, 30_000);
      // A run the owner holds, waiting on a deadline 15 s away (real time): 15 s past on the skewed host clock.
      const ownerParts = new Set<number>(st.ownedPartitions as number[]);
      let run = '';
      expect(ownerParts.size).toBeGreaterThan(0);
      for (let k = 0; k < 100_000; k++) {
        run = `reads-wait-${k}`;
        if (ownerParts.has(partitionOf(run, PARTITIONS))) break;
      }
      expect(ownerParts.has(partitionOf(run, PARTITIONS)), 'a run in a partition the owner holds').toBe(true);
      const now = realNow();
      const receipts = [
        { run, event: 'start', type: 'run.start', at: iso(now - 1000), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
        { run, event: 'e1', type: 'edge', at: iso(now - 900), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
        { run, event: 'w1', type: 'wait', at: iso(now - 800), on: 'verifier', edge: 'researcher -> verifier : handoff', deadline: iso(now + 15_000) },
      ];
      const res = await fetch(`${owner.api}/v1/receipts`, { method: 'POST', body: ndjson(receipts), headers: { 'content-type': 'application/x-ndjson' } });
      expect(res.status, await res.text()).toBe(200);
      await until('the owner holds the run as waiting', async () => (await getJson(`${owner.api}/api/v1/runs/${run}`)).body?.verdict === 'waiting', 10_000);
      // The skewed instance reads the run from the shared store and evaluates it: on the database's clock, as the owner
      // (before: on its own, 30 s past the deadline: incomplete).
      for (const path of [`/api/v1/runs/${run}`, `/api/v1/runs/${run}/verdict`, `/api/v1/runs/${run}/verdict?wait=1`]) {
        const [there, here] = await Promise.all([owner, ahead].map(async (i) => (await getJson(`${i.api}${path}`)).body?.verdict));
        expect({ path, verdict: here }).toEqual({ path, verdict: there });
      }
      expect(realNow(), 'asked before the deadline').toBeLessThan(now + 15_000);
    } finally {
      for (const i of [ahead, owner]) {
        await i.srv.close().catch(() => {});
        started.splice(started.indexOf(i), 1);
      }
      skewed.mockRestore();
    }
  }, 120_000);
});
