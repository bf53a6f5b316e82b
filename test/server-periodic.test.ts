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

describe('periodic jobs in slices (issue 44)', () => {
  it('runs an async job in slices that yield, never overlapping itself, while the other tasks run on', async () => {
    const ran: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slicesSeen: string[] = [];
    const s = startPeriodic(
      [
        {
          name: 'job',
          everyMs: 0,
          job: true,
          run: async (_now, slicer) => {
            ran.push('job');
            await gate;
            for (let i = 0; i < 3; i++) await slicer.pause();
          },
        },
        { name: 'every_tick', everyMs: 0, run: () => ran.push('every_tick') },
      ],
      3_600_000,
      () => {},
      () => 0,
      { observer: { slice: (task) => slicesSeen.push(task) } },
    );
    const first = s.tick();
    // A job starts on a turn of its own, after the tick's synchronous tasks.
    expect(ran).toEqual(['every_tick']);
    for (let i = 0; !ran.includes('job') && i < 100_000; i++) await new Promise((r) => setImmediate(r));
    await s.tick();
    await s.tick();
    // The job in flight is not started again; the synchronous task ran at each tick.
    expect(ran).toEqual(['every_tick', 'job', 'every_tick', 'every_tick']);
    expect(s.running()).toEqual(['job']);
    release();
    await first;
    expect(s.running()).toEqual([]);
    // Slices of the job: up to each of its three pauses, then to its end; one per run of the synchronous task.
    expect(slicesSeen.filter((t) => t === 'job')).toHaveLength(4);
    expect(slicesSeen.filter((t) => t === 'every_tick')).toHaveLength(3);
    await s.tick();
    expect(ran.filter((t) => t === 'job')).toHaveLength(2);
    await s.stop();
  });

  it('counts a failed job and logs it by name; a slice over budget is counted each time and logged once', async () => {
    const logs: { event: string; fields?: Record<string, unknown> }[] = [];
    const failed: string[] = [];
    const over: string[] = [];
    const busy = (ms: number) => {
      const end = Date.now() + ms;
      while (Date.now() < end);
    };
    const s = startPeriodic(
      [
        { name: 'rejects', everyMs: 0, job: true, run: async () => Promise.reject(new Error('pool gone')) },
        { name: 'hog', everyMs: 0, run: () => busy(30) },
      ],
      3_600_000,
      (event, fields) => logs.push({ event, fields }),
      () => 0,
      { sliceBudgetMs: 1, overBudgetMs: 10, observer: { failed: (t) => failed.push(t), overBudget: (t) => over.push(t) } },
    );
    await s.tick();
    await s.tick();
    expect(failed).toEqual(['rejects', 'rejects']);
    expect(logs.filter((l) => l.event === 'periodic_task_failed').map((l) => [l.fields?.task, String(l.fields?.error)])).toEqual([
      ['rejects', 'Error: pool gone'],
      ['rejects', 'Error: pool gone'],
    ]);
    expect(over).toEqual(['hog', 'hog']);
    expect(logs.filter((l) => l.event === 'periodic_slice_over_budget').map((l) => l.fields?.task)).toEqual(['hog']);
    await s.stop();
  });

  it('stop() ends a job in flight at its next pause, without counting it as failed, and resolves once it has', async () => {
    const failed: string[] = [];
    let pauses = 0;
    let ended = '';
    const s = startPeriodic(
      [
        {
          name: 'endless',
          everyMs: 0,
          job: true,
          run: async (_now, slicer) => {
            try {
              for (let i = 0; i < 1_000_000; i++) {
                await slicer.pause();
                pauses++;
              }
            } catch (e) {
              ended = (e as Error).name;
              throw e;
            }
          },
        },
      ],
      3_600_000,
      () => {},
      () => 0,
      { observer: { failed: (t) => failed.push(t) } },
    );
    void s.tick();
    for (let i = 0; pauses < 3 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
    expect(pauses).toBeGreaterThanOrEqual(3);
    await s.stop();
    expect(ended).toBe('SchedulerStopped');
    expect(s.running()).toEqual([]);
    expect(failed).toEqual([]);
    expect(pauses).toBeLessThan(1_000_000);
  });
});
