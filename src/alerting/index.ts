/**
 * The per-run alerting output: runs in an alerting verdict (and stalled runs) as Alertmanager alerts, and
 * Alertmanager silences seen on runs. Composed by the server: it hands over the engine's alerting runs once a
 * second (update) and asks for a run's silence (silenceOf) and for new silences (silenceRun, from `ack --silence`).
 */
import type { RunVerdict } from '../core/types.js';
import { runLabels, type AlertingRun } from './alert.js';
import { AlertmanagerClient } from './client.js';
import type { AlertingConfig } from './config.js';
import { Notifier, type NotifierHooks } from './notifier.js';
import { RunAlerts } from './run-alerts.js';
import { SilenceCache, type SilenceSkip, type SilenceView } from './silences.js';

export { alertingConfig, AlertingConfigError, ALERTING_DEFAULTS, type AlertingConfig, type AlertingInput } from './config.js';
export { VERDICT_RULES, STALLED_RULE, runAlert, type Alert, type AlertingRun } from './alert.js';
export { SILENCE_SKIPS, type SilenceSkip, type SilenceView } from './silences.js';
export { AlertmanagerError } from './client.js';

export interface AlertingHooks extends Omit<NotifierHooks, 'failed'> {
  log: (event: string, fields: Record<string, unknown>) => void;
  /** Silences of the last read from Alertmanager not used, per reason (malformed, matcher_unsupported, budget). */
  silencesSkipped?: (counts: Record<SilenceSkip, number>) => void;
}

export class Alerting {
  readonly notifier: Notifier;
  private readonly clients: AlertmanagerClient[];
  private readonly runs: RunAlerts;
  private readonly silences: SilenceCache;

  constructor(
    readonly cfg: AlertingConfig,
    hooks: AlertingHooks,
    clock: () => number = Date.now,
  ) {
    this.clients = cfg.alertmanagers.map((u) => new AlertmanagerClient(u, cfg));
    this.notifier = new Notifier(this.clients, cfg, {
      ...hooks,
      // The reason only (a status or an error code): never an alert's labels or annotations.
      failed: (alertmanager, reason, alerts, retryInMs) => hooks.log('alertmanager_send_failed', { alertmanager, reason, alerts, ...(retryInMs !== null ? { retryInMs } : {}) }),
    });
    this.runs = new RunAlerts({ externalUrl: cfg.externalUrl, runbookUrl: cfg.runbookUrl }, cfg.resendMs, (alerts) => this.notifier.enqueue(alerts));
    this.silences = new SilenceCache(this.clients, { cacheMs: cfg.silenceCacheMs, maxSilences: cfg.maxSilences, clock, log: hooks.log, skipped: hooks.silencesSkipped });
  }

  /**
   * The runs in an alerting verdict or stalled now: new, changed and ended alerts are queued, and re-sends when due.
   * `holds(run)`: the engine still holds the run (see RunAlerts.update).
   */
  update(now: number, runs: Iterable<AlertingRun>, holds?: (run: string) => boolean): void {
    this.runs.update(now, runs, holds);
    this.silences.refresh(); // in the background: run reads use what the last read brought
  }

  /** As `update`, looking only at the runs in `changed` between resends (RunAlerts.tick; null: every alerting run). */
  tick(now: number, changed: Iterable<string> | null, all: () => Iterable<AlertingRun>, current: (run: string) => AlertingRun | undefined, holds?: (run: string) => boolean): void {
    this.runs.tick(now, changed, all, current, holds);
    this.silences.refresh();
  }

  /** The active silence that matches the run's alert (as it fires now, else as its verdict's alert would be). */
  silenceOf(v: RunVerdict): Promise<SilenceView | null> {
    return this.silences.matching(this.runs.firing(v.run)?.labels ?? runLabels(v));
  }

  /**
   * Silences the run's alerts (matcher run="RUN") for `ms` from `now` at the first Alertmanager that takes it (an
   * HA pair shares silences). Throws AlertmanagerError when none does.
   */
  async silenceRun(run: string, by: string, ms: number, now: number, verdict: string, reason: string | null = null): Promise<{ id: string; endsAt: string; alertmanager: string }> {
    const silence = {
      matchers: [{ name: 'run', value: run, isRegex: false, isEqual: true }],
      startsAt: new Date(now).toISOString(),
      endsAt: new Date(now + ms).toISOString(),
      createdBy: by,
      // The ack's reason (operator text, bounded by ACK_REASON_MAX) goes with it, as on the run page.
      comment: `acknowledged with topology-audit ack (verdict ${verdict})${reason ? `: ${reason}` : ''}`,
    };
    let last: unknown;
    for (const c of this.clients) {
      try {
        const id = await c.createSilence(silence);
        this.silences.created({ ...silence, id, status: { state: 'active' } });
        return { id, endsAt: silence.endsAt, alertmanager: c.name };
      } catch (e) {
        last = e;
      }
    }
    throw last;
  }

  close(): void {
    this.notifier.close();
  }
}
