/**
 * Metrics of the per-run alerts' delivery to Alertmanager (serve --alertmanager-url), registered on the auditor's
 * registry next to the audit metrics when Alertmanagers are configured. Named as Prometheus names its notifier's.
 */
import type { AuditMetrics } from './audit-metrics.js';

export const ALERTMANAGER_METRIC_NAMES = {
  sent: 'topology_alertmanager_alerts_sent_total',
  dropped: 'topology_alertmanager_alerts_dropped_total',
  queueLength: 'topology_alertmanager_queue_length',
} as const;

export const SEND_RESULTS = ['success', 'failure'] as const;

export interface AlertmanagerMetrics {
  /** n alerts delivered to one Alertmanager, or refused by it / not reaching it. */
  sent(result: (typeof SEND_RESULTS)[number], n: number): void;
  /** n alerts dropped because the queue was full. */
  dropped(n: number): void;
  queueLength(n: number): void;
}

export function createAlertmanagerMetrics(metrics: AuditMetrics): AlertmanagerMetrics {
  const r = metrics.registry;
  const sent = r.counter({ name: ALERTMANAGER_METRIC_NAMES.sent, help: 'Alerts sent to an Alertmanager, per Alertmanager and attempt: success (it answered 200) or failure (error answer, unreachable, timeout).', labelNames: ['result'] });
  const dropped = r.counter({ name: ALERTMANAGER_METRIC_NAMES.dropped, help: 'Alerts dropped (oldest first) because the queue towards Alertmanager was full.' });
  const queue = r.gauge({ name: ALERTMANAGER_METRIC_NAMES.queueLength, help: 'Alerts waiting to be sent to Alertmanager.' });
  for (const res of SEND_RESULTS) sent.touch([res]);
  dropped.touch([]);
  queue.set([], 0);
  return {
    sent: (result, n) => sent.inc([result], n),
    dropped: (n) => dropped.inc([], n),
    queueLength: (n) => queue.set([], n),
  };
}
