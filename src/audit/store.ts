/**
 * What the engine needs of a store, small and composed by job (as Prometheus composes Appendable and Queryable into
 * Storage): the embedded SQLite ReceiptStore implements all of it; in cluster mode (`serve --store postgres://...`)
 * the view of the shared store in src/cluster/engine-store.ts does. Runs other instances hold are read through
 * RemoteRuns.
 */
import type { AckRecord, Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import type { AppendPin, AppendResult, LiveRun as StoredRun, PinRecord, PrunableRun, Slicer, SpanLogEntry, StoredReceipt } from '../store/index.js';

/**
 * Appends a batch; resolves only after its COMMIT (an acknowledged receipt is never lost), rejects if none. `pins`:
 * the first pins of the batch's runs that have none yet (Pinner.firstPins), written with their contracts' content in
 * the same transaction as the receipts (the first pin written wins: a run pinned before keeps its pin); the result's
 * `pins` are the pins in force of those runs. So a stored run is never without its pin, even after a kill -9 right
 * after the COMMIT.
 */
export interface ReceiptAppender {
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult>;
}

/** A run's stored receipts: every distinct content per (run, event), in commit order. */
export interface ReceiptReader {
  readReceipts(run: string): Promise<Receipt[]>;
  /** Many runs' receipts in one read (runs without any are absent). */
  readManyReceipts?(runs: readonly string[]): Promise<Map<string, Receipt[]>>;
}

/**
 * Whether a store answers a run's receipts synchronously, declared by the store (the engine never infers it from the
 * methods a store happens to have). `synchronousReads: true` (the embedded SQLite store): `runReceipts` answers in
 * place, already committed, and the engine's RunStates read back through it. `false` (the cluster's view of the shared
 * PostgreSQL store): the engine reads a run ahead asynchronously (readReceipts) when a fold or an evaluation needs its
 * receipts back (src/audit/read-ahead.ts), and holds only aggregates in between.
 */
export type ReceiptReads = SyncReceiptReader | { readonly synchronousReads: false };

/**
 * A store whose reads answer synchronously (see ReceiptReads): a run's receipts, and the stored runs as the single
 * instance lists them (RunListing: settled runs then leave live memory and are read from the store).
 */
export interface SyncReceiptReader extends RunListing {
  readonly synchronousReads: true;
  runReceipts(run: string): Receipt[];
}

/**
 * Pins (the first written wins, never changed) and the pinned contracts' content by hash. A run's first pin is
 * written by the append that brings its receipts (ReceiptAppender); setPin and putContractContent write what no
 * append pinned (a run restored without a pin, or pinned only after an evaluation), with the store's next group
 * commit (SQLite) or behind on the tick (the cluster's view of PostgreSQL).
 */
export interface PinStore {
  getPin(run: string): PinRecord | null;
  setPin(run: string, pin: Pin, contractHash: string): PinRecord;
  putContractContent(hash: string, contract: string, version: string, content: string): void;
  getContractContent(hash: string): string | null;
  /** Cluster mode: a stored pin read back (a takeover, a run loaded again), held from then on. */
  rememberPin?(run: string, record: PinRecord): void;
}

/** A run's verdict as last stored (restores and the cluster's lists read it), and the retention of settled runs. */
export interface RunRows {
  /** `full`: the whole evaluation and the run's first receipt time, for a store that keeps what the list views show (listsVerdicts). */
  setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number, full?: { verdict: RunVerdict; firstAt: number }): void;
  /**
   * The store keeps each run's verdict as the list views show it (cluster mode: the other instances list the run from
   * it): the engine then writes the verdict state whenever that changes (findings included), not only its verdict.
   */
  readonly listsVerdicts?: boolean;
  /** The stored runs to rebuild live state from, page by page; `changeable`: only those not settled, or alerting. */
  iterateLiveRuns(pageSize?: number, changeable?: boolean): Iterable<StoredRun>;
  /** The stored runs `iterateLiveRuns(_, true)` leaves out, counted (a restart's topology_runs for them). */
  settledRunCounts?(): { contract: string; version: string; verdict: Verdict; runs: number }[];
  /** Every pinned contract content stored, and a run pinned to one (restart's check of changed contract files). */
  pinnedContents?(): { hash: string; contract: string; version: string; content: string }[];
  runPinnedTo?(hash: string): string | null;
  /**
   * Deletes the settled runs past the retention; returns how many (a store that deletes behind, asynchronously: 0,
   * and `pruned` told each batch's runs when it lands).
   */
  prune(olderThanMs: number, now: number, pruned?: (runs: readonly PrunableRun[]) => void): number;
  /**
   * Runs' stored rows (verdict, settled, pin), verdict states and pins set here and not written yet included: what a
   * store with asynchronous reads answers for runs that left memory (Retirement.checkReturning).
   */
  storedRuns?(runs: readonly string[]): Promise<Map<string, StoredRun>>;
}

