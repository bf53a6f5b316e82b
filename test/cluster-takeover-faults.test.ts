/**
 * Issue 49, item 5: a takeover is all or nothing. A connection killed at each statement of a takeover (as a
 * PostgreSQL restart between the claim and the takeover's reads does), through a fault-injecting proxy between the
 * taking instance and PostgreSQL: the partitions are taken over again and a run whose deadline passed turns
 * `incomplete` at its new owner, listed under ?verdict=incomplete and stored. Before, the claimed partitions stayed
 * owned and never loaded: the run stayed `waiting` until the owner lost the lease or restarted. And PostgreSQL itself
 * restarted (fast shutdown, start on the same data directory) while a statement of the takeover waits after the claim.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { partitionOf } from '../src/store/pg-store.js';
import { faultHarness, type FaultProxy } from './helpers/fault-proxy.js';
import { getJson, runCli, startServerProcess, type ServerProcess } from './helpers/server.js';
import { shiftedDrift } from './helpers/drift.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { until } from './helpers/wait.js';

const PARTITIONS = 8;
const iso = (ms: number) => new Date(ms).toISOString();
const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';
const cluster = async (srv: ServerProcess) => (await getJson(`${srv.api}/api/v1/cluster`)).body;

/** The statements of a takeover (ClusterCoordinator.load), each by a marker of its bytes on the wire. */
const STATEMENTS: [string, string][] = [
  ['the partitions\u2019 runs (PgStore.partitionRuns)', 'FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.part'],
  ['their receipts (PgStore.receiptsOfRuns)', 'FROM receipts WHERE run = ANY($1::text[]) ORDER BY seq'],
];
// (The takeover's third statement, the partitions' acknowledgements (acksSince), is left out: a failure there was
// already made good before issue 49, the tail reading every acknowledgement of the owned partitions since its start.)

