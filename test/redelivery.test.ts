/**
 * Redelivered receipts of live runs are recognised by digest without a store round trip; conflicts (same id,
 * different content) are still found exactly, before and after a restart (when the store answers alone).
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine } from '../src/audit/engine.js';
import { DeliveredDigests } from '../src/audit/delivered.js';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { asReceipt } from './helpers/receipt.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(t0 + s * 1000).toISOString();
const batch = (run: string): Receipt[] => [
  { run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
  { run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' },
  { run, event: 'e2', type: 'edge', at: at(2), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' },
];

const open: ReceiptStore[] = [];
function engineOver(dir: string, maxDeliveredDigests?: number) {
  const store = ReceiptStore.open(dir);
  open.push(store);
  const counted: Record<string, number> = {};
  const engine = new AuditEngine(registry, store, {
    retentionMs: 86_400_000,
    maxDeliveredDigests,
  });
  engine.events.subscribe('receiptsStored', ({ result, n }) => (counted[result] = (counted[result] ?? 0) + n));
  engine.restore(t0);
  return { store, engine, counted, append: vi.spyOn(store, 'append') };
}
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

const now = t0 + 10_000;

describe('redelivery', () => {
  it('a redelivered batch is all duplicates and reaches the store with no receipt', async () => {
    const { engine, counted, append } = engineOver(tempDir('ta-redeliver-'));
    expect(await engine.ingest(batch('r1'), 'src', now)).toEqual({ accepted: 3, duplicates: 0, conflicts: 0 });
    const verdict = engine.verdictOf('r1');
    // The same receipts again, as new objects (decoded again from a retried export).
    const again = batch('r1').map((r) => ({ ...r }));
    expect(await engine.ingest(again, 'src', now + 1)).toEqual({ accepted: 0, duplicates: 3, conflicts: 0 });
    expect(append.mock.calls[1][0]).toEqual([]);
    expect(counted).toEqual({ accepted: 3, duplicate: 3 });
    expect(engine.verdictOf('r1')).toBe(verdict); // not re-evaluated
    expect(engine.get('r1')!.receipts).toHaveLength(3);
  });

  it('a conflict is still found exactly; an equal but differently written receipt is a duplicate through the store', async () => {
    const { engine, counted, append } = engineOver(tempDir('ta-redeliver-'));
    await engine.ingest(batch('r2'), 'src', now);
    const [s, e1, e2] = batch('r2');
    const changed = { ...e1, to: 'verifier' }; // same id, other content
    const sameInstant = { ...e2, at: new Date(Date.parse(e2.at)).toISOString().replace('Z', '+00:00') }; // the same instant, other text
    expect(await engine.ingest([s, changed, sameInstant], 'src', now + 1)).toEqual({ accepted: 0, duplicates: 2, conflicts: 1 });
    // Only the two whose stored form differs went to the store.
    expect(append.mock.calls[1][0].map((x) => x.receipt.event)).toEqual(['e1', 'e2']);
    expect(counted).toEqual({ accepted: 3, duplicate: 2, conflict: 1 });
    expect(engine.verdictOf('r2')!.findings.some((f) => f.code === 'conflict' || /conflict/.test(f.message))).toBe(true);
    // The conflicting version, delivered again, is a duplicate (of the stored second version), not a new conflict.
    expect(await engine.ingest([{ ...changed }], 'src', now + 2)).toEqual({ accepted: 0, duplicates: 1, conflicts: 0 });
  });

  it('after a restart the store alone recognises duplicates and conflicts; digests are then recorded again', async () => {
    const dir = tempDir('ta-redeliver-');
    const first = engineOver(dir);
    await first.engine.ingest(batch('r3'), 'src', now);
    await first.store.sync();
    first.store.close();
    open.length = 0;
    const second = engineOver(dir);
    const [, e1] = batch('r3');
    expect(await second.engine.ingest([...batch('r3'), asReceipt({ ...e1, kind: 'handoff' })], 'src', now + 1)).toEqual({ accepted: 0, duplicates: 3, conflicts: 1 });
    expect(second.append.mock.calls[0][0]).toHaveLength(4);
    expect(await second.engine.ingest(batch('r3'), 'src', now + 2)).toEqual({ accepted: 0, duplicates: 3, conflicts: 0 });
    expect(second.append.mock.calls[1][0]).toEqual([]);
  });

  it('keeps at most maxEntries digests; forgotten ones fall back to the store, still exact', async () => {
    const d = new DeliveredDigests(4);
    const r = (run: string, event: string): Receipt => ({ ...batch(run)[0], event });
    const dig = (run: string, event: string) => DeliveredDigests.digest(r(run, event));
    for (const run of ['a', 'b', 'c']) for (const ev of ['1', '2']) d.record(run, ev, dig(run, ev));
    expect(d.size).toBe(4);
    expect(d.has('a', '1', dig('a', '1'))).toBe(false); // the oldest digests went first
    expect(d.has('a', '2', dig('a', '2'))).toBe(false);
    expect(d.has('b', '1', dig('b', '1'))).toBe(true);
    expect(d.has('c', '2', dig('c', '2'))).toBe(true);
    expect(d.has('c', '2', DeliveredDigests.digest({ ...r('c', '2'), at: at(9) }))).toBe(false);
    expect(d.has('b', '1', dig('c', '2'))).toBe(false); // another run's digest
    d.forget('c');
    expect(d.has('c', '2', dig('c', '2'))).toBe(false);
    d.record('c', '2', dig('c', '2'));
    expect(d.has('c', '2', dig('c', '2'))).toBe(true);
    expect(d.size).toBe(4);

    const { engine, append } = engineOver(tempDir('ta-redeliver-'), 3);
    await engine.ingest([...batch('r4'), ...batch('r5')], 'src', now);
    expect(await engine.ingest([...batch('r4'), ...batch('r5')], 'src', now + 1)).toEqual({ accepted: 0, duplicates: 6, conflicts: 0 });
    expect(append.mock.calls[1][0].length).toBeGreaterThanOrEqual(3); // r4's digests were evicted: the store answered
  });

  it('the digest table answers as a plain model would: bound, oldest first, forgotten runs, colliding slots', () => {
    // Digests whose first word takes few values collide in the table: probing and removal are exercised.
    const digestArb = fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 40 })).map(([h, x]) => {
      const b = Buffer.alloc(32);
      b.writeInt32LE(h * 65536, 0);
      b.writeInt32LE(x, 4);
      return b.toString('latin1');
    });
    const runArb = fc.constantFrom('a', 'b', 'c', 'd');
    const opArb = fc.oneof(
      fc.record({ op: fc.constant('record' as const), run: runArb, digest: digestArb }),
      fc.record({ op: fc.constant('has' as const), run: runArb, digest: digestArb }),
      fc.record({ op: fc.constant('forget' as const), run: runArb }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.array(opArb, { maxLength: 400 }), (max, ops) => {
        const d = new DeliveredDigests(max);
        // the model: recorded (run number, digest) pairs, oldest first
        const ids = new Map<string, number>();
        let next = 1;
        let held: { id: number; key: string }[] = [];
        const key = (b: string) => b.slice(0, 16);
        for (const o of ops) {
          if (o.op === 'forget') {
            d.forget(o.run);
            ids.delete(o.run);
          } else if (o.op === 'record') {
            d.record(o.run, 'e', o.digest);
            let id = ids.get(o.run);
            if (id === undefined) ids.set(o.run, (id = next++));
            else if (held.some((x) => x.id === id && x.key === key(o.digest))) continue;
            held.push({ id, key: key(o.digest) });
            if (held.length > max) held = held.slice(held.length - max);
          } else {
            const id = ids.get(o.run);
            expect(d.has(o.run, 'e', o.digest)).toBe(id !== undefined && held.some((x) => x.id === id && x.key === key(o.digest)));
          }
          expect(d.size).toBe(held.length);
        }
      }),
      { numRuns: 300 },
    );
    // growing past the first table, wrapping the ring many times
    const d = new DeliveredDigests(3000);
    const dg = (i: number) => {
      const b = Buffer.alloc(32);
      b.writeInt32LE((i % 97) * 4096, 0); // 97 home slots only
      b.writeInt32LE(i, 4);
      return b.toString('latin1');
    };
    for (let i = 0; i < 10_000; i++) d.record(i % 3 === 0 ? 'x' : 'y', 'e', dg(i));
    expect(d.size).toBe(3000);
    for (let i = 0; i < 10_000; i++) expect(d.has(i % 3 === 0 ? 'x' : 'y', 'e', dg(i)), String(i)).toBe(i >= 7000);
  });
});
