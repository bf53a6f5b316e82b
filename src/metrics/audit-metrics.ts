/**
 * The auditor's metrics, behind named methods so that call sites cannot invent metric names or labels.
 * Names and label sets of the first four metrics are fixed by interfaces.md; the rest follow Prometheus
 * conventions (base units, `_total` for counters, `_seconds` for durations).
 *
 * Every label value is either a contract id/version (from the operator's contract files) or one of a closed set
 * of words; values from untrusted input (a rejected receipt's `type`) are mapped into the closed set first.
 * No run, agent or trace id is ever a label: the run id of a verdict transition travels only as an
 * OpenMetrics exemplar on `topology_verdicts_total`.
 */
import { RECEIPT_TYPES, VERDICTS, type Verdict } from '../core/types.js';
import { UNMAPPED_DIALECTS, UNMAPPED_REASONS } from '../ingest/unmapped.js';
import { isRunId } from '../core/receipt.js';
import { REJECT_REASONS, type RejectReason } from '../ingest/trust.js';
import type { IngestTotals } from './ingest-totals.js';
import {
  MetricsRegistry,
  contentTypeFor,
  type Counter,
  type ExpositionFormat,
  type Gauge,
  type Histogram,
} from './registry.js';

export { contentTypeFor };
export type { ExpositionFormat };

export const METRIC_NAMES = {
  runs: 'topology_runs',
  verdicts: 'topology_verdicts_total',
  receipts: 'topology_receipts_total',
  otlpSpans: 'topology_otlp_spans_total',
  ingestRequests: 'topology_ingest_requests_total',
  ingestRejectedRequests: 'topology_ingest_rejected_requests_total',
  storeCommitDuration: 'topology_store_commit_duration_seconds',
  storeCommitBatchSize: 'topology_store_commit_batch_size',
  liveRuns: 'topology_live_runs',
  liveRunsIdleEvicted: 'topology_live_runs_idle_evicted_total',
  clusterPartitions: 'topology_cluster_partitions',
  pendingParentSpans: 'topology_pending_parent_spans',
  pendingParentSpansEvicted: 'topology_pending_parent_spans_evicted_total',
  skeletonSpans: 'topology_span_skeleton_spans',
  callerUnresolved: 'topology_caller_unresolved_total',
  ingestQueueDepth: 'topology_ingest_queue_depth',
  ingestSaturated: 'topology_ingest_saturated',
  storeHealthy: 'topology_store_healthy',
  buildInfo: 'topology_build_info',
  alertingRuns: 'topology_alerting_runs',
  stalledRuns: 'topology_stalled_runs',
  seriesRefused: 'topology_metric_series_refused_total',
  unmappedTraces: 'topology_unmapped_traces_total',
  shadowVerdicts: 'topology_shadow_verdicts_total',
  shadowDisagreements: 'topology_shadow_disagreements_total',
  ingestRefused: 'topology_ingest_refused_total',
} as const;

export const RECEIPT_RESULTS = ['accepted', 'duplicate', 'conflict', 'rejected'] as const;
export type ReceiptResult = (typeof RECEIPT_RESULTS)[number];

export const OTLP_TRANSPORTS = ['http', 'grpc'] as const;
export type OtlpTransport = (typeof OTLP_TRANSPORTS)[number];

export const SPAN_RESULTS = ['receipt', 'dropped', 'rejected'] as const;
export type SpanResult = (typeof SPAN_RESULTS)[number];

/** Ingest paths: OTLP over HTTP, OTLP over gRPC, and NDJSON receipts posted to /v1/receipts. */
export const INGEST_TRANSPORTS = ['http', 'grpc', 'ndjson'] as const;
export type IngestTransport = (typeof INGEST_TRANSPORTS)[number];

export const INGEST_REJECT_REASONS = [
  'unauthenticated',
  'too_large',
  'bad_content_type',
  'undecodable',
  'saturated',
  'store_unavailable',
  'live_limit',
  'body_budget',
] as const;
export type IngestRejectReason = (typeof INGEST_REJECT_REASONS)[number];

