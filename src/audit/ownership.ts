/**
 * Ownership as a strategy the engine and the ingestor are given: which runs this instance holds live (folds,
 * evaluates, runs the deadlines and gauges of), which traces another instance resolves, how the runs held elsewhere
 * are read, whether a run's owner is at its live limit, and how to hear of traces whose partitions left.
 *
 * SingleOwner is the embedded store's (one instance owns every run, forwards nothing, reads nothing elsewhere); the
 * leased ownership of a cluster is src/cluster/leased-ownership.ts (an adapter over ClusterCoordinator).
 */
import type { RemoteRuns } from './store.js';

export interface Ownership {
  /**
   * One instance owns every run (the embedded store): nothing is stored or read by another instance, so settled runs
   * may leave live memory (the store lists them) and idle runs may be evicted. False in a cluster.
   */
  readonly single: boolean;
  /** Whether this instance holds the run live. Receipts of runs it does not own are stored and folded by their owner. */
  owns(run: string): boolean;
  /** Runs other instances hold, read from the shared store on demand (null: none, a single instance). */
  readonly remote: RemoteRuns | null;
  /**
   * Whether the instance owning `run` is at its live limit (as it last said): receipts that would start a new run
   * there are refused, as that instance would refuse them itself. Always false for a single instance.
   */
  ownerAtLimit(run: string): boolean;
  /** Which of `runs` the store already has (a run it has is not new, so its owner's limit does not refuse it). */
  knownRuns(runs: readonly string[]): Promise<Set<string>>;
  /** Whether any trace may be resolved elsewhere (a cluster with `--span-routing any`): then `forwards` is asked per span. */
  readonly forwarding: boolean;
  /** Whether another instance resolves this trace: its spans are forwarded through the shared span log. */
  forwards(traceId: string): boolean;
  /**
   * Registers what drops the pending spans of the traces picked (deriving nothing): called when a partition leaves
   * this instance (their new owner adopts their span records from the shared log). A single instance never calls it.
   */
  onTracesLost(drop: (pick: (traceId: string) => boolean) => number): void;
  /**
   * A cluster: the partition of a run (what moves between instances). The counts a retired run keeps in topology_runs
   * are kept per partition, and leave with it. None for a single instance.
   */
  partitionOf?(run: string): number;
}

/** The embedded store's ownership: this instance owns every run, forwards nothing and has no runs held elsewhere. */
export class SingleOwner implements Ownership {
  readonly single = true;
  readonly remote = null;
  readonly forwarding = false;
  owns(): boolean {
    return true;
  }
  ownerAtLimit(): boolean {
    return false;
  }
  knownRuns(): Promise<Set<string>> {
    return Promise.resolve(new Set());
  }
  forwards(): boolean {
    return false;
  }
  onTracesLost(): void {}
}

/** The one SingleOwner (it holds nothing). */
export const SINGLE_OWNER: Ownership = new SingleOwner();
