/**
 * The gauges over the live runs, counted as runs change (subscribed to the engine's `runChanged`, `runAcked` and
 * `runForgotten` events), never by a
 * walk over every live run: topology_runs (runs per contract, version, verdict), and the alerting and stalled rows
 * (runs per contract and alerting verdict within the alert window and unacknowledged; unsettled runs per contract
 * whose latest receipt is older than the stall time).
 */
import type { Verdict } from '../core/types.js';
import type { AuditEvents, EventSource } from './events.js';
import { DeadlineHeap } from './heap.js';
import { ALERT_VERDICTS, alertState, verdictKey, type LiveRun, type RunListener } from './live-run.js';

export type GaugeRow = { contract: string; version: string; verdict: Verdict; count: number };
export type AlertRow = { contract: string; verdict: Verdict; count: number };
export type StallRow = { contract: string; count: number };

export class RunGauges implements RunListener {
  /** topology_runs rows by `contract\0version\0verdict`, and the live runs whose verdict was set since gauge() last ran. */
  private readonly gaugeRows = new Map<string, GaugeRow>();
  private readonly gaugeDirty = new Set<LiveRun>();
  /**
   * The alerting and stalled gauges, counted like topology_runs: rows, the runs changed since alerting() last ran,
   * and per run the time its row may change with time alone (leaving the alert window, becoming stalled). The window
   * and stall they were counted for: other values in a call count again from scratch.
   */
  private readonly alertRows = new Map<string, AlertRow>();
  private readonly stallRows = new Map<string, StallRow>();
  private readonly alertDirty = new Set<LiveRun>();
  /** The live runs counted in an alerting or stalled row (what alertingRuns lists). */
  private readonly alertMembers = new Map<string, LiveRun>();
  private alertTimers = new DeadlineHeap();
  /**
   * The runs that were placed in (or left) the alerting and stalled rows since alertChanges() was last taken (their
   * per-run alert may differ); `alertChangesAll`: not known run by run (a recount, or more than MAX_ALERT_CHANGES).
   */
  private alertChanged = new Set<string>();
  private alertChangesAll = true;
  private alertWindowMs = NaN;
  private alertStallMs = NaN;

  /** Counts the live runs' changes as the engine publishes them; returns the unsubscribe. */
  subscribe(events: EventSource<AuditEvents>): () => void {
    const off = [
      events.subscribe('runChanged', (e) => this.runChanged(e.live)),
      events.subscribe('runAcked', (e) => this.runAcked(e.live)),
      events.subscribe('runForgotten', (e) => (e.retired ? this.runRetired(e.live) : this.runForgotten(e.live))),
    ];
    return () => off.forEach((f) => f());
  }

  runChanged(live: LiveRun): void {
    this.gaugeDirty.add(live);
    this.alertDirty.add(live);
  }

  runAcked(live: LiveRun): void {
    this.alertDirty.add(live);
  }

  runForgotten(live: LiveRun): void {
    this.gaugeDirty.delete(live);
    this.leaveRow(live);
    live.gaugeOf = undefined;
    this.alertDirty.delete(live);
    this.leaveAlertRows(live);
    this.alertTimers.set(live.state.run, null);
  }

  /**
   * A settled run left live memory (it can no longer change): it leaves the alerting and stalled rows, and stays
   * counted in its topology_runs row until it is pruned from the store or loads again (`unretain`), with no memory
   * of its own.
   */
  runRetired(live: LiveRun): void {
    this.count(live);
    if (this.groupOf && live.gaugeId !== undefined) this.tally(this.groupOf(live.state.run), live.gaugeId, 1);
    this.gaugeDirty.delete(live);
    live.gaugeId = undefined;
    live.gaugeOf = undefined;
    this.alertDirty.delete(live);
    this.leaveAlertRows(live);
    this.alertTimers.set(live.state.run, null);
  }

  /** `n` retired runs (see runRetired) of a (contract, version, verdict) row were pruned, or one loaded again. */
  unretain(contract: string, version: string, verdict: Verdict, n = 1, run?: string): void {
    const id = `${contract}\u0000${version}\u0000${verdict}`;
    if (this.groupOf && run !== undefined) this.tally(this.groupOf(run), id, -n);
    this.uncount(id, n);
  }

  private uncount(id: string, n: number): void {
    const row = this.gaugeRows.get(id);
    if (!row) return;
    row.count -= Math.min(n, row.count);
    if (row.count === 0) this.gaugeRows.delete(id);
  }

  /**
   * `n` retired runs counted without loading them (a restart's settled runs, or the settled runs of a partition a
   * cluster's instance takes over: `group`, the partition, whose counts leave with it, see dropRetained).
   */
  retain(contract: string, version: string, verdict: Verdict, n = 1, group?: number): void {
    const id = `${contract}\u0000${version}\u0000${verdict}`;
    const row = this.gaugeRows.get(id);
    if (row) row.count += n;
    else this.gaugeRows.set(id, { contract, version, verdict, count: n });
    if (group !== undefined && this.groupOf) this.tally(group, id, n);
  }

