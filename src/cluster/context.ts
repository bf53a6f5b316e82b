/**
 * What the parts of a cluster coordinator share (src/cluster/coordinator.ts composes them): its options and hooks,
 * the shared store and the coordination beside it, this instance's view of the store, the partitions it holds, and
 * the engine it drives once started.
 */
import type { AuditEngine } from '../audit/engine.js';
import type { PgStore } from '../store/pg-store.js';
import type { Coordination } from './coordination.js';
import type { ClusterEngineStore } from './engine-store.js';
import type { Ownership } from './ownership.js';

export interface ClusterOptions {
  /** How long a lease (and an instance's heartbeat) lasts without renewal. */
  leaseTtlMs: number;
  /** How often leases are renewed and the fair share rebalanced (default ttl / 5, at most 500 ms). */
  renewEveryMs?: number;
  /** How often the shared store is read for receipts other instances stored for runs owned here. */
  tailEveryMs?: number;
  /** Receipts read per tail query. */
  tailBatch?: number;
  /**
   * `trace` (default): the Collector routes every span of a trace to one instance; span records are adopted only
   * from instances that are gone. `any`: spans may arrive anywhere; instances forward the spans of traces they do not
   * own through the shared span log, and the owner of a trace's partition resolves them (every tail read).
   */
  spanRouting?: 'trace' | 'any';
  /**
   * How long after the last renewal landed the instance says it is not ready and refuses exports (503 + Retry-After)
   * until a renewal lands (default max(3 renewals, ttl / 2)).
   */
  beatDeadlineMs?: number;
  /**
   * An instance whose wall clock is further than this from the database's (measured with each heartbeat) holds no
   * partition: it claims none and releases those it holds (default 60 s). Within it, verdicts are timed on the
   * database's clock (the local clock plus the measured offset: `clockOffsetMs`).
   */
  maxClockOffsetMs?: number;
}

export interface ClusterHooks {
  log: (event: string, fields?: Record<string, unknown>) => void;
  clock: () => number;
  /** The clock leases are timed on (default performance.now: monotonic, runs on while the process is stopped). */
  monotonic?: () => number;
  /** This host's wall clock, compared with the database's at each heartbeat (default Date.now). */
  wall?: () => number;
}

/** Span log entries (of instances that died, or forwarded) are read this many per query. */
export const SPAN_LOG_PAGE = 2000;

export interface ClusterContext {
  readonly pg: PgStore;
  readonly coordination: Coordination;
  /** This instance's view of the shared store (pins, contract content, adopted span records). */
  readonly store: ClusterEngineStore;
  readonly opts: ClusterOptions;
  readonly hooks: ClusterHooks;
  readonly ownership: Ownership;
  /** The engine driven (set by start; null before: the parts act only after it). */
  engine(): AuditEngine | null;
  /**
   * Within a long step: renews the leases when a renewal is due, so the step itself never lets them lapse. False when
   * none is held any more (Renewal.keepLeases).
   */
  keepLeases(): Promise<boolean>;
}
