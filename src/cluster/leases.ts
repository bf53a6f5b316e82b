/**
 * Leases of the shared store (the `leases` table): one row per hash partition of run ids; an owner renews before
 * `expires_at` (database clock `now()`); an expired lease is lost and any instance may claim it (FOR UPDATE SKIP
 * LOCKED). Every claim raises the lease's `epoch`, which the fence (fence.ts) follows. The statements run on the
 * store's pool.
 */
import type { PgStore, Row } from '../store/pg-store.js';
import type { Fence } from './fence.js';

export interface LeaseRow {
  part: number;
  owner: string | null;
  /** Milliseconds until the lease expires (negative: expired), by the database clock. */
  expiresInMs: number;
}

export class PgLeases {
  constructor(
    private readonly store: PgStore,
    private readonly fence: Fence,
  ) {}

  /** The partitions leased to another live instance that is at its live limit (ascending). */
  async fullPartitions(): Promise<number[]> {
    const res = await this.store.pool.query({
      name: 'ta_full_partitions_v1',
      text: `SELECT l.part FROM leases l JOIN instances i ON i.id = l.owner
       WHERE i.at_limit AND i.expires_at > now() AND l.expires_at > now() AND l.owner <> $1 ORDER BY l.part`,
      values: [this.store.instance],
    });
    return res.rows.map((r: Row) => r.part as number);
  }

  /** The instances whose heartbeat has not expired (this one included once it has beaten). */
  async liveInstances(): Promise<string[]> {
    const res = await this.store.pool.query('SELECT id FROM instances WHERE expires_at > now() ORDER BY id');
    return res.rows.map((r: Row) => r.id as string);
  }

  /** Extends this instance's leases that have not expired; returns the partitions it still holds (ascending). */
  async renewLeases(ttlMs: number): Promise<number[]> {
    const res = await this.store.pool.query({
      name: 'ta_renew_v1',
      text: `UPDATE leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
       WHERE owner = $1 AND expires_at > now() RETURNING part, epoch`,
      values: [this.store.instance, Math.round(ttlMs)],
    });
    const held = new Set<number>();
    for (const r of res.rows as Row[]) {
      held.add(r.part as number);
      this.fence.hold(r.part as number, Number(r.epoch));
    }
    this.fence.keepOnly(held);
    return [...held].sort((a, b) => a - b);
  }

  /** Claims up to `max` partitions that are free or whose lease expired; returns those newly claimed (ascending). */
  async claimLeases(max: number, ttlMs: number): Promise<number[]> {
    if (max <= 0) return [];
    const res = await this.store.pool.query(
      `WITH free AS (
         SELECT part FROM leases WHERE owner IS NULL OR expires_at <= now()
         ORDER BY part LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       UPDATE leases l SET owner = $1, expires_at = now() + $3::bigint * interval '1 millisecond', epoch = l.epoch + 1
       FROM free WHERE l.part = free.part RETURNING l.part, l.epoch`,
      [this.store.instance, Math.floor(max), Math.round(ttlMs)],
    );
    for (const r of res.rows as Row[]) this.fence.claim(r.part as number, Number(r.epoch));
    return res.rows.map((r: Row) => r.part as number).sort((a, b) => a - b);
  }

  /** Gives up this instance's leases of `parts` (another instance may claim them at once). */
  async releaseLeases(parts: readonly number[]): Promise<void> {
    if (parts.length === 0) return;
    this.fence.drop(parts);
    await this.store.pool.query(
      'UPDATE leases SET owner = NULL, expires_at = now() WHERE owner = $1 AND part = ANY($2::int[])',
      [this.store.instance, [...parts]],
    );
  }

  /** Every partition's owner and time to expiry (database clock). */
  async leaseTable(): Promise<LeaseRow[]> {
    const res = await this.store.pool.query(
      `SELECT part, owner, (extract(epoch FROM (expires_at - now())) * 1000)::float8 AS ms FROM leases ORDER BY part`,
    );
    return res.rows.map((r: Row) => ({ part: r.part as number, owner: (r.owner as string | null) ?? null, expiresInMs: Number(r.ms) }));
  }
}
