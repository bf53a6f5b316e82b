/**
 * The shared store's span log: entries by partition, the records an owner adopts (their holder gone) or replays
 * (forwarded to it), fenced deletes, and the prune of this process's own held records (src/store/span-log-prune.ts).
 */
import { SpanLogPruner, type Slicer, type SpanLogRows } from '../span-log-prune.js';
import { FENCE_CTE } from './fence.js';
import { spanLogEntry, type Row } from './rows.js';
import type { PgShared } from './shared.js';

/** The span-log prune starts again from the first row every this many passes (about a minute at one pass in 5 s). */
const SPAN_LOG_RESCAN_PASSES = 12;

export class PgSpanLog {
  /** Prune only held span records of partitions whose lease this store holds (the coordinator, `--span-routing any`). */
  pruneHeldOfOwnedOnly = false;
  /** The span-log prune's cursor and held traces, per origin (this process's instance id). */
  private readonly spanLogPruners = new Map<string, SpanLogPruner>();

  constructor(private readonly s: PgShared) {}

  /** Span log entries of partitions `parts` (optionally of one origin), oldest first. */
  async spanLog(parts: readonly number[], origin?: string): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    if (parts.length === 0) return [];
    const values: unknown[] = [[...parts]];
    if (origin !== undefined) values.push(origin);
    const res = await this.s.pool.query(
      `SELECT seq, trace_id, origin, body FROM span_log WHERE part = ANY($1::int[]) ${origin !== undefined ? 'AND origin = $2' : ''} ORDER BY seq`,
      values,
    );
    return res.rows.map(spanLogEntry);
  }

  /**
   * Held (not forwarded) span records of partitions `parts` whose holder is gone: logged by a process (instance and
   * life) that is not alive, e.g. an instance killed, or one restarted under the same name (this one included).
   * After `afterSeq`, oldest first, at most `limit`. What a partition's owner adopts.
   */
  async orphanSpanLog(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    return (await this.orphanSpanLogPage(parts, afterSeq, limit, anyHolder)).entries;
  }

  /**
   * `orphanSpanLog` in one statement with, from the same snapshot, `head` (the highest span log seq, 0 when none) and
   * `live` (the live processes, instance and life, as one text): every seq up to a committed head is final (span log
   * rows are inserted by the append, under the ordering lock held to COMMIT), so a reader that got fewer than `limit`
   * rows has seen every adoptable record up to `head`; a record up to it becomes adoptable later only when its holder
   * stops being live, which changes `live` (issue 35, round 4: the adoption scan read every owned record twice a
   * second).
   */
  async orphanSpanLogPage(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ entries: { seq: number; traceId: string; origin: string; body: string }[]; head: number; live: string }> {
    if (parts.length === 0) return { entries: [], head: afterSeq, live: '' };
    // anyHolder (`--span-routing any`, where only a partition's owner holds its traces' records): every other process's
    // records are adopted, a live instance's that lost the partition too.
    const res = await this.s.pool.query({
      name: `ta_orphan_span_log_page_v1${anyHolder ? 'a' : ''}`,
      text: `SELECT h.head, h.live, s.seq, s.trace_id, s.origin, s.body
       FROM (SELECT (SELECT coalesce(max(seq), 0) FROM span_log) AS head,
               (SELECT coalesce(string_agg(i.id || '/' || i.life, ',' ORDER BY i.id, i.life), '') FROM instances i WHERE i.expires_at > now()) AS live) AS h
       LEFT JOIN LATERAL (
         SELECT s.seq, s.trace_id, s.origin, s.body FROM span_log s
         WHERE s.part = ANY($1::int[]) AND NOT s.forwarded AND s.seq > $2
           AND NOT (s.origin = $4 AND s.life = $5)
           ${anyHolder ? '' : 'AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = s.origin AND i.life = s.life AND i.expires_at > now())'}
         ORDER BY s.seq LIMIT $3
       ) AS s ON true
       ORDER BY s.seq`,
      values: [[...parts], afterSeq, limit, this.s.instance, this.s.life],
    });
    const rows = res.rows as Row[];
    const entries = rows.filter((r) => r.seq !== null && r.seq !== undefined).map(spanLogEntry);
    return { entries, head: Number(rows[0].head), live: rows[0].live as string };
  }

  /**
   * Span records forwarded (by any instance, this one included) to the owner of partitions `parts`, oldest first, at
   * most `limit`: the owner replays them into its own resolution, then deletes them.
   */
  async forwardedSpanLog(parts: readonly number[], limit: number): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    if (parts.length === 0) return [];
    const res = await this.s.pool.query({ name: 'ta_forwarded_span_log_v1', text: 'SELECT seq, trace_id, origin, body FROM span_log WHERE part = ANY($1::int[]) AND forwarded ORDER BY seq LIMIT $2', values: [[...parts], limit] });
    return res.rows.map(spanLogEntry);
  }

  /**
   * Forgets span log entries by seq, after the owner of their partitions replayed them: fenced, so an instance that
   * lost a partition meanwhile deletes nothing of it (its new owner reads them). Returns how many were deleted.
   */
  async deleteSpanLog(seqs: readonly number[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const [parts, epochs] = this.s.fence.arrays();
    const res = await this.s.pool.query(
      `WITH ${FENCE_CTE}
       DELETE FROM span_log WHERE seq = ANY($4::bigint[]) AND part IN (SELECT part FROM mine)`,
      [this.s.instance, parts, epochs, [...seqs]],
    );
    const n = res.rowCount ?? 0;
    this.s.fencedWrites += seqs.length - n;
    return n;
  }

  /**
   * Forgets the held span records this process logged, older than `before`, whose trace holds no pending work any
   * more. Forwarded records are never pruned here: only their reader deletes them. Returns the count. A cursor walk by
   * seq in pages (src/store/span-log-prune.ts), set-based deletes by seq, pausing when `slicer`'s budget is spent; it
   * rescans from the start every SPAN_LOG_RESCAN_PASSES passes (rows of concurrent transactions may commit out of seq
   * order), which costs the rows left then: the pending ones.
   */
  async pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, origin: string, slicer?: Slicer): Promise<number> {
    let pruner = this.spanLogPruners.get(origin);
    if (pruner === undefined) {
      if (this.spanLogPruners.size >= 16) this.spanLogPruners.clear();
      this.spanLogPruners.set(origin, (pruner = new SpanLogPruner(this.spanLogRowsOf(origin), SPAN_LOG_RESCAN_PASSES)));
    }
    return pruner.prune(before, stillPending, slicer);
  }

  /** The prune's two statements over this process's own held records (with pruneHeldOfOwnedOnly: of owned partitions). */
  private spanLogRowsOf(origin: string): SpanLogRows {
    // With pruneHeldOfOwnedOnly, only records of partitions this store holds leases of: those of a partition it lost
    // are adopted by the new owner, never pruned unread here.
    const owned = () => (this.pruneHeldOfOwnedOnly ? this.s.fence.parts() : null);
    return {
      after: async (after, limit) => {
        const parts = owned();
        if (parts !== null && parts.length === 0) return [];
        const res = await this.s.pool.query({
          name: `ta_span_log_prune_page_v1${parts !== null ? 'o' : ''}`,
          text: `SELECT seq, trace_id, logged_at FROM span_log WHERE seq > $1 AND origin = $2 AND life = $3 AND NOT forwarded ${parts !== null ? 'AND part = ANY($5::int[])' : ''} ORDER BY seq LIMIT $4`,
          values: parts !== null ? [after, origin, this.s.life, limit, parts] : [after, origin, this.s.life, limit],
        });
        return res.rows.map((r: Row) => ({ seq: Number(r.seq), traceId: r.trace_id as string, loggedAt: Number(r.logged_at) }));
      },
      remove: async (seqs) => {
        const parts = owned();
        if (parts !== null && parts.length === 0) return 0;
        const res = await this.s.pool.query({
          name: `ta_span_log_prune_delete_v1${parts !== null ? 'o' : ''}`,
          text: `DELETE FROM span_log WHERE seq = ANY($1::bigint[]) AND origin = $2 AND life = $3 AND NOT forwarded ${parts !== null ? 'AND part = ANY($4::int[])' : ''}`,
          values: parts !== null ? [[...seqs], origin, this.s.life, parts] : [[...seqs], origin, this.s.life],
        });
        return res.rowCount ?? 0;
      },
    };
  }
}
