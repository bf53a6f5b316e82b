/**
 * The embedded store's retention: settled runs past the retention deleted in short transactions, and the WAL scrubbed
 * after (copied into the database and truncated, so frames that held deleted rows are gone too); the WAL checkpoints
 * in a worker thread when `checkpointEveryMs` is set (src/store/checkpointer.ts).
 */
import { Checkpointer } from '../checkpointer.js';
import { UNSLICED, type Slicer } from '../span-log-prune.js';
import type { PrunableRun } from '../types.js';
import type { SqliteShared } from './statements.js';

/** Runs read per transaction by the retention prune (at most; see PRUNE_BATCH_MS). */
const PRUNE_RUNS_BATCH = 200;
/**
 * A retention prune transaction stops deleting once it has run this long (at least one run each): with secure_delete
 * a run's pages are overwritten, so a run's cost varies with its receipts and a count alone does not bound the slice.
 */
const PRUNE_BATCH_MS = 8;

export class Retention {
  /** Runs the WAL checkpoints off the event loop, when `checkpointEveryMs` is set. */
  private checkpointer: Checkpointer | null = null;

  constructor(private readonly shared: SqliteShared) {}

  /**
   * Deletes settled runs (receipts, pin, acknowledgement, state) last updated before `now - olderThanMs`, at most
   * PRUNE_RUNS_BATCH of them, oldest first (one transaction; pruneSliced does the rest). Returns how many.
   */
  prune(olderThanMs: number, now: number): number {
    const n = this.pruneBatch(now - olderThanMs, PRUNE_RUNS_BATCH, Infinity).runs;
    if (n > 0) this.scrubWal();
    return n;
  }

  /**
   * The retention prune in slices: transactions of at most PRUNE_RUNS_BATCH runs and PRUNE_BATCH_MS each, pausing
   * when `slicer`'s budget is spent; one WAL scrub at the end. Costs the runs that passed the retention since the last call.
   */
  async pruneSliced(olderThanMs: number, now: number, slicer: Slicer = UNSLICED, retired?: (runs: readonly PrunableRun[]) => void): Promise<number> {
    let total = 0;
    for (;;) {
      if (this.shared.writeHold) await this.shared.writeHold; // another job's scrub holds the write lock
      if (this.shared.closed) break;
      const batch = this.pruneBatch(now - olderThanMs, PRUNE_RUNS_BATCH, PRUNE_BATCH_MS, retired);
      total += batch.runs;
      if (batch.last) break;
      if (slicer.due()) await slicer.pause();
    }
    if (total === 0) return 0;
    await slicer.pause(); // the scrub in a slice of its own
    await this.scrub();
    return total;
  }

  /**
   * One transaction: at most `limit` settled runs updated before `cutoff`, oldest first (the runs_by_settled_age
   * index), stopping once it has run `budgetMs` (at least one run). `last`: no run past the cutoff is left.
   */
  private pruneBatch(cutoff: number, limit: number, budgetMs: number, retired?: (runs: readonly PrunableRun[]) => void): { runs: number; last: boolean } {
    this.shared.flush();
    const { db, stmt } = this.shared;
    const started = performance.now();
    const pruned = db.transaction(() => {
      let receipts = 0;
      const rows = stmt.prunable.all(cutoff, limit);
      let n = 0;
      while (n < rows.length && (n === 0 || performance.now() - started < budgetMs)) {
        const run = rows[n++].run;
        receipts += stmt.deleteReceipts.run(run).changes;
        stmt.deletePin.run(run);
        stmt.deleteAck.run(run);
        stmt.deleteRun.run(run);
      }
      return { runs: n, receipts, rows: rows.slice(0, n), last: n === rows.length && rows.length < limit };
    })();
    this.shared.rows.receipts -= pruned.receipts;
    this.shared.rows.runs -= pruned.runs;
    // Committed: the engine lets go of these runs in this same turn.
    if (retired && pruned.rows.length > 0) retired(pruned.rows.map((r) => ({ run: r.run, verdict: r.verdict, contract: r.contract ?? '', version: r.version ?? '' })));
    return { runs: pruned.runs, last: pruned.last };
  }

  /**
   * Copies the WAL into the database and truncates it to zero bytes, so the frames that held deleted rows are
   * gone from the WAL file too (with secure_delete, their pages in the database are zeroed). After pruning and at close.
   */
  scrubWal(): boolean {
    const [row] = this.shared.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return row?.busy === 0;
  }

  /**
   * The scrub from a job, off the event loop when the checkpoint worker runs: its PASSIVE checkpoint copies the WAL
   * first (writers go on), then its TRUNCATE checkpoint copies what came since, syncs the database and cuts the WAL to
   * zero bytes, while this thread holds its own writes (`writeHold`: group commits queue, the prunes' writes wait), so
   * no writer here sleeps in SQLite's busy handler on the event loop. A truncate that could not complete (busy, or the
   * worker gone) is done here, as without a worker. Scrubs never overlap: a second caller waits for the first.
   */
  async scrub(): Promise<void> {
    if (this.scrubbing) return this.scrubbing;
    this.scrubbing = this.scrubOnce().finally(() => (this.scrubbing = null));
    return this.scrubbing;
  }

  private scrubbing: Promise<void> | null = null;

  private async scrubOnce(): Promise<void> {
    const cp = this.checkpointer;
    if (cp?.running) {
      await cp.passive();
      if (this.shared.closed) return;
      let release!: () => void;
      this.shared.writeHold = new Promise<void>((r) => (release = r));
      let done: boolean;
      try {
        done = await cp.truncate();
      } finally {
        this.shared.writeHold = null;
        release();
      }
      this.truncatesInWorker += done ? 1 : 0;
      if (done || this.shared.closed) return;
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      await this.checkpointer?.passive();
      if (this.shared.closed || this.scrubWal()) return;
    }
  }

  /** Scrubs whose truncating checkpoint ran in the worker (tests). */
  truncatesInWorker = 0;

  /** WAL checkpoints in a worker thread: SQLite's auto-checkpoint off while it runs, on again if it is lost. */
  checkpointInWorker(file: string, everyMs: number, onLost?: (error: Error) => void): void {
    this.shared.db.pragma('wal_autocheckpoint = 0');
    this.checkpointer = new Checkpointer(file, everyMs, (e) => {
      if (!this.shared.closed) this.shared.db.pragma('wal_autocheckpoint = 1000');
      onLost?.(e);
    });
  }

  /** At close: the worker stopped, then the WAL scrubbed once more (a checkpoint that cannot run leaves it for the next open). */
  close(): void {
    this.checkpointer?.close();
    try {
      this.scrubWal();
    } catch {
      // A checkpoint that cannot run (e.g. disk full) leaves the WAL for the next open; closing still proceeds.
    }
  }
}
