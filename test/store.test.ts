import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { canonicalReceiptJson, ReceiptStore, sameReceipt, type AppendResult, type StoredReceipt } from '../src/store/index.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const dirs: string[] = [];
const stores: ReceiptStore[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'store-test-'));
  dirs.push(dir);
  return dir;
}

function openStore(dir = tempDir(), opts: Parameters<typeof ReceiptStore.open>[1] = {}): ReceiptStore {
  const store = ReceiptStore.open(dir, opts);
  stores.push(store);
  return store;
}

afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function edge(run: string, event: string, extra: Partial<LooseReceipt> = {}): Receipt {
  return asReceipt({ run, event, type: 'edge', at: '2025-01-01T10:00:00Z', from: 'orchestrator', to: 'researcher', kind: 'delegate', ...extra });
}

function delivery(receipt: Receipt, source = 'token-a', receivedAt = 1_000): StoredReceipt {
  return { receipt, source, receivedAt };
}

describe('receipt normalisation', () => {
  it('treats a missing status as ok, equal instants as equal, numeric versions as text, edges without spaces', () => {
    const base: Receipt = { run: 'r', event: 'w1', type: 'wait', at: '2025-01-01T10:00:00Z', on: 'b', edge: 'a -> b : delegate', deadline: '2025-01-01T11:00:00.000Z', version: '2' };
    const variant = { ...base, status: 'ok', at: '2025-01-01T11:00:00+01:00', edge: 'a->b:delegate', deadline: '2025-01-01T11:00:00Z', version: 2 as unknown as string } satisfies Receipt;
    expect(sameReceipt(base, variant)).toBe(true);
    expect(canonicalReceiptJson(base)).toBe(canonicalReceiptJson({ ...variant }));
  });

  it('tells apart receipts that differ in any field', () => {
    const base = edge('r', 'e1');
    expect(sameReceipt(base, { ...base, status: 'error' })).toBe(false);
    expect(sameReceipt(base, { ...base, at: '2025-01-01T10:00:00.001Z' })).toBe(false);
    expect(sameReceipt(base, asReceipt({ ...base, to: 'writer' }))).toBe(false);
    expect(sameReceipt(base, { ...base, version: '2.10' })).toBe(false);
    expect(sameReceipt({ ...base, version: '2.1' }, { ...base, version: '2.10' })).toBe(false);
  });

  it('is independent of key order', () => {
    const a = edge('r', 'e1');
    const reordered = Object.fromEntries(Object.entries(a).reverse()) as unknown as Receipt;
    expect(canonicalReceiptJson(reordered)).toBe(canonicalReceiptJson(a));
  });
});

