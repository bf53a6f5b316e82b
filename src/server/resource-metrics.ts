/**
 * Metrics of the server's resource limits (connections, long-polls, event streams, live state), registered on the
 * auditor's registry next to the audit metrics. Labels are closed sets of words.
 */
import type { AuditMetrics } from '../metrics/index.js';

export const RESOURCE_METRIC_NAMES = {
  connectionsDropped: 'topology_connections_dropped_total',
  longPolls: 'topology_api_long_polls',
  sseClients: 'topology_ui_event_streams',
  sseDropped: 'topology_ui_event_streams_dropped_total',
  liveLimited: 'topology_live_limit_refusals_total',
  liveReceipts: 'topology_live_receipts',
  logWriteErrors: 'topology_log_write_errors_total',
} as const;

export const LISTENERS = ['api', 'otlp_http', 'otlp_grpc'] as const;
export type ListenerName = (typeof LISTENERS)[number];

export interface ResourceMetrics {
  connectionDropped(listener: ListenerName): void;
  setLongPolls(n: number): void;
  setSseClients(n: number): void;
  sseDropped(reason: 'slow_reader' | 'too_many'): void;
  liveLimited(limit: 'runs' | 'receipts', transport: 'http' | 'grpc' | 'ndjson'): void;
  setLiveReceipts(n: number): void;
}

/** `outputWriteErrors`: the process's failed (dropped) writes to stdout and stderr so far, read at every scrape. */
export function createResourceMetrics(metrics: AuditMetrics, outputWriteErrors?: () => { stdout: number; stderr: number }): ResourceMetrics {
  const r = metrics.registry;
  const dropped = r.counter({ name: RESOURCE_METRIC_NAMES.connectionsDropped, help: 'Connections closed at accept because the listener was at --max-connections.', labelNames: ['listener'] });
  const polls = r.gauge({ name: RESOURCE_METRIC_NAMES.longPolls, help: 'Verdict long-polls waiting (each holds one listener and one timer).' });
  const sse = r.gauge({ name: RESOURCE_METRIC_NAMES.sseClients, help: 'Open web-view event streams.' });
  const sseDropped = r.counter({ name: RESOURCE_METRIC_NAMES.sseDropped, help: 'Event streams refused (too_many) or closed because the reader fell too far behind (slow_reader).', labelNames: ['reason'] });
  const limited = r.counter({ name: RESOURCE_METRIC_NAMES.liveLimited, help: 'Ingest requests with runs refused (per run: a partial success) because --max-live-runs or --max-live-receipts was reached.', labelNames: ['limit', 'transport'] });
  const liveReceipts = r.gauge({ name: RESOURCE_METRIC_NAMES.liveReceipts, help: 'Receipts held in memory by live runs.' });
  for (const l of LISTENERS) dropped.touch([l]);
  polls.set([], 0);
  sse.set([], 0);
  for (const why of ['slow_reader', 'too_many']) sseDropped.touch([why]);
  for (const lim of ['runs', 'receipts']) for (const t of ['http', 'grpc', 'ndjson']) limited.touch([lim, t]);
  liveReceipts.set([], 0);
  const writeErrors = r.counter({ name: RESOURCE_METRIC_NAMES.logWriteErrors, help: 'Log lines (stderr) and output (stdout) dropped because the write failed (a full disk, a closed pipe): logging never stops the server.', labelNames: ['stream'] });
  const seen = { stdout: 0, stderr: 0 };
  for (const stream of ['stdout', 'stderr'] as const) writeErrors.touch([stream]);
  if (outputWriteErrors) {
    metrics.registry.onCollect(() => {
      const now = outputWriteErrors();
      for (const stream of ['stdout', 'stderr'] as const) {
        if (now[stream] > seen[stream]) writeErrors.inc([stream], now[stream] - seen[stream]);
        seen[stream] = now[stream];
      }
    });
  }
  return {
    connectionDropped: (l) => dropped.inc([l]),
    setLongPolls: (n) => polls.set([], n),
    setSseClients: (n) => sse.set([], n),
    sseDropped: (why) => sseDropped.inc([why]),
    liveLimited: (lim, t) => limited.inc([lim, t]),
    setLiveReceipts: (n) => liveReceipts.set([], n),
  };
}