/** The `type` label of a receipt whose type is not one of RECEIPT_TYPES (it can only have been rejected). */
export const INVALID_RECEIPT_TYPE = 'invalid';
/** The `contract` (and `version`) label of a run that has no pin yet. */
export const UNPINNED = 'none';

/** Verdicts that mean the run's topology is unsafe or its completion is false. */
export const UNSAFE_VERDICTS: readonly Verdict[] = [
  'stale_contract',
  'unknown_agent',
  'forbidden_edge',
  'ambiguous_route',
  'false_complete',
];

/** Commit durations, 0.5 ms to 2.5 s: group commits of SQLite in WAL mode sit in the low milliseconds. */
/** Verdicts with an alert rule (topology_alerting_runs carries a row for each). */
export const ALERTING_VERDICTS: readonly Verdict[] = ['stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete', 'incomplete', 'uncertain'];

export const COMMIT_DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Receipts per group commit. */
export const COMMIT_BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

export interface RunsGaugeRow {
  contract: string;
  version: string;
  verdict: Verdict;
  runs: number;
}

export interface AuditMetricsOptions {
  /** Version reported by topology_build_info. */
  version?: string;
  /** Clock for exemplar timestamps (ms since the epoch). */
  now?: () => number;
  /** Series cap per metric (default 10 000). */
  maxSeries?: number;
}

export interface AuditMetrics {
  readonly registry: MetricsRegistry;
  /** A run entered `verdict`: counts it, with the run id as the OpenMetrics exemplar. */
  verdictEntered(contract: string, verdict: Verdict, runId: string): void;
  /**
   * Replaces topology_runs with these rows. Every (contract, version) present gets all ten verdicts, zero where no
   * row says otherwise; pairs absent from the rows disappear from the exposition.
   */
  setRunsGauge(rows: Iterable<RunsGaugeRow>): void;
  /**
   * Replaces topology_alerting_runs (runs that entered an alerting verdict within the alert window and are not
   * acknowledged) and topology_stalled_runs (unsettled runs with no receipt for --stall-after). Every contract in
   * `contracts` gets a zero row for each alerting verdict so alerts resolve on a present 0, not on a vanished series.
   */
  setAlertingGauges(contracts: Iterable<string>, alerting: Iterable<{ contract: string; verdict: Verdict; count: number }>, stalled: Iterable<{ contract: string; count: number }>): void;
  /** n receipts ended in `result`; a type outside RECEIPT_TYPES is counted as "invalid". */
  receipt(type: string, result: ReceiptResult, n?: number): void;
  /** n OTLP spans, by transport, became a receipt, were dropped (no receipt), or were rejected. */
  otlpSpans(transport: OtlpTransport, result: SpanResult, n?: number): void;
  /** One ingest request answered with `code` (HTTP status number or gRPC status name). */
  ingestRequest(transport: IngestTransport, code: number | string): void;
  /** One ingest request (or n) refused before its content was accepted, with the reason. */
  ingestRejected(transport: IngestTransport, reason: IngestRejectReason, n?: number): void;
  /** One group commit landed: its duration in seconds and its number of receipts. */
  storeCommit(durationSeconds: number, batchSize: number): void;
  setLiveRuns(n: number): void;
  /** Runs that left live memory idle to make room under a live cap (kept in the store; see --idle-evict-after). */
  liveRunsIdleEvicted(n: number): void;
  /** Hash partitions of runs this instance owns in a cluster (0 on a single instance). */
  setClusterPartitions(n: number): void;
  /** Spans held back because their parent has not arrived yet. */
  setPendingParentSpans(n: number): void;
  /**
   * Spans evicted from the span skeleton (caller resolution) because it was full: `total` (--max-skeleton-spans) or
   * their trace was (`trace`, --max-trace-spans).
   */
  pendingParentEvicted(n?: number, limit?: 'total' | 'trace'): void;
  /** Spans held in the span skeleton (every span of the traces kept for caller resolution). */
  setSkeletonSpans(n: number): void;
  /** Derived receipts whose caller stayed unresolved at the end of the wait (each became a gap receipt). */
  callerUnresolved(n?: number): void;
  /** A trace with agent-framework markers that yielded no receipt (labels from closed sets: src/ingest/unmapped.ts). */
  unmappedTrace(dialect: string, reason: string): void;
  /** n spans or receipts refused at the trust boundary (id rule, source binding, run scope), by reason. */
  ingestRefused(reason: RejectReason, n?: number): void;
  setIngestQueueDepth(n: number): void;
  setIngestSaturated(saturated: boolean): void;
  setStoreHealthy(healthy: boolean): void;
  /** A run entered `verdict` under a shadow candidate; `disagreed`: it started to disagree with its pinned verdict. */
  shadowVerdictEntered(contract: string, version: string, verdict: Verdict, disagreed: boolean): void;
  /** The ingest counters as typed totals, read from the counter objects (the ingest summary log line). */
  ingestTotals(): IngestTotals;
  render(format?: ExpositionFormat): string;
}

