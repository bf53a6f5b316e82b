/**
 * The tail of the shared store: committed receipts in commit (seq) order, read by an owner's coordinator every
 * --tail-every (100 ms) to fold what other instances stored for the runs it holds, with the acknowledgements made
 * anywhere. Its statements run on the store's pool.
 */
import type { Receipt } from '../core/types.js';
import { parseBody, type AckSince, type PgStore, type Row } from '../store/pg-store.js';

export interface TailedReceipt {
  seq: number;
  receipt: Receipt;
  variant: number;
  source: string;
  origin: string;
  receivedAt: number;
}

/** A tailed receipt row (seq, run, event, variant, body, source, origin, received_at) as the tail answers it. */
export function tailedReceiptOf(row: Row): TailedReceipt {
  return {
    seq: Number(row.seq),
    receipt: parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(row.run)}, event ${JSON.stringify(row.event)})`),
    variant: row.variant as number,
    source: row.source as string,
    origin: row.origin as string,
    receivedAt: Number(row.received_at),
  };
}

export class PgTail {
  constructor(private readonly store: PgStore) {}

  /**
   * Committed receipts with `seq > afterSeq`, in seq order, at most `limit`; only of partitions `parts` and not
   * appended by `excludeOrigin` when given. A tailer may also advance its position to a `headSeq()` read before a
   * call that returned fewer than `limit` rows: every seq up to a committed head is final.
   */
  async tail(afterSeq: number, limit: number, parts?: readonly number[], excludeOrigin?: string): Promise<TailedReceipt[]> {
    const where = ['seq > $1'];
    const values: unknown[] = [afterSeq, limit];
    if (parts !== undefined) {
      values.push([...parts]);
      where.push(`part = ANY($${values.length}::int[])`);
    }
    if (excludeOrigin !== undefined) {
      values.push(excludeOrigin);
      where.push(`origin <> $${values.length}`);
    }
    // Named (parsed and planned once per connection): the coordinator tails every 100 ms.
    const res = await this.store.pool.query({
      name: `ta_tail_v1_${parts !== undefined ? 'p' : ''}${excludeOrigin !== undefined ? 'o' : ''}`,
      text: `SELECT seq, run, event, variant, body, source, origin, received_at FROM receipts WHERE ${where.join(' AND ')} ORDER BY seq LIMIT $2`,
      values,
    });
    return res.rows.map(tailedReceiptOf);
  }

  /**
   * One round trip for an owner's tail read (ClusterCoordinator, every 100 ms): `acksSince(ackAfter, parts)`,
   * `tail(afterSeq, limit, parts, excludeOrigin)` and `headSeq()` as one statement, answered from one snapshot (the
   * acknowledgements and the head as values on every row; a row with no receipt when none is new). When fewer than
   * `limit` receipts come back, every receipt up to `head` that the tail would return is among them (same snapshot;
   * every seq up to a committed head is final), so the tailer may move its position to `head`: the next read does not
   * walk again over the rows it filtered out (its own, other partitions'). Without that, a lone instance's tail read
   * every row it had stored since it started, ten times a second (issue 35, round 3).
   */
  async tailWithAcks(
    afterSeq: number,
    limit: number,
    parts: readonly number[],
    excludeOrigin: string,
    ackAfter: number,
  ): Promise<{ receipts: TailedReceipt[]; acks: AckSince[]; head: number }> {
    if (parts.length === 0) return { receipts: [], acks: [], head: afterSeq };
    const res = await this.store.pool.query({
      name: 'ta_tail_acks_v2',
      text: `SELECT a.acks, a.head, r.seq, r.run, r.event, r.variant, r.body, r.source, r.origin, r.received_at
       FROM (SELECT coalesce((SELECT json_agg(x ORDER BY x.seq) FROM (
           SELECT seq, run, verdict, acked_at, acked_by, reason FROM acks WHERE part = ANY($3::int[]) AND seq > $5 ORDER BY seq LIMIT 10000
         ) AS x), '[]'::json) AS acks, (SELECT coalesce(max(seq), 0) FROM receipts) AS head) AS a
       LEFT JOIN LATERAL (
         SELECT seq, run, event, variant, body, source, origin, received_at FROM receipts
         WHERE seq > $1 AND part = ANY($3::int[]) AND origin <> $4 ORDER BY seq LIMIT $2
       ) AS r ON true
       ORDER BY r.seq`,
      values: [afterSeq, limit, [...parts], excludeOrigin, ackAfter],
    });
    const rows = res.rows as Row[];
    const acks = ((rows[0]?.acks ?? []) as Row[]).map((r) => ({ seq: Number(r.seq), run: r.run as string, verdict: r.verdict as string, ackedAt: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null }));
    const receipts: TailedReceipt[] = [];
    for (const row of rows) if (row.seq !== null && row.seq !== undefined) receipts.push(tailedReceiptOf(row));
    return { receipts, acks, head: Number(rows[0].head) };
  }

  /** The highest committed seq (0 when there is none). */
  async headSeq(): Promise<number> {
    const res = await this.store.pool.query('SELECT coalesce(max(seq), 0) AS head FROM receipts');
    return Number(res.rows[0].head);
  }
}
