/**
 * Issue 44 (SIGTERM stops the server within 10 s under any load): a cluster instance told to stop in the middle of a
 * takeover does not first read every run of the partitions in. The soak's second instance, stopped after the first
 * had released its 32 partitions (60,000 runs), took 7.5 s to exit: its stop waited for the whole takeover. Now the
 * takeover stops before its next group of runs (500 at a time), and the partitions it gave up are released with the
 * others, so another instance takes them at once.
 *
 * Setting: A (through a fault-injecting proxy) and B share the partitions; B holds 1,200 runs (three groups) and dies;
 * A's takeover of B's partitions is held at its first read of receipts while A is sent SIGTERM. Checked: A logs
 * `takeover_stopped` (never `partitions_taken` for B's partitions), exits 0, and no lease is left in A's name.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { partitionOf } from '../src/store/pg-store.js';
import { faultHarness } from './helpers/fault-proxy.js';
import { getJson, startServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const PARTITIONS = 8;
const RUNS = 1_200;
const cluster = async (api: string) => (await getJson(`${api}/api/v1/cluster`)).body;
const logLines = (text: string): Record<string, unknown>[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('a cluster instance stopped during a takeover', () => {
  const h = faultHarness();

  it('stops the takeover at its next group of runs and releases the partitions it gave up', async () => {
    const url = await h.db().database('leave_takeover');
    const proxy = await h.proxy();
    const args = (n: string, store: string) => ['--store', store, '--instance', `leave-${n}`, '--partitions', String(PARTITIONS), '--contract', 'research-publish', '--lease-ttl', '3s'];
    const a = await startServerProcess({ args: args('a', proxy.through(url)) });
    h.running.add(a);
    const b = await startServerProcess({ args: args('b', url) });
    h.running.add(b);
    await until('A and B share the partitions', async () => {
      const st = await Promise.all([a, b].map((s) => cluster(s.api)));
      return st.every((s) => s.liveInstances === 2 && s.owned > 0) && st[0].owned + st[1].owned === PARTITIONS;
    }, 30_000);
    const bParts = new Set<number>((await cluster(b.api)).ownedPartitions as number[]);

    // 1,200 runs in B's partitions: the takeover reads them in three groups.
    const runs: string[] = [];
    for (let k = 0; runs.length < RUNS && k < 100 * RUNS; k++) if (bParts.has(partitionOf(`leave-${k}`, PARTITIONS))) runs.push(`leave-${k}`);
    expect(runs.length).toBe(RUNS);
    const at = new Date().toISOString();
    const body = runs.map((run) => JSON.stringify({ run, event: 'e1', type: 'edge', at, from: 'orchestrator', to: 'researcher', kind: 'delegate' })).join('\n') + '\n';
    const res = await fetch(`${b.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status, await res.text()).toBe(200);
    await until('B holds the runs', async () => Number((await (await fetch(`${b.api}/metrics`)).text()).match(/^topology_live_runs (\d+)$/m)?.[1]) >= RUNS, 30_000);

    // B dies. A's takeover of B's partitions is held at its first read of receipts until A has begun to shut down.
    proxy.holdOn('FROM receipts WHERE run = ANY($1::text[]) ORDER BY seq', async () => {
      a.child.kill('SIGTERM');
      await until('A shutting down', async () => logLines(a.stderr()).some((l) => l.event === 'shutdown'), 30_000);
    });
    b.child.kill('SIGKILL');
    await b.stop();
    h.running.delete(b);

    await until('the takeover held', async () => proxy.held() === 1, 60_000);
    // Its exit, on the one SIGTERM sent above (a second would end it by the signal's default action).
    const code = await new Promise<number | null>((resolve) => (a.child.exitCode !== null ? resolve(a.child.exitCode) : a.child.once('exit', (c) => resolve(c))));
    h.running.delete(a);
    expect(code).toBe(0);
    const lines = logLines(a.stderr());
    const stopped = lines.find((l) => l.event === 'takeover_stopped');
    expect(stopped, 'takeover_stopped logged').toMatchObject({ partitions: bParts.size });
    // The takeover of B's partitions never finished (A's own, at its start, did: with no runs).
    expect(lines.filter((l) => l.event === 'partitions_taken' && Number(l.runs) > 0)).toEqual([]);
    // Every lease A held or was taking over is released: none is left in A's name.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const left = await client.query(`SELECT part FROM leases WHERE owner = 'leave-a'`);
      expect(left.rows).toEqual([]);
    } finally {
      await client.end();
    }
  }, 180_000);
});
