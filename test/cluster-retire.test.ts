/**
 * Issues 44 and 50 in a cluster: memory holds what can still change. A cluster's instance used to keep every run of
 * its partitions in memory until the retention pruned it (7 days by default), and counted the settled ones against
 * --max-live-runs, so steady traffic filled the cap and was refused. Now a settled run leaves memory at once, as on a
 * single instance: it stays counted in topology_runs, is read from the shared store by the API, and is loaded again,
 * with its whole history, by its next receipt (whichever instance received it). A partition handed to another
 * instance takes its retired runs' counts with it (its new owner counts them without loading them), and the
 * retention prune takes them out of the count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Receipt } from '../src/core/types.js';
import { startPgCluster } from './helpers/pg-cluster.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const PARTITIONS = 8;
const RUNS = 200;
const CAP = 40;
const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

/** A healthy research-publish run (the drift fixture's drift-complete), `at` its start. */
function healthyRun(run: string, at: number): Receipt[] {
  const t = (s: number) => new Date(at + s * 1000).toISOString();
  const base = { run, version: '3', status: 'ok' };
  return [
    { ...base, event: 'start', type: 'run.start', at: t(0), contract: 'research-publish', phase: 'research', from: 'orchestrator' },
    { ...base, event: 'e1', type: 'edge', at: t(5), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    { ...base, event: 'e2', type: 'edge', at: t(10), from: 'researcher', to: 'verifier', kind: 'handoff' },
    { ...base, event: 'e3', type: 'edge', at: t(15), from: 'verifier', to: 'orchestrator', kind: 'return' },
    { ...base, event: 'outcome', type: 'outcome', at: t(20), from: 'orchestrator', verified: true },
    { ...base, event: 'end', type: 'run.end', at: t(25), from: 'orchestrator', result: 'completed' },
  ] as unknown as Receipt[];
}

async function post(srv: ServerProcess, rs: readonly object[]): Promise<{ status: number; body: { accepted: number; duplicates?: number; refused?: unknown } }> {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: ndjson(rs), headers: { 'content-type': 'application/x-ndjson' } });
  return { status: res.status, body: (await res.json()) as { accepted: number; refused?: unknown } };
}

/** A metric's samples on `srv`, summed over the samples `pick` keeps. */
async function metric(srv: ServerProcess, name: string, pick: (labels: Record<string, string>) => boolean = () => true): Promise<number> {
  const text = await (await fetch(`${srv.api}/metrics`)).text();
  return parseExposition(text, 'prometheus')
    .samples.filter((s) => s.name === name && pick(s.labels))
    .reduce((n, s) => n + s.value, 0);
}
const healthyRuns = (srv: ServerProcess) => metric(srv, 'topology_runs', (l) => l.verdict === 'healthy');
const liveRuns = (srv: ServerProcess) => metric(srv, 'topology_live_runs');
/** Runs counted in topology_runs under any verdict: a run loaded without its history would be counted twice (under healthy, kept, and the lone edge's verdict). */
const countedRuns = (srv: ServerProcess) => metric(srv, 'topology_runs');
const owned = async (srv: ServerProcess) => (await getJson(`${srv.api}/api/v1/cluster`)).body.owned as number;

