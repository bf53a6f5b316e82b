/**
 * What to send, per run: compares the alerts the runs should have now with those last sent. A new or changed alert
 * is sent at once; every firing alert again each resend interval (with a future endsAt); an alert that should no
 * longer fire (acknowledged, healed, out of its alert window) is sent once more, resolved. No I/O: the alerts go to
 * `send` (the notifier's queue). One entry per run, updated in place: a look at unchanged runs builds nothing.
 */
import { resolvedAlert, runAlert, sameAlert, type Alert, type AlertLinks, type AlertingRun } from './alert.js';

interface Entry {
  /** The inputs the alert was built from (a new verdict object means the run was evaluated again). */
  from: AlertingRun['verdict'];
  inWindow: boolean;
  stalledAt: number | null;
  /** The alert the run should have now, null when none. */
  alert: Alert | null;
  /** The firing alert last sent, null when none. */
  sent: Alert | null;
  /** The update that last saw the run. */
  seen: number;
}

export class RunAlerts {
  private readonly runs = new Map<string, Entry>();
  private generation = 0;
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
    const gen = ++this.generation;
    const out: Alert[] = [];
    for (const r of runs) {
      const run = r.verdict.run;
      let e = this.runs.get(run);
      if (!e || e.from !== r.verdict || e.inWindow !== r.inWindow || e.stalledAt !== r.stalledAt) {
        const alert = runAlert(r, this.links, now, validMs);
        if (e) Object.assign(e, { from: r.verdict, inWindow: r.inWindow, stalledAt: r.stalledAt, alert });
        else this.runs.set(run, (e = { from: r.verdict, inWindow: r.inWindow, stalledAt: r.stalledAt, alert, sent: null, seen: gen }));
      } else if (resend && e.alert) {
        e.alert = { ...e.alert, endsAt: new Date(now + validMs).toISOString() }; // the same alert, valid further on
      }
      e.seen = gen;
      const { alert, sent } = e;
      if (sent && (!alert || !sameLabels(sent, alert))) out.push(resolvedAlert(sent, now));
      if (alert && (resend || !sent || !sameAlert(sent, alert))) out.push(alert);
      e.sent = alert;
    }
    for (const [run, e] of this.runs) {
      if (e.seen === gen) continue;
      if (e.sent && holds(run)) out.push(resolvedAlert(e.sent, now));
      this.runs.delete(run);
    }
    if (out.length) this.send(out);
  }

  /** The alert a run fires now, if any. */
  firing(run: string): Alert | null {
    return this.runs.get(run)?.sent ?? null;
  }
}

function sameLabels(a: Alert, b: Alert): boolean {
  if (a.labels === b.labels) return true;
  const ka = Object.keys(a.labels);
  return ka.length === Object.keys(b.labels).length && ka.every((k) => a.labels[k] === b.labels[k]);
}