/** The span log (spans waiting for their parent, replayed after a restart). */
export interface SpanLogStore {
  spanLog(): { seq: number; traceId: string; body: string }[];
  deleteSpanLogUpTo(seq: number): void;
  /** Resolves with the count pruned; pauses when `slicer`'s budget is spent (src/store/span-log-prune.ts). */
  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, slicer?: Slicer): Promise<number>;
}

/**
 * The stored runs as the single instance lists them (SQLite): settled runs leave live memory, so the run lists, the
 * gauges of retired runs and the pages read them from the store.
 */
export interface RunListing {
  runVerdict(run: string): { verdict: Verdict | null; settled: boolean } | null;
  prunableRuns(olderThanMs: number, now: number): PrunableRun[];
  /**
   * The retention prune in batches (one transaction each), pausing when `slicer`'s budget is spent: `retired` is told
   * each batch's runs in the same turn as their deletion (no receipt can land between). Costs the runs that passed the
   * retention since the last call.
   */
  pruneSliced(olderThanMs: number, now: number, slicer?: Slicer, retired?: (runs: readonly PrunableRun[]) => void): Promise<number>;
  listRuns(f: { verdict?: string; contract?: string; oldest?: boolean; after?: { firstAt: number; run: string }; limit: number }): StoredRun[];
  verdictCounts(f?: { contract?: string }): Record<string, number>;
  /** The run's latest stored acknowledgement (a run that left live memory keeps it in the store). */
  getAck(run: string): AckRecord | null;
}

/** What the engine needs of any store but the kind of its reads (ReceiptReads). */
export type EngineStoreJobs = ReceiptAppender & ReceiptReader & PinStore & RunRows & SpanLogStore & Partial<RunListing>;

export type EngineStore = EngineStoreJobs & ReceiptReads;

/** A store whose reads are asynchronous only (the cluster's view of the shared store): what a class implements. */
export interface AsyncEngineStore extends EngineStoreJobs {
  readonly synchronousReads: false;
}

/** A run this instance does not hold, read from the shared store (cluster mode): what evaluating it needs. */
export interface DetachedRun {
  run: string;
  pin: PinRecord | null;
  /** The pinned contract's canonical content (by pin.contractHash), when pinned. */
  contractContent: string | null;
  receipts: Receipt[];
  updatedAt: number;
}

/** What RemoteRuns.list filters on: verdict and contract as stored, the order, the page's cursor and size. */
export interface StoredListFilter {
  verdict?: string;
  contract?: string;
  limit: number;
  oldest?: boolean;
  after?: { firstAt: number; run: string };
}

/** A run as the shared store lists it (RemoteRuns.list): its key (first_at, run), the verdict its owner last wrote. */
export interface StoredListRow {
  run: string;
  firstAt: number;
  updatedAt: number;
  verdict?: string | null;
  settled?: boolean;
  listed?: string | null;
}

/** Runs held by other instances of a cluster, read from the shared store on demand (see ClusterReads). */
export interface RemoteRuns {
  /** A run as stored; a cached read no older than `maxAgeMs` (default: the reader's cache time) may answer. */
  load(run: string, maxAgeMs?: number): Promise<DetachedRun | null>;
  /** Many runs in a few queries (the list views), by run; runs not stored are absent. */
  loadMany?(runs: readonly string[]): Promise<Map<string, DetachedRun>>;
  /** The run's stored pin and its contract's content (for the run-scope rule of a run held elsewhere). */
  pin(run: string): Promise<{ record: PinRecord; contractContent: string | null } | null>;
  /** Runs of the whole cluster per verdict, as their owners last stored them (optionally of one pinned contract). */
  counts(filter: { contract?: string }): Promise<Record<string, number>>;
  /**
   * Runs of the whole cluster, newest first (`oldest`: oldest first), as the shared store lists them: with the verdict
   * as last stored by the owner (`verdict`) and, when its owner wrote it, the whole evaluation (`listed`, as
   * listedJson wrote it; parsed only for the runs not held here): a page of the run list, after the key `after` in the
   * store's (first_at, run) order.
   */
  list(filter: StoredListFilter): Promise<StoredListRow[]>;
  /** The run's latest acknowledgement, made at any instance. */
  ack?(run: string): Promise<AckRecord | null>;
}
