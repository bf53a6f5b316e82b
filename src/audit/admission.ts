/**
 * Admission and the live limits: whether receipts may enter live memory (--max-live-runs, --max-live-receipts, and
 * in cluster mode the owner's limit), reservations held until an ingest landed, and which idle runs leave live memory
 * to make room (--idle-evict-after).
 */
import type { Receipt } from '../core/types.js';
import type { Ownership } from './ownership.js';

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
  /** Which runs this instance holds (ownership.ts): a cluster's instance evicts no idle run, and refuses new runs of an owner at its limit. */
  ownership?: Ownership;
  /**
   * Fair live cap (with ingest tokens): a source holds at most FAIR_SOURCE_SHARE of --max-live-runs, and the last
   * FAIR_KEPT_SHARE of it is kept for sources with no run in flight (see Admission.reserve).
   */
  fairSources?: boolean;
  /**
   * Settled runs count against --max-live-runs too: where they stay in live memory until pruned (a cluster's
   * instance, shadow mode), so the cap still bounds memory.
   */
  countSettled?: boolean;
}

/** The share of --max-live-runs one source may hold (fair live cap). */
export const FAIR_SOURCE_SHARE = 0.5;
/** The share of --max-live-runs kept for sources with no run in flight (fair live cap). */
export const FAIR_KEPT_SHARE = 0.1;

/** What admission reads of the live runs, and the one thing it asks of them: evict idle runs. */
export interface AdmissionHost {
  readonly heldReceipts: number;
  has(run: string): boolean;
  /**
   * Takes runs that received no receipt since `before` out of live memory (they stay in the store), the longest idle
   * first, until `runs` runs that could still change and `receipts` held receipts are freed; a time-ordered structure
   * finds them (no walk over the live runs). Returns how many runs left.
   */
  evictIdle(before: number, runs: number, receipts: number): number;
}

/** A live run as admission counts it: runs that can still change count against the cap, per source. */
export interface CountedRun {
  verdict: { settled: boolean } | null;
  /** The source whose receipt created the run in live memory (the fair cap counts per source). */
  source?: string;
  /** Counted among the runs that can still change (maintained by Admission.track). */
  counted?: boolean;
}

/** The outcome of a reservation: the runs refused (their receipts are not stored), and the release. */
export interface Reservation {
  release(): void;
  /** Refused runs by the limit that refused them; null: none. */
  refused: Map<string, 'runs' | 'receipts'> | null;
  /** Why, for the refused runs' receipts (the partial-success message). */
  message: string;
}

const NO_RESERVATION: Reservation = { release: () => {}, refused: null, message: '' };

export class Admission {
  /** New runs and receipts of ingests that passed the live caps and have not landed yet. */
  private reservedRuns = 0;
  private reservedReceipts = 0;
  /** Held runs that can still change (not settled): what --max-live-runs counts. */
  private changeable = 0;
  /** Of those, per source (fair live cap), reserved ones included. */
  private readonly bySource = new Map<string, number>();
  /** Runs that left live memory idle since start (topology_live_runs_evicted_total). */
  evictedRuns = 0;

  constructor(
    private readonly host: AdmissionHost,
    private readonly limits: AdmissionLimits,
    private readonly idleEvicted?: (n: number) => void,
  ) {}

  /** Runs held that can still change (what --max-live-runs counts). */
  get changeableRuns(): number {
    return this.changeable;
  }

  /** Runs that can still change held (or reserved) for one source. */
  sourceRuns(source: string): number {
    return this.bySource.get(source) ?? 0;
  }

  /** Counts a live run (created, evaluated, reloaded) among the runs that can still change, or not. O(1). */
  track(live: CountedRun): void {
    const counts = this.limits.countSettled === true || !live.verdict || !live.verdict.settled;
    if (counts === (live.counted === true)) return;
    live.counted = counts;
    this.count(live.source, counts ? 1 : -1);
  }

  /** A run left live memory. O(1). */
  untrack(live: CountedRun): void {
    if (!live.counted) return;
    live.counted = false;
    this.count(live.source, -1);
  }

  private count(source: string | undefined, d: number): void {
    this.changeable += d;
    if (source === undefined || !this.limits.fairSources) return;
    const n = (this.bySource.get(source) ?? 0) + d;
    if (n <= 0) this.bySource.delete(source);
    else this.bySource.set(source, n);
  }

  private unreserveSource(source: string, n: number): void {
    const left = (this.bySource.get(source) ?? 0) - n;
    if (left <= 0) this.bySource.delete(source);
    else this.bySource.set(source, left);
  }

  /** At a live limit: no room for a new run (--max-live-runs or --max-live-receipts reached). */
  atLiveLimit(): boolean {
    return this.changeable >= (this.limits.maxLiveRuns ?? Infinity) || this.host.heldReceipts >= (this.limits.maxLiveReceipts ?? Infinity);
  }

