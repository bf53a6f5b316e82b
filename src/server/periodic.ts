/**
 * The server's periodic work as a list of named tasks under one timer: each task runs when its interval has passed
 * (0: every tick), in list order; a task that throws is logged by name (`periodic_task_failed`) and the others run.
 */

export interface PeriodicTask {
  /** Content-free name, logged when the task fails. */
  name: string;
  /** Least time between two runs (0: every tick). */
  everyMs: number;
  /** Run at the first tick (default: one interval after start). */
  atStart?: boolean;
  run(now: number): void;
}

export interface Scheduler {
  /** Runs the due tasks now (the timer calls it every tick). */
  tick(now?: number): void;
  stop(): void;
}

export function startPeriodic(
  tasks: readonly PeriodicTask[],
  tickMs: number,
  log: (event: string, fields?: Record<string, unknown>) => void,
  clock: () => number = Date.now,
): Scheduler {
  const start = clock();
  const last = tasks.map((t) => (t.atStart ? -Infinity : start));
  let ticking = false;
  const tick = (now = clock()) => {
    if (ticking) return;
    ticking = true;
    try {
      tasks.forEach((t, i) => {
        if (t.everyMs > 0 && now - last[i] < t.everyMs) return;
        last[i] = now;
        try {
          t.run(now);
        } catch (e) {
          log('periodic_task_failed', { task: t.name, error: `${(e as Error)?.name ?? 'Error'}: ${String((e as Error)?.message ?? e).slice(0, 200)}` });
        }
      });
    } finally {
      ticking = false;
    }
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  return { tick, stop: () => clearInterval(timer) };
}