describe('ReceiptStore: idempotent append', () => {
  it('accepts new receipts and counts a redelivery with equal content as a duplicate, stored once', async () => {
    const store = openStore();
    const first = await store.append([delivery(edge('r1', 'e1')), delivery(edge('r1', 'e2'))]);
    expect(first).toEqual({ accepted: 2, duplicates: 0, conflicts: 0, results: ['accepted', 'accepted'] });
    const retry = await store.append([
      delivery({ ...edge('r1', 'e1'), status: 'ok', at: '2025-01-01T11:00:00+01:00' }, 'token-b', 2_000),
    ]);
    expect(retry).toEqual({ accepted: 0, duplicates: 1, conflicts: 0, results: ['duplicate'] });
    expect(store.runReceipts('r1').map((r) => r.event)).toEqual(['e1', 'e2']);
    expect(store.counts()).toEqual({ receipts: 2, runs: 1 });
  });

  it('keeps both versions of a conflicting (run, event) so the classifier sees the conflict', async () => {
    const store = openStore();
    await store.append([delivery(edge('r1', 'e1'))]);
    const clash = await store.append([delivery(edge('r1', 'e1', { to: 'writer' }), 'token-b')]);
    expect(clash).toEqual({ accepted: 0, duplicates: 0, conflicts: 1, results: ['conflict'] });
    const stored = store.runReceipts('r1');
    expect(stored.map((r: LooseReceipt) => r.to)).toEqual(['researcher', 'writer']);
    // A retry of either version is a duplicate of that version, not a new conflict.
    const retries = await store.append([delivery(edge('r1', 'e1', { to: 'writer' })), delivery(edge('r1', 'e1'))]);
    expect(retries.results).toEqual(['duplicate', 'duplicate']);
    const third = await store.append([delivery(edge('r1', 'e1', { to: 'critic' }))]);
    expect(third.results).toEqual(['conflict']);
    expect(store.runReceipts('r1').map((r: LooseReceipt) => r.to)).toEqual(['researcher', 'writer', 'critic']);
    expect(store.counts().receipts).toBe(3);
  });

  it('detects duplicates and conflicts inside one batch', async () => {
    const store = openStore();
    const result = await store.append([
      delivery(edge('r1', 'e1')),
      delivery(edge('r1', 'e1')),
      delivery(edge('r1', 'e1', { kind: 'handoff' })),
      delivery(edge('r2', 'e1')),
    ]);
    expect(result.results).toEqual(['accepted', 'duplicate', 'conflict', 'accepted']);
    expect(result).toMatchObject({ accepted: 2, duplicates: 1, conflicts: 1 });
    expect(store.runReceipts('r1')).toHaveLength(2);
    expect(store.runReceipts('r2')).toHaveLength(1);
  });

  it('gathers concurrent appends into one transaction and detects duplicates and conflicts across them', async () => {
    const store = openStore();
    const before = store.commitStats().commits;
    const results = await Promise.all([
      store.append([delivery(edge('r1', 'e1'))]),
      store.append([delivery(edge('r1', 'e1'))]),
      store.append([delivery(edge('r1', 'e1', { status: 'error' }))]),
      ...Array.from({ length: 61 }, (_, i) => store.append([delivery(edge(`run-${i}`, 'e1'))])),
    ]);
    expect(store.commitStats().commits - before).toBe(1);
    expect(results[0].results).toEqual(['accepted']);
    expect(results[1].results).toEqual(['duplicate']);
    expect(results[2].results).toEqual(['conflict']);
    expect(results.slice(3).every((r) => r.accepted === 1)).toBe(true);
    expect(store.counts()).toEqual({ receipts: 63, runs: 62 });
  });

  it('commits once per append when group commit is off', async () => {
    const store = openStore(tempDir(), { groupCommit: false });
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.append([delivery(edge('r', `e${i}`))])));
    expect(store.commitStats().commits).toBe(10);
    expect(store.runReceipts('r')).toHaveLength(10);
  });

  it('commits a full group at once without waiting for the delay', async () => {
    const store = openStore(tempDir(), { groupCommitMaxDelayMs: 60_000, groupCommitMaxBatch: 4 });
    const pending = store.append([1, 2, 3, 4].map((i) => delivery(edge('r', `e${i}`))));
    expect(store.commitStats().commits).toBe(1);
    expect((await pending).accepted).toBe(4);
  });

  it('with a flush gate, waits for the work it names: appends made meanwhile share the commit, none resolves before it', async () => {
    const store = openStore();
    let finish!: () => void;
    let asked = 0;
    store.setFlushGate(() => (asked++ === 0 ? new Promise<void>((r) => (finish = r)) : null));
    const resolved: string[] = [];
    const first = store.append([delivery(edge('r', 'e1'))]).then((x) => (resolved.push('e1'), x));
    // Past the end of the turn in which the group would have committed without a gate.
    await new Promise((r) => setTimeout(r, 20));
    expect(store.commitStats().commits).toBe(0);
    expect(resolved).toEqual([]);
    const second = store.append([delivery(edge('r', 'e2'))]).then((x) => (resolved.push('e2'), x));
    await new Promise((r) => setTimeout(r, 20));
    expect(store.commitStats().commits).toBe(0);
    finish();
    expect([(await first).accepted, (await second).accepted]).toEqual([1, 1]);
    expect(store.commitStats().commits).toBe(1);
    expect(asked).toBe(1);
    // The gate says there is nothing to wait for: the next group commits at the end of its turn, as without one.
    await store.append([delivery(edge('r', 'e3'))]);
    expect(store.commitStats().commits).toBe(2);
    expect(store.runReceipts('r').map((r) => r.event)).toEqual(['e1', 'e2', 'e3']);
  });

  it('with a flush gate, a full group and sync still commit at once', async () => {
    const store = openStore(tempDir(), { groupCommitMaxBatch: 3 });
    store.setFlushGate(() => new Promise<void>(() => {}));
    const a = store.append([delivery(edge('r', 'e1'))]);
    await new Promise((r) => setTimeout(r, 20));
    expect(store.commitStats().commits).toBe(0);
    const full = store.append([2, 3].map((i) => delivery(edge('r', `e${i}`))));
    expect(store.commitStats().commits).toBe(1);
    expect([(await a).accepted, (await full).accepted]).toEqual([1, 2]);
    const b = store.append([delivery(edge('r', 'e4'))]);
    await new Promise((r) => setTimeout(r, 20));
    await store.sync();
    expect((await b).accepted).toBe(1);
    expect(store.commitStats().commits).toBe(2);
  });

  it('returns a run\'s receipts in insertion order', async () => {
    const store = openStore();
    const events = ['z', 'a', 'm', 'b'];
    for (const e of events) await store.append([delivery(edge('r', e))]);
    await store.append([delivery(edge('other', 'q'))]);
    expect(store.runReceipts('r').map((r) => r.event)).toEqual(events);
    expect(store.runReceipts('missing')).toEqual([]);
  });

  it('stores only receipt fields, never extra (content) properties', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    const leaky = { ...edge('r', 'e1'), prompt: 'SECRET-PROMPT-TEXT', units: { actions: 2, note: 'SECRET-UNIT' } } as unknown as Receipt;
    await store.append([delivery(leaky)]);
    expect(store.runReceipts('r')[0]).toEqual({ ...edge('r', 'e1'), units: { actions: 2 } });
    store.close();
    for (const file of readdirSync(dir)) {
      const bytes = readFileSync(join(dir, file)).toString('latin1');
      expect(bytes).not.toContain('SECRET-');
    }
  });

  it('keeps the source and server receive time beside each receipt', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    await store.append([delivery(edge('r', 'e1'), 'collector-1', 42)]);
    store.close();
    const db = new Database(join(dir, 'receipts.db'), { readonly: true });
    expect(db.prepare('SELECT source, received_at FROM receipts').all()).toEqual([{ source: 'collector-1', received_at: 42 }]);
    db.close();
  });
});

