import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import {
  PG_SCHEMA_VERSION,
  PgStore,
  ReceiptStore,
  StoreCommitError,
  partitionOf,
  type AppendPin,
  type AppendResult,
  type PgStoreOptions,
  type SpanLogEntry,
  type StoredReceipt,
} from '../src/store/index.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { migrate, PG_MIGRATIONS } from '../src/store/index.js';
import { at, edge, end, ms, registryOf, start, tinyContract, wait } from './helpers/receipts.js';
import { AuditEngine } from '../src/audit/engine.js';
import { ClusterEngineStore } from '../src/cluster/engine-store.js';
import { Coordination } from '../src/cluster/coordination.js';
import { until } from './helpers/wait.js';

let cluster: PgCluster;
const stores: PgStore[] = [];
const dirs: string[] = [];
let dbCounter = 0;

beforeAll(async () => {
  cluster = await startPgCluster();
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh database of the shared throwaway cluster. */
function freshDb(): Promise<string> {
  return cluster.database(`t${++dbCounter}`);
}

async function open(url: string, instance: string, opts: Omit<PgStoreOptions, 'instance'> = {}): Promise<PgStore> {
  const store = await PgStore.open(url, { instance, ...opts });
  stores.push(store);
  return store;
}

/** The cluster's coordination beside a store (its leases, heartbeat, fence and tail: src/cluster/), one per store. */
const coordinations = new WeakMap<PgStore, Coordination>();
function cl(store: PgStore): Coordination {
  let c = coordinations.get(store);
  if (c === undefined) coordinations.set(store, (c = new Coordination(store)));
  return c;
}

async function sql<T = Record<string, unknown>>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

function delivery(receipt: Receipt, source = 'token-a', receivedAt = 1_000): StoredReceipt {
  return { receipt, source, receivedAt };
}

/** A run id of partition `part` (of `partitions`), the `n`-th such id. */
function runIn(part: number, partitions: number, n = 0): string {
  let found = 0;
  for (let i = 0; ; i++) {
    const id = `run-${i}`;
    if (partitionOf(id, partitions) === part && found++ === n) return id;
  }
}

describe('PgStore: durability', () => {
  // First in the file: crash recovery then replays little WAL (every CREATE DATABASE of later tests adds some).
  it('an acknowledged append survives kill -9 of the database server', async () => {
    const store = await PgStore.open(cluster.url, { instance: 'a' });
    stores.push(store);
    const batch = Array.from({ length: 20 }, (_, i) => delivery(edge(`e${i}`, 0, 'a -> b : delegate', { run: 'durable' })));
    const results = await Promise.all([store.append(batch.slice(0, 10)), store.append(batch.slice(10))]);
    expect(results.map((r) => r.accepted)).toEqual([10, 10]);
    cluster.kill();
    // While the server is down, appends fail and nothing is acknowledged.
    await expect(store.append([delivery(edge('lost', 0, 'a -> b : delegate', { run: 'durable' }))])).rejects.toBeInstanceOf(StoreCommitError);
    expect(store.healthy()).toBe(false);
    await cluster.restart();
    const after = await open(cluster.url, 'b');
    expect((await after.runReceipts('durable')).map((r) => r.event)).toEqual(batch.map((d) => d.receipt.event));
    // The first store reconnects by itself.
    expect((await store.append([delivery(edge('later', 0, 'a -> b : delegate', { run: 'durable' }))])).accepted).toBe(1);
    expect(store.healthy()).toBe(true);
    expect((await after.runReceipts('durable')).map((r) => r.event)).toEqual([...batch.map((d) => d.receipt.event), 'later']);
  });
});

describe('partitionOf', () => {
  /** Reference: FNV-1a over TextEncoder's UTF-8. */
  function reference(key: string, partitions: number): number {
    let h = 0x811c9dc5;
    for (const b of new TextEncoder().encode(key)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    return h % partitions;
  }

  it('is FNV-1a 32-bit of the UTF-8 bytes, modulo the partition count', () => {
    expect(partitionOf('', 2 ** 32)).toBe(0x811c9dc5);
    expect(partitionOf('a', 2 ** 32)).toBe(0xe40c292c);
    expect(partitionOf('foobar', 2 ** 32)).toBe(0xbf9cf968);
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.integer({ min: 1, max: 1024 }), (key, n) => {
        const p = partitionOf(key, n);
        return p === reference(key, n) && p >= 0 && p < n;
      }),
    );
    // Lone surrogates hash as U+FFFD, as TextEncoder encodes them.
    expect(partitionOf('a\ud800b', 2 ** 32)).toBe(reference('a\ud800b', 2 ** 32));
  });
});

describe('PgStore: schema and migrations', () => {
  it('applies the migrations once; a second instance opens the same schema and keeps its partition count', async () => {
    const url = await freshDb();
    // Two servers starting together: the migration lock serialises them.
    const [a, b] = await Promise.all([open(url, 'a', { partitions: 8 }), open(url, 'b', { partitions: 8 })]);
    const c = await open(url, 'c', { partitions: 32 });
    expect([a.partitions, b.partitions, c.partitions]).toEqual([8, 8, 8]);
    expect(c.instance).toBe('c');
    const versions = await sql<{ version: number }>(url, 'SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
    expect(await sql(url, 'SELECT count(*)::int AS n FROM leases')).toEqual([{ n: 8 }]);
    expect(await sql(url, `SELECT value FROM meta WHERE key = 'partitions'`)).toEqual([{ value: '8' }]);
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' }))]);
    expect(await b.runReceipts('r')).toHaveLength(1);
  });

  it('migrates a database of the previous version in place: its runs kept, runs.listed added (null until their owner writes it)', async () => {
    const url = await freshDb();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await migrate(c, 8, PG_MIGRATIONS.filter((m) => m.version < 6));
      await c.query(`INSERT INTO runs (run, part, first_at, updated_at, verdict, settled) VALUES ('old-run', 1, 1000, 2000, 'healthy', true)`);
    } finally {
      await c.end();
    }
    const s = await open(url, 'a');
    expect(s.partitions).toBe(8);
    const versions = await sql<{ version: number }>(url, 'SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
    expect(await s.listRuns({ limit: 10 })).toEqual([{ run: 'old-run', verdict: 'healthy', settled: true, firstAt: 1000, updatedAt: 2000, listed: null }]);
  });

  it('migrates a version-7 database to 8 in place: receipts_by_run dropped, runs fillfactor 80, its receipts read by run as before', async () => {
    const url = await freshDb();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await migrate(c, 8, PG_MIGRATIONS.filter((m) => m.version < 8));
      await c.query(`INSERT INTO runs (run, part, first_at, updated_at) VALUES ('old-run', 1, 1000, 2000)`);
      for (const [event, seqBody] of [['e2', '{"n":1}'], ['e1', '{"n":2}'], ['e3', '{"n":3}']]) {
        await c.query(`INSERT INTO receipts (run, event, variant, body, source, received_at, origin, part) VALUES ('old-run', $1, 0, $2, 'tok', 1000, 'x', 1)`, [event, seqBody]);
      }
    } finally {
      await c.end();
    }
    const indexesOf = async (): Promise<string[]> =>
      (await sql<{ indexname: string }>(url, `SELECT indexname FROM pg_indexes WHERE tablename = 'receipts' ORDER BY indexname`)).map((r) => r.indexname);
    expect(await indexesOf()).toContain('receipts_by_run');
    const s = await open(url, 'a');
    expect(PG_SCHEMA_VERSION).toBeGreaterThanOrEqual(8);
    expect(await indexesOf()).toEqual(['receipts_by_part', 'receipts_pkey', 'receipts_run_event_variant_key']);
    // Version 9: the tables pruned all day are vacuumed at 2% dead rows (and runs keep version 8's fillfactor).
    const vacuum = ['autovacuum_vacuum_scale_factor=0.02', 'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_insert_scale_factor=0.05'];
    expect(await sql(url, `SELECT reloptions FROM pg_class WHERE relname = 'runs'`)).toEqual([{ reloptions: ['fillfactor=80', ...vacuum] }]);
    for (const table of ['receipts', 'pins', 'span_log']) expect(await sql(url, `SELECT reloptions FROM pg_class WHERE relname = $1`, [table]), table).toEqual([{ reloptions: vacuum }]);
    // In seq order (not the unique key's event order), every read by run.
    expect(await s.runReceipts('old-run')).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect((await s.receiptsOfRuns(['old-run'])).get('old-run')).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect((await s.runsWithReceipts(['old-run']))[0].receipts).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('refuses a database whose schema is newer than this build', async () => {
    const url = await freshDb();
    await open(url, 'a');
    await sql(url, 'INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())', [PG_SCHEMA_VERSION + 1]);
    await expect(PgStore.open(url, { instance: 'b' })).rejects.toThrow(/schema version \d+ is newer than this build/);
  });
});

describe('PgStore: append', () => {
  /** Appends, each awaited in turn (`sequential`) or all in one turn, through both stores. */
  async function both(batches: StoredReceipt[][], sequential: boolean): Promise<{ pg: AppendResult[]; lite: AppendResult[]; pgStore: PgStore; lite_: ReceiptStore }> {
    const pgStore = await open(await freshDb(), 'a');
    const dir = mkdtempSync(join(tmpdir(), 'pg-parity-'));
    dirs.push(dir);
    const lite = ReceiptStore.open(dir);
    const run = async (append: (b: StoredReceipt[]) => Promise<AppendResult>): Promise<AppendResult[]> => {
      if (!sequential) return Promise.all(batches.map(append));
      const out: AppendResult[] = [];
      for (const b of batches) out.push(await append(b));
      return out;
    };
    const pgResults = await run((b) => pgStore.append(b));
    const liteResults = await run((b) => lite.append(b));
    return { pg: pgResults, lite: liteResults, pgStore, lite_: lite };
  }

  const r1 = { run: 'r1' };
  const r2 = { run: 'tenant-7/r2' };
  const batches: StoredReceipt[][] = [
    [delivery(start('s', 0, r1)), delivery(edge('e1', 1, 'orchestrator -> researcher : delegate', r1))],
    // A retry written differently (explicit status, another offset, spaced edge): a duplicate.
    [delivery({ ...edge('e1', 1, 'orchestrator -> researcher : delegate', r1), status: 'ok', at: at(1).replace('Z', '+00:00') }, 'token-b', 2_000)],
    // A different content under a stored event: a conflict, kept as variant 1.
    [delivery(edge('e1', 1, 'orchestrator -> writer : delegate', r1), 'token-b', 3_000)],
    // Retries of both versions: duplicates; a third content: conflict.
    [delivery(edge('e1', 1, 'orchestrator -> writer : delegate', r1)), delivery(edge('e1', 1, 'orchestrator -> researcher : delegate', r1)), delivery(edge('e1', 1, 'orchestrator -> critic : delegate', r1))],
    // Inside one batch: new, its duplicate, its conflict, another run.
    [delivery(wait('w1', 2, 'researcher', 'orchestrator -> researcher : delegate', 10, r2)), delivery(wait('w1', 2, 'researcher', 'orchestrator->researcher:delegate', 10, r2)), delivery(wait('w1', 2, 'researcher', 'orchestrator -> researcher : delegate', 11, r2)), delivery(end('end', 3, 'completed', r1))],
    [delivery(end('end', 3, 'failed', r1), 'token-c', 500), delivery(end('end', 3, 'failed', r1))],
  ];

  for (const sequential of [true, false]) {
    it(`gives the SQLite store's outcomes and stored order on the same input (${sequential ? 'one append at a time' : 'all appends in one turn'})`, async () => {
      const { pg: pgResults, lite: liteResults, pgStore, lite_ } = await both(batches, sequential);
      try {
        expect(pgResults).toEqual(liteResults);
        expect(pgResults.flatMap((r) => r.results)).toContain('conflict');
        expect(pgResults.flatMap((r) => r.results)).toContain('duplicate');
        for (const run of ['r1', 'tenant-7/r2']) expect(await pgStore.runReceipts(run)).toEqual(lite_.runReceipts(run));
        expect(await pgStore.counts()).toEqual(lite_.counts());
      } finally {
        lite_.close();
      }
    });
  }

  describe('source-scoped event ids (--ingest-tokens, issue 30.2)', () => {
    /** A delivery from a bound source: its token name and its tag, as the engine hands them to the store. */
    const bound = (receipt: Receipt, token: 'orch' | 'res', receivedAt = 1_000): StoredReceipt => ({ receipt, source: `token-${token === 'orch' ? 1 : 2}-${token}0000`, receivedAt, scope: `${token}0000` });
    const forbidden = (run: string) => edge('x1', 1, 'orchestrator -> verifier : delegate', { run });
    const honest = (run: string) => edge('x1', 1, 'researcher -> verifier : handoff', { run });

    for (const first of ['orchestrator', 'researcher'] as const) {
      for (const sequential of [true, false]) {
        it(`another source's content under the same (run, event) is stored beside it, never in conflict (${first}'s first, ${sequential ? 'one append at a time' : 'one group'})`, async () => {
          const run = `masked-${first}`;
          const orch = () => bound(forbidden(run), 'orch');
          const res = () => bound(honest(run), 'res', 2_000);
          const pair = first === 'orchestrator' ? [orch, res] : [res, orch];
          // both arrive, then each is sent again, then the same-source rule: other content from the first source conflicts
          const batches = [[pair[0]()], [pair[1]()], [res()], [orch()], [bound(edge('x1', 1, 'orchestrator -> critic : delegate', { run }), first === 'orchestrator' ? 'orch' : 'res')]];
          const { pg: pgResults, lite: liteResults, pgStore, lite_ } = await both(batches, sequential);
          try {
            expect(pgResults.map((r) => r.results)).toEqual([['accepted'], ['accepted'], ['duplicate'], ['duplicate'], ['conflict']]);
            expect(pgResults).toEqual(liteResults);
            const stored = await pgStore.runReceipts(run);
            expect(stored).toEqual(lite_.runReceipts(run));
            const later = first === 'orchestrator' ? 'res0000' : 'orch0000';
            expect(stored.map((r) => r.event)).toEqual(['x1', `x1@${later}`, 'x1']);
            expect(stored.filter((r) => r.type === 'edge' && r.from === 'orchestrator' && r.to === 'verifier')).toHaveLength(1);
            expect(await pgStore.counts()).toEqual(lite_.counts());
          } finally {
            lite_.close();
          }
        });
      }
    }

    it('sets storedAs on the later delivery, also on its redelivery; identical content from two sources is one receipt', async () => {
      const url = await freshDb();
      const store = await open(url, 'a');
      const run = 'scoped-ids';
      await store.append([bound(forbidden(run), 'orch')]);
      const later = bound(honest(run), 'res');
      expect((await store.append([later])).results).toEqual(['accepted']);
      expect(later.storedAs).toBe('x1@res0000');
      const again = bound(honest(run), 'res');
      expect((await store.append([again])).results).toEqual(['duplicate']);
      expect(again.storedAs).toBe('x1@res0000');
      // the first source's own receipt is not scoped; the same content from the other source is a duplicate of it
      const same = bound(forbidden(run), 'res');
      expect((await store.append([same])).results).toEqual(['duplicate']);
      expect(same.storedAs).toBeUndefined();
      // without a scope (no --ingest-tokens), other content conflicts as before
      expect((await store.append([delivery(edge('x1', 1, 'orchestrator -> writer : delegate', { run }), 'token-3-c')])).results).toEqual(['conflict']);
      expect(await sql(url, 'SELECT event, variant, source FROM receipts WHERE run = $1 ORDER BY seq', [run])).toEqual([
        { event: 'x1', variant: 0, source: 'token-1-orch0000' },
        { event: 'x1@res0000', variant: 0, source: 'token-2-res0000' },
        { event: 'x1', variant: 1, source: 'token-3-c' },
      ]);
    });
  });

  it('keeps runs.first_at the least and updated_at the greatest receipt time; an append that changes neither leaves the row unwritten', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    const times = async (): Promise<unknown> => (await s.listRuns({ limit: 10 })).map((r) => [r.run, r.firstAt, r.updatedAt]);
    const xmin = async (): Promise<string> => (await sql<{ xmin: string }>(url, `SELECT xmin::text FROM runs WHERE run = 'r'`))[0].xmin;
    await s.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' }), 'tok', 2_000)]);
    expect(await times()).toEqual([['r', 2_000, 2_000]]);
    await s.append([delivery(edge('e2', 1, 'a -> b : delegate', { run: 'r' }), 'tok', 1_000)]);
    expect(await times()).toEqual([['r', 1_000, 2_000]]);
    await s.append([delivery(edge('e3', 2, 'a -> b : delegate', { run: 'r' }), 'tok', 3_000), delivery(edge('e4', 3, 'a -> b : delegate', { run: 'q' }), 'tok', 3_000)]);
    expect(await times()).toEqual([['q', 3_000, 3_000], ['r', 1_000, 3_000]]);
    const before = await xmin();
    await s.append([delivery(edge('e5', 4, 'a -> b : delegate', { run: 'r' }), 'tok', 1_500)]);
    expect(await times()).toEqual([['q', 3_000, 3_000], ['r', 1_000, 3_000]]);
    expect(await xmin()).toBe(before);
    expect(await s.runReceipts('r')).toHaveLength(4);
  });

  it('group commit: 50 concurrent appends share transactions and all resolve', async () => {
    const commits: number[] = [];
    const store = await open(await freshDb(), 'a', { onCommit: (_s, n) => commits.push(n) });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => store.append([delivery(edge(`e${i}`, 0, 'a -> b : delegate', { run: `run-${i % 7}` })), delivery(edge(`f${i}`, 0, 'a -> b : delegate', { run: `run-${i % 7}` }))])),
    );
    expect(results.every((r) => r.accepted === 2)).toBe(true);
    expect(commits.length).toBeGreaterThan(0);
    expect(commits.length).toBeLessThan(50);
    expect(commits.reduce((a, b) => a + b, 0)).toBe(100);
    expect(store.commitStats()).toEqual({ commits: commits.length, failedCommits: 0 });
    expect(await store.counts()).toEqual({ receipts: 100, runs: 7 });
  });

  it('acknowledges nothing of a group whose commit fails, and recovers with the next', async () => {
    const store = await open(await freshDb(), 'a');
    // A NUL byte is refused by PostgreSQL text: the whole group's transaction fails.
    const poisoned = store.append([delivery(edge('bad', 0, 'a -> b : delegate', { run: 'r' }), 'tok\u0000en')]);
    const innocent = store.append([delivery(edge('good', 0, 'a -> b : delegate', { run: 'r' }))]);
    await expect(poisoned).rejects.toBeInstanceOf(StoreCommitError);
    await expect(innocent).rejects.toBeInstanceOf(StoreCommitError);
    expect(store.healthy()).toBe(false);
    expect(await store.runReceipts('r')).toEqual([]);
    expect((await store.append([delivery(edge('good', 0, 'a -> b : delegate', { run: 'r' }))])).accepted).toBe(1);
    expect(store.healthy()).toBe(true);
    expect(store.commitStats().failedCommits).toBe(1);
  });

  it('refuses appends while the queue holds too many receipts', async () => {
    const store = await open(await freshDb(), 'a', { maxQueuedReceipts: 10 });
    const first = store.append(Array.from({ length: 8 }, (_, i) => delivery(edge(`e${i}`, 0, 'a -> b : delegate', { run: 'r' }))));
    const second = store.append(Array.from({ length: 5 }, (_, i) => delivery(edge(`x${i}`, 0, 'a -> b : delegate', { run: 'r' }))));
    await expect(second).rejects.toMatchObject({ name: 'StoreCommitError', code: 'STORE_SATURATED' });
    expect((await first).accepted).toBe(8);
    // Once committed, the queue has room again.
    expect((await store.append([delivery(edge('y', 0, 'a -> b : delegate', { run: 'r' }))])).accepted).toBe(1);
  });

  it('rejects appends after close', async () => {
    const store = await PgStore.open(await freshDb(), { instance: 'a' });
    const before = store.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' }))]);
    await store.close();
    // What was queued before close is committed.
    expect((await before).accepted).toBe(1);
    await expect(store.append([delivery(edge('e2', 0, 'a -> b : delegate', { run: 'r' }))])).rejects.toThrow(/closed/);
  });
});