const RECEIPT_TYPE_SET: ReadonlySet<string> = new Set(RECEIPT_TYPES);
const VERDICT_SET: ReadonlySet<string> = new Set(VERDICTS);

function oneOf<T extends string>(value: string, allowed: readonly T[], what: string): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new TypeError(`${what} must be one of ${allowed.join(', ')}; got ${JSON.stringify(value)}`);
  }
  return value as T;
}

function statusCodeLabel(code: number | string): string {
  const text = String(code);
  return /^[A-Za-z0-9_]{1,32}$/.test(text) ? text : 'other';
}

function nonEmpty(value: string): string {
  return value === '' ? UNPINNED : value;
}

function count(n: number | undefined): number {
  return n ?? 1;
}

/** The families of runs and ingest: verdicts and run gauges, receipts, spans and requests by result. */
function runAndIngestFamilies(registry: MetricsRegistry) {
  const runs: Gauge = registry.gauge({
    name: METRIC_NAMES.runs,
    help: 'Runs currently in each verdict, by pinned contract and version.',
    labelNames: ['contract', 'version', 'verdict'],
  });
  const alertingRuns: Gauge = registry.gauge({
    name: METRIC_NAMES.alertingRuns,
    help: 'Runs that entered an alerting verdict within the alert window (serve --alert-window) and are not acknowledged.',
    labelNames: ['contract', 'verdict'],
  });
  const stalledRuns: Gauge = registry.gauge({
    name: METRIC_NAMES.stalledRuns,
    help: 'Unsettled, unacknowledged runs whose latest receipt is older than serve --stall-after.',
    labelNames: ['contract'],
  });
  const verdicts: Counter = registry.counter({
    name: METRIC_NAMES.verdicts,
    help: 'Runs entering each verdict (the run id is the OpenMetrics exemplar).',
    labelNames: ['contract', 'verdict'],
  });
  const receipts: Counter = registry.counter({
    name: METRIC_NAMES.receipts,
    help: 'Receipts by type and ingest result: accepted, duplicate, conflict or rejected.',
    labelNames: ['type', 'result'],
  });
  const otlpSpans: Counter = registry.counter({
    name: METRIC_NAMES.otlpSpans,
    help: 'OTLP spans by transport and result: receipt (became one), dropped (no receipt) or rejected.',
    labelNames: ['transport', 'result'],
  });
  const ingestRequests: Counter = registry.counter({
    name: METRIC_NAMES.ingestRequests,
    help: 'Ingest requests by transport (http, grpc, ndjson) and response code.',
    labelNames: ['transport', 'code'],
  });
  const ingestRejected: Counter = registry.counter({
    name: METRIC_NAMES.ingestRejectedRequests,
    help: 'Ingest requests refused before acceptance, by transport and reason.',
    labelNames: ['transport', 'reason'],
  });
  return { runs, alertingRuns, stalledRuns, verdicts, receipts, otlpSpans, ingestRequests, ingestRejected };
}

