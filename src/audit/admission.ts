/**
 * Admission and the live limits: whether receipts may enter live memory (--max-live-runs, --max-live-receipts, and
 * in cluster mode the owner's limit), reservations held until an ingest landed, and which idle runs leave live memory
 * to make room (--idle-evict-after).
 */
import type { Receipt } from '../core/types.js';
import type { LiveRun } from './live-run.js';

/** Refused because a live-state cap is reached: nothing of the request was stored; retry later. */
export class LiveLimitError extends Error {
  constructor(readonly limit: 'runs' | 'receipts', message: string, readonly retryAfterSeconds = 30) {
    super(message);
  }
}

export interface AdmissionLimits {
  maxLiveRuns?: number;
  maxLiveReceipts?: number;
  idleEvictMs?: number;
  /** Cluster mode (see EngineOptions.owns): no idle eviction. */
  owns?: (run: string) => boolean;
  ownerFull?: { full(run: string): boolean; known(runs: readonly string[]): Promise<Set<string>> };
}

/** What admission reads of the live runs, and the one thing it asks of them: evict. */
export interface AdmissionHost {
  readonly runCount: number;
  readonly heldReceipts: number;
  has(run: string): boolean;
  entries(): Iterable<[string, LiveRun]>;
  /** Takes an idle run out of live memory (it stays in the store). */
  evict(run: string, live: LiveRun): void;
}

export class Admission {
  /** New runs and receipts of ingests that passed the live caps and have not landed yet. */
  private reservedRuns = 0;
  private reservedReceipts = 0;
  /** Runs that left live memory idle since start (topology_live_runs_evicted_total). */
  evictedRuns = 0;

  constructor(
    private readonly host: AdmissionHost,
    private readonly limits: AdmissionLimits,
    private readonly idleEvicted?: (n: number) => void,
  ) {}

  /** At a live limit: no room for a new run (--max-live-runs or --max-live-receipts reached). */
  atLiveLimit(): boolean {
    return this.host.runCount >= (this.limits.maxLiveRuns ?? Infinity) || this.host.heldReceipts >= (this.limits.maxLiveReceipts ?? Infinity);
  }

  /**
   * The live caps: throws LiveLimitError when the receipts would start new runs past --max-live-runs, or hold
   * receipts past --max-live-receipts. Otherwise reserves room until the returned release is called (after the
   * ingest landed).
   */
  reserve(receipts: readonly Receipt[], now: number): () => void {
    const maxRuns = this.limits.maxLiveRuns ?? Infinity;
    const maxReceipts = this.limits.maxLiveReceipts ?? Infinity;
    if (maxRuns === Infinity && maxReceipts === Infinity) return () => {};
    const host = this.host;
    let newRuns = 0;
    let seen: Set<string> | undefined;
    for (const r of receipts) {
      if (host.has(r.run)) continue;
      seen ??= new Set();
      if (!seen.has(r.run)) {
        seen.add(r.run);
        newRuns++;
      }
    }
    if (newRuns > 0) this.evictIdle(now, host.runCount + this.reservedRuns + newRuns - maxRuns, host.heldReceipts + this.reservedReceipts + receipts.length - maxReceipts);
    const held = host.heldReceipts + this.reservedReceipts;
    if (newRuns > 0 && host.runCount + this.reservedRuns + newRuns > maxRuns) {
      throw new LiveLimitError('runs', `live-run limit reached (${maxRuns} runs held; --max-live-runs): receipts of new runs are refused until runs are pruned or idle long enough to leave live memory (--idle-evict-after); retry later`);
    }
    if (receipts.length > 0 && held + receipts.length > (newRuns > 0 ? maxReceipts : maxReceipts * 1.1)) {
      throw new LiveLimitError('receipts', `live-receipt limit reached (${maxReceipts} receipts held; --max-live-receipts): retry later`);
    }
    this.reservedRuns += newRuns;
    this.reservedReceipts += receipts.length;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.reservedRuns -= newRuns;
      this.reservedReceipts -= receipts.length;
    };
  }

  /**
   * Makes room under the live caps: runs that received no receipt for --idle-evict-after leave live memory, the
   * longest idle first, until `runs` runs and `receipts` receipts are freed (at least 1/64 of the run cap at once, so
   * a full server does not scan its runs for every new run). They stay in the store; their next receipt (or a read)
   * loads them again. Returns how many left.
   */
  private evictIdle(now: number, runs: number, receipts: number): number {
    const idleMs = this.limits.idleEvictMs;
    if (idleMs === undefined || (runs <= 0 && receipts <= 0) || this.limits.owns) return 0;
    const idle: [number, string, LiveRun][] = [];
    for (const [run, live] of this.host.entries()) {
      const at = live.receivedAt ?? live.updatedAt;
      if (now - at >= idleMs) idle.push([at, run, live]);
    }
    if (idle.length === 0) return 0;
    idle.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1));
    const minRuns = Math.max(runs, Math.ceil((this.limits.maxLiveRuns ?? 0) / 64));
    let n = 0;
    let freed = 0;
    for (const [, run, live] of idle) {
      if (n >= minRuns && freed >= receipts) break;
      freed += live.held;
      this.host.evict(run, live);
      n++;
    }
    this.evictedRuns += n;
    if (n) this.idleEvicted?.(n);
    return n;
  }

  /** Cluster mode: refuses receipts that would start new runs owned by an instance at its live limit (see ownerFull). */
  async refuseForFullOwners(receipts: readonly Receipt[]): Promise<void> {
    const full = this.limits.ownerFull;
    const owns = this.limits.owns;
    if (!full || !owns) return;
    let candidates: Set<string> | undefined;
    for (const r of receipts) if (!owns(r.run) && full.full(r.run)) (candidates ??= new Set()).add(r.run);
    if (!candidates) return;
    const known = await full.known([...candidates]);
    for (const run of candidates) {
      if (!known.has(run)) {
        throw new LiveLimitError('runs', "the instance that owns this run's partition is at its live limit (--max-live-runs or --max-live-receipts): receipts of new runs in its partitions are refused until it has room; retry later");
      }
    }
  }
}