describe('PgStore: tail across instances', () => {
  it('sees every seq of two concurrently appending instances exactly once, in order, never skipping one', async () => {
    const url = await freshDb();
    const a = await open(url, 'a');
    const b = await open(url, 'b');
    const reader = await open(url, 'reader');
    const perLoop = 40;
    let appending = true;
    const appender = async (store: PgStore, loop: number): Promise<void> => {
      for (let i = 0; i < perLoop; i++) {
        const run = `run-${store.instance}-${loop}-${i % 5}`;
        await store.append([0, 1, 2].map((k) => delivery(edge(`e${i}-${k}`, 0, 'a -> b : delegate', { run }), store.instance, Date.now())));
      }
    };
    const loops = Promise.all([0, 1, 2, 3].flatMap((loop) => [appender(a, loop), appender(b, loop)])).finally(() => {
      appending = false;
    });

    const seen: number[] = [];
    /** After each poll: the highest seq seen and how many were seen up to then. */
    const checkpoints: { max: number; count: number }[] = [];
    let after = 0;
    for (;;) {
      const done = !appending;
      const rows = await cl(reader).tail.tail(after, 7);
      for (const r of rows) seen.push(r.seq);
      if (rows.length > 0) {
        after = rows[rows.length - 1].seq;
        checkpoints.push({ max: after, count: seen.length });
      } else if (done) break;
    }
    await loops;

    const full = (await cl(reader).tail.tail(0, 100_000)).map((r) => r.seq);
    expect(full).toHaveLength(2 * 4 * perLoop * 3);
    expect(seen).toEqual(full);
    // Gap-free at every point: everything committed up to what the tailer had seen was seen by then.
    for (const c of checkpoints) expect(full.filter((s) => s <= c.max)).toHaveLength(c.count);
    expect(checkpoints.length).toBeGreaterThan(10);
    expect(await cl(reader).tail.headSeq()).toBe(full[full.length - 1]);
    const origins = (await cl(reader).tail.tail(0, 100_000)).map((r) => r.origin);
    expect(origins.filter((o) => o === 'a')).toHaveLength(4 * perLoop * 3);
    expect(origins.filter((o) => o === 'b')).toHaveLength(4 * perLoop * 3);
  });

  it('filters by partition and origin, and reports fields as stored', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b');
    const r0 = runIn(0, 8);
    const r5 = runIn(5, 8);
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: r0 }), 'tok', 111)]);
    await b.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: r5 }), 'tok2', 222)]);
    await b.append([delivery(edge('e1', 0, 'a -> c : delegate', { run: r0 }), 'tok2', 333)]);
    expect(await cl(a).tail.headSeq()).toBeGreaterThan(0);
    const all = await cl(a).tail.tail(0, 10);
    expect(all.map((r) => [r.receipt.run, r.variant, r.source, r.origin, r.receivedAt])).toEqual([
      [r0, 0, 'tok', 'a', 111],
      [r5, 0, 'tok2', 'b', 222],
      [r0, 1, 'tok2', 'b', 333],
    ]);
    expect((await cl(a).tail.tail(0, 10, [0])).map((r) => r.receipt.run)).toEqual([r0, r0]);
    expect((await cl(a).tail.tail(0, 10, [0, 5], 'a')).map((r) => r.origin)).toEqual(['b', 'b']);
    expect(await cl(a).tail.tail(all[2].seq, 10)).toEqual([]);
    expect(await cl(a).tail.tail(0, 1)).toHaveLength(1);
  });

  it('tailWithAcks answers as acksSince and tail apart, in one round trip', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b');
    const r0 = runIn(0, 8);
    const r5 = runIn(5, 8);
    expect(await cl(a).tail.tailWithAcks(0, 10, [0, 5], 'a', 0)).toEqual({ receipts: [], acks: [], head: 0 });
    expect(await cl(a).tail.tailWithAcks(0, 10, [], 'a', 0)).toEqual({ receipts: [], acks: [], head: 0 });
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: r0 }), 'tok', 111)]);
    await b.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: r5 }), 'tok2', 222)]);
    await b.append([delivery(edge('e2', 0, 'a -> c : delegate', { run: r0 }), 'tok2', 333)]);
    await b.putAck(r5, { verdict: 'forbidden_edge', at: 444, by: 'oncall', reason: 'known' });
    await b.putAck(r0, { verdict: 'working', at: 555, by: null, reason: null });
    for (const [parts, after, limit, ackAfter] of [[[0, 5], 0, 10, 0], [[0], 0, 10, 0], [[5], 0, 1, 0], [[0, 5], 0, 1, 0]] as [number[], number, number, number][]) {
      const both = await cl(a).tail.tailWithAcks(after, limit, parts, 'a', ackAfter);
      expect(both.receipts).toEqual(await cl(a).tail.tail(after, limit, parts, 'a'));
      expect(both.acks).toEqual(await a.acksSince(ackAfter, parts));
      expect(both.head).toBe(await cl(a).tail.headSeq());
    }
    const both = await cl(a).tail.tailWithAcks(0, 10, [0, 5], 'a', 0);
    expect(both.receipts.map((r) => [r.receipt.run, r.receipt.event, r.origin, r.receivedAt])).toEqual([[r5, 'e1', 'b', 222], [r0, 'e2', 'b', 333]]);
    expect(both.acks.map((x) => [x.run, x.verdict, x.ackedAt, x.by, x.reason])).toEqual([[r5, 'forbidden_edge', 444, 'oncall', 'known'], [r0, 'working', 555, null, null]]);
    // Past every receipt and acknowledgement: nothing.
    const head = await cl(a).tail.headSeq();
    expect(await cl(a).tail.tailWithAcks(both.receipts[1].seq, 10, [0, 5], 'a', both.acks[1].seq)).toEqual({ receipts: [], acks: [], head });
    // The head covers rows the tail filters out (a's own, other partitions'): a later one of a's own moves it, not the tail.
    await a.append([delivery(edge('e3', 0, 'a -> b : delegate', { run: r0 }), 'tok', 666)]);
    const after = await cl(a).tail.tailWithAcks(head, 10, [0, 5], 'a', both.acks[1].seq);
    expect(after.receipts).toEqual([]);
    expect(after.head).toBeGreaterThan(head);
    expect(after.head).toBe(await cl(a).tail.headSeq());
  });
});

