/**
 * The server's periodic work as a list of named tasks under one timer (issue 44). Each task runs when its interval has
 * passed (0: every tick), in list order. A synchronous task is one slice. A job (`job: true`) is async, starts on a
 * turn of its own and works in slices: between bounded steps it asks `slicer.due()`, and `await slicer.pause()` once
 * its slice's budget (~20 ms) is spent, so the event loop serves requests between slices. A job never overlaps itself:
 * while it is in flight its later turns are skipped (the other tasks run on). A task that throws or rejects is logged
 * by name (`periodic_task_failed`) and counted (observer.failed); a slice over budget is counted and logged once per
 * task (`periodic_slice_over_budget`). `stop()` ends the timer; a job in flight ends at its next pause (the pause
 * rejects with SchedulerStopped) and `stop()` resolves once none is in flight.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { Slicer } from '../store/index.js';

export interface PeriodicTask {
  /** Content-free name: the label of its metrics, and logged when the task fails or a slice runs over budget. */
  name: string;
  /** Least time between two runs (0: every tick). */
  everyMs: number;
  /** Run at the first tick (default: one interval after start). */
  atStart?: boolean;
  /**
   * A job: `run` is async, started on a turn of its own, and works in slices (`slicer`); its later turns are skipped
   * until it settles. Otherwise `run` is synchronous, run in list order within the tick, and is one slice.
   */
  job?: boolean;
  run(now: number, slicer: Slicer): unknown;
}

/** What the scheduler reports besides its log lines (the metrics of src/server/loop-metrics.ts). */
export interface PeriodicObserver {
  /** A run of `task` threw or rejected. */
  failed?(task: string): void;
  /** One slice of `task` ran this long on the event loop (a synchronous task: its whole run). */
  slice?(task: string, seconds: number): void;
  /** A slice of `task` ran over the budget. */
  overBudget?(task: string): void;
}

export interface PeriodicOptions {
  /** A slice's budget: a job pauses once it has run this long (default 20 ms). */
  sliceBudgetMs?: number;
  /** A slice that ran longer than this is over budget: counted, and logged once per task (default 2.5 x the budget). */
  overBudgetMs?: number;
  observer?: PeriodicObserver;
}

export interface Scheduler {
  /** Starts the due tasks now (the timer calls it every tick); resolves when the jobs it started have settled. */
  tick(now?: number): Promise<void>;
  /** Stops the timer; a job in flight ends at its next pause. Resolves when none is in flight. */
  stop(): Promise<void>;
  /** Names of the jobs in flight now. */
  running(): string[];
}

/** The rejection of a job's pause once the scheduler is stopping: the job ends there (not a failure). */
export class SchedulerStopped extends Error {
  constructor() {
    super('periodic scheduler stopped');
    this.name = 'SchedulerStopped';
  }
}

export const SLICE_BUDGET_MS = 20;

/** A synchronous task's slicer: it has no pause. */
const UNPAUSED: Slicer = { due: () => false, pause: () => Promise.resolve() };

type Log = (event: string, fields?: Record<string, unknown>) => void;

const errorText = (e: unknown) => `${(e as Error)?.name ?? 'Error'}: ${String((e as Error)?.message ?? e).slice(0, 200)}`;

export function startPeriodic(
  tasks: readonly PeriodicTask[],
  tickMs: number,
  log: Log,
  clock: () => number = Date.now,
  options: PeriodicOptions = {},
): Scheduler {
  const budgetMs = options.sliceBudgetMs ?? SLICE_BUDGET_MS;
  const overBudgetMs = options.overBudgetMs ?? budgetMs * 2.5;
  const observer = options.observer ?? {};
  const start = clock();
  const last = tasks.map((t) => (t.atStart ? -Infinity : start));
  const inFlight = new Map<string, Promise<void>>();
  const overLogged = new Set<string>();
  let stopped = false;

  const endSlice = (task: string, began: number) => {
    const ms = performance.now() - began;
    observer.slice?.(task, ms / 1000);
    if (ms <= overBudgetMs) return;
    observer.overBudget?.(task);
    if (overLogged.has(task)) return;
    overLogged.add(task);
    log('periodic_slice_over_budget', { task, ms: Math.round(ms), budgetMs, note: 'logged once per task; counted in topology_periodic_slices_over_budget_total' });
  };
  const failed = (task: string, e: unknown) => {
    observer.failed?.(task);
    log('periodic_task_failed', { task, error: errorText(e) });
  };

  /** One run of a synchronous task: one slice. */
  const runTask = (t: PeriodicTask, now: number): void => {
    const began = performance.now();
    try {
      t.run(now, UNPAUSED);
    } catch (e) {
      failed(t.name, e);
    } finally {
      endSlice(t.name, began);
    }
  };

  /**
   * One run of a job, started on a turn of its own: a slice is the time from the start of a turn (the first, or the
   * one after a pause) to the next pause or the job's end. Wall time: a job awaiting I/O (PostgreSQL) counts the wait.
   */
  const runJob = async (t: PeriodicTask, now: number): Promise<void> => {
    await nextTurn();
    let began = performance.now();
    const slicer: Slicer = {
      due: () => stopped || performance.now() - began >= budgetMs,
      pause: async () => {
        endSlice(t.name, began);
        if (stopped) throw new SchedulerStopped();
        await nextTurn();
        if (stopped) throw new SchedulerStopped();
        began = performance.now();
      },
    };
    try {
      if (stopped) return;
      await t.run(now, slicer);
      endSlice(t.name, began);
    } catch (e) {
      endSlice(t.name, began);
      if (!(e instanceof SchedulerStopped)) failed(t.name, e);
    }
  };

  const tick = (now = clock()): Promise<void> => {
    if (stopped) return Promise.resolve();
    const started: Promise<void>[] = [];
    tasks.forEach((t, i) => {
      if (inFlight.has(t.name)) return;
      // A clock set back (a cluster's clock corrected to the database's) runs the task rather than skipping it until then.
      if (t.everyMs > 0 && now - last[i] < t.everyMs && now >= last[i]) return;
      last[i] = now;
      if (!t.job) return runTask(t, now);
      const job = runJob(t, now).finally(() => inFlight.delete(t.name));
      inFlight.set(t.name, job);
      started.push(job);
    });
    return Promise.all(started).then(() => undefined);
  };
  const timer = setInterval(() => void tick(), tickMs);
  timer.unref();
  return {
    tick,
    running: () => [...inFlight.keys()],
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      while (inFlight.size) await Promise.allSettled([...inFlight.values()]);
    },
  };
}
