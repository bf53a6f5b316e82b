/**
 * The leased ownership of a cluster, as the engine's Ownership strategy (src/audit/ownership.ts): an adapter over the
 * ClusterCoordinator's public members. This instance owns the runs of the partitions it holds a valid lease on;
 * the runs of the others are read from the shared store (SharedStoreRuns, its list leaving out the partitions this
 * instance lists from memory); a new run whose owner said it is at its live limit is refused; with
 * `--span-routing any`, the spans of traces another instance resolves are forwarded through the shared span log,
 * and the pending spans of a partition that leaves are dropped (its new owner adopts them from the log).
 */
import type { Ownership } from '../audit/ownership.js';
import type { RemoteRuns } from '../audit/store.js';
import type { PgStore } from '../store/pg-store.js';
import type { ClusterCoordinator } from './coordinator.js';
import { SharedStoreRuns } from './remote.js';

export class LeasedOwnership implements Ownership {
  readonly single = false;
  readonly remote: RemoteRuns;
  readonly forwarding: boolean;

  constructor(
    private readonly coordinator: ClusterCoordinator,
    private readonly pg: PgStore,
    opts: { spanRouting?: 'trace' | 'any'; unwritten?: () => readonly string[] } = {},
  ) {
    this.remote = new SharedStoreRuns(pg, { unwritten: opts.unwritten });
    this.forwarding = opts.spanRouting === 'any';
  }

  owns(run: string): boolean {
    return this.coordinator.owns(run);
  }

  ownerAtLimit(run: string): boolean {
    return this.coordinator.ownerFull.full(run);
  }

  knownRuns(runs: readonly string[]): Promise<Set<string>> {
    return this.coordinator.ownerFull.known(runs);
  }

  partitionOf(run: string): number {
    return this.pg.partitionOf(run);
  }

  forwards(traceId: string): boolean {
    return this.forwarding && this.coordinator.forwards(traceId);
  }

  onTracesLost(drop: (pick: (traceId: string) => boolean) => number): void {
    // Routed by trace id, every span of a trace reaches its owner: nothing is pending for a partition that leaves.
    if (this.forwarding) this.coordinator.dropTraces = drop;
  }
}