describe('PgStore: pins, contracts, runs, prune', () => {
  const pinA = { contract: 'research', version: '2', phase: 'build' };
  const pinB = { contract: 'research', version: '3', phase: 'build' };

  it('keeps the first pin written by any instance', async () => {
    const url = await freshDb();
    const a = await open(url, 'a');
    const b = await open(url, 'b');
    expect(await a.getPin('r')).toBeNull();
    const [fromA, fromB] = await Promise.all([a.setPin('r', pinA, 'hash-a'), b.setPin('r', pinB, 'hash-b')]);
    expect(fromA).toEqual(fromB);
    const winner = fromA;
    expect([pinA, pinB]).toContainEqual(winner.pin);
    expect(await b.setPin('r', winner.pin === pinA ? pinB : pinA, 'other')).toEqual(winner);
    expect(await a.getPin('r')).toEqual(winner);
    expect(await b.getPin('r')).toEqual(winner);
  });

  it('stores contract content by hash, first write wins', async () => {
    const url = await freshDb();
    const a = await open(url, 'a');
    const b = await open(url, 'b');
    await a.putContractContent('h1', 'research', '2', 'agents: [a]');
    await b.putContractContent('h1', 'research', '2', 'something else');
    expect(await b.getContractContent('h1')).toBe('agents: [a]');
    expect(await a.getContractContent('h2')).toBeNull();
  });

  it('lists runs of partitions with verdicts and pins, and lists runs newest first with filters', async () => {
    const url = await freshDb();
    const s = await open(url, 'a', { partitions: 8 });
    const [x, y, z] = [runIn(1, 8), runIn(1, 8, 1), runIn(6, 8)];
    await s.append([delivery(start('s', 0, { run: x }), 'tok', 1_000)]);
    await s.append([delivery(start('s', 0, { run: y }), 'tok', 2_000), delivery(edge('e', 1, 'a -> b : delegate', { run: y }), 'tok', 2_500)]);
    await s.append([delivery(start('s', 0, { run: z }), 'tok', 3_000)]);
    await s.setPin(x, pinA, 'ha');
    await s.setPin(z, pinB, 'hb');
    // Verdict states are owner writes, fenced by the leases: refused (every row) until the store holds them.
    expect(await s.setVerdictStates([{ run: x, verdict: 'healthy', settled: true, updatedAt: 4_000 }])).toBe(1);
    expect(await cl(s).leases.claimLeases(8, 60_000)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    await s.setVerdictStates([
      { run: x, verdict: 'healthy', settled: true, updatedAt: 5_000 },
      { run: y, verdict: 'working', settled: false, updatedAt: 100 }, // older than its receipts: updated_at keeps 2500
      { run: x, verdict: 'forbidden_edge', settled: true, updatedAt: 6_000 }, // the last row per run wins
    ]);
    const part1 = await s.partitionRuns([1]);
    expect(part1).toEqual([
      { run: x, firstAt: 1_000, updatedAt: 6_000, verdict: 'forbidden_edge', settled: true, pin: pinA, contractHash: 'ha' },
      { run: y, firstAt: 2_000, updatedAt: 2_500, verdict: 'working', settled: false, pin: null, contractHash: null },
    ]);
    expect((await s.partitionRuns([1, 6])).map((r) => r.run)).toEqual([x, y, z]);
    expect(await s.partitionRuns([])).toEqual([]);
    expect((await s.listRuns({ limit: 10 })).map((r) => r.run)).toEqual([z, y, x]);
    expect((await s.listRuns({ limit: 2 })).map((r) => r.run)).toEqual([z, y]);
    expect((await s.listRuns({ limit: 10, verdict: 'forbidden_edge' })).map((r) => r.run)).toEqual([x]);
    expect(await s.listRuns({ limit: 10, contract: 'research' })).toEqual([
      { run: z, verdict: null, settled: false, firstAt: 3_000, updatedAt: 3_000, listed: null },
      { run: x, verdict: 'forbidden_edge', settled: true, firstAt: 1_000, updatedAt: 6_000, listed: null },
    ]);
    expect((await s.listRuns({ limit: 2, oldest: true })).map((r) => r.run)).toEqual([x, y]);
    // The partitions a caller lists from its memory are left out (all of them: no query at all).
    expect((await s.listRuns({ limit: 10, exceptParts: [1] })).map((r) => r.run)).toEqual([z]);
    expect((await s.listRuns({ limit: 10, exceptParts: [6] })).map((r) => r.run)).toEqual([y, x]);
    expect(await s.listRuns({ limit: 10, exceptParts: [0, 1, 2, 3, 4, 5, 6, 7] })).toEqual([]);
    // Runs the caller holds newer than stored (orRuns: a verdict or pin not written yet) are read whatever their stored
    // verdict and pin, in the list's order; without a filter on either nothing changes.
    expect((await s.listRuns({ limit: 10, verdict: 'forbidden_edge', orRuns: [z] })).map((r) => r.run)).toEqual([z, x]);
    expect((await s.listRuns({ limit: 10, contract: 'no-such-contract', orRuns: [y] })).map((r) => r.run)).toEqual([y]);
    expect((await s.listRuns({ limit: 10, verdict: 'forbidden_edge', contract: 'research', orRuns: [y, z] })).map((r) => r.run)).toEqual([z, y, x]);
    expect((await s.listRuns({ limit: 10, orRuns: [y] })).map((r) => r.run)).toEqual([z, y, x]);
    // The owner's evaluation for the list views is written with the verdict (same statement, same fence) and read
    // back with the list; a verdict written without it clears it (never a stale one beside a newer verdict).
    const listed = JSON.stringify({ pin: null, verdict: 'waiting', naive: 'green', settled: false, findings: [{ verdict: 'waiting', code: 'waiting', agents: ['b'], events: ['e'], message: 'm', settled: false }], nextChangeAt: 9_000 });
    // It is read by every instance: the holder lists the runs it holds from its memory, and the runs of its partitions
    // that left memory (settled) from the store, as the others do.
    const other = await open(url, 'b', { partitions: 8 });
    await s.setVerdictStates([{ run: y, verdict: 'waiting', settled: false, updatedAt: 7_000, listed }]);
    expect((await other.listRuns({ limit: 10, verdict: 'waiting' })).map((r) => [r.run, r.listed])).toEqual([[y, listed]]);
    expect((await s.listRuns({ limit: 10, verdict: 'waiting' })).map((r) => [r.run, r.listed])).toEqual([[y, listed]]);
    await s.setVerdictStates([{ run: y, verdict: 'incomplete', settled: true, updatedAt: 8_000 }]);
    expect((await other.listRuns({ limit: 10, verdict: 'incomplete' })).map((r) => [r.run, r.listed])).toEqual([[y, null]]);
    // Fenced like the verdict: an instance without the lease writes neither.
    expect(await other.setVerdictStates([{ run: y, verdict: 'waiting', settled: false, updatedAt: 9_000, listed }])).toBe(1);
    expect((await other.listRuns({ limit: 10, verdict: 'incomplete' })).map((r) => [r.run, r.listed])).toEqual([[y, null]]);
    // A takeover reads the runs that can still change or alert (x: forbidden_edge alerts; y: incomplete; z has no verdict yet), and counts
    // the settled others without reading them.
    expect((await s.partitionRuns([1, 6], true)).map((r) => r.run)).toEqual([x, y, z]);
    await s.setVerdictStates([{ run: z, verdict: 'healthy', settled: true, updatedAt: 7_000 }]);
    expect((await s.partitionRuns([1, 6], true)).map((r) => r.run)).toEqual([x, y]);
    expect(await s.settledCounts([1, 6])).toEqual([{ part: 6, contract: pinB.contract, version: pinB.version, verdict: 'healthy', runs: 1 }]);
    expect(await s.settledCounts([1])).toEqual([]);
  });

  it('prunes only settled runs last updated before the cut, of the given partitions', async () => {
    const url = await freshDb();
    const s = await open(url, 'a', { partitions: 8 });
    const oldSettled = runIn(2, 8);
    const oldOpen = runIn(2, 8, 1);
    const newSettled = runIn(2, 8, 2);
    const otherPart = runIn(3, 8);
    for (const run of [oldSettled, oldOpen, newSettled, otherPart]) {
      await s.append([delivery(edge('e1', 0, 'a -> b : delegate', { run }), 'tok', 1_000), delivery(edge('e1', 0, 'a -> c : delegate', { run }), 'tok', 1_000)]);
      await s.setPin(run, pinA, 'h');
    }
    await cl(s).leases.claimLeases(8, 60_000);
    await s.setVerdictStates([
      { run: oldSettled, verdict: 'healthy', settled: true, updatedAt: 2_000 },
      { run: oldOpen, verdict: 'working', settled: false, updatedAt: 2_000 },
      { run: newSettled, verdict: 'healthy', settled: true, updatedAt: 9_500 },
      { run: otherPart, verdict: 'healthy', settled: true, updatedAt: 2_000 },
    ]);
    // Each committed batch's runs are told, with the verdict and pinned contract (what topology_runs counted them as).
    const told: unknown[] = [];
    expect(await s.prune(1_000, 10_000, [2], (rows) => told.push(...rows))).toBe(1);
    expect(told).toEqual([{ run: oldSettled, verdict: 'healthy', contract: pinA.contract, version: pinA.version }]);
    expect(await s.runReceipts(oldSettled)).toEqual([]);
    expect(await s.getPin(oldSettled)).toBeNull();
    for (const run of [oldOpen, newSettled, otherPart]) {
      expect(await s.runReceipts(run)).toHaveLength(2);
      expect(await s.getPin(run)).not.toBeNull();
    }
    expect(await s.counts()).toEqual({ receipts: 6, runs: 3 });
    expect(await s.prune(1_000, 10_000, [2])).toBe(0);
    expect(await s.prune(1_000, 10_000, [])).toBe(0);
    expect(await s.prune(1_000, 10_000, [3])).toBe(1);
    expect(await s.counts()).toEqual({ receipts: 4, runs: 2 });
  });
});

describe('PgStore: pins inside the append (issue 31.3)', () => {
  const C = tinyContract;
  const registry = registryOf(C('1'), C('2'));
  const pinOf = (run: string, version: string): AppendPin => {
    const c = registry.get('t', version)!;
    return { run, pin: { contract: 't', version, phase: 'main' }, contractHash: c.hash, contract: 't', version, content: c.canonical };
  };
  /** The pin row and its contract's content as another connection reads them. */
  async function stored(url: string, run: string): Promise<{ version: string; contract_hash: string; content: string | null } | undefined> {
    const rows = await sql<{ version: string; contract_hash: string; content: string | null }>(
      url,
      'SELECT p.version, p.contract_hash, c.content FROM pins p LEFT JOIN contracts c ON c.hash = p.contract_hash WHERE p.run = $1',
      [run],
    );
    return rows[0];
  }

  it('the fast path (every receipt new) commits the pin and its content in its one statement', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    const res = await s.append([delivery(start('s', 0, { run: 'n1' })), delivery(edge('e1', 1, 'o -> r : delegate', { run: 'n1' }))], [], [pinOf('n1', '1')]);
    expect(res.results).toEqual(['accepted', 'accepted']);
    expect(await stored(url, 'n1')).toEqual({ version: '1', contract_hash: registry.get('t', '1')!.hash, content: registry.get('t', '1')!.canonical });
    expect(res.pins?.get('n1')).toEqual({ pin: { contract: 't', version: '1', phase: 'main' }, contractHash: registry.get('t', '1')!.hash });
  });

  it('the transactional path (a redelivery in the group) commits the pin and its content with the receipts', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    const x = delivery(start('s', 0, { run: 'm0' }));
    await s.append([x]);
    const res = await s.append([x, delivery(start('s', 0, { run: 'm1' }))], [], [pinOf('m1', '2')]);
    expect(res.results).toEqual(['duplicate', 'accepted']);
    expect(await stored(url, 'm1')).toEqual({ version: '2', contract_hash: registry.get('t', '2')!.hash, content: registry.get('t', '2')!.canonical });
    expect(res.pins?.get('m1')?.pin.version).toBe('2');
    // A key twice in one group (two appends of the same turn) also takes it: per run the first pin of the group wins.
    const [one, two] = await Promise.all([
      s.append([delivery(start('s', 0, { run: 'm2' }))], [], [pinOf('m2', '1')]),
      s.append([delivery(start('s', 0, { run: 'm2' }))], [], [pinOf('m2', '2')]),
    ]);
    expect([one.results, two.results]).toEqual([['accepted'], ['duplicate']]);
    expect(one.pins?.get('m2')?.pin.version).toBe('1');
    expect(two.pins?.get('m2')?.pin.version).toBe('1');
    expect((await stored(url, 'm2'))?.version).toBe('1');
  });

  it('a pin written before wins on both paths; the result carries the pin in force', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    await s.setPin('w1', { contract: 't', version: '2', phase: 'main' }, registry.get('t', '2')!.hash);
    const fast = await s.append([delivery(start('s', 0, { run: 'w1' }))], [], [pinOf('w1', '1')]);
    expect(fast.pins?.get('w1')?.pin.version).toBe('2');
    const x = delivery(edge('e1', 1, 'o -> r : delegate', { run: 'w1' }));
    await s.append([x]);
    const slow = await s.append([x, delivery(edge('e2', 2, 'o -> r : delegate', { run: 'w1' }))], [], [pinOf('w1', '1')]);
    expect(slow.results).toEqual(['duplicate', 'accepted']);
    expect(slow.pins?.get('w1')?.pin.version).toBe('2');
    expect((await stored(url, 'w1'))?.version).toBe('2');
  });

  it('an engine over the cluster store: the pin of a new run is in the shared store once ingest resolves, not behind on the tick', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    const shared = new ClusterEngineStore(s, () => []);
    const engine = new AuditEngine(registryOf(C('1')), shared, { retentionMs: 3_600_000 });
    await engine.ingest([start('s', 0, { run: 'c1' }), edge('e1', 1, 'o -> r : delegate', { run: 'c1' })], 'test', ms(2));
    const c = registryOf(C('1')).get('t', '1')!;
    expect(await stored(url, 'c1')).toEqual({ version: '1', contract_hash: c.hash, content: c.canonical });
    expect(engine.verdictOf('c1')?.pin).toMatchObject({ contract: 't', version: '1' });
    expect(shared.getPin('c1')?.contractHash).toBe(c.hash);
    // Nothing left to write behind for it: the flush writes no pin (one row, the same), and no write failed.
    await shared.sync();
    expect(await sql(url, 'SELECT run FROM pins')).toEqual([{ run: 'c1' }]);
    expect(shared.failedWrites).toBe(0);
  });

  it('knows the runs whose verdict state is not written yet, also while its flush is in flight (a page of the run list filtered on a verdict reads them whatever is stored)', async () => {
    const url = await freshDb();
    const s = await open(url, 'a');
    const shared = new ClusterEngineStore(s, () => []);
    const engine = new AuditEngine(registryOf(C('1')), shared, { retentionMs: 3_600_000 });
    await engine.ingest([start('s', 0, { run: 'u1' }), edge('e1', 1, 'o -> r : delegate', { run: 'u1' })], 'test', ms(2));
    expect(engine.verdictOf('u1')).not.toBeNull();
    expect(shared.unwritten()).toEqual(['u1']);
    const flushing = shared.flush();
    expect(shared.unwritten()).toEqual(['u1']);
    await flushing;
    expect(shared.unwritten()).toEqual([]);
  });
});