  /**
   * Cluster mode: the partition of a run. Retired runs' counts are then kept per partition too, so that a partition
   * handed to another instance takes its retired runs' counts with it (dropRetained): each run is counted in
   * topology_runs by exactly one instance, its partition's holder.
   */
  groupOf?: (run: string) => number;
  /** Retired runs counted per partition and row (cluster mode, see groupOf): bounded by partitions x rows. */
  private readonly retainedBy = new Map<number, Map<string, number>>();

  private tally(group: number, id: string, d: number): void {
    let rows = this.retainedBy.get(group);
    if (!rows) this.retainedBy.set(group, (rows = new Map()));
    const n = Math.max(0, (rows.get(id) ?? 0) + d);
    if (n === 0) rows.delete(id);
    else rows.set(id, n);
    if (rows.size === 0) this.retainedBy.delete(group);
  }

  /** Cluster mode: a partition left this instance: the counts of its retired runs leave topology_runs here. */
  dropRetained(group: number): void {
    const rows = this.retainedBy.get(group);
    if (!rows) return;
    this.retainedBy.delete(group);
    for (const [id, n] of rows) this.uncount(id, n);
  }

  /** Retired runs counted here (cluster mode: summed over partitions), for tests and the soak. */
  get retainedRuns(): number {
    let n = 0;
    for (const rows of this.retainedBy.values()) for (const c of rows.values()) n += c;
    return n;
  }

  /**
   * Runs per (contract, version, verdict), for the topology_runs gauge (rows with at least one run). A run whose
   * verdict was set since the last call is recounted, a run forgotten leaves its row at once. Serve calls this every
   * tick; with 100,000 live runs a walk cost ~9 ms a tick.
   */
  gauge(): GaugeRow[] {
    for (const live of this.gaugeDirty) this.count(live);
    this.gaugeDirty.clear();
    const out: GaugeRow[] = [];
    for (const row of this.gaugeRows.values()) out.push({ ...row });
    return out;
  }

  /** Counts a live run under its current verdict's row (moving it from the row it was counted under). */
  private count(live: LiveRun): void {
    const v = live.verdict;
    if (!v || live.gaugeOf === v) return;
    const k = verdictKey(v);
    const id = `${k.contract}\u0000${k.version}\u0000${k.verdict}`;
    if (id !== live.gaugeId) {
      this.leaveRow(live);
      const row = this.gaugeRows.get(id);
      if (row) row.count++;
      else this.gaugeRows.set(id, { ...k, count: 1 });
      live.gaugeId = id;
    }
    live.gaugeOf = v;
  }

  private leaveRow(live: LiveRun): void {
    const id = live.gaugeId;
    if (id === undefined) return;
    live.gaugeId = undefined;
    const row = this.gaugeRows.get(id)!;
    if (--row.count === 0) this.gaugeRows.delete(id);
  }

  /** The window and stall time the alerting rows were last counted with (NaN before the first call). */
  get windowMs(): number {
    return this.alertWindowMs;
  }

  get stallMs(): number {
    return this.alertStallMs;
  }

  /**
   * Whether a live run counts in topology_alerting_runs / topology_stalled_runs at `now` (the rules of placeAlert),
   * with the window and stall time the gauges last used (or the ones given).
   */
  alertStateOf(live: LiveRun | undefined, now: number, windowMs = this.alertWindowMs, stallMs = this.alertStallMs): { acked: boolean; alerting: boolean; stalled: boolean } | null {
    return live ? alertState(live, now, windowMs, stallMs) : null;
  }

  /**
   * Alerting and stalled rows at `now`. A run is looked at again when it changes, is acknowledged, or reaches the
   * time its rows may change (the end of its alert window, the moment it stalls), not by a walk over every live run
   * (with 100,000 live runs the walk cost ~27 ms, once a second). `runs`: every live run (walked only when the window
   * or stall time differ from the last call); `held`: a live run by id.
   */
  alerting(now: number, windowMs: number, stallMs: number, runs: () => Iterable<LiveRun>, held: (run: string) => LiveRun | undefined): { alerting: AlertRow[]; stalled: StallRow[] } {
    if (windowMs !== this.alertWindowMs || stallMs !== this.alertStallMs) {
      // first call, or other parameters: count every live run again
      this.alertWindowMs = windowMs;
      this.alertStallMs = stallMs;
      this.alertRows.clear();
      this.stallRows.clear();
      this.alertMembers.clear();
      this.alertTimers = new DeadlineHeap();
      this.alertDirty.clear();
      this.alertChangesAll = true;
      this.alertChanged.clear();
      for (const live of runs()) {
        live.alertId = undefined;
        live.stallId = undefined;
        this.placeAlert(live, now);
      }
    } else {
      for (const live of this.alertDirty) this.placeAlert(live, now);
      this.alertDirty.clear();
      for (const run of this.alertTimers.popDue(now)) {
        const live = held(run);
        if (live) this.placeAlert(live, now);
      }
    }
    return { alerting: [...this.alertRows.values()].map((r) => ({ ...r })), stalled: [...this.stallRows.values()].map((r) => ({ ...r })) };
  }

