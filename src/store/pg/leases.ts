/**
 * Leases of the shared store: one row per hash partition of run ids; an owner renews before `expires_at` (database
 * clock `now()`); an expired lease is lost and any instance may claim it (FOR UPDATE SKIP LOCKED). Every claim raises
 * the lease's `epoch`, which the fence (src/store/pg/fence.ts) follows. (To move to src/cluster/ with leased
 * ownership as a strategy, issue 48.)
 */
import type { LeaseRow, Row } from './rows.js';
import type { PgShared } from './shared.js';

export class PgLeases {
  constructor(private readonly s: PgShared) {}

  /** The partitions leased to another live instance that is at its live limit (ascending). */
  async fullPartitions(): Promise<number[]> {
    const res = await this.s.pool.query({
      name: 'ta_full_partitions_v1',
      text: `SELECT l.part FROM leases l JOIN instances i ON i.id = l.owner
       WHERE i.at_limit AND i.expires_at > now() AND l.expires_at > now() AND l.owner <> $1 ORDER BY l.part`,
      values: [this.s.instance],
    });
    return res.rows.map((r: Row) => r.part as number);
  }

  /** The instances whose heartbeat has not expired (this one included once it has beaten). */
  async liveInstances(): Promise<string[]> {
    const res = await this.s.pool.query('SELECT id FROM instances WHERE expires_at > now() ORDER BY id');
    return res.rows.map((r: Row) => r.id as string);
  }

  /** Extends this instance's leases that have not expired; returns the partitions it still holds (ascending). */
  async renewLeases(ttlMs: number): Promise<number[]> {
    const res = await this.s.pool.query({
      name: 'ta_renew_v1',
      text: `UPDATE leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
       WHERE owner = $1 AND expires_at > now() RETURNING part, epoch`,
      values: [this.s.instance, Math.round(ttlMs)],
    });
    const held = new Set<number>();
    for (const r of res.rows as Row[]) {
      held.add(r.part as number);
      this.s.fence.hold(r.part as number, Number(r.epoch));
    }
    this.s.fence.keepOnly(held);
    return [...held].sort((a, b) => a - b);
  }

  /** Claims up to `max` partitions that are free or whose lease expired; returns those newly claimed (ascending). */
  async claimLeases(max: number, ttlMs: number): Promise<number[]> {
    if (max <= 0) return [];
    const res = await this.s.pool.query(
      `WITH free AS (
         SELECT part FROM leases WHERE owner IS NULL OR expires_at <= now()
         ORDER BY part LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       UPDATE leases l SET owner = $1, expires_at = now() + $3::bigint * interval '1 millisecond', epoch = l.epoch + 1
       FROM free WHERE l.part = free.part RETURNING l.part, l.epoch`,
      [this.s.instance, Math.floor(max), Math.round(ttlMs)],
    );
    for (const r of res.rows as Row[]) this.s.fence.claim(r.part as number, Number(r.epoch));
    return res.rows.map((r: Row) => r.part as number).sort((a, b) => a - b);
  }

  /** Gives up this instance's leases of `parts` (another instance may claim them at once). */
  async releaseLeases(parts: readonly number[]): Promise<void> {
    if (parts.length === 0) return;
    this.s.fence.drop(parts);
    await this.s.pool.query(
      'UPDATE leases SET owner = NULL, expires_at = now() WHERE owner = $1 AND part = ANY($2::int[])',
      [this.s.instance, [...parts]],
    );
  }

  /** Every partition's owner and time to expiry (database clock). */
  async leaseTable(): Promise<LeaseRow[]> {
    const res = await this.s.pool.query(
      `SELECT part, owner, (extract(epoch FROM (expires_at - now())) * 1000)::float8 AS ms FROM leases ORDER BY part`,
    );
    return res.rows.map((r: Row) => ({ part: r.part as number, owner: (r.owner as string | null) ?? null, expiresInMs: Number(r.ms) }));
  }
}