describe.sequential('a cluster instance holds only runs that can still change', () => {
  let db: Awaited<ReturnType<typeof startPgCluster>>;
  let client: pg.Client;
  const servers: ServerProcess[] = [];
  const args = (name: string, extra: string[] = []) => ['--store', db.url, '--instance', name, '--lease-ttl', '3s', '--partitions', String(PARTITIONS), '--contract', 'research-publish', '--max-live-runs', String(CAP), ...extra];
  const runs = Array.from({ length: RUNS }, (_, i) => `retire-${String(i).padStart(4, '0')}`);
  const at = Date.now() - 60_000;

  beforeAll(async () => {
    db = await startPgCluster();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  }, 120_000);

  afterAll(async () => {
    await client?.end().catch(() => {});
    await Promise.all(servers.map((s) => s.stop()));
    await db?.stop();
  });

  it(`${RUNS} settled runs under --max-live-runs ${CAP}: none refused, none held, every one counted and readable`, async () => {
    const a = await startServerProcess({ args: args('retire-a') });
    servers.push(a);
    await until('A holds every partition', async () => (await owned(a)) === PARTITIONS, 60_000);
    // Ten runs per request, each request after the one before is evaluated: more runs than the cap, one after another.
    for (let i = 0; i < RUNS; i += 10) {
      const batch = runs.slice(i, i + 10).flatMap((run, k) => healthyRun(run, at + (i + k) * 10));
      const { status, body } = await post(a, batch);
      expect(status).toBe(200);
      expect(body.refused).toBeUndefined();
      expect(body.accepted).toBe(batch.length);
      await until('the batch settled', async () => (await healthyRuns(a)) === i + 10, 30_000);
    }
    expect(await liveRuns(a)).toBeLessThan(CAP);
    expect(await healthyRuns(a)).toBe(RUNS);
    await until('every verdict state written', async () => Number((await client.query(`SELECT count(*) AS n FROM runs WHERE verdict = 'healthy' AND settled`)).rows[0].n) === RUNS, 30_000);
    // A run that left memory is read from the shared store: its verdict and its receipts.
    const { status, body } = await getJson(`${a.api}/api/v1/runs/${runs[7]}`);
    expect(status).toBe(200);
    expect(body.verdict).toBe('healthy');
    expect(body.receipts).toHaveLength(6);
  }, 240_000);

  it('a receipt of a run that left memory loads it again with its whole history', async () => {
    const a = servers[0];
    // An edge the contract allows, after the run ended: with the run's six receipts the run stays healthy; a run with
    // that edge alone (what a run loaded without its history would be) is judged otherwise.
    const late = (run: string) => ({ run, event: 'late', type: 'edge', at: new Date(at + 600_000).toISOString(), version: '3', status: 'ok', from: 'orchestrator', to: 'publisher', kind: 'delegate' });
    expect((await post(a, [late('retire-alone')])).body.accepted).toBe(1);
    await until('the lone edge judged', async () => (await getJson(`${a.api}/api/v1/runs/retire-alone`)).status === 200, 30_000);
    const alone = (await getJson(`${a.api}/api/v1/runs/retire-alone`)).body.verdict;
    expect(alone).not.toBe('healthy');
    expect((await post(a, [late(runs[3])])).body.accepted).toBe(1);
    await until('the run judged with its seven receipts', async () => (await getJson(`${a.api}/api/v1/runs/${runs[3]}`)).body.receipts?.length === 7, 30_000);
    const { body } = await getJson(`${a.api}/api/v1/runs/${runs[3]}`);
    expect(body.verdict).toBe('healthy');
    // Evaluated again and left again: counted once in topology_runs (its count left with the reload, came back with
    // the retire); the lone edge's run once, under its verdict. Loaded without its history, the run would be counted
    // twice (healthy, kept, and the lone edge's verdict).
    await until('retired again, every run counted once', async () => (await liveRuns(a)) === 1 && (await countedRuns(a)) === RUNS + 1, 30_000);
    expect(await healthyRuns(a)).toBe(RUNS);
    expect(await metric(a, 'topology_runs', (l) => l.verdict === alone)).toBe(1);
  }, 120_000);

  it('a second instance takes half the partitions: the retired runs are counted once in the cluster, by their partition\u2019s holder, without being loaded', async () => {
    const a = servers[0];
    const b = await startServerProcess({ args: args('retire-b') });
    servers.push(b);
    await until('an even split', async () => (await owned(a)) === PARTITIONS / 2 && (await owned(b)) === PARTITIONS / 2, 60_000);
    const byPart = await client.query(`SELECT part, count(*) AS n FROM runs WHERE verdict = 'healthy' GROUP BY part`);
    expect(byPart.rows.length).toBe(PARTITIONS);
    await until('the counts moved with the partitions', async () => (await healthyRuns(a)) + (await healthyRuns(b)) === RUNS && (await healthyRuns(b)) > 0 && (await healthyRuns(a)) > 0, 30_000);
    // B holds none of them in memory: it counted them.
    expect(await liveRuns(b)).toBeLessThan(5);
    // A receipt of one of B's retired runs sent to A: stored by A, folded by B with the run's history (the tail).
    const mine = await client.query(`SELECT r.run FROM runs r JOIN leases l ON l.part = r.part WHERE l.owner = 'retire-b' AND r.verdict = 'healthy' ORDER BY r.run LIMIT 1`);
    expect(mine.rows.length).toBe(1);
    const run = mine.rows[0].run as string;
    const late = { run, event: 'late-b', type: 'edge', at: new Date(at + 600_000).toISOString(), version: '3', status: 'ok', from: 'orchestrator', to: 'publisher', kind: 'delegate' };
    expect((await post(a, [late])).body.accepted).toBe(1);
    await until('B loaded it with its history', async () => (await getJson(`${b.api}/api/v1/runs/${run}`)).body.receipts?.length === 7, 30_000);
    expect((await getJson(`${b.api}/api/v1/runs/${run}`)).body.verdict).toBe('healthy');
    await until('retired again at B, every run counted once', async () => (await liveRuns(b)) === 0 && (await countedRuns(a)) + (await countedRuns(b)) === RUNS + 1, 30_000);
    expect((await healthyRuns(a)) + (await healthyRuns(b))).toBe(RUNS);
  }, 180_000);

  it('the retention prune deletes settled runs and takes their counts out of topology_runs', async () => {
    for (const s of servers.splice(0)) await s.stop();
    const c = await startServerProcess({ args: args('retire-c', ['--retention', '2s']) });
    servers.push(c);
    await until('every settled run pruned', async () => Number((await client.query('SELECT count(*) AS n FROM runs WHERE settled')).rows[0].n) === 0, 60_000);
    await until('none counted', async () => (await healthyRuns(c)) === 0, 30_000);
    // Only the receipt of the one run that can still change (the lone edge, working) is left.
    expect((await client.query('SELECT DISTINCT run FROM receipts')).rows.map((r) => r.run)).toEqual(['retire-alone']);
  }, 120_000);
});
