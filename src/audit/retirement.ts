/**
 * Leaving live memory: a settled run whose verdict no time can move leaves at once (one in an alerting verdict once
 * its alert window passed), idle runs leave when a live cap needs room (--idle-evict-after), and the retention prune
 * deletes settled runs from store and memory. A single instance's runs that left are loaded again from the store by
 * their next receipt (reload). A cluster's instance keeps its owned runs until pruned (others read them).
 */
import type { Receipt, RunVerdict } from '../core/types.js';
import type { PrunableRun, Slicer as StoreSlicer } from '../store/index.js';
import type { RunGauges } from './gauges.js';
import { ALERT_VERDICTS, nextChange, type LiveRun } from './live-run.js';
import type { LiveRuns } from './live-runs.js';
import type { EngineStore } from './store.js';

/** serve's default --alert-window. */
const DEFAULT_ALERT_WINDOW_MS = 60 * 60_000;

/** What leaving live memory reads besides the live runs. */
export interface RetirementHost {
  readonly store: EngineStore;
  readonly gauges: RunGauges;
  /** Whether settled runs leave live memory (a single instance with synchronous reads, no shadow candidates). */
  readonly retires: boolean;
  readonly retentionMs: number;
  readonly alertWindowMs?: number;
  syncReceipts(run: string): Receipt[];
}

export class Retirement {
  constructor(
    private readonly live: LiveRuns,
    private readonly host: RetirementHost,
  ) {}

  /** Whether settled runs leave live memory (a single instance with synchronous reads, no shadow candidates). */
  get retires(): boolean {
    return this.host.retires;
  }

  /**
   * Idle eviction (Admission): runs with no receipt since `before` leave live memory, the longest idle first, popped
   * from the time-ordered `idle` heap (O(log n) each, no walk), until `wantRuns` runs that could still change and
   * `wantReceipts` held receipts are freed. A settled one is retired (it stays counted in topology_runs). They stay
   * in the store; their next receipt (or a read) loads them again.
   */
  evictIdle(before: number, wantRuns: number, wantReceipts: number): number {
    if (!this.host.retires) return 0;
    let n = 0;
    let runs = 0;
    let receipts = 0;
    while (runs < wantRuns || receipts < wantReceipts) {
      const [run] = this.live.idle.popDue(before, 1);
      if (run === undefined) break;
      const live = this.live.get(run);
      if (!live || !live.verdict) continue;
      if (live.counted) runs++;
      receipts += live.held;
      this.live.forget(run, live, live.verdict.settled);
      n++;
    }
    return n;
  }

  /**
   * Memory holds what can still change: a settled run whose verdict no time can move (no next change) leaves live
   * memory at once, and is loaded again on its next receipt; one in an alerting verdict, unacknowledged, stays until
   * its alert window passed (the alerting gauge counts it meanwhile). It stays counted in topology_runs until pruned.
   */
  retireIfSettled(run: string, live: LiveRun, now: number): void {
    if (!this.host.retires || !live.verdict?.settled || nextChange(live) !== null) return;
    const v = live.verdict.verdict;
    if (ALERT_VERDICTS.has(v) && live.ackedVerdict !== v) {
      const end = (live.enteredAt ?? live.updatedAt) + (this.host.alertWindowMs ?? DEFAULT_ALERT_WINDOW_MS);
      if (now <= end) {
        this.live.retireAt.set(run, end + 1);
        return;
      }
    }
    this.live.forget(run, live, true);
  }

  /**
   * A run that left live memory (settled, or idle), loaded again from the store (its receipts, stored pin and
   * verdict). A settled one leaves the count topology_runs kept for it (it is counted as live again).
   */
  reload(run: string, now: number, source?: string): LiveRun {
    this.live.returning.delete(run);
    const stored = this.host.store.runVerdict?.(run);
    const pin = stored?.verdict ? this.host.store.getPin(run)?.pin : undefined;
    if (stored?.settled && stored.verdict) this.host.gauges.unretain(pin?.contract ?? '', pin?.version ?? '', stored.verdict);
    const state = this.live.state(run);
    let held = 0;
    for (const r of this.host.syncReceipts(run)) if (state.add(r) !== 'duplicate') held++;
    const live: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: now, held, receivedAt: now };
    // Its stored verdict stands for the previous one: loading a run again is no transition unless evaluation moves it.
    if (stored?.verdict) live.previous = { contract: pin?.contract ?? '', version: pin?.version ?? '', verdict: stored.verdict };
    this.live.idle.set(run, now);
    if (source !== undefined) live.source = source;
    this.live.put(run, live);
    return live;
  }

  /**
   * The runs of a batch that are stored but not in live memory (retired or left idle): marked to be loaded again by
   * their fold. One indexed store read per run new to memory.
   */
  markReturning(receipts: readonly Receipt[]): void {
    if (!this.host.retires) return;
    let seen: Set<string> | undefined;
    for (const r of receipts) {
      if (this.live.has(r.run) || this.live.returning.has(r.run) || seen?.has(r.run)) continue;
      (seen ??= new Set()).add(r.run);
      if (this.host.store.runVerdict!(r.run) !== null) this.live.returning.add(r.run);
    }
  }

  /**
   * Prune settled runs idle for longer than the retention; memory is bounded by live runs. A run in any state is
   * handled: one created by an ingest's fold and not evaluated yet (verdict null) is not settled, so it stays.
   */
  prune(now: number): number {
    let n = 0;
    if (!this.host.retires) {
      for (const [run, live] of this.live.entries()) {
        if (live.verdict?.settled && now - live.updatedAt > this.host.retentionMs) {
          this.live.forget(run, live);
          n++;
        }
      }
    } else {
      // Retired runs (not in memory) leave the topology_runs count they kept when the store deletes them.
      // A run still held that the store deletes leaves memory with it (the lists read the store).
      // Every batch: a run left in the store would leave its count a second time at the next prune.
      n += this.retireStored(this.host.store.prunableRuns!(this.host.retentionMs, now));
      while (this.host.store.prune(this.host.retentionMs, now) > 0);
      return n;
    }
    this.host.store.prune(this.host.retentionMs, now);
    return n;
  }

  /**
   * The retention prune as the server runs it: a single instance's store deletes the settled runs past the retention
   * in batches that yield (`slicer`), and each batch's runs leave memory and the gauges in the same turn as their
   * deletion (a cost of what passed the retention since the last call, never a scan of what is stored). Any other
   * store: `prune`. Returns the runs that left memory.
   */
  async pruneSliced(now: number, slicer?: StoreSlicer): Promise<number> {
    if (!this.host.retires || !this.host.store.pruneSliced) return this.prune(now);
    let n = 0;
    await this.host.store.pruneSliced(this.host.retentionMs, now, slicer, (rows) => (n += this.retireStored(rows)));
    return n;
  }

  /** Stored runs the store deletes: a held one leaves memory, the others the topology_runs count they kept. */
  private retireStored(rows: readonly PrunableRun[]): number {
    let n = 0;
    for (const p of rows) {
      const live = this.live.get(p.run);
      if (live) {
        this.live.forget(p.run, live);
        n++;
      } else if (p.verdict !== null) this.host.gauges.unretain(p.contract, p.version, p.verdict);
    }
    return n;
  }

  /** Settled alerting runs whose alert window passed leave live memory (the tick). */
  retireDue(now: number): void {
    for (const run of this.live.retireAt.popDue(now)) {
      const live = this.live.get(run);
      if (live) this.retireIfSettled(run, live, now);
    }
  }
}