/** The families of the store and live memory: group commits, live runs, partitions, the span skeleton. */
function storeFamilies(registry: MetricsRegistry) {
  const commitDuration: Histogram = registry.histogram({
    name: METRIC_NAMES.storeCommitDuration,
    help: 'Duration of one group commit of receipts to the store.',
    unit: 'seconds',
    buckets: COMMIT_DURATION_BUCKETS,
  });
  const commitBatch: Histogram = registry.histogram({
    name: METRIC_NAMES.storeCommitBatchSize,
    help: 'Receipts written by one group commit.',
    buckets: COMMIT_BATCH_BUCKETS,
  });
  const liveRuns: Gauge = registry.gauge({ name: METRIC_NAMES.liveRuns, help: 'Runs whose verdict state is held in memory.' });
  const idleEvicted: Counter = registry.counter({
    name: METRIC_NAMES.liveRunsIdleEvicted,
    help: 'Runs that left live memory, longest idle first, to make room under --max-live-runs/--max-live-receipts (kept in the store; loaded again on their next receipt).',
  });
  const clusterPartitions: Gauge = registry.gauge({ name: METRIC_NAMES.clusterPartitions, help: 'Hash partitions of runs this instance owns (cluster on a shared PostgreSQL store; 0 on a single instance).' });
  const pendingParents: Gauge = registry.gauge({
    name: METRIC_NAMES.pendingParentSpans,
    help: 'Spans waiting for their parent span to arrive before their caller can be resolved.',
  });
  const pendingEvicted: Counter = registry.counter({
    name: METRIC_NAMES.pendingParentSpansEvicted,
    help: 'Spans evicted from the span skeleton of caller resolution because it (limit="total") or their trace (limit="trace") was full; a waiting span evicted becomes a gap.',
    labelNames: ['limit'],
  });
  const skeletonSpans: Gauge = registry.gauge({
    name: METRIC_NAMES.skeletonSpans,
    help: 'Spans held in the span skeleton of caller resolution (ids, parents and agent ids of recent traces).',
  });
  const callerUnresolved: Counter = registry.counter({
    name: METRIC_NAMES.callerUnresolved,
    help: 'Derived receipts whose caller was still unresolved when the wait ended (recorded as gap receipts).',
  });
  // Unlabelled metrics start at zero so that dashboards and rate() see them from the first scrape.
  commitDuration.touch([]);
  commitBatch.touch([]);
  liveRuns.set([], 0);
  clusterPartitions.set([], 0);
  pendingParents.set([], 0);
  pendingEvicted.touch(['total']);
  pendingEvicted.touch(['trace']);
  skeletonSpans.set([], 0);
  idleEvicted.touch([]);
  callerUnresolved.touch([]);
  return { commitDuration, commitBatch, liveRuns, idleEvicted, clusterPartitions, pendingParents, pendingEvicted, skeletonSpans, callerUnresolved };
}

/** The families of refusals, health, shadow evaluation and the build. */
function healthAndShadowFamilies(registry: MetricsRegistry, version: string | undefined) {
  const unmappedTraces: Counter = registry.counter({
    name: METRIC_NAMES.unmappedTraces,
    help: 'Traces that carried agent-framework markers but yielded no receipt, by dialect family and reason.',
    labelNames: ['dialect', 'reason'],
  });
  const ingestRefused: Counter = registry.counter({
    name: METRIC_NAMES.ingestRefused,
    help: 'Spans and receipts refused at the trust boundary, by reason (id rule, source binding, run scope); never stored.',
    labelNames: ['reason'],
  });
  for (const r of REJECT_REASONS) ingestRefused.touch([r]);
  const queueDepth: Gauge = registry.gauge({
    name: METRIC_NAMES.ingestQueueDepth,
    help: 'Receipts accepted by ingest and waiting for the next group commit.',
  });
  const saturated: Gauge = registry.gauge({
    name: METRIC_NAMES.ingestSaturated,
    help: '1 while ingest refuses new work because its queue is full, else 0.',
  });
  const storeHealthy: Gauge = registry.gauge({
    name: METRIC_NAMES.storeHealthy,
    help: '1 while the store accepts commits, else 0.',
  });
  const shadowVerdicts: Counter = registry.counter({
    name: METRIC_NAMES.shadowVerdicts,
    help: 'Runs entering each verdict under a shadow-evaluated candidate version (never the pinned verdict).',
    labelNames: ['contract', 'version', 'verdict'],
  });
  const shadowDisagreements: Counter = registry.counter({
    name: METRIC_NAMES.shadowDisagreements,
    help: 'Runs starting to disagree with their pinned verdict under a shadow-evaluated candidate version.',
    labelNames: ['contract', 'version'],
  });
  const buildInfo = registry.info({ name: METRIC_NAMES.buildInfo, help: 'Build of topology-audit.', labelNames: ['version'] });

  queueDepth.set([], 0);
  saturated.set([], 0);
  storeHealthy.set([], 1);
  buildInfo.set([version ?? 'unknown']);
  return { unmappedTraces, ingestRefused, queueDepth, saturated, storeHealthy, shadowVerdicts, shadowDisagreements, buildInfo };
}

