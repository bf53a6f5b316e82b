/**
 * The span-log prune (issue 44): forgets logged spans of traces that hold no pending work any more, at a cost in
 * proportion to what changed since the last pass, never to what is stored.
 *
 * The span log is appended in `seq` order (SQLite: the rowid; PostgreSQL: an identity) at about the time each row is
 * logged, so a cursor walks it by its primary key: each pass reads the rows logged since the cursor that are now older
 * than the cut (it stops at the first younger one), in pages. A row whose trace is done is deleted (by seq, set-based:
 * one statement per slice, at most PRUNE_DELETE_ROWS rows); a row whose trace is still pending is *held*: remembered in memory by trace, so a later pass
 * deletes it once its trace is done without reading the table again. A pass costs the rows aged since the last one plus
 * the traces held (at most the pending traces, bounded by --max-pending-spans), and runs in slices that yield.
 *
 * A store whose rows may become visible out of seq order (PostgreSQL: concurrent transactions) rescans from the start
 * every `rescanEvery` passes; the rows left by then are only the held and the young (pruned rows are gone), so the
 * rescan too costs what is pending, not what was ever logged.
 */

/** One slice's budget, given by the periodic scheduler (src/server/periodic.ts). */
export interface Slicer {
  /** True once the current slice has used its budget: the job should `pause()` at its next safe point. */
  due(): boolean;
  /** Ends the slice: resolves on a later turn of the event loop (rejects when the scheduler is stopping). */
  pause(): Promise<void>;
}

/** A slicer that never asks for a pause: the whole job in one go (tests, the CLI, a store closing). */
export const UNSLICED: Slicer = { due: () => false, pause: () => Promise.resolve() };

/** A span_log row as the prune reads it: its key, trace and age only (never the body). */
export interface SpanLogKey {
  seq: number;
  traceId: string;
  loggedAt: number;
}

/** The two statements a store gives the prune: a page of rows after a seq, and a delete by seqs. */
export interface SpanLogRows {
  /** Rows with seq > `after` the prune may delete (e.g. of this process), in seq order, at most `limit`. */
  after(after: number, limit: number): SpanLogKey[] | Promise<SpanLogKey[]>;
  /** Deletes the rows with these seqs; returns how many went. */
  remove(seqs: readonly number[]): number | Promise<number>;
  /**
   * The greatest seq left (0: none), read at once after each `remove` (synchronously, before anything else inserts):
   * SQLite gives a new row the greatest rowid left plus one, so once the rows at the end are deleted a new row may
   * take a seq the cursor has passed; the cursor is kept at or below it. A store whose seqs are never reused omits it.
   */
  lastSeq?(): number;
  /** A promise to wait for before a DELETE (another job holds the write lock meanwhile), or null: write now. */
  writable?(): Promise<void> | null;
}

/** Rows read per page (one statement each); a slice reads pages until its budget is spent. */
export const PRUNE_PAGE_ROWS = 512;
/**
 * Most rows one DELETE removes (each DELETE is a commit, an fsync on SQLite; with secure_delete it overwrites the rows'
 * pages, so a DELETE costs its rows' bytes): a slice that is due pauses between two DELETEs.
 */
export const PRUNE_DELETE_ROWS = 1024;

interface Held {
  seqs: number[];
  loggedAt: number[];
}

export class SpanLogPruner {
  private cursor = 0;
  private passes = 0;
  /** Rows passed over because their trace was pending, by trace. */
  private readonly held = new Map<string, Held>();

  constructor(
    private readonly rows: SpanLogRows,
    private readonly rescanEvery = 0,
  ) {}

  /** Traces and rows held (pending when the cursor passed them), for the job list's gauge. */
  heldCount(): { traces: number; rows: number } {
    let rows = 0;
    for (const h of this.held.values()) rows += h.seqs.length;
    return { traces: this.held.size, rows };
  }

  /** Forget what was held (the rows were deleted by a replay); the next pass starts from the cursor as before. */
  forget(uptoSeq: number): void {
    for (const [t, h] of this.held) {
      const keep = h.seqs.map((s, i) => (s > uptoSeq ? i : -1)).filter((i) => i >= 0);
      if (keep.length === 0) this.held.delete(t);
      else this.held.set(t, { seqs: keep.map((i) => h.seqs[i]), loggedAt: keep.map((i) => h.loggedAt[i]) });
    }
    if (this.cursor < uptoSeq) this.cursor = uptoSeq;
    this.keepBelowLast();
  }

  private keepBelowLast(): void {
    if (this.rows.lastSeq) this.cursor = Math.min(this.cursor, this.rows.lastSeq());
  }

  /** One pass: deletes the rows older than `before` whose trace `stillPending` no longer keeps. Returns the count. */
  async prune(before: number, stillPending: (traceId: string) => boolean, slicer: Slicer = UNSLICED): Promise<number> {
    this.passes++;
    if (this.rescanEvery > 0 && this.passes % this.rescanEvery === 0) {
      this.cursor = 0;
      this.held.clear();
    }
    let deleted = 0;
    const doomed: number[] = [];
    /** Deletes the doomed rows, PRUNE_DELETE_ROWS per statement, pausing between statements once the slice is due. */
    const flush = async () => {
      while (doomed.length > 0) {
        const held = this.rows.writable?.();
        if (held) await held;
        const removed = this.rows.remove(doomed.splice(0, PRUNE_DELETE_ROWS));
        this.keepBelowLast();
        deleted += await removed;
        if (doomed.length > 0 && slicer.due()) await slicer.pause();
      }
    };
    // The held traces that are done now.
    for (const [traceId, h] of this.held) {
      if (stillPending(traceId)) continue;
      const young = { seqs: [] as number[], loggedAt: [] as number[] };
      h.seqs.forEach((s, i) => {
        if (h.loggedAt[i] < before) doomed.push(s);
        else (young.seqs.push(s), young.loggedAt.push(h.loggedAt[i]));
      });
      if (young.seqs.length) this.held.set(traceId, young);
      else this.held.delete(traceId);
      if (doomed.length >= PRUNE_DELETE_ROWS) await flush();
      if (slicer.due()) {
        await flush();
        await slicer.pause();
      }
    }
    // The rows logged since the cursor that are now old enough.
    const verdict = new Map<string, boolean>();
    for (;;) {
      const page = await this.rows.after(this.cursor, PRUNE_PAGE_ROWS);
      let aged = 0;
      for (const row of page) {
        if (row.loggedAt >= before) break;
        aged++;
        this.cursor = row.seq;
        let pending = verdict.get(row.traceId);
        if (pending === undefined) verdict.set(row.traceId, (pending = stillPending(row.traceId)));
        if (!pending) {
          doomed.push(row.seq);
          continue;
        }
        const h = this.held.get(row.traceId);
        if (h) (h.seqs.push(row.seq), h.loggedAt.push(row.loggedAt));
        else this.held.set(row.traceId, { seqs: [row.seq], loggedAt: [row.loggedAt] });
      }
      if (aged < page.length || page.length < PRUNE_PAGE_ROWS) break;
      // One DELETE (one commit: an fsync) per slice, or per PRUNE_DELETE_ROWS rows, not per page.
      if (doomed.length >= PRUNE_DELETE_ROWS) await flush();
      if (slicer.due()) {
        await flush();
        await slicer.pause();
      }
    }
    await flush();
    return deleted;
  }
}