describe('ReceiptStore: pins, verdict state, contracts, prune', () => {
  const pinA = { contract: 'research', version: '2', phase: 'build' };
  const pinB = { contract: 'research', version: '3', phase: 'build' };

  it('keeps the first pin of a run, also across reopen', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    expect(store.getPin('r')).toBeNull();
    expect(store.setPin('r', pinA, 'hash-a')).toEqual({ pin: pinA, contractHash: 'hash-a' });
    expect(store.setPin('r', pinB, 'hash-b')).toEqual({ pin: pinA, contractHash: 'hash-a' });
    await store.append([delivery(edge('r', 'e1'))]);
    store.close();
    const reopened = openStore(dir);
    expect(reopened.getPin('r')).toEqual({ pin: pinA, contractHash: 'hash-a' });
    expect(reopened.setPin('r', pinB, 'hash-b').pin).toEqual(pinA);
    await reopened.sync();
    reopened.close();
    expect(openStore(dir).getPin('r')).toEqual({ pin: pinA, contractHash: 'hash-a' });
  });

  it('answers "no pin" for a run its own commit created without a query, and the pin once set, also after prune', async () => {
    const store = openStore();
    const stmt = (store as unknown as { stmt: { getPin: { get: (run: string) => unknown } } }).stmt;
    const real = stmt.getPin.get.bind(stmt.getPin);
    const queried: string[] = [];
    stmt.getPin.get = (run: string) => (queried.push(run), real(run));
    await store.append([delivery(edge('fresh', 'e1'))]);
    expect(store.getPin('fresh')).toBeNull();
    expect(store.getPin('never-seen')).toBeNull();
    expect(queried).toEqual(['never-seen']);
    expect(store.setPin('fresh', pinA, 'hash-a')).toEqual({ pin: pinA, contractHash: 'hash-a' });
    await store.sync();
    expect(store.getPin('fresh')).toEqual({ pin: pinA, contractHash: 'hash-a' });
    expect(queried).toEqual(['never-seen', 'fresh']);
    // a run created again after its pin and receipts were pruned has no pin
    store.setVerdictState('fresh', 'healthy', true, 1_000);
    await store.sync();
    expect(store.prune(10, 10_000)).toBe(1);
    await store.append([delivery(edge('fresh', 'e1'), 's', 20_000)]);
    expect(store.getPin('fresh')).toBeNull();
    expect(store.setPin('fresh', pinB, 'hash-b').pin).toEqual(pinB);
  });

  it('stores contract content by hash, first write wins, across reopen', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    store.putContractContent('h1', 'research', '2', 'agents: [a]');
    store.putContractContent('h1', 'research', '2', 'something else');
    expect(store.getContractContent('h1')).toBe('agents: [a]');
    expect(store.getContractContent('h2')).toBeNull();
    await store.sync();
    store.close();
    expect(openStore(dir).getContractContent('h1')).toBe('agents: [a]');
  });

  it('lists live runs with first receipt time, latest verdict, settledness and pin after reopen', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    await store.append([delivery(edge('r1', 'e1'), 's', 500), delivery(edge('r1', 'e2'), 's', 900)]);
    await store.append([delivery(edge('r2', 'e1'), 's', 700)]);
    store.setPin('r1', pinA, 'hash-a');
    store.setVerdictState('r1', 'working', false, 1_000);
    store.setVerdictState('r1', 'forbidden_edge', true, 1_100);
    store.setVerdictState('r2', 'waiting', false, 1_050);
    await store.sync();
    store.close();
    const runs = [...openStore(dir).liveRuns()];
    expect(runs).toEqual([
      { run: 'r1', firstAt: 500, updatedAt: 1_100, verdict: 'forbidden_edge', settled: true, pin: pinA, contractHash: 'hash-a' },
      { run: 'r2', firstAt: 700, updatedAt: 1_050, verdict: 'waiting', settled: false, pin: null, contractHash: null },
    ]);
  });

  it('prunes only settled runs whose last update is older than the age', async () => {
    const store = openStore();
    await store.append([
      delivery(edge('old-settled', 'e1'), 's', 1_000),
      delivery(edge('old-open', 'e1'), 's', 1_000),
      delivery(edge('new-settled', 'e1'), 's', 1_000),
    ]);
    store.setPin('old-settled', pinA, 'h');
    store.setVerdictState('old-settled', 'healthy', true, 2_000);
    store.setVerdictState('old-open', 'working', false, 2_000);
    store.setVerdictState('new-settled', 'incomplete', true, 9_000);
    expect(store.prune(5_000, 10_000)).toBe(1);
    expect(store.runReceipts('old-settled')).toEqual([]);
    expect(store.getPin('old-settled')).toBeNull();
    expect([...store.liveRuns()].map((r) => r.run).sort()).toEqual(['new-settled', 'old-open']);
    expect(store.counts()).toEqual({ receipts: 2, runs: 2 });
    expect(store.prune(5_000, 10_000)).toBe(0);
    expect(store.prune(0, 20_000)).toBe(1);
    expect(store.counts()).toEqual({ receipts: 1, runs: 1 });
  });

  it('a late receipt after a verdict update keeps the run from being pruned until it ages', async () => {
    const store = openStore();
    await store.append([delivery(edge('r', 'e1'), 's', 1_000)]);
    store.setVerdictState('r', 'healthy', true, 1_000);
    await store.append([delivery(edge('r', 'e2'), 's', 8_000)]);
    expect(store.prune(5_000, 10_000)).toBe(0);
    expect(store.prune(5_000, 13_001)).toBe(1);
  });

  it('counts survive reopen', async () => {
    const dir = tempDir();
    const store = openStore(dir);
    await store.append([delivery(edge('a', '1')), delivery(edge('a', '2')), delivery(edge('b', '1')), delivery(edge('b', '1', { kind: 'return' }))]);
    store.close();
    expect(openStore(dir).counts()).toEqual({ receipts: 4, runs: 2 });
  });

  it('rejects appends after close', async () => {
    const store = ReceiptStore.open(tempDir());
    store.close();
    await expect(store.append([delivery(edge('r', 'e'))])).rejects.toThrow(/closed/);
  });
});

