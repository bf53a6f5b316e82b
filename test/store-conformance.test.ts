/**
 * One storage conformance suite (issue 48): the same cases run against both backends, the embedded SQLite store and
 * the PostgreSQL store of a cluster (a throwaway cluster from test/helpers/pg-cluster.ts), through one asynchronous
 * view of a store: the storage port (src/store/port.ts) each backend implements. What a case asserts is what the
 * engine, the API and the retention rely on:
 * append (outcomes, commit order), dedup, conflicts, pins (first written wins, content by hash), run rows (verdict
 * states), acknowledgements, the span log, retention and listing (filters, paging).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { PgStore, ReceiptStore, type AppendPin, type StoredReceipt } from '../src/store/index.js';
import type { StoragePort } from '../src/store/port.js';
import { SqlitePort } from '../src/store/sqlite/port.js';
import { PgPort } from '../src/store/pg/port.js';
import { Coordination } from '../src/cluster/coordination.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { edge, end, registryOf, start, tinyContract } from './helpers/receipts.js';

type Backend = StoragePort;

function sqliteBackend(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'ta-conformance-'));
  const port = new SqlitePort(ReceiptStore.open(dir));
  return Object.assign(port, {
    close: async () => {
      port.store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}

const PARTITIONS = 4;

/** A PostgreSQL store that holds the leases of every partition (a cluster of one instance). */
async function pgBackend(url: string): Promise<Backend> {
  const s = await PgStore.open(url, { instance: 'conformance', partitions: PARTITIONS });
  const parts = await new Coordination(s).leases.claimLeases(PARTITIONS, 600_000);
  return new PgPort(s, () => parts);
}

let cluster: PgCluster;
let dbCounter = 0;
const open: Backend[] = [];

