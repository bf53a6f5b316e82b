/**
 * What to send, per run: compares the alerts the runs should have now with those last sent. A new or changed alert
 * is sent at once; every firing alert again each resend interval (with a future endsAt); an alert that should no
 * longer fire (acknowledged, healed, out of its alert window, pruned) is sent once more, resolved. No I/O: the
 * alerts go to `send` (the notifier's queue).
 */
import { resolvedAlert, runAlert, sameAlert, type Alert, type AlertLinks, type AlertingRun } from './alert.js';

export class RunAlerts {
  /** The firing alert last sent per run. */
  private sent = new Map<string, Alert>();
  /** Per run: the inputs its alert was built from, and the alert (rebuilt only when they change). */
  private built = new Map<string, { from: AlertingRun['verdict']; inWindow: boolean; stalledAt: number | null; alert: Alert | null }>();
  private lastResend = -Infinity;

  constructor(
    private readonly links: AlertLinks,
    private readonly resendMs: number,
    private readonly send: (alerts: Alert[]) => void,
  ) {}

  /**
   * The alerts of the runs in an alerting verdict or stalled now (AuditEngine.alertingRuns); sends what changed.
   * `holds(run)`: this instance still holds the run. A run that left without being held any more (in a cluster, its
   * partition moved to another instance, which sends the same alert on) is forgotten without a resolution, so the
   * alert does not flap; Alertmanager ends it at its endsAt if nobody sends it again.
   */
  update(now: number, runs: Iterable<AlertingRun>, holds: (run: string) => boolean = () => true): void {
    const resend = now - this.lastResend >= this.resendMs;
    if (resend) this.lastResend = now;
    const validMs = 4 * this.resendMs;
    const next = new Map<string, Alert>();
    const built = new Map<string, { from: AlertingRun['verdict']; inWindow: boolean; stalledAt: number | null; alert: Alert | null }>();
    const out: Alert[] = [];
    for (const r of runs) {
      const run = r.verdict.run;
      const prevBuilt = this.built.get(run);
      let alert: Alert | null;
      if (!resend && prevBuilt && prevBuilt.from === r.verdict && prevBuilt.inWindow === r.inWindow && prevBuilt.stalledAt === r.stalledAt) alert = prevBuilt.alert;
      else alert = runAlert(r, this.links, now, validMs);
      built.set(run, { from: r.verdict, inWindow: r.inWindow, stalledAt: r.stalledAt, alert });
      if (!alert) continue;
      next.set(run, alert);
      const prev = this.sent.get(run);
      if (resend || !prev || !sameAlert(prev, alert)) out.push(alert);
    }
    for (const [run, prev] of this.sent) {
      const now_ = next.get(run);
      if (now_ ? !sameLabels(prev, now_) : holds(run)) out.push(resolvedAlert(prev, now));
    }
    this.sent = next;
    this.built = built;
    if (out.length) this.send(out);
  }

  /** The alert a run fires now, if any. */
  firing(run: string): Alert | null {
    return this.sent.get(run) ?? null;
  }

  get firingCount(): number {
    return this.sent.size;
  }
}

function sameLabels(a: Alert, b: Alert): boolean {
  const ka = Object.keys(a.labels);
  return ka.length === Object.keys(b.labels).length && ka.every((k) => a.labels[k] === b.labels[k]);
}