  /** Counts a live run in its alerting and stalled rows at `now`, and schedules the time they may change with time. */
  private placeAlert(live: LiveRun, now: number): void {
    this.leaveAlertRows(live);
    const v = live.verdict;
    let next = Infinity;
    if (v) {
      const contract = v.pin?.contract ?? '';
      const acked = live.ackedVerdict === v.verdict;
      if (ALERT_VERDICTS.has(v.verdict) && !acked) {
        const entered = live.enteredAt ?? live.updatedAt;
        if (now - entered <= this.alertWindowMs) {
          const id = `${contract}\u0000${v.verdict}`;
          const row = this.alertRows.get(id);
          if (row) row.count++;
          else this.alertRows.set(id, { contract, verdict: v.verdict, count: 1 });
          live.alertId = id;
          next = entered + this.alertWindowMs; // leaves the window after this instant
        }
      }
      const lastAt = live.state.lastAt;
      if (!v.settled && !acked && Number.isFinite(lastAt)) {
        if (now - lastAt > this.alertStallMs) {
          const row = this.stallRows.get(contract);
          if (row) row.count++;
          else this.stallRows.set(contract, { contract, count: 1 });
          live.stallId = contract;
        } else next = Math.min(next, lastAt + this.alertStallMs); // stalls after this instant
      }
      if (live.alertId !== undefined || live.stallId !== undefined) {
        this.alertMembers.set(live.state.run, live);
        this.alertChange(live.state.run);
      }
    }
    this.alertTimers.set(live.state.run, Number.isFinite(next) ? next : null);
  }

  private leaveAlertRows(live: LiveRun): void {
    if (live.alertId !== undefined || live.stallId !== undefined) {
      this.alertMembers.delete(live.state.run);
      this.alertChange(live.state.run);
    }
    if (live.alertId !== undefined) {
      const row = this.alertRows.get(live.alertId)!;
      if (--row.count === 0) this.alertRows.delete(live.alertId);
      live.alertId = undefined;
    }
    if (live.stallId !== undefined) {
      const row = this.stallRows.get(live.stallId)!;
      if (--row.count === 0) this.stallRows.delete(live.stallId);
      live.stallId = undefined;
    }
  }

  /**
   * The runs counted by the last `alerting` call (per-run alerts, src/alerting): each with its verdict, when it
   * entered it, whether it is in an alerting row (within the window, unacknowledged) and when it stalled, if it did.
   * O(runs in those rows), not O(live runs).
   */
  *alertingRuns(): Iterable<AlertingRunOf> {
    for (const live of this.alertMembers.values()) yield this.alertingRunOf(live);
  }

  /** One run of alertingRuns, by id; undefined when it is not in an alerting or stalled row. */
  alertingRun(run: string): AlertingRunOf | undefined {
    const live = this.alertMembers.get(run);
    return live ? this.alertingRunOf(live) : undefined;
  }

  /**
   * The runs placed in or out of the alerting and stalled rows since the last call (their per-run alert may have
   * changed; the others' has not), or null when that is not known run by run: the first call, a recount, or more
   * than MAX_ALERT_CHANGES runs (then the caller looks at every alerting run). Bounded: at most MAX_ALERT_CHANGES ids.
   */
  alertChanges(): Set<string> | null {
    const all = this.alertChangesAll;
    const out = this.alertChanged;
    this.alertChangesAll = false;
    this.alertChanged = new Set();
    return all ? null : out;
  }

  private alertChange(run: string): void {
    if (this.alertChangesAll) return;
    this.alertChanged.add(run);
    if (this.alertChanged.size > MAX_ALERT_CHANGES) {
      this.alertChangesAll = true;
      this.alertChanged.clear();
    }
  }

  private alertingRunOf(live: LiveRun): AlertingRunOf {
    return {
      verdict: live.verdict,
      enteredAt: live.enteredAt ?? live.updatedAt,
      inWindow: live.alertId !== undefined,
      stalledAt: live.stallId !== undefined ? live.state.lastAt + this.alertStallMs : null,
      lastAt: live.state.lastAt,
    };
  }
}

/** Runs whose alert changes are kept one by one between two looks (beyond: every alerting run is looked at). */
export const MAX_ALERT_CHANGES = 100_000;

export type AlertingRunOf = { verdict: LiveRun['verdict']; enteredAt: number; inWindow: boolean; stalledAt: number | null; lastAt: number };
