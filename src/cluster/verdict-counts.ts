/**
 * Verdict transitions of runs held here, counted (metrics) only once their verdict state is in the shared table: the
 * next owner compares with that table, so each transition is counted by exactly one instance. Those of a write the
 * fence refused (the partition was lost) are never counted here: the new owner counts from what the table holds.
 */
import type { PgStore } from '../store/pg-store.js';

type Pending = (() => void)[];

export class VerdictCounts {
  private pending = new Map<string, Pending>();

  /** Follows the store's verdict-state writes (PgStore.onVerdictWrite); `held`: is a run's partition still held here. */
  constructor(
    private readonly pg: PgStore,
    held: (run: string) => boolean,
  ) {
    pg.onVerdictWrite = {
      taken: (runs) => {
        const taken: [string, Pending][] = [];
        for (const run of runs) {
          const counts = this.pending.get(run);
          if (counts) {
            taken.push([run, counts]);
            this.pending.delete(run);
          }
        }
        return taken;
      },
      landed: (token, written) => {
        for (const [run, counts] of token as [string, Pending][]) {
          if (written === null) {
            // The write failed (it is retried by the next flush): counted when it lands, unless the partition left
            // meanwhile (the state was forgotten with the run; the next owner counts from the table).
            if (held(run)) this.pending.set(run, [...counts, ...(this.pending.get(run) ?? [])]);
          } else if (written.has(run)) {
            for (const count of counts) count();
          }
        }
      },
    };
  }

  /** Counts a transition of `run` (`count` increments the metric) once its verdict state is written, or never. */
  countWhenWritten(run: string, count: () => void): void {
    const list = this.pending.get(run);
    if (list) list.push(count);
    else this.pending.set(run, [count]);
  }

  /** Transitions of partition `part` whose state was not written (forgotten with the run): its next owner counts them. */
  forgetPartition(part: number): void {
    for (const run of [...this.pending.keys()]) if (this.pg.partitionOf(run) === part) this.pending.delete(run);
  }
}