/** The rows of topology_runs: every (contract, version) present gets all ten verdicts, zero where no row says otherwise. */
function runsGaugeEntries(rows: Iterable<RunsGaugeRow>): Array<readonly [readonly string[], number]> {
  const byPin = new Map<string, { contract: string; version: string; counts: Map<Verdict, number> }>();
  for (const row of rows) {
    if (!VERDICT_SET.has(row.verdict)) throw new TypeError(`unknown verdict ${JSON.stringify(row.verdict)}`);
    const contract = nonEmpty(row.contract);
    const version = nonEmpty(row.version);
    const key = `${contract}\u0000${version}`;
    let pin = byPin.get(key);
    if (pin === undefined) {
      pin = { contract, version, counts: new Map() };
      byPin.set(key, pin);
    }
    pin.counts.set(row.verdict, (pin.counts.get(row.verdict) ?? 0) + row.runs);
  }
  const entries: Array<readonly [readonly string[], number]> = [];
  for (const pin of byPin.values()) {
    for (const v of VERDICTS) entries.push([[pin.contract, pin.version, v], pin.counts.get(v) ?? 0]);
  }
  return entries;
}

/** The rows of topology_alerting_runs and topology_stalled_runs, with a zero row for each alerting verdict of every contract. */
function alertingGaugeEntries(
  contracts: Iterable<string>,
  alerting: Iterable<{ contract: string; verdict: Verdict; count: number }>,
  stalled: Iterable<{ contract: string; count: number }>,
): { alerting: Array<readonly [readonly string[], number]>; stalled: Array<readonly [readonly string[], number]> } {
  const a = new Map<string, number>();
  const st = new Map<string, number>();
  for (const c of contracts) {
    for (const v of ALERTING_VERDICTS) a.set(`${nonEmpty(c)}\u0000${v}`, 0);
    st.set(nonEmpty(c), 0);
  }
  for (const r of alerting) {
    if (!VERDICT_SET.has(r.verdict)) throw new TypeError(`unknown verdict ${JSON.stringify(r.verdict)}`);
    const k = `${nonEmpty(r.contract)}\u0000${r.verdict}`;
    a.set(k, (a.get(k) ?? 0) + r.count);
  }
  for (const r of stalled) st.set(nonEmpty(r.contract), (st.get(nonEmpty(r.contract)) ?? 0) + r.count);
  return { alerting: [...a].map(([k, n]) => [k.split('\u0000'), n] as const), stalled: [...st].map(([c, n]) => [[c], n] as const) };
}

/**
 * The metrics: each family declared once (name, help, labels, its zero series) in the three family functions above, in
 * the order of the exposition, then the one-line methods that move them.
 */
