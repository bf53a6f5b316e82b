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
    const gen = ++this.generation;
    const out: Alert[] = [];
    for (const r of runs) this.look(r, now, resend, gen, out);
    for (const [run, e] of this.runs) {
      if (e.seen === gen) continue;
      this.leave(run, e, now, holds, out);
    }
    if (out.length) this.send(out);
  }

  /**
   * The same as `update`, at a cost that follows what changed (issue 44): between resends only the runs in `changed`
   * (every run whose alert inputs may have changed since the last call: AuditEngine.alertChanges) are looked at,
   * `current(run)` giving each one's alert inputs now (undefined: it left the alerting runs). A run not in `changed`
   * has the inputs it had, so `update` would send nothing for it. When a resend is due, or `changed` is null (not
   * known), it is `update` over `all()`. Alertmanager receives the same alerts; within one POST, the alerts of a
   * look between resends come in the order of `changed` instead of the alerting runs' order.
   */
  tick(now: number, changed: Iterable<string> | null, all: () => Iterable<AlertingRun>, current: (run: string) => AlertingRun | undefined, holds: (run: string) => boolean = () => true): void {
    if (changed === null || now - this.lastResend >= this.resendMs) {
      this.update(now, all(), holds);
      return;
    }
    const gen = this.generation;
    const out: Alert[] = [];
    for (const run of changed) {
      this.looked++;
      const r = current(run);
      if (r !== undefined) this.look(r, now, false, gen, out);
      else {
        const e = this.runs.get(run);
        if (e) this.leave(run, e, now, holds, out);
      }
    }
    if (out.length) this.send(out);
  }

  /** Runs looked at by `tick` between resends (work counter). */
  looked = 0;

  /** One alerting run: rebuilds its alert if its inputs changed, and queues what Alertmanager must learn of it. */
  private look(r: AlertingRun, now: number, resend: boolean, gen: number, out: Alert[]): void {
    const validMs = 4 * this.resendMs;
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

  /** A run that left the alerting runs: resolved (if it fired and is still held here) and forgotten. */
  private leave(run: string, e: Entry, now: number, holds: (run: string) => boolean, out: Alert[]): void {
    if (e.sent && holds(run)) out.push(resolvedAlert(e.sent, now));
    this.runs.delete(run);
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