describe('PgStore: span log', () => {
  it('compresses large span log bodies with lz4 where the server has it (pglz, the default, cost ~14% of its CPU in the append)', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const body = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ t: 'trace-lz4', s: `span-${i}`, p: i ? `span-${i - 1}` : null, src: 'tok', op: 'span' })));
    await a.append([], [{ traceId: 'trace-lz4', loggedAt: 1_000, body }]);
    const [server] = await sql<{ v: number; lz4: boolean }>(url, `SELECT current_setting('server_version_num')::int AS v, EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) AS lz4`);
    const [row] = await sql<{ method: string | null; body: string }>(url, `SELECT pg_column_compression(body) AS method, body FROM span_log WHERE trace_id = 'trace-lz4'`);
    expect(row.body).toBe(body);
    // lz4 on PostgreSQL 14+ built with it (as the test cluster is); otherwise the store keeps the server's default.
    expect(row.method).toBe(server.v >= 140000 && server.lz4 ? 'lz4' : 'pglz');
  });

  it('stores every body as given, in order, whether the append sends the bodies joined by newlines or (a body with a newline, or an empty one) as arrays', async () => {
    const url = await freshDb();
    const a = await open(url, 'a');
    const bodies = (es: readonly { body: string }[]): string[] => es.map((e) => e.body);
    const logged = ['[{"s":"1"}]', '{"v":2,"g":[["a",0,"AAAA"]]}', '[{"s":"quote \\" and \\\\ back"}]'];
    const withNewline = ['[{"s":"x"}]', '[\n{"s":"y"}\n]', '', '[{"s":"z"}]\n'];
    // Fast path, joined.
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' })), delivery(edge('e2', 1, 'b -> c : delegate', { run: 'q' }))], logged.map((body, i) => ({ traceId: `t${i}`, loggedAt: 1_000, body })));
    // Fast path, arrays (bodies with newlines, an empty one).
    await a.append([delivery(edge('e3', 2, 'c -> d : delegate', { run: 'r' }))], withNewline.map((body, i) => ({ traceId: `u${i}`, loggedAt: 2_000, body })));
    // The transactional path (a redelivery in the group), both ways.
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' })), delivery(edge('e4', 3, 'd -> e : delegate', { run: 'r' }))], [{ traceId: 'v0', loggedAt: 3_000, body: logged[2] }]);
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run: 'r' })), delivery(edge('e5', 4, 'e -> f : delegate', { run: 'r' }))], [{ traceId: 'w0', loggedAt: 4_000, body: withNewline[1] }]);
    const parts = Array.from({ length: a.partitions }, (_, i) => i);
    expect(bodies(await a.spanLog(parts))).toEqual([...logged, ...withNewline, logged[2], withNewline[1]]);
    expect((await a.runReceipts('r')).map((r) => r.event)).toEqual(['e1', 'e3', 'e4', 'e5']);
    expect((await a.runReceipts('q')).map((r) => r.event)).toEqual(['e2']);
  });

  it('commits span log entries with their append and reads, deletes and prunes them by partition and origin', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b');
    const traceIn = (part: number, n = 0): string => {
      let found = 0;
      for (let i = 0; ; i++) if (partitionOf(`trace${i}`, 8) === part && found++ === n) return `trace${i}`;
    };
    const t1 = traceIn(4);
    const t2 = traceIn(4, 1);
    const t3 = traceIn(7);
    const entry = (traceId: string, loggedAt: number): SpanLogEntry => ({ traceId, loggedAt, body: `[{"spanId":"${traceId}"}]` });
    // A span log entry alone still commits.
    await a.append([], [entry(t1, 1_000)]);
    await a.append([delivery(edge('e', 0, 'a -> b : delegate', { run: 'r' }))], [entry(t2, 2_000), entry(t3, 2_000)]);
    await b.append([], [entry(t1, 3_000)]);
    // A redelivery (its fast insert is rolled back and redone) still logs its span entries exactly once.
    expect((await b.append([delivery(edge('e', 0, 'a -> b : delegate', { run: 'r' }))], [entry(t3, 3_000)])).results).toEqual(['duplicate']);

    const all = await a.spanLog([4, 7]);
    expect(all.map((e) => [e.traceId, e.origin])).toEqual([[t1, 'a'], [t2, 'a'], [t3, 'a'], [t1, 'b'], [t3, 'b']]);
    expect(all[0].body).toBe(`[{"spanId":"${t1}"}]`);
    expect(all.map((e) => e.seq)).toEqual([...all.map((e) => e.seq)].sort((x, y) => x - y));
    expect((await a.spanLog([4])).map((e) => e.traceId)).toEqual([t1, t2, t1]);
    expect((await a.spanLog([4, 7], 'b')).map((e) => e.traceId)).toEqual([t1, t3]);
    expect(await a.spanLog([])).toEqual([]);
    // What a takeover adopts: held entries of processes not alive (b has no heartbeat yet), a page at a time; never
    // the reader's own.
    const orphans = await a.orphanSpanLog([4, 7], 0, 1);
    expect(orphans.map((e) => e.traceId)).toEqual([all.filter((e) => e.origin !== 'a')[0].traceId]);
    const rest = await a.orphanSpanLog([4, 7], orphans[0].seq, 100);
    expect([...orphans, ...rest].map((e) => e.seq)).toEqual(all.filter((e) => e.origin !== 'a').map((e) => e.seq));
    await cl(b).beats.heartbeat(60_000);
    expect(await a.orphanSpanLog([4, 7], 0, 100)).toEqual([]);
    // b restarted under the same name (a new life, alive): the entries of its earlier life are orphans again.
    const b2 = await open(url, 'b');
    await cl(b2).beats.heartbeat(60_000);
    expect((await a.orphanSpanLog([4, 7], 0, 100)).map((e) => e.seq)).toEqual(all.filter((e) => e.origin !== 'a').map((e) => e.seq));
    // ... and so are a's own of an earlier life, for the new life (this process's are never its own orphans).
    const a2 = await open(url, 'a');
    await cl(a2).beats.heartbeat(60_000);
    expect((await a2.orphanSpanLog([4, 7], 0, 100)).map((e) => e.seq)).toEqual(all.map((e) => e.seq));
    // The page form (the coordinator's): the same entries, with the span log's head and the live processes of the same
    // snapshot; `live` changes when a process stops being live.
    const page = await a2.orphanSpanLogPage([4, 7], 0, 100);
    expect(page.entries).toEqual(await a2.orphanSpanLog([4, 7], 0, 100));
    expect(page.head).toBe(Math.max(...all.map((e) => e.seq)));
    expect((await a2.orphanSpanLogPage([4, 7], page.head, 100)).entries).toEqual([]);
    expect((await a2.orphanSpanLogPage([4, 7], 0, 2)).entries).toEqual(page.entries.slice(0, 2));
    expect(await a2.orphanSpanLogPage([], 7, 100)).toEqual({ entries: [], head: 7, live: '' });
    const liveBefore = page.live;
    expect(liveBefore.split(',')).toHaveLength(2); // a2 and b2 (a, b first lives: never heartbeated or replaced)
    await sql(url, `UPDATE instances SET expires_at = now() WHERE id = 'b'`);
    const after = await a2.orphanSpanLogPage([4, 7], 0, 100);
    expect(after.live).not.toBe(liveBefore);
    expect(after.live.split(',')).toHaveLength(1);
    expect(after.entries.map((e) => e.seq)).toEqual(all.map((e) => e.seq)); // no entry is a live process's

    // Older than 2500, of origin a, and t1 still pending: only t2 and t3 go (b's t1 entry is b's).
    expect(await a.pruneSpanLog(2_500, (t) => t === t1, 'a')).toBe(2);
    expect((await a.spanLog([4, 7])).map((e) => [e.traceId, e.origin])).toEqual([[t1, 'a'], [t1, 'b'], [t3, 'b']]);
    expect(await a.pruneSpanLog(500, () => false, 'a')).toBe(0);
    // Deleting replayed entries is an owner's write: fenced by the partition's lease.
    expect(await a.deleteSpanLog([all[0].seq])).toBe(0);
    expect(a.fencedWrites).toBe(1);
    await cl(a).leases.claimLeases(8, 60_000);
    expect(await a.deleteSpanLog([all[0].seq])).toBe(1);
    expect((await a.spanLog([4, 7])).map((e) => e.origin)).toEqual(['b', 'b']);

    // Forwarded entries (--span-routing any) are read by the partition's owner whoever forwarded them (a included),
    // are never pruned by their sender, and are no orphans (nobody holds them).
    await a.append([], [{ ...entry(t3, 1_000), forwarded: true }]);
    await b.append([], [{ ...entry(t2, 1_000), forwarded: true }]);
    expect((await a.forwardedSpanLog([4, 7], 100)).map((e) => [e.traceId, e.origin])).toEqual([[t3, 'a'], [t2, 'b']]);
    expect((await a.forwardedSpanLog([7], 1)).map((e) => e.traceId)).toEqual([t3]);
    expect(await a.pruneSpanLog(5_000, () => false, 'a')).toBe(0);
    const forwardedSeqs = new Set((await a.forwardedSpanLog([4, 7], 100)).map((e) => e.seq));
    expect(forwardedSeqs.size).toBe(2);
    expect((await a2.orphanSpanLog([4, 7], 0, 100)).filter((e) => forwardedSeqs.has(e.seq))).toEqual([]);
    await Promise.all([a2.close(), b2.close()]);
  });
});

