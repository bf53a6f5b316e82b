/**
 * Issue 50: the run list of a cluster pages as a single instance's does (`?after=` / `next`, issue 44's soak check of
 * every acknowledged run): two `serve` instances on a throwaway PostgreSQL hold 2,500 runs spread over both
 * instances' partitions; paged from either instance, newest or oldest first, every run is listed exactly once, in the
 * store's (first_at, run) order, each with its verdict, the last page's `next` null; the CLI's `runs --all` and the
 * web view's list page the same way; a run whose partition moves to the other instance between two pages is neither
 * listed twice nor skipped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startPgCluster } from './helpers/pg-cluster.js';
import { getJson, runCli, startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const PARTITIONS = 8;
const RUNS = 2_500;
const TTL_MS = 4000;

const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

async function post(srv: ServerProcess, rs: readonly object[]): Promise<number> {
  // As an exporter does: a 503 + Retry-After (an instance not ready yet) is sent again after a short wait.
  let res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: ndjson(rs), headers: { 'content-type': 'application/x-ndjson' } });
  for (let i = 0; i < 60 && res.status === 503 && res.headers.get('retry-after') !== null; i++) {
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 500));
    res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: ndjson(rs), headers: { 'content-type': 'application/x-ndjson' } });
  }
  expect(res.status).toBe(200);
  const body = (await res.json()) as { accepted: number };
  if (body.accepted !== rs.length) console.log(JSON.stringify(body).slice(0, 1000));
  return body.accepted;
}

type Row = { run: string; verdict: string };

/** Every page of the list from `srv` (`path` the list's URL with its query) after `from`, following `next`: the rows, pages and their sizes. */
async function pageAll(srv: ServerProcess, path: string, from: string | null = null, maxPages = 100): Promise<{ rows: Row[]; pages: number; sizes: number[] }> {
  const rows: Row[] = [];
  const sizes: number[] = [];
  let after = from;
  for (let pages = 1; pages <= maxPages; pages++) {
    const { status, body } = await getJson<{ runs: Row[]; next: string | null }>(`${srv.api}${path}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    expect(status).toBe(200);
    rows.push(...body.runs.map((r) => ({ run: r.run, verdict: r.verdict })));
    sizes.push(body.runs.length);
    if (body.next === null) return { rows, pages, sizes };
    expect(typeof body.next).toBe('string');
    after = body.next;
  }
  throw new Error(`more than ${maxPages} pages`);
}

describe('the run list of a cluster pages like the single instance (?after= / next)', () => {
  let db: Awaited<ReturnType<typeof startPgCluster>>;
  let a: ServerProcess;
  let b: ServerProcess;
  let client: pg.Client;
  const args = (name: string) => ['--store', db.url, '--instance', name, '--lease-ttl', `${TTL_MS}ms`, '--partitions', String(PARTITIONS), '--contract', 'research-publish'];
  /** The store's runs in the list's order (newest first) and each one's stored verdict. */
  let newest: string[] = [];
  let stored = new Map<string, string>();

  beforeAll(async () => {
    db = await startPgCluster();
    [a, b] = await Promise.all([startServerProcess({ args: args('pager-a') }), startServerProcess({ args: args('pager-b') })]);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await until('an even split of the partitions', async () => {
      const [x, y] = await Promise.all([getJson(`${a.api}/api/v1/cluster`), getJson(`${b.api}/api/v1/cluster`)]);
      return x.body.owned === PARTITIONS / 2 && y.body.owned === PARTITIONS / 2 && x.body.liveInstances === 2;
    }, 60_000);
    // 2,500 runs in five bulk posts, alternately to each instance (each run's owner folds it, whoever received it):
    // one run.start each; every third run ends too (another verdict).
    const at = Date.now();
    for (let k = 0; k < 5; k++) {
      const batch: object[] = [];
      for (let i = k * (RUNS / 5); i < (k + 1) * (RUNS / 5); i++) {
        const run = `page-${String(i).padStart(5, '0')}`;
        batch.push({ run, event: 's', type: 'run.start', at: new Date(at + i).toISOString(), contract: 'research-publish' });
        if (i % 3 === 0) batch.push({ run, event: 'e', type: 'run.end', at: new Date(at + i + 1).toISOString(), result: 'failed' });
      }
      expect(await post(k % 2 ? b : a, batch)).toBe(batch.length);
    }
    // Every run evaluated by its owner and its verdict stored.
    await until('every run with a stored verdict', async () => Number((await client.query('SELECT count(*) AS n FROM runs WHERE verdict IS NOT NULL')).rows[0].n) === RUNS, 120_000);
    const res = await client.query('SELECT run, verdict FROM runs ORDER BY first_at DESC, run DESC');
    newest = res.rows.map((r) => r.run as string);
    stored = new Map(res.rows.map((r) => [r.run as string, r.verdict as string]));
    // Both instances hold runs: the list merges runs held here with the other instance's.
    const parts = await client.query('SELECT count(DISTINCT part) AS n FROM runs');
    expect(Number(parts.rows[0].n)).toBe(PARTITIONS);
  }, 240_000);

  afterAll(async () => {
    await client?.end().catch(() => {});
    await Promise.all([a, b].map((s) => s?.stop()));
    await db?.stop();
  });

  it('from each instance, newest and oldest first, limit 100: every run once, in order, with its verdict, next null on the last page', async () => {
    expect(new Set(stored.values()).size).toBeGreaterThan(1);
    for (const srv of [a, b]) {
      for (const order of ['newest', 'oldest'] as const) {
        const { rows, pages, sizes } = await pageAll(srv, `/api/v1/runs?limit=100&order=${order}`);
        expect(pages).toBe(RUNS / 100);
        expect(sizes.every((n) => n === 100)).toBe(true);
        expect(rows.map((r) => r.run)).toEqual(order === 'newest' ? newest : [...newest].reverse());
        for (const r of rows) expect(r.verdict).toBe(stored.get(r.run));
      }
      // A verdict filter pages too: the runs in that verdict, once each.
      const ended = [...stored].filter(([, v]) => v === stored.get('page-00000')).map(([run]) => run);
      const { rows } = await pageAll(srv, `/api/v1/runs?limit=100&verdict=${stored.get('page-00000')}`);
      expect(rows.map((r) => r.run).sort()).toEqual(ended.sort());
    }
  }, 120_000);

  it('a malformed cursor is the client error (400) from the API and the web view', async () => {
    for (const srv of [a, b]) {
      for (const path of ['/api/v1/runs?after=not-a-cursor', '/ui/api/runs?after=not-a-cursor']) {
        const { status, body } = await getJson(`${srv.api}${path}`);
        expect(status).toBe(400);
        expect(body.error).toMatch(/after: not a cursor/);
      }
    }
  });

  it('the CLI (runs --all) and the web view page through every run', async () => {
    const cli = await runCli(['runs', '--server', b.api, '--limit', '300', '--all', '--json'], { timeoutMs: 60_000 });
    expect(cli.code).toBe(0);
    const pages = cli.stdout.trim().split('\n').map((l) => JSON.parse(l) as { runs: Row[]; next: string | null });
    expect(pages.length).toBe(Math.ceil(RUNS / 300));
    expect(pages.at(-1)!.next).toBeNull();
    expect(pages.flatMap((p) => p.runs.map((r) => r.run))).toEqual(newest);
    const ui = await pageAll(a, '/ui/api/runs?limit=500');
    expect(ui.pages).toBe(RUNS / 500);
    expect(ui.rows.map((r) => r.run)).toEqual(newest);
  }, 120_000);

  it('the partitions of a stopped instance move to the other between two pages: no run listed twice, none skipped', async () => {
    const first = await getJson<{ runs: Row[]; next: string }>(`${a.api}/api/v1/runs?limit=1000`);
    expect(first.body.next).toEqual(expect.any(String));
    await b.stop();
    await until('a holds every partition', async () => (await getJson(`${a.api}/api/v1/cluster`)).body.owned === PARTITIONS, 60_000);
    const rest = await pageAll(a, '/api/v1/runs?limit=1000', first.body.next);
    const all = [...first.body.runs.map((r) => r.run), ...rest.rows.map((r) => r.run)];
    expect(all).toEqual(newest);
    for (const r of rest.rows) expect(r.verdict).toBe(stored.get(r.run));
  }, 120_000);
});
