/**
 * The durable embedded receipt store: SQLite (better-sqlite3) in WAL mode with group commit. A facade over its parts,
 * one per job, sharing one connection and its statements (SqliteShared):
 *   connection.ts   the data directory, the pragmas (durability: WAL with synchronous=FULL), the schema, the size cap
 *   group-commit.ts the append queue and its one transaction per group, with the pins, verdict states and contracts
 *                   written with the next group (commit.ts: the transaction itself)
 *   run-reads.ts    a run's receipts and row, the run lists, and what a restart restores
 *   retention.ts    the prune of settled runs, the WAL scrub and the checkpoint worker
 *   span-log.ts     the span log; acks.ts the operators' acknowledgements
 * port.ts puts it behind the storage port (src/store/port.ts); the engine's synchronous fast path stays here.
 */
import { join } from 'node:path';
import type { AckRecord, Pin, Receipt, Verdict } from '../../core/types.js';
import type { Slicer } from '../span-log-prune.js';
import type { AppendPin, AppendResult, LiveRun, PinRecord, PrunableRun, SpanLogEntry, StoredReceipt } from '../types.js';
import { allAcks, getAck, putAck } from './acks.js';
import { DATABASE_FILE, countRows, openDatabase, setMaxDbBytes } from './connection.js';
import { WalSync } from './wal-sync.js';
import { GroupCommit } from './group-commit.js';
import { Retention } from './retention.js';
import { RunReads } from './run-reads.js';
import { SqliteSpanLog } from './span-log.js';
import { prepareStatements, type SqliteShared, type Statements } from './statements.js';

export { DATABASE_FILE } from './connection.js';

export interface ReceiptStoreOptions {
  /** Gather appends into one transaction (default true). False: one transaction per append (for comparison). */
  groupCommit?: boolean;
  /** Longest wait after the first queued append before its group commits; 0 = end of the event-loop turn. Default 0. */
  groupCommitMaxDelayMs?: number;
  /** A group commits at once when it holds this many receipts. Default 2000. */
  groupCommitMaxBatch?: number;
  /** FULL (default): survives power loss (the WAL fdatasynced off the event loop before an answer). NORMAL: survives a killed process only. */
  synchronous?: 'FULL' | 'NORMAL';
  /** Cap on the database size in bytes; a commit that would grow past it fails like a full disk. */
  maxDbBytes?: number;
  /** Delay before retrying pins / verdict states / contracts whose commit failed. Default 1000 ms. */
  retryDelayMs?: number;
  /** Called after each group commit lands, with its duration in seconds and its number of receipts (for metrics). */
  onCommit?: (seconds: number, receipts: number) => void;
  /**
   * Checkpoints in a worker thread every this many ms (src/store/checkpointer.ts), none on the event loop but the
   * scrub's last few frames; unset: SQLite's auto-checkpoint in the committing call (the CLI, tests). `serve` sets it.
   */
  checkpointEveryMs?: number;
  /** Called when the checkpoint worker is lost (SQLite's auto-checkpoint is back on). */
  onCheckpointerLost?: (error: Error) => void;
}

export class ReceiptStore {
  /** A run's receipts answer synchronously (runReceipts), already committed: the engine reads back in place. */
  readonly synchronousReads = true;
  private readonly shared: SqliteShared;
  private readonly stmt: Statements;
  private readonly commits: GroupCommit;
  private readonly reads: RunReads;
  private readonly retention: Retention;
  private readonly log: SqliteSpanLog;

  private constructor(shared: SqliteShared, opts: ReceiptStoreOptions) {
    this.shared = shared;
    this.stmt = shared.stmt;
    this.commits = new GroupCommit(shared, { ...opts, walSync: opts.synchronous === 'NORMAL' ? null : new WalSync(`${shared.db.name}-wal`) });
    shared.flush = () => void this.commits.flush();
    this.reads = new RunReads(shared, (run) => this.commits.pendingVerdict(run));
    this.retention = new Retention(shared);
    this.log = new SqliteSpanLog(shared, this.retention);
  }