export function createAuditMetrics(options: AuditMetricsOptions = {}): AuditMetrics {
  const now = options.now ?? Date.now;
  const registry = new MetricsRegistry({ maxSeries: options.maxSeries, refusedSeriesCounter: METRIC_NAMES.seriesRefused });
  const { runs, alertingRuns, stalledRuns, verdicts, receipts, otlpSpans, ingestRequests, ingestRejected } = runAndIngestFamilies(registry);
  const { commitDuration, commitBatch, liveRuns, idleEvicted, clusterPartitions, pendingParents, pendingEvicted, skeletonSpans, callerUnresolved } = storeFamilies(registry);
  const { unmappedTraces, ingestRefused, queueDepth, saturated, storeHealthy, shadowVerdicts, shadowDisagreements, buildInfo } = healthAndShadowFamilies(registry, options.version);

  return {
    registry,

    verdictEntered(contract, verdict, runId) {
      oneOf(verdict, VERDICTS, 'verdict');
      // Exemplars carry only ids that pass the id rule (every stored run does; this keeps /metrics safe regardless).
      if (isRunId(runId)) verdicts.inc([nonEmpty(contract), verdict], 1, { labels: { run_id: runId }, value: 1, timestampMs: now() });
      else verdicts.inc([nonEmpty(contract), verdict], 1);
    },

    setRunsGauge(rows) {
      runs.replaceAll(runsGaugeEntries(rows));
    },

    setAlertingGauges(contracts, alerting, stalled) {
      const entries = alertingGaugeEntries(contracts, alerting, stalled);
      alertingRuns.replaceAll(entries.alerting);
      stalledRuns.replaceAll(entries.stalled);
    },

    receipt(type, result, n) {
      oneOf(result, RECEIPT_RESULTS, 'receipt result');
      receipts.inc([RECEIPT_TYPE_SET.has(type) ? type : INVALID_RECEIPT_TYPE, result], count(n));
    },

    otlpSpans(transport, result, n) {
      otlpSpans.inc([oneOf(transport, OTLP_TRANSPORTS, 'transport'), oneOf(result, SPAN_RESULTS, 'span result')], count(n));
    },

    ingestRequest(transport, code) {
      ingestRequests.inc([oneOf(transport, INGEST_TRANSPORTS, 'transport'), statusCodeLabel(code)]);
    },

    ingestRejected(transport, reason, n) {
      ingestRejected.inc(
        [oneOf(transport, INGEST_TRANSPORTS, 'transport'), oneOf(reason, INGEST_REJECT_REASONS, 'reject reason')],
        count(n),
      );
    },

    storeCommit(durationSeconds, batchSize) {
      commitDuration.observe([], durationSeconds);
      commitBatch.observe([], batchSize);
    },

    setLiveRuns(n) {
      liveRuns.set([], n);
    },
    liveRunsIdleEvicted(n) {
      idleEvicted.inc([], count(n));
    },
    setClusterPartitions(n) {
      clusterPartitions.set([], n);
    },
    setPendingParentSpans(n) {
      pendingParents.set([], n);
    },
    pendingParentEvicted(n, limit = 'total') {
      pendingEvicted.inc([limit === 'trace' ? 'trace' : 'total'], count(n));
    },
    setSkeletonSpans(n) {
      skeletonSpans.set([], n);
    },
    unmappedTrace(dialect, reason) {
      unmappedTraces.inc([oneOf(dialect, UNMAPPED_DIALECTS, 'dialect'), oneOf(reason, UNMAPPED_REASONS, 'reason')], 1);
    },
    callerUnresolved(n) {
      callerUnresolved.inc([], count(n));
    },
    ingestRefused(reason, n) {
      ingestRefused.inc([oneOf(reason, REJECT_REASONS, 'refusal reason')], count(n));
    },
    setIngestQueueDepth(n) {
      queueDepth.set([], n);
    },
    setIngestSaturated(isSaturated) {
      saturated.set([], isSaturated ? 1 : 0);
    },
    setStoreHealthy(healthy) {
      storeHealthy.set([], healthy ? 1 : 0);
    },

    shadowVerdictEntered(contract, version, verdict, disagreed) {
      oneOf(verdict, VERDICTS, 'verdict');
      shadowVerdicts.inc([contract, version, verdict]);
      if (disagreed) shadowDisagreements.inc([contract, version]);
    },

    ingestTotals() {
      const byResult = receipts.sumBy(1);
      const spans = otlpSpans.sumBy(1);
      return {
        receipts: {
          accepted: byResult.get('accepted') ?? 0,
          duplicates: byResult.get('duplicate') ?? 0,
          conflicts: byResult.get('conflict') ?? 0,
          rejected: byResult.get('rejected') ?? 0,
        },
        refused: ingestRefused.sumBy(0),
        rejectedRequests: ingestRejected.sumBy(1),
        spans: { dropped: spans.get('dropped') ?? 0, rejected: spans.get('rejected') ?? 0, evicted: pendingEvicted.total(), callerUnresolved: callerUnresolved.total() },
      };
    },

    render(format: ExpositionFormat = 'prometheus') {
      return registry.render(format);
    },
  };
}
