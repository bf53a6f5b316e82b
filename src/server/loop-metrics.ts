/**
 * The event loop's delay and the periodic jobs' metrics (issue 44), on the auditor's registry.
 *
 * Event-loop delay under the conventional Node.js names (those of prom-client's default metrics), from
 * perf_hooks.monitorEventLoopDelay (10 ms resolution, as prom-client's default): min, max, mean, stddev, p50, p90 and
 * p99 of the delays since the previous scrape (each scrape reads, then resets the histogram, as prom-client does),
 * and nodejs_eventloop_lag_seconds, the delay of the last setImmediate probe (one per periodic tick).
 * process_resident_memory_bytes: the process's RSS at the scrape; nodejs_heap_size_used_bytes,
 * nodejs_heap_size_total_bytes and nodejs_external_memory_bytes (V8's heap and the memory outside it) beside it, so a
 * growing RSS can be told apart from a growing heap; nodejs_gc_duration_seconds{kind}: each garbage collection's pause
 * (major, minor, incremental, weakcb), prom-client's names and buckets.
 *
 * The periodic jobs (src/server/periodic.ts), labelled by the task's name (a closed set of words):
 * topology_periodic_task_failures_total, topology_periodic_slice_seconds, topology_periodic_slices_over_budget_total.
 */
import { PerformanceObserver, constants as perf, monitorEventLoopDelay } from 'node:perf_hooks';
import type { AuditMetrics } from '../metrics/index.js';
import type { PeriodicObserver } from './periodic.js';

export const LOOP_METRIC_NAMES = {
  lag: 'nodejs_eventloop_lag_seconds',
  min: 'nodejs_eventloop_lag_min_seconds',
  max: 'nodejs_eventloop_lag_max_seconds',
  mean: 'nodejs_eventloop_lag_mean_seconds',
  stddev: 'nodejs_eventloop_lag_stddev_seconds',
  p50: 'nodejs_eventloop_lag_p50_seconds',
  p90: 'nodejs_eventloop_lag_p90_seconds',
  p99: 'nodejs_eventloop_lag_p99_seconds',
  rss: 'process_resident_memory_bytes',
  heapUsed: 'nodejs_heap_size_used_bytes',
  heapTotal: 'nodejs_heap_size_total_bytes',
  external: 'nodejs_external_memory_bytes',
  gc: 'nodejs_gc_duration_seconds',
  taskFailures: 'topology_periodic_task_failures_total',
  slice: 'topology_periodic_slice_seconds',
  overBudget: 'topology_periodic_slices_over_budget_total',
} as const;

/** prom-client's buckets for nodejs_gc_duration_seconds. */
const GC_BUCKETS = [0.001, 0.01, 0.1, 1, 2, 5];
const GC_KINDS: Readonly<Record<number, string>> = {
  [perf.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [perf.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [perf.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [perf.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** Slice durations: around the 20 ms budget, up to the stalls issue 44 is about. */
const SLICE_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5];

export interface LoopMetrics {
  /** The periodic scheduler's observer. */
  periodic: PeriodicObserver;
  /** Measures the delay of one setImmediate (the lag gauge); call once per tick. */
  probe(): void;
  stop(): void;
}

/** Registers the metrics; `tasks`: the periodic tasks' names (their series exist from the start, at zero). */
export function createLoopMetrics(metrics: AuditMetrics, tasks: readonly string[]): LoopMetrics {
  const r = metrics.registry;
  const N = LOOP_METRIC_NAMES;
  const gauge = (name: string, help: string) => r.gauge({ name, help, unit: name.endsWith('_bytes') ? 'bytes' : 'seconds' });
  const lag = gauge(N.lag, 'Lag of event loop in seconds (the delay of the last setImmediate probe, one per periodic tick).');
  const stats = {
    min: gauge(N.min, 'The minimum recorded event loop delay since the last scrape.'),
    max: gauge(N.max, 'The maximum recorded event loop delay since the last scrape.'),
    mean: gauge(N.mean, 'The mean of the recorded event loop delays since the last scrape.'),
    stddev: gauge(N.stddev, 'The standard deviation of the recorded event loop delays since the last scrape.'),
    p50: gauge(N.p50, 'The 50th percentile of the recorded event loop delays since the last scrape.'),
    p90: gauge(N.p90, 'The 90th percentile of the recorded event loop delays since the last scrape.'),
    p99: gauge(N.p99, 'The 99th percentile of the recorded event loop delays since the last scrape.'),
  };
  const rss = gauge(N.rss, 'Resident memory size in bytes.');
  const heapUsed = gauge(N.heapUsed, 'Process heap size used from Node.js in bytes.');
  const heapTotal = gauge(N.heapTotal, 'Process heap size from Node.js in bytes.');
  const external = gauge(N.external, 'Node.js external memory size in bytes.');
  const gc = r.histogram({ name: N.gc, help: 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.', labelNames: ['kind'], unit: 'seconds', buckets: GC_BUCKETS });
  for (const kind of Object.values(GC_KINDS)) gc.touch([kind]);
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[(e as { detail?: { kind?: number } }).detail?.kind ?? -1];
      if (kind) gc.observe([kind], e.duration / 1000);
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const failures = r.counter({ name: N.taskFailures, help: 'Runs of a periodic task that failed (each is logged as periodic_task_failed).', labelNames: ['task'] });
  const slice = r.histogram({ name: N.slice, help: 'Time one slice of a periodic task held the event loop (a synchronous task: its whole run).', labelNames: ['task'], unit: 'seconds', buckets: SLICE_BUCKETS });
  const over = r.counter({ name: N.overBudget, help: 'Slices of a periodic task over the slice budget (the first is logged as periodic_slice_over_budget).', labelNames: ['task'] });
  for (const t of tasks) {
    failures.touch([t]);
    slice.touch([t]);
    over.touch([t]);
  }
  lag.set([], 0);

  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  const ns = (v: number) => (Number.isFinite(v) ? v / 1e9 : 0);
  r.onCollect(() => {
    stats.min.set([], h.count ? ns(h.min) : 0);
    stats.max.set([], ns(h.max));
    stats.mean.set([], h.count ? ns(h.mean) : 0);
    stats.stddev.set([], h.count ? ns(h.stddev) : 0);
    stats.p50.set([], ns(h.percentile(50)));
    stats.p90.set([], ns(h.percentile(90)));
    stats.p99.set([], ns(h.percentile(99)));
    h.reset();
    const mem = process.memoryUsage();
    rss.set([], mem.rss);
    heapUsed.set([], mem.heapUsed);
    heapTotal.set([], mem.heapTotal);
    external.set([], mem.external);
  });
  let probing = false;
  return {
    periodic: {
      failed: (task) => failures.inc([task]),
      slice: (task, s) => slice.observe([task], s),
      overBudget: (task) => over.inc([task]),
    },
    probe: () => {
      if (probing) return;
      probing = true;
      const at = process.hrtime.bigint();
      setImmediate(() => {
        probing = false;
        lag.set([], Number(process.hrtime.bigint() - at) / 1e9);
      });
    },
    stop: () => {
      h.disable();
      gcObserver.disconnect();
    },
  };
}
