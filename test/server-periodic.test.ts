// The server's periodic work (src/server/periodic.ts): named tasks under one timer, each at its own interval; a task
// that throws is logged by name and the tasks after it still run.
import { describe, expect, it } from 'vitest';
import { startPeriodic } from '../src/server/periodic.js';

describe('periodic tasks', () => {
  it('runs each task when due, in list order, and a failing task is logged by name without stopping the others', () => {
    let now = 1_000;
    const ran: string[] = [];
    const logs: { event: string; fields?: Record<string, unknown> }[] = [];
    const s = startPeriodic(
      [
        { name: 'every_tick', everyMs: 0, run: () => ran.push('every_tick') },
        { name: 'broken', everyMs: 0, run: () => { throw new Error('store gone'); } },
        { name: 'slow', everyMs: 500, run: () => ran.push('slow') },
        { name: 'first', everyMs: 500, atStart: true, run: () => ran.push('first') },
      ],
      60_000,
      (event, fields) => logs.push({ event, fields }),
      () => now,
    );
    try {
      s.tick(now);
      expect(ran).toEqual(['every_tick', 'first']);
      now += 499;
      s.tick(now);
      expect(ran).toEqual(['every_tick', 'first', 'every_tick']);
      now += 1;
      s.tick(now);
      expect(ran).toEqual(['every_tick', 'first', 'every_tick', 'every_tick', 'slow', 'first']);
      expect(logs).toHaveLength(3);
      expect(logs.every((l) => l.event === 'periodic_task_failed' && l.fields?.task === 'broken' && String(l.fields?.error).includes('store gone'))).toBe(true);
    } finally {
      s.stop();
    }
  });
});
