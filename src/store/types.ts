/**
 * The rows both stores write and read (the embedded SQLite store in src/store/sqlite/, the shared
 * PostgreSQL store in src/store/pg-store.ts), and the rules they share: the outcome of an append per delivery, the
 * event id of a source-scoped receipt, the errors of a commit and of a stored row.
 */
import { createHash } from 'node:crypto';
import type { Pin, Receipt, Verdict } from '../core/types.js';

export interface StoredReceipt {
  receipt: Receipt;
  /** The authenticated source that delivered it (e.g. a token name), never content. */
  source: string;
  /** Server time of receipt, ms since epoch. */
  receivedAt: number;
  /** compactReceiptJson(receipt), when the caller already made it (then it is not made again). */
  body?: string;
  /**
   * Source-scoped event ids (serve with --ingest-tokens; issue 30.2): this source's tag. When another source stored
   * this (run, event) first, the receipt is stored under scopedEventId(event, scope) instead of conflicting with that
   * source's receipt, and `storedAs` is set to that id (both stores: sourceScopedEvent decides).
   */
  scope?: string;
  storedAs?: string;
}

/**
 * The event id a receipt is stored under when another source stored its (run, event) first: `event@tag` (an id of
 * the id rule: at most 200 characters, a long id shortened with a digest of the whole).
 */
export function scopedEventId(event: string, tag: string): string {
  const id = `${event}@${tag}`;
  if (id.length <= 200) return id;
  return `${event.slice(0, 200 - tag.length - 18)}#${createHash('sha256').update(event).digest('hex').slice(0, 16)}@${tag}`;
}

/**
 * The rule of source-scoped event ids, shared by the SQLite and PostgreSQL stores: a delivery whose (run, event) holds
 * other content, stored first (variant 0) by `firstSource`, is stored under scopedEventId(event, its scope) when it
 * carries a scope and neither it nor the first is the auditor's own or from the same source. Null: it stays under
 * its (run, event) (a conflict, as without --ingest-tokens).
 */
export function sourceScopedEvent(item: StoredReceipt, firstSource: string | undefined): string | null {
  if (item.scope === undefined || item.source === 'auditor') return null;
  if (firstSource === undefined || firstSource === item.source || firstSource === 'auditor') return null;
  return scopedEventId(item.receipt.event, item.scope);
}

export type AppendOutcome = 'accepted' | 'duplicate' | 'conflict';

export interface AppendResult {
  accepted: number;
  duplicates: number;
  conflicts: number;
  /** Per input index. A conflict is stored beside the first version; a duplicate is not stored again. */
  results: AppendOutcome[];
  /**
   * The pins in force, after the commit, of the runs whose first pin this append carried (AppendPin): its own, or the
   * one written before it (the first pin written wins). A run whose pin row is gone (pruned meanwhile) is absent.
   */
  pins?: Map<string, PinRecord>;
}

export interface PinRecord {
  pin: Pin;
  contractHash: string;
}

/**
 * A run's first pin, handed to `append` with the receipts that bring the run (or make it pinnable) and written in
 * the same transaction (both stores), with its contract's content when that is not stored yet. A run that has a pin
 * keeps it: the first pin written wins and is never changed.
 */
export interface AppendPin {
  run: string;
  pin: Pin;
  contractHash: string;
  /** The pinned contract's name, version and canonical content (stored by contractHash; a hash names one content). */
  contract: string;
  version: string;
  content: string;
}

export interface LiveRun {
  run: string;
  /** Server time of the run's first stored receipt (or first verdict state), ms since epoch. */
  firstAt: number;
  /** Last receipt or verdict update, ms since epoch. */
  updatedAt: number;
  verdict: Verdict | null;
  settled: boolean;
  pin: Pin | null;
  contractHash: string | null;
}


/**
 * What went wrong in a store, by kind, whichever backend: `unavailable` (the database did not answer, an I/O error, a
 * commit that failed: try again later), `full` (the disk or the size cap is full, or too many writes wait), `fenced`
 * (a write of partitions this instance no longer holds, refused), `corrupt` (a stored row that cannot be read back).
 */
export type StoreErrorKind = 'unavailable' | 'full' | 'fenced' | 'corrupt';

/** The one error type of the storage port (src/store/port.ts); StoreCommitError and StoreRowError are its kinds' cases. */
export class StoreError extends Error {
  constructor(readonly kind: StoreErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
  }
}

/** The kind of a failed commit, from its driver's code: a full disk, size cap or saturated queue is `full`. */
export function commitErrorKind(code: string | undefined): StoreErrorKind {
  return code === 'SQLITE_FULL' || code === 'STORE_SATURATED' || code === '53100' ? 'full' : 'unavailable';
}

/** A stored row that cannot be read back, named by table and row (never by content). */
export class StoreRowError extends StoreError {
  override name = 'StoreRowError';
  constructor(readonly table: string, readonly row: string, reason: string) {
    super('corrupt', `store table ${table}, row ${row}: ${reason}`);
  }
}

/** A commit that did not land (disk full, read-only, I/O error). The affected appends are not acknowledged. */
export class StoreCommitError extends StoreError {
  readonly code: string | undefined;
  constructor(cause: unknown) {
    const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : undefined;
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(commitErrorKind(code), `receipt store commit failed: ${reason}`, { cause });
    this.name = 'StoreCommitError';
    this.code = code;
  }
}

/**
 * Content-free span records (allow-listed attributes only) of traces whose agent spans still wait for a caller or
 * target: committed with the receipts of the same export, so an acknowledged export's pending work survives kill -9.
 */
export interface SpanLogEntry {
  traceId: string;
  loggedAt: number;
  body: string;
  /**
   * Cluster with `--span-routing any`: spans of a trace another instance resolves, forwarded to the owner of the
   * trace's partition (whoever that is when it reads them), not held here. The embedded store never sees one.
   */
  forwarded?: boolean;
}


/** A settled run past the retention: its stored verdict and pin (the gauges it leaves). */
export interface PrunableRun {
  run: string;
  verdict: Verdict | null;
  contract: string;
  version: string;
}


/** An append's result before any receipt (shared with the PostgreSQL store). */
export function emptyResult(): AppendResult {
  return { accepted: 0, duplicates: 0, conflicts: 0, results: [] };
}

/** Counts one delivery's outcome into an append's result (shared with the PostgreSQL store). */
export function countOutcome(result: AppendResult, outcome: AppendOutcome): void {
  result.results.push(outcome);
  if (outcome === 'accepted') result.accepted++;
  else if (outcome === 'duplicate') result.duplicates++;
  else result.conflicts++;
}
