/**
 * Metrics of the per-run alerts' delivery to Alertmanager (serve --alertmanager-url), registered on the auditor's
 * registry next to the audit metrics when Alertmanagers are configured. Named as Prometheus names its notifier's.
 */
import type { AuditMetrics } from './audit-metrics.js';

export const ALERTMANAGER_METRIC_NAMES = {
  sent: 'topology_alertmanager_alerts_sent_total',
  dropped: 'topology_alertmanager_alerts_dropped_total',
  queueLength: 'topology_alertmanager_queue_length',
  silencesSkipped: 'topology_alertmanager_silences_skipped',
} as const;

/** Why a silence read from Alertmanager is not used (src/alerting/silences.ts). */
export const SILENCE_SKIP_REASONS = ['malformed', 'matcher_unsupported', 'budget'] as const;

export const SEND_RESULTS = ['success', 'failure'] as const;

export interface AlertmanagerMetrics {
  /** n alerts delivered to one Alertmanager, or refused by it / not reaching it. */
  sent(result: (typeof SEND_RESULTS)[number], n: number): void;
  /** n alerts dropped because the queue was full. */
  dropped(n: number): void;
  queueLength(n: number): void;
  /** Silences of the last read not used, per reason. */
  silencesSkipped(counts: Record<(typeof SILENCE_SKIP_REASONS)[number], number>): void;
}

export function createAlertmanagerMetrics(metrics: AuditMetrics): AlertmanagerMetrics {
  const r = metrics.registry;
  const sent = r.counter({ name: ALERTMANAGER_METRIC_NAMES.sent, help: 'Alerts sent to an Alertmanager, per Alertmanager and attempt: success (it answered 200) or failure (error answer, unreachable, timeout).', labelNames: ['result'] });
  const dropped = r.counter({ name: ALERTMANAGER_METRIC_NAMES.dropped, help: 'Alerts dropped (oldest first) because the queue towards Alertmanager was full.' });
  const queue = r.gauge({ name: ALERTMANAGER_METRIC_NAMES.queueLength, help: 'Alerts waiting to be sent to Alertmanager.' });
  const skipped = r.gauge({ name: ALERTMANAGER_METRIC_NAMES.silencesSkipped, help: 'Silences of the last read from Alertmanager not shown on runs: malformed (a field missing), matcher_unsupported (a pattern the linear matcher does not take), budget (past the total state budget).', labelNames: ['reason'] });
  for (const reason of SILENCE_SKIP_REASONS) skipped.set([reason], 0);
  for (const res of SEND_RESULTS) sent.touch([res]);
  dropped.touch([]);
  queue.set([], 0);
  return {
    sent: (result, n) => sent.inc([result], n),
    dropped: (n) => dropped.inc([], n),
    queueLength: (n) => queue.set([], n),
    silencesSkipped: (counts) => {
      for (const reason of SILENCE_SKIP_REASONS) skipped.set([reason], counts[reason]);
    },
  };
}