describe('PgStore: leases and liveness', () => {
  const ALL = [0, 1, 2, 3, 4, 5, 6, 7];

  it('gives each partition one owner; an owner that stops renewing loses its partitions after the ttl; release hands them over', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b', { partitions: 8 });
    const ttl = 1_000;
    expect(await cl(a).leases.claimLeases(8, ttl)).toEqual(ALL);
    expect(await cl(b).leases.claimLeases(8, ttl)).toEqual([]);
    // While A renews (past its first ttl), B gets nothing.
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 250));
      expect(await cl(a).leases.renewLeases(ttl)).toEqual(ALL);
      expect(await cl(b).leases.claimLeases(8, ttl)).toEqual([]);
    }
    const table = await cl(a).leases.leaseTable();
    expect(table.map((l) => l.owner)).toEqual(ALL.map(() => 'a'));
    expect(table.every((l) => l.expiresInMs > 0 && l.expiresInMs <= ttl)).toBe(true);

    // A stops renewing: after the ttl, B claims everything; A's late renewal finds nothing left.
    const claimed = new Set<number>();
    await until('B claims all partitions', async () => {
      for (const p of await cl(b).leases.claimLeases(8, 60_000)) claimed.add(p);
      return claimed.size === 8;
    });
    expect([...claimed].sort((x, y) => x - y)).toEqual(ALL);
    expect(await cl(a).leases.renewLeases(ttl)).toEqual([]);
    expect(await cl(b).leases.renewLeases(60_000)).toEqual(ALL);

    // A release is taken over at once.
    await cl(b).leases.releaseLeases([0, 1, 2, 3]);
    await cl(a).leases.releaseLeases([4, 5]); // not A's: nothing happens
    expect(await cl(a).leases.claimLeases(8, 60_000)).toEqual([0, 1, 2, 3]);
    expect((await cl(a).leases.leaseTable()).map((l) => l.owner)).toEqual(['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b']);
    expect(await cl(a).leases.claimLeases(0, 60_000)).toEqual([]);
  });

  it('fences owner writes by lease: a stale owner (lease expired and claimed, or claimed again at a newer epoch) writes nothing', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b', { partitions: 8 });
    const run = runIn(5, 8);
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run }), 'tok', 1_000)]);
    expect(await cl(a).leases.claimLeases(8, 400)).toEqual(ALL);
    expect(await a.setVerdictStates([{ run, verdict: 'working', settled: false, updatedAt: 2_000 }])).toBe(0);
    const verdictOf = async () => (await a.getRun(run))?.verdict;
    expect(await verdictOf()).toBe('working');
    // A's lease expires (it was paused) and B claims the partitions: A's writes are refused by the database.
    await until('B claims every partition', async () => (await cl(b).leases.claimLeases(8, 60_000)).length > 0 && (await cl(b).leases.leaseTable()).every((l) => l.owner === 'b'));
    expect(await a.setVerdictStates([{ run, verdict: 'incomplete', settled: true, updatedAt: 3_000 }])).toBe(1);
    expect(await a.prune(0, 10_000, ALL)).toBe(0);
    expect(await verdictOf()).toBe('working');
    expect(await b.setVerdictStates([{ run, verdict: 'healthy', settled: true, updatedAt: 3_000 }])).toBe(0);
    expect(await verdictOf()).toBe('healthy');
    // Merely holding the lease under the same name is not enough: the epoch must be the one claimed. A second process
    // named 'a' claims partition 5 after B releases it; the first still knows the older epoch and is refused.
    await cl(b).leases.releaseLeases([5]);
    const a2 = await open(url, 'a', { partitions: 8 });
    expect(await cl(a2).leases.claimLeases(1, 60_000)).toEqual([5]);
    expect(await a.setVerdictStates([{ run, verdict: 'incomplete', settled: true, updatedAt: 4_000 }])).toBe(1);
    expect(await a2.setVerdictStates([{ run, verdict: 'forbidden_edge', settled: true, updatedAt: 4_000 }])).toBe(0);
    expect(await verdictOf()).toBe('forbidden_edge');
    expect(a.fencedWrites).toBe(2);
    await a2.close();
  });

  it('claims at most max partitions, and two claimers never get the same one', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b', { partitions: 8 });
    expect(await cl(a).leases.claimLeases(3, 60_000)).toEqual([0, 1, 2]);
    const [fromA, fromB] = await Promise.all([cl(a).leases.claimLeases(4, 60_000), cl(b).leases.claimLeases(4, 60_000)]);
    expect(fromA.length + fromB.length).toBe(5);
    expect(new Set([...fromA, ...fromB]).size).toBe(5);
    expect(fromA.concat(fromB).every((p) => p >= 3)).toBe(true);
  });

  it('counts live instances by heartbeat; a closed instance releases its leases and stops counting at once', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await PgStore.open(url, { instance: 'b' });
    const c = await open(url, 'c');
    expect(await cl(a).beats.heartbeat(60_000)).toEqual({ liveInstances: 1 });
    expect(await cl(b).beats.heartbeat(60_000)).toEqual({ liveInstances: 2 });
    expect(await cl(a).beats.heartbeat(60_000)).toEqual({ liveInstances: 2 });
    // C's heartbeat lapses after its short ttl.
    expect(await cl(c).beats.heartbeat(300)).toEqual({ liveInstances: 3 });
    await until('C expires', async () => (await cl(a).beats.heartbeat(60_000)).liveInstances === 2);
    expect(await cl(b).leases.claimLeases(8, 60_000)).toEqual(ALL);
    await b.close();
    expect(await cl(a).beats.heartbeat(60_000)).toEqual({ liveInstances: 1 });
    expect(await cl(a).leases.claimLeases(8, 60_000)).toEqual(ALL);
  });

  it('beat: heartbeat, renewal (the fence follows it) and the partitions of instances at their live limit in one statement, as the three apart', async () => {
    const url = await freshDb();
    const a = await open(url, 'a', { partitions: 8 });
    const b = await open(url, 'b', { partitions: 8 });
    expect(await cl(a).beats.beat(60_000, false)).toEqual({ liveInstances: 1, held: [], fullParts: [], dbNow: expect.any(Number) });
    expect(await cl(a).leases.claimLeases(3, 60_000)).toEqual([0, 1, 2]);
    expect(await cl(b).leases.claimLeases(2, 60_000)).toEqual([3, 4]);
    // B says it is at its live limit: A sees B's partitions as full; B does not count its own.
    expect(await cl(b).beats.beat(60_000, true)).toEqual({ liveInstances: 2, held: [3, 4], fullParts: [], dbNow: expect.any(Number) });
    expect(await cl(a).beats.beat(60_000, false)).toEqual({ liveInstances: 2, held: [0, 1, 2], fullParts: [3, 4], dbNow: expect.any(Number) });
    expect(await cl(a).leases.fullPartitions()).toEqual([3, 4]);
    expect((await cl(a).leases.leaseTable()).filter((l) => l.owner === 'a').every((l) => l.expiresInMs > 30_000)).toBe(true);
    // The fence follows the renewal: a lease lost (released, claimed by B at a newer epoch) is no longer A's to write.
    const run = runIn(1, 8);
    await a.append([delivery(edge('e1', 0, 'a -> b : delegate', { run }), 'tok', 1_000)]);
    await cl(a).leases.releaseLeases([1]);
    expect(await cl(b).leases.claimLeases(1, 60_000)).toEqual([1]);
    expect((await cl(a).beats.beat(60_000, false)).held).toEqual([0, 2]);
    expect(await a.setVerdictStates([{ run, verdict: 'working', settled: false, updatedAt: 2_000 }])).toBe(1);
    expect(await b.setVerdictStates([{ run, verdict: 'working', settled: false, updatedAt: 2_000 }])).toBe(0);
    // An expired lease is not renewed by a beat (as renewLeases).
    expect(await cl(b).beats.beat(60_000, false)).toEqual({ liveInstances: 2, held: [1, 3, 4], fullParts: [], dbNow: expect.any(Number) });
    await cl(b).leases.renewLeases(1);
    await until('B\'s leases expire', async () => (await cl(b).leases.leaseTable()).filter((l) => l.owner === 'b').every((l) => l.expiresInMs <= 0));
    expect((await cl(b).beats.beat(60_000, false)).held).toEqual([]);
    expect(await b.setVerdictStates([{ run, verdict: 'healthy', settled: true, updatedAt: 3_000 }])).toBe(1);
  });
});