  /**
   * The live caps, per run: receipts of a new run are refused when it would pass --max-live-runs (runs that can
   * still change), or hold receipts past --max-live-receipts (receipts of runs already live: past 110% of it, so
   * running runs can finish); the other runs of the batch are admitted. With fair sources, a new run is also refused
   * when its source holds FAIR_SOURCE_SHARE of the cap, or when only the share kept for sources with no run in
   * flight is left and its source has one. Idle runs leave live memory first to make room (longest idle first, by a
   * time-ordered structure). Costs O(runs of the batch), whatever the number of live runs. The admitted runs'
   * room is reserved until the returned release is called (after the ingest landed).
   */
  reserve(receipts: readonly Receipt[], now: number, source = ''): Reservation {
    const maxRuns = this.limits.maxLiveRuns ?? Infinity;
    const maxReceipts = this.limits.maxLiveReceipts ?? Infinity;
    if (receipts.length === 0 || (maxRuns === Infinity && maxReceipts === Infinity)) return NO_RESERVATION;
    const host = this.host;
    const per = new Map<string, number>();
    let newRuns = 0;
    for (const r of receipts) {
      const n = per.get(r.run);
      if (n === undefined) {
        per.set(r.run, 1);
        if (!host.has(r.run)) newRuns++;
      } else per.set(r.run, n + 1);
    }
    if (newRuns > 0) {
      const needRuns = this.changeable + this.reservedRuns + newRuns - maxRuns;
      const needReceipts = host.heldReceipts + this.reservedReceipts + receipts.length - maxReceipts;
      this.evictIdle(now, needRuns, needReceipts);
    }
    const fair = this.limits.fairSources === true && source !== 'auditor';
    const mine = fair ? this.sourceRuns(source) : 0;
    const kept = fair && mine > 0 ? Math.ceil(maxRuns * FAIR_KEPT_SHARE) : 0;
    const quota = fair ? Math.max(1, Math.floor(maxRuns * FAIR_SOURCE_SHARE)) : Infinity;
    let roomRuns = maxRuns - kept - this.changeable - this.reservedRuns;
    let held = host.heldReceipts + this.reservedReceipts;
    let admittedRuns = 0;
    let admittedReceipts = 0;
    let refused: Map<string, 'runs' | 'receipts'> | null = null;
    let why: 'runs' | 'quota' | 'receipts' | null = null;
    for (const [run, n] of per) {
      let limit: 'runs' | 'quota' | 'receipts' | null = null;
      if (host.has(run)) {
        if (held + n > maxReceipts * 1.1) limit = 'receipts';
      } else if (mine + admittedRuns >= quota) limit = 'quota';
      else if (roomRuns <= 0) limit = 'runs';
      else if (held + n > maxReceipts) limit = 'receipts';
      if (limit !== null) {
        (refused ??= new Map()).set(run, limit === 'receipts' ? 'receipts' : 'runs');
        why ??= limit;
        continue;
      }
      if (!host.has(run)) {
        admittedRuns++;
        roomRuns--;
      }
      held += n;
      admittedReceipts += n;
    }
    this.reservedRuns += admittedRuns;
    this.reservedReceipts += admittedReceipts;
    if (fair && admittedRuns) this.bySource.set(source, mine + admittedRuns);
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      this.reservedRuns -= admittedRuns;
      this.reservedReceipts -= admittedReceipts;
      if (fair && admittedRuns) this.unreserveSource(source, admittedRuns);
    };
    return { release, refused, message: refused ? refusalMessage(why!, refused.size, maxRuns, maxReceipts) : '' };
  }

  /** Makes room under the live caps: idle runs leave live memory (see AdmissionHost.evictIdle). */
  private evictIdle(now: number, runs: number, receipts: number): number {
    const idleMs = this.limits.idleEvictMs;
    if (idleMs === undefined || (runs <= 0 && receipts <= 0) || this.limits.ownership?.single === false) return 0;
    const n = this.host.evictIdle(now - idleMs, Math.max(0, runs), Math.max(0, receipts));
    this.evictedRuns += n;
    if (n) this.idleEvicted?.(n);
    return n;
  }

  /** Cluster mode: refuses receipts that would start new runs owned by an instance at its live limit (Ownership.ownerAtLimit). */
  async refuseForFullOwners(receipts: readonly Receipt[]): Promise<void> {
    const ownership = this.limits.ownership;
    if (!ownership || ownership.single) return;
    let candidates: Set<string> | undefined;
    for (const r of receipts) if (!ownership.owns(r.run) && ownership.ownerAtLimit(r.run)) (candidates ??= new Set()).add(r.run);
    if (!candidates) return;
    const known = await ownership.knownRuns([...candidates]);
    for (const run of candidates) {
      if (!known.has(run)) {
        throw new LiveLimitError('runs', "the instance that owns this run's partition is at its live limit (--max-live-runs or --max-live-receipts): receipts of new runs in its partitions are refused until it has room; retry later");
      }
    }
  }
}

/** The partial-success message of the receipts of refused runs (content-free: counts and flags). */
function refusalMessage(why: 'runs' | 'quota' | 'receipts', runs: number, maxRuns: number, maxReceipts: number): string {
  if (why === 'quota') return `${runs} run(s) refused: this source holds its share of the live-run limit (${Math.floor(maxRuns * FAIR_SOURCE_SHARE)} of --max-live-runs ${maxRuns}) in runs that can still change; retry when they settle`;
  if (why === 'receipts') return `${runs} run(s) refused: live-receipt limit reached (${maxReceipts} receipts held; --max-live-receipts); retry later`;
  return `${runs} run(s) refused: live-run limit reached (${maxRuns} runs that can still change; --max-live-runs); retry when runs settle or are idle long enough to leave live memory (--idle-evict-after)`;
}
