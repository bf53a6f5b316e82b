/**
 * Issue 18: several `serve` processes on one real PostgreSQL (a throwaway cluster started by the test), against one
 * embedded single instance given the same input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { parseReceiptFile } from '../src/core/receipt.js';
import { partitionOf, PgStore } from '../src/store/pg-store.js';
import { startPgCluster } from './helpers/pg-cluster.js';
import { getJson, ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import { parseExposition } from './helpers/metrics-exposition.js';
import { until } from './helpers/wait.js';

const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
const expected = JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8')) as Record<string, string>;
const PARTITIONS = 16;
const TTL_MS = 4000;

/** The drift fixture moved so its latest receipt is 5 s old (`wait` stays waiting, `late` is past its deadline). */
function shifted(): typeof drift {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 5000 - latest;
  return drift.map((r) => ({ ...r, at: new Date(Date.parse(r.at) + delta).toISOString() }));
}

const ndjson = (rs: readonly object[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

async function post(srv: ServerProcess, rs: readonly object[]): Promise<{ accepted: number; duplicates: number }> {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: ndjson(rs), headers: { 'content-type': 'application/x-ndjson' } });
  expect(res.status).toBe(200);
  return (await res.json()) as { accepted: number; duplicates: number };
}

/** Whether the server logged that `run` entered `verdict` (the content-free verdict_changed line). */
function entered(srv: ServerProcess, run: string, verdict: string): boolean {
  return srv
    .stderr()
    .split('\n')
    .some((l) => l.includes('"verdict_changed"') && l.includes(`"run":${JSON.stringify(run)}`) && l.includes(`"verdict":"${verdict}"`));
}

async function metricsOf(srv: ServerProcess) {
  const text = await (await fetch(`${srv.api}/metrics`)).text();
  return parseExposition(text, 'prometheus').samples;
}

/** Sum of a family's samples by the given labels, over instances. */
function sumBy(samples: { name: string; labels: Record<string, string>; value: number }[][], name: string, labels: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const list of samples) {
    for (const s of list) {
      if (s.name !== name) continue;
      const k = labels.map((l) => s.labels[l] ?? '').join('|');
      out[k] = (out[k] ?? 0) + s.value;
    }
  }
  for (const k of Object.keys(out)) if (out[k] === 0) delete out[k];
  return out;
}

