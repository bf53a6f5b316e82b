/**
 * The storage port (issue 48): what a store does, asynchronous and by job, whichever backend runs. The embedded SQLite
 * store (src/store/sqlite/) and the shared PostgreSQL store of a cluster (src/store/pg/) both implement it, and one
 * conformance suite (test/store-conformance.test.ts) runs the same cases against both. Every failure is a StoreError
 * of one of four kinds (unavailable / full / fenced / corrupt); the embedded store may answer at once (a resolved
 * promise), and keeps its synchronous fast path inside its own folder.
 */
import type { AckRecord, Pin, Receipt, Verdict } from '../core/types.js';
import type { AppendPin, AppendResult, LiveRun, PinRecord, SpanLogEntry, StoredReceipt } from './types.js';

export { StoreError, type StoreErrorKind } from './types.js';

/**
 * Appends a batch of deliveries with the span log entries and the first pins of their runs, in one transaction:
 * resolves only after its COMMIT (an acknowledged receipt is never lost), rejects with a StoreError if none.
 */
export interface Appender {
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult>;
  /** Resolves once every write started so far has landed. */
  sync(): Promise<void>;
}

/** A stored run's row as both backends list it. */
export interface RunRow {
  run: string;
  /** Server time of the run's first stored receipt (or first verdict state), ms since epoch. */
  firstAt: number;
  verdict: Verdict | null;
  settled: boolean;
}

/** The filter and cursor of a page of the run list: newest first (`oldest`: oldest first), after the cursor. */
export interface RunPage {
  verdict?: string;
  contract?: string;
  oldest?: boolean;
  after?: { firstAt: number; run: string };
  limit: number;
}

/** A run's history and the run list, as stored. */
export interface RunReader {
  /** Every distinct content per (run, event), in commit order (conflicting versions included). */
  readReceipts(run: string): Promise<Receipt[]>;
  getRun(run: string): Promise<RunRow | null>;
  listRuns(page: RunPage): Promise<RunRow[]>;
  verdictCounts(filter: { contract?: string }): Promise<Record<string, number>>;
}

/** Pins (the first written wins, never changed) and the pinned contracts' content by hash. */
export interface Pins {
  getPin(run: string): Promise<PinRecord | null>;
  /** Returns the pin in force: this one, or the one written before. */
  setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord>;
  putContractContent(hash: string, contract: string, version: string, content: string): Promise<void>;
  getContractContent(hash: string): Promise<string | null>;
}

/** A run's latest verdict state, and the retention of settled runs. */
export interface RunRows {
  setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number): Promise<void>;
  /** Deletes the settled runs last updated before `now - olderThanMs` (receipts, pin, acknowledgement, row); how many. */
  prune(olderThanMs: number, now: number): Promise<number>;
}

/** Operators' acknowledgements: the run's latest replaces an earlier one, stored before the API answers. */
export interface Acks {
  putAck(run: string, ack: AckRecord): Promise<void>;
  getAck(run: string): Promise<AckRecord | null>;
}

/** The span log: spans waiting for their parent, replayed after a restart. */
export interface SpanLog {
  /** This instance's entries, oldest first. */
  spanLog(): Promise<{ seq: number; traceId: string; body: string }[]>;
  deleteSpanLogUpTo(seq: number): Promise<void>;
  /** Forgets entries older than `before` whose trace holds no pending work any more; how many. */
  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean): Promise<number>;
}

/** The whole port: what one backend implements. */
export interface StoragePort extends Appender, RunReader, Pins, RunRows, Acks, SpanLog {
  healthy(): boolean;
  close(): Promise<void>;
}

/** A LiveRun as the port's RunRow. */
export function runRowOf(r: Pick<LiveRun, 'run' | 'firstAt' | 'settled'> & { verdict: Verdict | string | null }): RunRow {
  return { run: r.run, firstAt: r.firstAt, verdict: r.verdict as Verdict | null, settled: r.settled };
}