describe('ReceiptStore: outcomes match a reference model however deliveries are grouped', () => {
  /** Reference: per (run, event) the distinct canonical contents in first-seen order. */
  function referenceOutcomes(receipts: Receipt[]): string[] {
    const seen = new Map<string, string[]>();
    return receipts.map((r) => {
      const key = `${r.run} ${r.event}`;
      const canonical = canonicalReceiptJson(r);
      const versions = seen.get(key);
      if (versions === undefined) { seen.set(key, [canonical]); return 'accepted'; }
      if (versions.includes(canonical)) return 'duplicate';
      versions.push(canonical);
      return 'conflict';
    });
  }

  const receiptArb = fc.record({
    run: fc.constantFrom('r1', 'r2'),
    event: fc.constantFrom('e1', 'e2', 'e3'),
    to: fc.constantFrom('b', 'c'),
    status: fc.constantFrom(undefined, 'ok', 'error'),
    at: fc.constantFrom('2025-01-01T10:00:00Z', '2025-01-01T11:00:00+01:00', '2025-01-01T10:00:00.000Z', '2025-01-01T10:00:01Z'),
  }).map(({ status, ...rest }): Receipt => ({ ...rest, type: 'edge', from: 'a', kind: 'delegate', ...(status === undefined ? {} : { status: status as 'ok' | 'error' }) }));

  it('gives every delivery the reference outcome and stores each distinct version once', async () => {
    const store = openStore();
    let round = 0;
    await fc.assert(fc.asyncProperty(
      fc.array(receiptArb, { minLength: 1, maxLength: 30 }),
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 30 }),
      fc.boolean(),
      async (receipts, sizes, concurrent) => {
        const prefix = `p${round++}-`;
        const scoped = receipts.map((r) => ({ ...r, run: prefix + r.run }));
        const chunks: Receipt[][] = [];
        for (let i = 0, k = 0; i < scoped.length; k++) {
          const size = sizes[k % sizes.length];
          chunks.push(scoped.slice(i, i + size));
          i += size;
        }
        const results = concurrent
          ? await Promise.all(chunks.map((c) => store.append(c.map((r) => delivery(r)))))
          : await chunks.reduce<Promise<AppendResult[]>>(async (acc, c) => [...(await acc), await store.append(c.map((r) => delivery(r)))], Promise.resolve([]));
        const expected = referenceOutcomes(scoped);
        expect(results.flatMap((r) => r.results)).toEqual(expected);
        const storedCount = [prefix + 'r1', prefix + 'r2'].reduce((n, run) => n + store.runReceipts(run).length, 0);
        expect(storedCount).toBe(expected.filter((o) => o !== 'duplicate').length);
      },
    ), { numRuns: 100 });
  });
});
