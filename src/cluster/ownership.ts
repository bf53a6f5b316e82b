/**
 * The partitions this instance holds, and until when (on the monotonic clock) it surely holds them: every act as
 * owner asks first (`owns`, `guard`). A partition dropped here (lapsed, not renewed, released) stops being fenced for
 * this instance's writes at once, and the coordinator lets go of its runs.
 */
import type { PgStore } from '../store/pg-store.js';
import type { Fence } from './fence.js';

export class Ownership {
  /** The partitions held. */
  readonly owned = new Set<number>();
  /** The renewal count when each owned partition was taken (Renewal.renewOnce). */
  readonly acquired = new Map<number, number>();
  /** Until when (monotonic clock, ms) the leases renewed last are surely still this instance's. */
  validUntil = 0;
  /** Times the leases lapsed here (every partition dropped before acting). */
  lapses = 0;

  constructor(
    private readonly pg: PgStore,
    private readonly fence: Fence,
    readonly mono: () => number,
    private readonly log: (event: string, fields?: Record<string, unknown>) => void,
    /** Lets go of a partition's runs (its live state, pending counts and spans) once it is no longer held. */
    private readonly dropped: (part: number) => void,
  ) {}

  /** Whether this instance owns the run (its partition's lease, still valid by the local clock). */
  readonly owns = (run: string): boolean => this.owned.has(this.pg.partitionOf(run)) && this.mono() <= this.validUntil;

  /**
   * Before acting as owner: true while the leases are valid; otherwise (the process was paused, or renewals failed
   * past the lease) every partition is dropped first, and false.
   */
  guard(): boolean {
    if (this.owned.size === 0) return true;
    if (this.mono() <= this.validUntil) return true;
    this.log('leases_lapsed', { partitions: this.owned.size, overdueMs: Math.round(this.mono() - this.validUntil) });
    this.lapses++;
    for (const p of [...this.owned]) this.drop(p);
    return false;
  }

  /** The partitions held, ascending. */
  ownedParts(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  /** Holds `parts` from now on, taken at renewal `renewal`: their runs are being read in. */
  take(parts: readonly number[], renewal: number): void {
    for (const p of parts) {
      this.owned.add(p);
      this.acquired.set(p, renewal);
    }
  }

  /** Stops holding `p`: no longer fenced for this instance's writes, its runs let go. */
  drop(p: number): void {
    this.acquired.delete(p);
    if (!this.owned.delete(p)) return;
    this.fence.drop([p]);
    this.dropped(p);
  }

  /** Forgets every partition (leaving the cluster: the leases are given up next). */
  clear(): void {
    this.owned.clear();
  }
}
