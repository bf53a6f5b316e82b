/**
 * DeadlineHeap (the verdict deadlines and the alerting timers): what popDue returns equals a plain map's answer, in
 * time order, across reschedules, clears and the rebuilds that drop stale entries; its size stays bounded by the
 * scheduled keys however often they are rescheduled.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadlineHeap } from '../src/audit/heap.js';

const op = fc.oneof(
  { weight: 60, arbitrary: fc.record({ op: fc.constant('set' as const), key: fc.integer({ min: 0, max: 30 }), at: fc.option(fc.integer({ min: 0, max: 5000 }), { freq: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('pop' as const), now: fc.integer({ min: 0, max: 2000 }) }) },
);

describe('DeadlineHeap', () => {
  it('pops what a map says is due, in time order, through reschedules, clears and rebuilds; stays bounded', () => {
    let rebuilt = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 2500, maxLength: 4000 }), (ops) => {
        const heap = new DeadlineHeap();
        const model = new Map<string, number>();
        let before = 0;
        for (const o of ops) {
          if (o.op === 'set') {
            before = heap.entries;
            heap.set(`k${o.key}`, o.at);
            if (o.at === null) model.delete(`k${o.key}`);
            else model.set(`k${o.key}`, o.at);
            if (heap.entries < before) rebuilt++;
            // right after a key is scheduled, stale entries are at most the scheduled keys plus the slack
            if (o.at !== null) expect(heap.entries).toBeLessThanOrEqual(2 * model.size + 1024);
          } else {
            const due = [...model].filter(([, t]) => t <= o.now);
            for (const [k] of due) model.delete(k);
            const got = heap.popDue(o.now);
            expect([...got].sort()).toEqual(due.map(([k]) => k).sort());
            const times = got.map((k) => due.find(([d]) => d === k)![1]);
            for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThanOrEqual(times[i - 1]);
          }
          expect(heap.size).toBe(model.size);
        }
      }),
      { numRuns: 40, endOnFailure: true },
    );
    expect(rebuilt).toBeGreaterThan(0); // the sequences did rebuild the heap
  });

  it('a key rescheduled a million times keeps the heap at a few thousand entries', () => {
    const heap = new DeadlineHeap();
    for (let i = 0; i < 1_000_000; i++) heap.set(`run-${i % 100}`, 1_000_000 + i);
    expect(heap.size).toBe(100);
    expect(heap.entries).toBeLessThanOrEqual(2 * 100 + 1024);
    expect(heap.popDue(1_000_000 + 999_899)).toEqual([]); // every key's last time is 1,999,900 or later
    expect(heap.popDue(1_000_000 + 999_900)).toEqual(['run-0']);
    expect(heap.popDue(2_000_000)).toHaveLength(99);
  });
});
