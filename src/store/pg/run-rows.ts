/**
 * The rows an owner writes in the shared store: runs' verdict states (fenced), operators' acknowledgements, and the
 * retention prune of settled runs (fenced, under the ordering lock).
 */
import type { AckRecord, Verdict } from '../../core/types.js';
import { LOG_LOCK } from './schema.js';
import { FENCE_CTE } from './fence.js';
import type { AckSince, Row } from './rows.js';
import type { PrunableRun } from '../types.js';
import { inTransaction, type PgShared } from './shared.js';

/** Told of every verdict-state write: see PgStore.onVerdictWrite. */
export type VerdictWriteObserver = { taken(runs: readonly string[]): unknown; landed(token: unknown, written: ReadonlySet<string> | null): void };

export class PgRunRows {
  onVerdictWrite: VerdictWriteObserver | null = null;

  constructor(private readonly s: PgShared) {}

  /**
   * Records runs' latest verdicts in one statement (the last row per run wins; updated_at only grows), each with
   * `listed`, the verdict as the list views show it (compact JSON; null when not given: a stale one is never kept).
   * Fenced: only rows of partitions whose lease this instance holds (at the epoch it holds, unexpired) are written.
   * Returns how many rows the fence refused.
   */
  async setVerdictStates(rows: readonly { run: string; verdict: Verdict; settled: boolean; updatedAt: number; listed?: string | null }[]): Promise<number> {
    if (rows.length === 0) return 0;
    const latest = new Map<string, { verdict: Verdict; settled: boolean; updatedAt: number; listed?: string | null }>();
    for (const r of rows) latest.set(r.run, r);
    const runs = [...latest.keys()];
    const [parts, epochs] = this.s.fence.arrays();
    const token = this.onVerdictWrite?.taken(runs);
    let res;
    try {
      // In run order, as appends touch runs, so the two never wait on each other's row locks in a cycle.
      res = await this.s.pool.query({
        name: 'ta_verdict_states_v2',
        text: `WITH ${FENCE_CTE}
         INSERT INTO runs (run, part, first_at, updated_at, verdict, settled, listed)
         SELECT run, part, updated_at, updated_at, verdict, settled, listed
         FROM unnest($4::text[], $5::int[], $6::bigint[], $7::text[], $8::boolean[], $9::text[]) AS u(run, part, updated_at, verdict, settled, listed)
         WHERE part IN (SELECT part FROM mine)
         ORDER BY run
         ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, settled = excluded.settled, listed = excluded.listed,
           updated_at = GREATEST(runs.updated_at, excluded.updated_at)
         RETURNING run`,
        values: [
          this.s.instance,
          parts,
          epochs,
          runs,
          runs.map((r) => this.s.partitionOf(r)),
          runs.map((r) => latest.get(r)!.updatedAt),
          runs.map((r) => latest.get(r)!.verdict),
          runs.map((r) => latest.get(r)!.settled),
          runs.map((r) => latest.get(r)!.listed ?? null),
        ],
      });
    } catch (e) {
      this.onVerdictWrite?.landed(token, null);
      throw e;
    }
    const written = new Set<string>(res.rows.map((r: Row) => r.run as string));
    this.onVerdictWrite?.landed(token, written);
    const refused = runs.length - written.size;
    this.s.fencedWrites += refused;
    return refused;
  }

  /** Records that an operator acknowledged `verdict` of `run` (the latest acknowledgement wins). */
  async putAck(run: string, ack: AckRecord): Promise<void> {
    await inTransaction(this.s.pool, async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(${LOG_LOCK})`);
      await client.query(
        `INSERT INTO acks (run, part, verdict, acked_at, seq, acked_by, reason) VALUES ($1, $2, $3, $4, nextval('acks_seq'), $5, $6)
         ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, acked_at = excluded.acked_at, seq = excluded.seq, acked_by = excluded.acked_by, reason = excluded.reason`,
        [run, this.s.partitionOf(run), ack.verdict, ack.at, ack.by ?? null, ack.reason ?? null],
      );
    });
  }

  /** The latest acknowledgement of a run, from any instance. */
  async getAck(run: string): Promise<AckRecord | null> {
    const res = await this.s.pool.query('SELECT verdict, acked_at, acked_by, reason FROM acks WHERE run = $1', [run]);
    const r = res.rows[0] as Row | undefined;
    return r ? { verdict: r.verdict as Verdict, at: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null } : null;
  }

  /** Acknowledgements of partitions `parts` written after `afterSeq`, in seq order. */
  async acksSince(afterSeq: number, parts: readonly number[]): Promise<AckSince[]> {
    if (parts.length === 0) return [];
    const res = await this.s.pool.query({ name: 'ta_acks_since_v1', text: 'SELECT seq, run, verdict, acked_at, acked_by, reason FROM acks WHERE part = ANY($1::int[]) AND seq > $2 ORDER BY seq LIMIT 10000', values: [[...parts], afterSeq] });
    return res.rows.map((r: Row) => ({ seq: Number(r.seq), run: r.run as string, verdict: r.verdict as string, ackedAt: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null }));
  }

  /**
   * Deletes settled runs of partitions `parts` last updated before `now - olderThanMs`: receipts, pin and run row,
   * in transactions of at most 500 runs under the ordering lock (so no append of the same run interleaves).
   * Returns how many runs.
   */
  async prune(olderThanMs: number, now: number, parts: readonly number[], pruned?: (runs: readonly PrunableRun[]) => void): Promise<number> {
    if (parts.length === 0) return 0;
    const cutoff = now - olderThanMs;
    const batch = 500;
    let total = 0;
    for (;;) {
      const [fparts, epochs] = this.s.fence.arrays();
      const rows = await inTransaction(this.s.pool, async (client) => {
        await client.query(`SELECT pg_advisory_xact_lock(${LOG_LOCK})`);
        const res = await client.query(
          `WITH ${FENCE_CTE}, gone AS (
             DELETE FROM runs WHERE run IN (
               SELECT run FROM runs WHERE part = ANY($4::int[]) AND part IN (SELECT part FROM mine) AND settled AND updated_at < $5 LIMIT $6 FOR UPDATE
             ) RETURNING run, verdict
           ), pins_gone AS (
             DELETE FROM pins WHERE run IN (SELECT run FROM gone) RETURNING run, contract, version
           ), receipts_gone AS (
             DELETE FROM receipts WHERE run IN (SELECT run FROM gone)
           ), acks_gone AS (
             DELETE FROM acks WHERE run IN (SELECT run FROM gone)
           )
           SELECT g.run, g.verdict, p.contract, p.version FROM gone g LEFT JOIN pins_gone p ON p.run = g.run`,
          [this.s.instance, fparts, epochs, [...parts], cutoff, batch],
        );
        return res.rows as { run: string; verdict: Verdict | null; contract: string | null; version: string | null }[];
      });
      const n = rows.length;
      // Committed: the runs each leave memory, or the topology_runs count they kept, at the instance holding them.
      if (n > 0) pruned?.(rows.map((r) => ({ run: r.run, verdict: r.verdict, contract: r.contract ?? '', version: r.version ?? '' })));
      total += n;
      if (n < batch) return total;
    }
  }
}
