// Issue 44: the span-log prune never blocks the event loop for long. A span log of 50,000 traces (one row each, as
// fresh-trace traffic leaves it) is pruned by the server's periodic scheduler; from inside the process, a heartbeat
// on the event loop measures the longest time it was held while the prune ran. Before, the prune was one synchronous
// transaction (a DELETE per trace, each walking the age index): minutes of a blocked event loop at this size.
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { ReceiptStore, type SpanLogEntry } from '../src/store/index.js';
import { startPeriodic } from '../src/server/periodic.js';
import { tempDir } from './helpers/server.js';

const TRACES = 50_000;
const traceId = (i: number) => i.toString(16).padStart(32, '0');

/** Runs `work` while a setImmediate heartbeat records how often the event loop turned and its longest gap. */
async function heartbeatDuring(work: () => Promise<unknown>): Promise<{ turns: number; longestGapMs: number }> {
  let turns = 0;
  let longestGapMs = 0;
  let last = performance.now();
  let done = false;
  const beat = () => {
    const now = performance.now();
    longestGapMs = Math.max(longestGapMs, now - last);
    last = now;
    turns++;
    if (!done) setImmediate(beat);
  };
  setImmediate(beat);
  await work();
  done = true;
  return { turns, longestGapMs: Math.max(longestGapMs, performance.now() - last) };
}

describe('span-log prune (issue 44)', () => {
  it('prunes 50,000 traces in slices that yield to the event loop, keeps pending traces, and a later pass reads only what is new', { timeout: 300_000 }, async () => {
    const store = ReceiptStore.open(tempDir('ta-prune-'));
    const pending = new Set<string>();
    for (let start = 0; start < TRACES; start += 5_000) {
      const batch: SpanLogEntry[] = [];
      for (let i = start; i < start + 5_000; i++) batch.push({ traceId: traceId(i), loggedAt: 1_000 + i, body: '[]' });
      await store.append([], batch);
    }
    for (let i = 0; i < TRACES; i += 1_000) pending.add(traceId(i));
    const slices: number[] = [];
    const logs: string[] = [];
    const scheduler = startPeriodic(
      [{ name: 'span_log_prune', everyMs: 0, job: true, run: (_now, slicer) => store.pruneSpanLog(1_000 + TRACES, (t) => pending.has(t), slicer) }],
      3_600_000,
      (event) => logs.push(event),
      () => 0,
      { observer: { slice: (_task, s) => slices.push(s) } },
    );
    try {
      const beat = await heartbeatDuring(() => scheduler.tick());
      // Every row but the pending traces' went.
      expect(store.spanLog().map((e) => e.traceId)).toEqual([...pending]);
      expect(store.spanLogHeld()).toEqual({ traces: pending.size, rows: pending.size });
      // Bounded slices: the event loop turned between them, many times, and was never held for long (the bound is
      // generous: a slice's budget is 20 ms; before, the prune held it for minutes).
      expect(slices.length).toBeGreaterThan(5);
      expect(beat.turns).toBeGreaterThan(5);
      expect(beat.longestGapMs).toBeLessThan(1_000);
      expect(Math.max(...slices)).toBeLessThan(1);

      // A pending trace that is done is deleted by the next pass from the rows held, without reading the table again.
      pending.delete(traceId(0));
      slices.length = 0;
      await scheduler.tick();
      expect(store.spanLog()).toHaveLength(pending.size);
      expect(store.spanLogHeld().traces).toBe(pending.size);
      // New rows since the last pass: only they are read, and those of done traces go.
      await store.append([], [{ traceId: 'f'.repeat(32), loggedAt: 2_000 + TRACES, body: '[]' }, { traceId: traceId(1_000), loggedAt: 2_000 + TRACES, body: '[]' }]);
      expect(await store.pruneSpanLog(3_000 + TRACES, (t) => pending.has(t))).toBe(1);
      expect(store.spanLog().map((e) => e.traceId)).toEqual([...pending, traceId(1_000)]);
    } finally {
      await scheduler.stop();
      store.close();
    }
  });
});