  /** Opens (creating if needed) the store in `dir`. */
  static open(dir: string, opts: ReceiptStoreOptions = {}): ReceiptStore {
    const db = openDatabase(dir);
    try {
      const shared: SqliteShared = { db, stmt: prepareStatements(db), rows: countRows(db), closed: false, flush: () => {}, writeHold: null };
      const store = new ReceiptStore(shared, opts);
      if (opts.maxDbBytes !== undefined) store.setMaxDbBytes(opts.maxDbBytes);
      if (opts.checkpointEveryMs) store.retention.checkpointInWorker(join(dir, DATABASE_FILE), opts.checkpointEveryMs, opts.onCheckpointerLost);
      return store;
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /** See GroupCommit.append: resolves only after the receipts are durably committed. */
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    return this.commits.append(items, spanLog, pins);
  }

  /** Resolves once everything queued so far (receipts, pins, verdict states, contracts) is committed. */
  sync(): Promise<void> {
    return this.commits.sync();
  }

  /** See GroupCommit.setFlushGate. */
  setFlushGate(gate: (() => Promise<void> | null) | null): void {
    this.commits.setFlushGate(gate);
  }

  /** runReceipts for the engine's asynchronous reader (src/audit/store.ts): the same rows, already committed. */
  readReceipts(run: string): Promise<Receipt[]> {
    return Promise.resolve(this.reads.runReceipts(run));
  }

  /** A run's receipts in insertion order, conflicting versions included (the engine's synchronous fast path). */
  runReceipts(run: string): Receipt[] {
    return this.reads.runReceipts(run);
  }

  iterateLiveRuns(pageSize = 1000, changeable = false): Generator<LiveRun> {
    return this.reads.iterateLiveRuns(pageSize, changeable);
  }

  settledRunCounts(): { contract: string; version: string; verdict: Verdict; runs: number }[] {
    return this.reads.settledRunCounts();
  }

  pinnedContents(): { hash: string; contract: string; version: string; content: string }[] {
    return this.reads.pinnedContents();
  }

  runPinnedTo(hash: string): string | null {
    return this.reads.runPinnedTo(hash);
  }

  liveRuns(): LiveRun[] {
    return this.reads.liveRuns();
  }

  runVerdict(run: string): { verdict: Verdict | null; settled: boolean } | null {
    return this.reads.runVerdict(run);
  }

  getRun(run: string): LiveRun | null {
    return this.reads.getRun(run);
  }

  prunableRuns(olderThanMs: number, now: number): { run: string; verdict: Verdict | null; contract: string; version: string }[] {
    return this.reads.prunableRuns(olderThanMs, now);
  }

  listRuns(f: { verdict?: string; contract?: string; oldest?: boolean; after?: { firstAt: number; run: string }; limit: number }): LiveRun[] {
    return this.reads.listRuns(f);
  }

  verdictCounts(f: { contract?: string } = {}): Record<string, number> {
    return this.reads.verdictCounts(f);
  }

  setPin(run: string, pin: Pin, contractHash: string): PinRecord {
    return this.commits.setPin(run, pin, contractHash);
  }

  getPin(run: string): PinRecord | null {
    return this.commits.getPin(run);
  }

  setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number): void {
    this.commits.setVerdictState(run, verdict, settled, updatedAt);
  }

  putAck(run: string, ack: AckRecord): void {
    putAck(this.stmt, run, ack);
  }

  getAck(run: string): AckRecord | null {
    return getAck(this.stmt, run);
  }

  acks(): { run: string; ack: AckRecord }[] {
    return allAcks(this.stmt);
  }

  putContractContent(hash: string, contract: string, version: string, content: string): void {
    this.commits.putContractContent(hash, contract, version, content);
  }

  getContractContent(hash: string): string | null {
    return this.commits.getContractContent(hash);
  }

  prune(olderThanMs: number, now: number): number {
    return this.retention.prune(olderThanMs, now);
  }

  pruneSliced(olderThanMs: number, now: number, slicer?: Slicer, retired?: (runs: readonly PrunableRun[]) => void): Promise<number> {
    return this.retention.pruneSliced(olderThanMs, now, slicer, retired);
  }

  /** Committed rows: receipts (conflicting versions included) and live runs. */
  counts(): { receipts: number; runs: number } {
    return { receipts: this.shared.rows.receipts, runs: this.shared.rows.runs };
  }

  commitStats(): { commits: number; failedCommits: number; walSyncs: number } {
    return this.commits.commitStats();
  }

  spanLog(): { seq: number; traceId: string; body: string }[] {
    return this.log.entries();
  }

  /**
   * Forgets the span log up to `seq`; resolves after the WAL scrub that follows (off the event loop with the checkpoint
   * worker). A scrub that fails (e.g. a full disk) is left for the next one: the rows are deleted either way.
   */
  deleteSpanLogUpTo(seq: number): Promise<void> {
    return this.log.deleteUpTo(seq).catch(() => {});
  }

  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, slicer?: Slicer): Promise<number> {
    return this.log.prune(before, stillPending, slicer);
  }

  spanLogHeld(): { traces: number; rows: number } {
    return this.log.held();
  }

  /** False after a failed commit, until a later commit succeeds. */
  healthy(): boolean {
    return this.commits.healthy();
  }

  /** Caps the database size (bytes, rounded down to whole pages); null lifts the cap. */
  setMaxDbBytes(bytes: number | null): void {
    setMaxDbBytes(this.shared.db, bytes);
  }

  /** Commits what is queued, then closes. Appends still queued are rejected if that commit fails. */
  close(): void {
    if (this.shared.closed) return;
    this.commits.closing();
    this.shared.closed = true;
    this.retention.close();
    this.shared.db.close();
  }
}
