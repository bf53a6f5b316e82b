/**
 * The embedded store's span log (spans waiting for their parent, replayed after a restart): read, forgotten up to a
 * sequence number once replayed, and pruned by age when their trace holds no pending work (src/store/span-log-prune.ts).
 */
import { SpanLogPruner, type Slicer } from '../span-log-prune.js';
import type { Retention } from './retention.js';
import type { SqliteShared } from './statements.js';

/** Least time between two WAL scrubs after sliced span-log prunes. */
const SPAN_LOG_SCRUB_MS = 60_000;

export class SqliteSpanLog {
  private readonly pruner: SpanLogPruner;
  private scrubbedAt = 0;

  constructor(private readonly shared: SqliteShared, private readonly retention: Retention) {
    const { stmt } = shared;
    // The span-log prune walks the table by its primary key from a cursor (src/store/span-log-prune.ts).
    this.pruner = new SpanLogPruner({
      after: (after, limit) => shared.closed ? [] : stmt.spanLogAfter.all(after, limit).map((r) => ({ seq: r.seq, traceId: r.trace_id, loggedAt: r.logged_at })),
      remove: (seqs) => (shared.closed ? 0 : stmt.deleteSpanLogSeqs.run(JSON.stringify(seqs)).changes),
      lastSeq: () => (shared.closed ? 0 : (stmt.spanLogLast.get()?.seq ?? 0)),
      // Another job's scrub may hold the write lock (the checkpoint worker truncating): its DELETE waits for it.
      writable: () => shared.writeHold,
    });
  }

  /** The span log, oldest first (replayed through the ingest pipeline on start). */
  entries(): { seq: number; traceId: string; body: string }[] {
    this.shared.flush();
    return (this.shared.db.prepare('SELECT seq, trace_id, body FROM span_log ORDER BY seq').all() as { seq: number; trace_id: string; body: string }[]).map((r) => ({
      seq: r.seq,
      traceId: r.trace_id,
      body: r.body,
    }));
  }

  /**
   * Forget span log entries up to `seq` (after they were replayed and re-logged where still pending). The scrub that
   * follows runs off the event loop when the checkpoint worker does (the returned promise; a failure is the caller's).
   */
  deleteUpTo(seq: number): Promise<void> {
    this.shared.flush();
    const deleted = this.shared.db.prepare('DELETE FROM span_log WHERE seq <= ?').run(seq).changes > 0;
    this.pruner.forget(seq);
    return deleted ? this.retention.scrub() : Promise.resolve();
  }

  /**
   * Forget span log entries older than `before` whose trace holds no pending work any more. Returns the count. Costs
   * the rows aged since the last call (and the traces held pending), in slices of `slicer`'s budget: see
   * src/store/span-log-prune.ts.
   */
  async prune(before: number, stillPending: (traceId: string) => boolean, slicer?: Slicer): Promise<number> {
    const n = await this.pruner.prune(before, stillPending, slicer);
    if (n === 0) return 0;
    // The scrub (a checkpoint that copies the WAL into the database and truncates it, with fsyncs) in a slice of its
    // own, and from the periodic job at most once a minute (the span log holds allow-listed fields only); the
    // retention prune and close scrub every time.
    if (slicer) {
      if (Date.now() - this.scrubbedAt < SPAN_LOG_SCRUB_MS) return n;
      await slicer.pause();
    }
    await this.retention.scrub();
    this.scrubbedAt = Date.now();
    return n;
  }

  /** Span-log rows the prune passed over because their trace was pending (the job list's gauge). */
  held(): { traces: number; rows: number } {
    return this.pruner.heldCount();
  }
}