beforeAll(async () => {
  cluster = await startPgCluster();
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

afterEach(async () => {
  for (const b of open.splice(0)) await b.close();
});

const BACKENDS: { name: string; make: () => Promise<Backend> }[] = [
  { name: 'sqlite', make: async () => sqliteBackend() },
  { name: 'postgres', make: async () => pgBackend(await cluster.database(`conf${++dbCounter}`)) },
];

const delivery = (receipt: Receipt, receivedAt: number, source = 'token-a'): StoredReceipt => ({ receipt, source, receivedAt });
const registry = registryOf(tinyContract('1'), tinyContract('2'));
const pinOf = (run: string, version: string): AppendPin => {
  const c = registry.get('t', version)!;
  return { run, pin: { contract: 't', version, phase: 'main' }, contractHash: c.hash, contract: 't', version, content: c.canonical };
};

describe.each(BACKENDS)('store conformance: $name', ({ make }) => {
  async function backend(): Promise<Backend> {
    const b = await make();
    open.push(b);
    return b;
  }

  it('append: outcomes per input, receipts read back in commit order', async () => {
    const s = await backend();
    const a = start('s', 0, { run: 'a1' });
    const b = edge('e1', 1, 'o -> r : delegate', { run: 'a1' });
    const res = await s.append([delivery(a, 1_000), delivery(b, 1_001), delivery(start('s', 0, { run: 'a2' }), 1_002)]);
    expect(res).toMatchObject({ accepted: 3, duplicates: 0, conflicts: 0, results: ['accepted', 'accepted', 'accepted'] });
    expect(await s.readReceipts('a1')).toEqual([a, b]);
    expect(await s.readReceipts('nope')).toEqual([]);
    const c = end('x', 2, 'completed', { run: 'a1' });
    expect((await s.append([delivery(c, 1_003)])).results).toEqual(['accepted']);
    expect(await s.readReceipts('a1')).toEqual([a, b, c]);
  });

  it('dedup: the same content under the same (run, event) is stored once, in one batch or across batches', async () => {
    const s = await backend();
    const a = start('s', 0, { run: 'd1' });
    const res = await s.append([delivery(a, 1_000), delivery(a, 1_001, 'token-b')]);
    expect(res).toMatchObject({ accepted: 1, duplicates: 1, results: ['accepted', 'duplicate'] });
    expect((await s.append([delivery(a, 2_000)])).results).toEqual(['duplicate']);
    expect(await s.readReceipts('d1')).toEqual([a]);
  });

  it('conflicts: other content under a stored (run, event) is kept beside the first, once', async () => {
    const s = await backend();
    const first = edge('e1', 1, 'o -> r : delegate', { run: 'c1' });
    const other = edge('e1', 1, 'r -> o : delegate', { run: 'c1' });
    expect((await s.append([delivery(first, 1_000)])).results).toEqual(['accepted']);
    const res = await s.append([delivery(other, 1_001), delivery(other, 1_002)]);
    expect(res).toMatchObject({ conflicts: 1, results: ['conflict', 'duplicate'] });
    expect(await s.readReceipts('c1')).toEqual([first, other]);
  });

  it('pins: the first pin written wins, in the append or set afterwards; contract content by hash', async () => {
    const s = await backend();
    const v1 = registry.get('t', '1')!;
    const res = await s.append([delivery(start('s', 0, { run: 'p1' }), 1_000)], [], [pinOf('p1', '1')]);
    expect(res.pins?.get('p1')).toEqual({ pin: { contract: 't', version: '1', phase: 'main' }, contractHash: v1.hash });
    const again = await s.append([delivery(edge('e', 1, 'o -> r : delegate', { run: 'p1' }), 1_001)], [], [pinOf('p1', '2')]);
    expect(again.pins?.get('p1')?.pin.version).toBe('1');
    expect(await s.getPin('p1')).toEqual({ pin: { contract: 't', version: '1', phase: 'main' }, contractHash: v1.hash });
    expect(await s.getContractContent(v1.hash)).toBe(v1.canonical);

    await s.append([delivery(start('s', 0, { run: 'p2' }), 1_002)]);
    expect(await s.getPin('p2')).toBeNull();
    const v2 = registry.get('t', '2')!;
    expect(await s.setPin('p2', { contract: 't', version: '2', phase: 'main' }, v2.hash)).toEqual({ pin: { contract: 't', version: '2', phase: 'main' }, contractHash: v2.hash });
    await s.putContractContent(v2.hash, 't', '2', v2.canonical);
    expect((await s.setPin('p2', { contract: 't', version: '1', phase: 'main' }, v1.hash)).pin.version).toBe('2');
    await s.sync();
    expect((await s.getPin('p2'))?.pin.version).toBe('2');
    expect(await s.getContractContent(v2.hash)).toBe(v2.canonical);
    expect(await s.getContractContent('no-such-hash')).toBeNull();
  });

  it('run rows: the first receipt time and the latest verdict state', async () => {
    const s = await backend();
    await s.append([delivery(start('s', 0, { run: 'r1' }), 5_000)]);
    await s.append([delivery(edge('e', 1, 'o -> r : delegate', { run: 'r1' }), 6_000)]);
    expect(await s.getRun('r1')).toEqual({ run: 'r1', firstAt: 5_000, verdict: null, settled: false });
    await s.setVerdictState('r1', 'working', false, 6_500);
    await s.setVerdictState('r1', 'healthy', true, 7_000);
    await s.sync();
    expect(await s.getRun('r1')).toEqual({ run: 'r1', firstAt: 5_000, verdict: 'healthy', settled: true });
    expect(await s.getRun('nope')).toBeNull();
  });

  it('acks: the latest acknowledgement of a run replaces an earlier one', async () => {
    const s = await backend();
    await s.append([delivery(start('s', 0, { run: 'k1' }), 1_000)]);
    expect(await s.getAck('k1')).toBeNull();
    await s.putAck('k1', { verdict: 'incomplete', by: 'alice', at: 2_000, reason: 'known flake' });
    expect(await s.getAck('k1')).toEqual({ verdict: 'incomplete', by: 'alice', at: 2_000, reason: 'known flake' });
    await s.putAck('k1', { verdict: 'forbidden_edge', by: null, at: 3_000, reason: null });
    expect(await s.getAck('k1')).toEqual({ verdict: 'forbidden_edge', by: null, at: 3_000, reason: null });
  });

  it('span log: committed with the append, read in order, deleted up to a seq, pruned unless pending', async () => {
    const s = await backend();
    const t1 = 'a'.repeat(32);
    const t2 = 'b'.repeat(32);
    await s.append([], [
      { traceId: t1, loggedAt: 1_000, body: '{"n":1}' },
      { traceId: t2, loggedAt: 1_000, body: '{"n":2}' },
    ]);
    await s.append([delivery(start('s', 0, { run: 'l1' }), 2_000)], [{ traceId: t1, loggedAt: 2_000, body: '{"n":3}' }]);
    const log = await s.spanLog();
    expect(log.map((e) => [e.traceId, e.body])).toEqual([[t1, '{"n":1}'], [t2, '{"n":2}'], [t1, '{"n":3}']]);
    expect(log[0].seq).toBeLessThan(log[1].seq);
    expect(log[1].seq).toBeLessThan(log[2].seq);
    await s.deleteSpanLogUpTo(log[0].seq);
    expect((await s.spanLog()).map((e) => e.body)).toEqual(['{"n":2}', '{"n":3}']);
    // Older than 1500 and not pending: only t2's entry goes (t1's at 2000 is too young).
    expect(await s.pruneSpanLog(1_500, () => false)).toBe(1);
    expect((await s.spanLog()).map((e) => e.body)).toEqual(['{"n":3}']);
    // Pending traces are kept, however old.
    expect(await s.pruneSpanLog(10_000, (t) => t === t1)).toBe(0);
    expect((await s.spanLog()).map((e) => e.body)).toEqual(['{"n":3}']);
  });

  it('retention: settled runs past the retention go with their receipts, pin and ack; the others stay', async () => {
    const s = await backend();
    await s.append([delivery(start('s', 0, { run: 'old' }), 1_000)], [], [pinOf('old', '1')]);
    await s.append([delivery(start('s', 0, { run: 'live' }), 1_000)]);
    await s.append([delivery(start('s', 0, { run: 'young' }), 1_000)]);
    await s.putAck('old', { verdict: 'healthy', by: null, at: 1_500, reason: null });
    await s.setVerdictState('old', 'healthy', true, 2_000);
    await s.setVerdictState('live', 'working', false, 2_000);
    await s.setVerdictState('young', 'healthy', true, 9_000);
    await s.sync();
    expect(await s.prune(5_000, 10_000)).toBe(1);
    expect(await s.getRun('old')).toBeNull();
    expect(await s.readReceipts('old')).toEqual([]);
    expect(await s.getPin('old')).toBeNull();
    expect(await s.getAck('old')).toBeNull();
    expect((await s.getRun('live'))?.verdict).toBe('working');
    expect((await s.getRun('young'))?.verdict).toBe('healthy');
    expect(await s.prune(5_000, 10_000)).toBe(0);
  });

  it('listing: newest first (or oldest), by verdict or pinned contract, page by page', async () => {
    const s = await backend();
    for (let i = 0; i < 5; i++) {
      const run = `n${i}`;
      await s.append([delivery(start('s', 0, { run }), 1_000 + i)], [], i % 2 === 0 ? [pinOf(run, '1')] : []);
      await s.setVerdictState(run, i < 3 ? 'working' : 'healthy', i >= 3, 1_000 + i);
    }
    await s.sync();
    expect((await s.listRuns({ limit: 10 })).map((r) => r.run)).toEqual(['n4', 'n3', 'n2', 'n1', 'n0']);
    expect((await s.listRuns({ limit: 10, oldest: true })).map((r) => r.run)).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    expect((await s.listRuns({ limit: 10, verdict: 'healthy' })).map((r) => [r.run, r.settled])).toEqual([['n4', true], ['n3', true]]);
    expect((await s.listRuns({ limit: 10, contract: 't' })).map((r) => r.run)).toEqual(['n4', 'n2', 'n0']);
    expect(await s.verdictCounts({})).toEqual({ working: 3, healthy: 2 });
    expect(await s.verdictCounts({ contract: 't' })).toEqual({ working: 2, healthy: 1 });
    // Keyset paging: a page starts after the last row of the previous one.
    const first = await s.listRuns({ limit: 2 });
    expect(first.map((r) => r.run)).toEqual(['n4', 'n3']);
    const last = first[first.length - 1];
    const second = await s.listRuns({ limit: 2, after: { firstAt: last.firstAt, run: last.run } });
    expect(second.map((r) => r.run)).toEqual(['n2', 'n1']);
  });
});