describe('a cluster of auditors on one shared PostgreSQL store', () => {
  let db: Awaited<ReturnType<typeof startPgCluster>>;
  let a: ServerProcess;
  let b: ServerProcess;
  let single: ServerProcess;
  let client: pg.Client;
  const clusterArgs = (name: string) => ['--store', db.url, '--instance', name, '--lease-ttl', `${TTL_MS}ms`, '--partitions', String(PARTITIONS), '--contract', 'research-publish'];

  beforeAll(async () => {
    db = await startPgCluster();
    [a, b, single] = await Promise.all([
      startServerProcess({ args: clusterArgs('auditor-a') }),
      startServerProcess({ args: clusterArgs('auditor-b') }),
      startServerProcess({ args: ['--contract', 'research-publish'] }),
    ]);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    // The two instances settle on a fair share each.
    await until('an even split of the partitions', async () => {
      const [x, y] = await Promise.all([getJson(`${a.api}/api/v1/cluster`), getJson(`${b.api}/api/v1/cluster`)]);
      return x.body.owned === PARTITIONS / 2 && y.body.owned === PARTITIONS / 2 && x.body.liveInstances === 2;
    }, 30_000);
  }, 90_000);

  afterAll(async () => {
    await client?.end().catch(() => {});
    await Promise.all([a, b, single].map((s) => s?.stop()));
    await db?.stop();
  });

  it('the nine drift cases posted half to each instance give the expected verdict from every instance, and metrics sum to the single instance', async () => {
    const receipts = shifted();
    const runs = [...new Set(receipts.map((r) => r.run))];
    const toA = new Set(runs.filter((_, i) => i % 2 === 0));
    const [ra, rb, rs] = await Promise.all([post(a, receipts.filter((r) => toA.has(r.run))), post(b, receipts.filter((r) => !toA.has(r.run))), post(single, receipts)]);
    expect(ra.accepted + rb.accepted).toBe(receipts.length);
    expect(rs.accepted).toBe(receipts.length);
    // Every instance answers every run, owned or not.
    for (const srv of [a, b]) {
      for (const run of runs) {
        const got = await until(`${run} on ${srv.api}`, async () => {
          const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
          return r.status === 200 && r.body.verdict === expected[run] ? r.body : null;
        }, 15_000);
        expect(got.receipts.length).toBe(receipts.filter((r) => r.run === run).length);
      }
      const list = await getJson(`${srv.api}/api/v1/runs?limit=100`);
      expect(new Set(list.body.runs.map((r: { run: string }) => r.run))).toEqual(new Set(runs));
    }
    // The owners hold the runs (each once), so the gauges and counters summed over the instances equal one instance's.
    await until('the owners hold all nine runs', async () => {
      const m = await Promise.all([a, b].map(metricsOf));
      const live = m.flat().filter((s) => s.name === 'topology_live_runs').reduce((n, s) => n + s.value, 0);
      return live === runs.length;
    }, 15_000);
    const families = [
      ['topology_runs', ['contract', 'version', 'verdict']],
      ['topology_verdicts_total', ['contract', 'verdict']],
      ['topology_receipts_total', ['type', 'result']],
      ['topology_alerting_runs', ['contract', 'verdict']],
    ] as const;
    // Gauges are refreshed by each server's tick (the alerting gauges once a second): compare once every instance has
    // refreshed since the receipts arrived, i.e. when they agree or after 3 s (then the assertions below show the diff).
    const scrapeAll = () => Promise.all([a, b, single].map(metricsOf));
    let [ma, mb, ms] = await scrapeAll();
    for (const end = Date.now() + 3000; Date.now() < end; ) {
      if (families.every(([name, labels]) => isDeepStrictEqual(sumBy([ma, mb], name, [...labels]), sumBy([ms], name, [...labels])))) break;
      await new Promise((r) => setTimeout(r, 100));
      [ma, mb, ms] = await scrapeAll();
    }
    for (const [name, labels] of families) {
      const clusterSum = sumBy([ma, mb], name, [...labels]);
      expect(Object.keys(clusterSum).length, name).toBeGreaterThan(0);
      expect(clusterSum, name).toEqual(sumBy([ms], name, [...labels]));
    }
    // Both instances owned some of the nine.
    expect(ma.find((s) => s.name === 'topology_live_runs')!.value).toBeGreaterThan(0);
    expect(mb.find((s) => s.name === 'topology_live_runs')!.value).toBeGreaterThan(0);
    // The owners wrote each run's pin to the shared store (behind, with the tick's flush): the single instance's pins.
    const singleRuns = (await getJson(`${single.api}/api/v1/runs?limit=100`)).body.runs as { run: string; pin: object | null }[];
    const pinned = Object.fromEntries(singleRuns.filter((r) => r.pin !== null).map((r) => [r.run, r.pin]));
    expect(Object.keys(pinned).length).toBeGreaterThan(0);
    const rows = await until('every pin written to the shared store', async () => {
      const res = await client.query('SELECT run, contract, version, phase FROM pins');
      return res.rows.length >= Object.keys(pinned).length ? res.rows : null;
    }, 10_000);
    expect(Object.fromEntries(rows.map((r) => [r.run, { contract: r.contract, version: r.version, phase: r.phase }]))).toEqual(pinned);
  }, 90_000);

  it('SIGKILL of one instance: the other answers every run, takes receipts for its runs, turns its waiting run incomplete within lease expiry + 1 s, and loses no acknowledged receipt', async () => {
    // A run owned by A, waiting on a deadline 3 s from now, posted to B (the owner folds it from the shared store).
    const leases = async () => new Map((await client.query('SELECT part, owner, expires_at FROM leases')).rows.map((r) => [r.part as number, { owner: r.owner as string | null, expiresAt: (r.expires_at as Date | null)?.getTime() ?? 0 }]));
    const owned = await leases();
    let run = '';
    for (let i = 0; ; i++) {
      run = `kill-wait-${i}`;
      if (owned.get(partitionOf(run, PARTITIONS))?.owner === 'auditor-a') break;
    }
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const deadline = now + 3000;
    const waiting = [
      { run, event: 'start', type: 'run.start', at: iso(now - 1000), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
      { run, event: 'e1', type: 'edge', at: iso(now - 900), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run, event: 'w1', type: 'wait', at: iso(now - 800), on: 'verifier', edge: 'researcher -> verifier : handoff', deadline: iso(deadline) },
    ];
    expect((await post(b, waiting)).accepted).toBe(3);
    // The owner (A) logs the verdict it enters; B, which received the receipts, does not own the run.
    await until('A holds the run as waiting', async () => entered(a, run, 'waiting'), 10_000);
    expect(entered(b, run, 'waiting')).toBe(false);

    // A stream of receipts to A, acknowledged ones remembered, cut by SIGKILL.
    const acked: string[] = [];
    let stop = false;
    const streaming = (async () => {
      for (let i = 0; !stop; i++) {
        const batch = Array.from({ length: 20 }, (_, k) => ({ run: `stream-${i % 7}`, event: `b${i}-${k}`, type: 'edge', at: iso(Date.now()), from: 'orchestrator', to: 'researcher', kind: 'delegate' }));
        try {
          const res = await fetch(`${a.api}/v1/receipts`, { method: 'POST', body: ndjson(batch), headers: { 'content-type': 'application/x-ndjson' } });
          if (res.status === 200 && !stop) for (const r of batch) acked.push(`${r.run}/${r.event}`);
        } catch {
          return;
        }
      }
    })();
    await until('some receipts acknowledged by A', async () => acked.length >= 200, 10_000);
    const before = await leases();
    const aExpiry = Math.max(...[...before.values()].filter((l) => l.owner === 'auditor-a').map((l) => l.expiresAt));
    a.child.kill('SIGKILL');
    stop = true;
    await a.stop();
    await streaming;

    // B still answers every run, including A's, at once (from the shared store).
    for (const r of Object.keys(expected)) {
      const got = await getJson(`${b.api}/api/v1/runs/${r}`);
      expect(got.status, r).toBe(200);
    }
    // B takes A's partitions over once A's leases expire, and its timer moves the waiting run to incomplete.
    const turned = await until('B holds the run as incomplete', async () => (entered(b, run, 'incomplete') ? Date.now() : null), 30_000);
    expect((await getJson(`${b.api}/api/v1/cluster`)).body.owned).toBe(PARTITIONS);
    const view = await getJson(`${b.api}/api/v1/runs/${run}`);
    expect(view.body.verdict).toBe('incomplete');
    expect(turned).toBeLessThanOrEqual(Math.max(aExpiry, deadline) + 1000 + 250 /* polling */);
    console.log(JSON.stringify({ takeover: { leaseExpiredAfterKillMs: aExpiry - now, incompleteAfterLeaseExpiryMs: turned - Math.max(aExpiry, deadline) } }));

    // B takes new receipts for a run A owned.
    expect((await post(b, [{ run, event: 'late-edge', type: 'edge', at: iso(Date.now()), from: 'researcher', to: 'verifier', kind: 'handoff' }])).accepted).toBe(1);
    // No acknowledged receipt lost: every one is in the shared store, answered by B.
    const stored = new Set<string>();
    for (let i = 0; i < 7; i++) {
      const r = await getJson(`${b.api}/api/v1/runs/stream-${i}`);
      for (const x of r.body.receipts ?? []) stored.add(`stream-${i}/${x.event}`);
    }
    expect(acked.length).toBeGreaterThan(0);
    expect(acked.filter((k) => !stored.has(k))).toEqual([]);
  }, 90_000);

  it('setPins writes many pins in one statement; the first pin of a run wins, in the input and across instances', async () => {
    const url = await db.database('pins_batch');
    const [p1, p2] = await Promise.all(['pins-1', 'pins-2'].map((instance) => PgStore.open(url, { instance, partitions: 4 })));
    try {
      const v3 = { contract: 'research-publish', version: '3', phase: 'research' };
      const v2 = { contract: 'research-publish', version: '2', phase: 'publish' };
      const first = await p1.setPins([{ run: 'r1', pin: v3, contractHash: 'h3' }, { run: 'r2', pin: v3, contractHash: 'h3' }]);
      expect(Object.fromEntries(first)).toEqual({ r1: { pin: v3, contractHash: 'h3' }, r2: { pin: v3, contractHash: 'h3' } });
      // r2 is pinned already (by the other instance); r3 twice in one call: its first pin wins.
      const second = await p2.setPins([
        { run: 'r3', pin: v2, contractHash: 'h2' },
        { run: 'r2', pin: v2, contractHash: 'h2' },
        { run: 'r3', pin: v3, contractHash: 'h3' },
      ]);
      expect(Object.fromEntries(second)).toEqual({ r2: { pin: v3, contractHash: 'h3' }, r3: { pin: v2, contractHash: 'h2' } });
      expect(await p1.getPin('r3')).toEqual({ pin: v2, contractHash: 'h2' });
      const direct = new pg.Client({ connectionString: url });
      await direct.connect();
      try {
        expect((await direct.query('SELECT run, contract_hash FROM pins ORDER BY run')).rows).toEqual([
          { run: 'r1', contract_hash: 'h3' },
          { run: 'r2', contract_hash: 'h3' },
          { run: 'r3', contract_hash: 'h2' },
        ]);
      } finally {
        await direct.end();
      }
      expect((await p1.setPins([])).size).toBe(0);
    } finally {
      await Promise.all([p1.close(), p2.close()]);
    }
  }, 30_000);
});
