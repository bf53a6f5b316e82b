/**
 * Leaving live memory: a settled run whose verdict no time can move leaves at once (one in an alerting verdict once
 * its alert window passed), idle runs leave when a live cap needs room (--idle-evict-after), and the retention prune
 * deletes settled runs from store and memory. Runs that left are loaded again from the store by their next receipt
 * (reload): synchronously on a single instance; on a cluster's instance, whose shared store answers only
 * asynchronously, the runs of a batch that are not held are looked up before its fold (checkReturning) and their
 * history read ahead, and a run of a batch in flight does not leave memory until that batch is folded (busy).
 */
import type { Receipt, RunVerdict } from '../core/types.js';
import type { LiveRun as StoredRun, PinRecord, PrunableRun, Slicer as StoreSlicer } from '../store/index.js';
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
  /** Whether settled runs leave live memory (no shadow candidates: the shadow summary counts them). */
  readonly retires: boolean;
  readonly retentionMs: number;
  readonly alertWindowMs?: number;
  /** A run's stored receipts: read in place (SQLite), or read ahead of the step (cluster mode, read-ahead.ts). */
  syncReceipts(run: string): Receipt[];
  /** Cluster mode: runs' stored rows, verdict states set here and not written yet included (checkReturning). */
  storedRuns?(runs: readonly string[]): Promise<Map<string, StoredRun>>;
  /** Cluster mode: a reloaded run's stored pin, held again (its pin left memory with it). */
  rememberPin?(run: string, record: PinRecord): void;
}

export class Retirement {
  /**
   * Cluster mode: runs of batches between their look-up (checkReturning) and the end of their fold, with how many
   * batches hold each. Such a run is not retired meanwhile (deferred, then retired when the last batch lets go): its
   * fold must find it live, or marked returning, never created anew without its history.
   */
  private readonly busy = new Map<string, number>();
  private readonly deferred = new Set<string>();
  /** Cluster mode: the stored rows of the runs marked returning (verdict, settled, pin), for their reload. */
  private readonly returningRows = new Map<string, StoredRun>();

  constructor(
    private readonly live: LiveRuns,
    private readonly host: RetirementHost,
  ) {}

  /** Whether settled runs leave live memory (no shadow candidates). */
  get retires(): boolean {
    return this.host.retires;
  }

  /** Whether idle runs that can still change leave memory at a live cap: a store with synchronous reads only. */
  private get evicts(): boolean {
    return this.host.retires && this.host.store.synchronousReads;
  }

  /**
   * Idle eviction (Admission): runs with no receipt since `before` leave live memory, the longest idle first, popped
   * from the time-ordered `idle` heap (O(log n) each, no walk), until `wantRuns` runs that could still change and
   * `wantReceipts` held receipts are freed. A settled one is retired (it stays counted in topology_runs). They stay
   * in the store; their next receipt (or a read) loads them again.
   */
  evictIdle(before: number, wantRuns: number, wantReceipts: number): number {
    if (!this.evicts) return 0;
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
    if (this.busy.has(run)) {
      this.deferred.add(run);
      return;
    }
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
    const row = this.returningRows.get(run);
    this.returningRows.delete(run);
    const stored = row ?? this.host.store.runVerdict?.(run);
    const pin = row ? (row.pin ?? undefined) : stored?.verdict ? this.host.store.getPin(run)?.pin : undefined;
    if (row?.pin && row.contractHash) this.host.rememberPin?.(run, { pin: row.pin, contractHash: row.contractHash });
    if (stored?.settled && stored.verdict) this.host.gauges.unretain(pin?.contract ?? '', pin?.version ?? '', stored.verdict, 1, run);
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
    if (!this.host.retires || !this.host.store.synchronousReads) return;
    let seen: Set<string> | undefined;
    for (const r of receipts) {
      if (this.live.has(r.run) || this.live.returning.has(r.run) || seen?.has(r.run)) continue;
      (seen ??= new Set()).add(r.run);
      if (this.host.store.runVerdict!(r.run) !== null) this.live.returning.add(r.run);
    }
  }

  /**
   * Cluster mode: the runs of a batch (or of the tail's receipts) that this instance owns are held busy until
   * `release` (none of them leaves memory meanwhile), and those not in live memory are looked up in the shared store
   * (one query): a run with a verdict state stored (or set here and not written yet) was evaluated here and left;
   * it is marked returning, loaded again with its history by its fold (reload). Returns the release, and the
   * runs marked. A single instance: nothing to do (its fold looks the store up synchronously).
   */
  async checkReturning(runs: Iterable<string>): Promise<{ release: (now: number) => void; returning: string[] }> {
    if (!this.host.retires || this.host.store.synchronousReads || !this.host.storedRuns) return { release: () => {}, returning: [] };
    const held: string[] = [];
    const absent: string[] = [];
    const returning: string[] = [];
    for (const run of new Set(runs)) {
      held.push(run);
      this.busy.set(run, (this.busy.get(run) ?? 0) + 1);
      if (this.live.has(run)) continue;
      // Marked by another batch in flight: whichever folds first loads it again, the other finds it live.
      if (this.live.returning.has(run)) returning.push(run);
      else absent.push(run);
    }
    const release = (now: number) => {
      for (const run of held) {
        const n = (this.busy.get(run) ?? 1) - 1;
        if (n > 0) {
          this.busy.set(run, n);
          continue;
        }
        this.busy.delete(run);
        if (this.live.returning.delete(run)) this.returningRows.delete(run);
        if (!this.deferred.delete(run)) continue;
        const live = this.live.get(run);
        if (live) this.retireIfSettled(run, live, now);
      }
    };
    try {
      if (absent.length) {
        const rows = await this.host.storedRuns(absent);
        for (const run of absent) {
          const row = rows.get(run);
          if (!row || row.verdict === null || this.live.has(run)) continue;
          this.live.returning.add(run);
          this.returningRows.set(run, row);
          returning.push(run);
        }
      }
    } catch (e) {
      release(Date.now());
      throw e;
    }
    return { release, returning };
  }

  /** `step` with the runs held (checkReturning), given the runs marked returning; released after it. */
  async holding<T>(runs: Iterable<string>, now: number, step: (returning: string[]) => Promise<T>): Promise<T> {
    const back = await this.checkReturning(runs);
    try {
      return await step(back.returning);
    } finally {
      back.release(now);
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
    } else if (!this.host.store.synchronousReads) {
      // Cluster mode: the shared store deletes the settled runs of the partitions held here past the retention, in
      // batches, behind; each batch's runs leave memory (a held one) or the topology_runs count they kept (a retired
      // one) when it lands. A held run of a batch in flight, or one that can still change, is left alone.
      this.host.store.prune(this.host.retentionMs, now, (rows) => this.retireStored(rows, true));
      return 0;
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
  private retireStored(rows: readonly PrunableRun[], behind = false): number {
    let n = 0;
    for (const p of rows) {
      const live = this.live.get(p.run);
      if (live) {
        // Deleted behind (cluster): a run that came back meanwhile with a receipt stays.
        if (behind && (this.busy.has(p.run) || !live.verdict?.settled)) continue;
        this.live.forget(p.run, live);
        n++;
      } else if (p.verdict !== null) this.host.gauges.unretain(p.contract, p.version, p.verdict, 1, p.run);
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