describe('a takeover whose statement fails', () => {
  const h = faultHarness();
  const running = h.running;

  /**
   * A and B share the partitions (A through the proxy); B holds a run waiting on a deadline, other runs and an
   * acknowledged forbidden edge, and dies; `arm` sets the fault A's takeover of B's partitions meets, `faulted` says it
   * happened. Then A holds every partition, the run turns incomplete at A (listed, stored), every run is loaded, the
   * acknowledgement applies and no receipt is stored twice.
   */
  async function takeoverThroughFault(name: string, arm: (proxy: FaultProxy) => void, faulted: (proxy: FaultProxy) => boolean): Promise<void> {
    const url = await h.db().database(name);
    const proxy = await h.proxy();
    const args = (n: string, store: string) => ['--store', store, '--instance', `${name}-${n}`, '--partitions', String(PARTITIONS), '--contract', 'research-publish', '--lease-ttl', '3s'];
    const a = await startServerProcess({ args: args('a', proxy.through(url)) });
    running.add(a);
    const b = await startServerProcess({ args: args('b', url) });
    running.add(b);
    // A session per question (PostgreSQL may be restarted in between).
    const query = async (text: string, values: unknown[]) => {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      await client.connect();
      try {
        return await client.query(text, values);
      } finally {
        await client.end().catch(() => {});
      }
    };
    try {
      await until('A and B share the partitions', async () => {
        const st = await Promise.all([a, b].map(cluster));
        return st.every((s) => s.liveInstances === 2 && s.owned > 0) && st[0].owned + st[1].owned === PARTITIONS;
      }, 30_000);
      const bParts = new Set<number>((await cluster(b)).ownedPartitions as number[]);
      // A run of B's, waiting on a deadline that passes while B is gone; and other runs of B's partitions.
      let run = '';
      // Bounded: partitions read after the wait above may have moved (then it fails, never spins).
      for (let k = 0; k < 100_000; k++) {
        run = `${name}-wait-${k}`;
        if (bParts.has(partitionOf(run, PARTITIONS))) break;
      }
      expect(bParts.has(partitionOf(run, PARTITIONS)), "a run in a partition B holds").toBe(true);
      const now = Date.now();
      const receipts = [
        { run, event: 'start', type: 'run.start', at: iso(now - 1000), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
        { run, event: 'e1', type: 'edge', at: iso(now - 900), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
        { run, event: 'w1', type: 'wait', at: iso(now - 800), on: 'verifier', edge: 'researcher -> verifier : handoff', deadline: iso(now + 2000) },
        ...Array.from({ length: 20 }, (_, k) => ({ run: `${name}-other-${k}`, event: 'e1', type: 'edge', at: iso(now), from: 'orchestrator', to: 'researcher', kind: 'delegate' })),
      ];
      // And a run of B's partitions with a forbidden edge (alerting), acknowledged before B dies.
      let forbidden = '';
      for (let k = 0; k < 100_000; k++) {
        forbidden = `${name}-fe${k}-drift-direct-route`;
        if (bParts.has(partitionOf(forbidden, PARTITIONS))) break;
      }
      expect(bParts.has(partitionOf(forbidden, PARTITIONS)), "a forbidden-edge run in a partition B holds").toBe(true);
      const drifted = shiftedDrift(forbidden.slice(0, -'-drift-direct-route'.length)).filter((r) => r.run === forbidden);
      const res = await fetch(`${b.api}/v1/receipts`, { method: 'POST', body: ndjson([...receipts, ...drifted]), headers: { 'content-type': 'application/x-ndjson' } });
      expect(res.status, await res.text()).toBe(200);
      await until('B holds the run as waiting', async () => (await getJson(`${b.api}/api/v1/runs/${run}`)).body?.verdict === 'waiting', 10_000);
      await until('B holds the forbidden edge', async () => (await getJson(`${b.api}/api/v1/runs/${forbidden}`)).body?.verdict === 'forbidden_edge', 10_000);
      const ack = await runCli(['ack', forbidden, '--server', b.api, '--by', 'oncall']);
      expect(ack.code, ack.stderr).toBe(0);

      // B dies; A's takeover of B's partitions meets the fault at the statement.
      arm(proxy);
      b.child.kill('SIGKILL');
      await b.stop();
      running.delete(b);

      await until('the fault happened once', async () => faulted(proxy), 60_000);
      await until('A holds every partition', async () => (await cluster(a)).owned === PARTITIONS, 30_000);
      await until('the run incomplete at A', async () => (await getJson(`${a.api}/api/v1/runs/${run}`)).body?.verdict === 'incomplete', 30_000);
      // Listed under its verdict once A holds it (GET may answer first, evaluated from the shared store while the
      // retried takeover still reads; the list filters a run nobody holds by the verdict its last owner stored).
      await until('the run listed incomplete at A', async () => (await getJson(`${a.api}/api/v1/runs?verdict=incomplete&limit=50`)).body.runs.some((r: { run: string }) => r.run === run), 10_000);
      await until('the verdict stored', async () => (await query('SELECT verdict FROM runs WHERE run = $1', [run])).rows[0]?.verdict === 'incomplete', 10_000);
      // Every run of B's partitions is held live at A (loaded), none twice.
      // (Every partition is held once its takeover began: the retried takeovers may still be reading.)
      await until('every run live at A', async () => Number((await (await fetch(`${a.api}/metrics`)).text()).match(/^topology_live_runs (\d+)$/m)?.[1]) >= 22, 30_000);
      // The acknowledgement made at B applies at A (read with the partitions): the forbidden edge is not alerting.
      const alerting = parseExposition(await (await fetch(`${a.api}/metrics`)).text(), 'prometheus').samples.filter((x) => x.name === 'topology_alerting_runs' && x.labels.verdict === 'forbidden_edge');
      expect(alerting.reduce((n, x) => n + x.value, 0)).toBe(0);
      const twice = await query(`SELECT run, event FROM receipts WHERE run LIKE $1 GROUP BY run, event HAVING count(*) > 1`, [`${name}%`]);
      expect(twice.rows).toEqual([]);
    } finally {
      await a.stop();
      running.delete(a);
    }
  }

  it.each(STATEMENTS.map(([what, marker], i) => ({ what, marker, i })))('connection killed at $what: the partitions are loaded anyway, the passed deadline turns incomplete', async ({ marker, i }) => {
    await takeoverThroughFault(`takeover_${i}`, (proxy) => proxy.failOn(marker), (proxy) => proxy.failed() === 1);
  }, 120_000);

  // Issue 49, item 5 as reported: PostgreSQL itself restarted (fast shutdown, then start on the same data directory)
  // while the takeover's statement waits, after the claim: every session of every instance ends with it.
  it.each(STATEMENTS.map(([what, marker], i) => ({ what, marker, i })))('PostgreSQL restarted between the claim and $what: the partitions are taken over after the restart, the passed deadline turns incomplete', async ({ marker, i }) => {
    const restart = async (): Promise<void> => {
      await h.db().shutdown();
      await h.db().restart();
    };
    await takeoverThroughFault(`takeover_restart_${i}`, (proxy) => proxy.holdOn(marker, restart), (proxy) => proxy.held() === 1);
  }, 180_000);
});
