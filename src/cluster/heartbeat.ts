/**
 * The cluster's heartbeat in the shared store (the `instances` table): this instance alive (by the database clock),
 * the trust configuration it joins with, and the coordinator's renewal step (heartbeat, lease renewal and the full
 * partitions in one statement) on a connection of its own. The store follows its outcome: a heartbeat with no answer
 * replaces the store's pool and refuses appends until one lands (PgStore.beatOverdue, beatLanded).
 */
import type pg from 'pg';
import { KEEPALIVE_IDLE_MS, MIGRATION_LOCK, destroyClient, inTransaction, isReadTimeout, type PgStore, type Row } from '../store/pg-store.js';
import type { Fence } from './fence.js';

/** An instance whose trust configuration differs from the live cluster's (PgHeartbeat.joinTrust). */
export class TrustMismatchError extends Error {}

const noop = (): void => {};

/**
 * The heartbeat as CTEs (`up`, `forgotten`) of one statement: this instance ($1) alive for $2 ms by the database
 * clock, at its live limit or not ($3), in its life $4; instances silent for a day forgotten. Used by heartbeat and beat.
 */
const HEARTBEAT_CTE = `up AS (
         INSERT INTO instances (id, seen_at, expires_at, at_limit, life) VALUES ($1, now(), now() + $2::bigint * interval '1 millisecond', $3, $4)
         ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at, at_limit = excluded.at_limit, life = excluded.life
         RETURNING id
       ), forgotten AS (
         DELETE FROM instances WHERE expires_at < now() - interval '1 day' AND id <> $1
       )`;

export class PgHeartbeat {
  private readonly beatTimeoutMs: number;
  /** Pools replaced after a heartbeat got no answer (their connections may all be dead without a reset). */
  private poolsReplaced = 0;
  private poolReplacedInOutage = false;
  /** The heartbeat's own connection (never waits for a pool slot behind appends and reads); replaced after any failure. */
  private beatClient: pg.Client | null = null;

  /** `beatTimeoutMs`: the deadline of a heartbeat (`beat`, on its own connection): past it the beat failed (default 3 s). */
  constructor(
    private readonly store: PgStore,
    private readonly fence: Fence,
    beatTimeoutMs = 3_000,
  ) {
    this.beatTimeoutMs = Math.max(100, beatTimeoutMs);
  }

  /**
   * Marks this instance alive for `ttlMs` (database clock), and whether it is at its live limit (`full`). Returns how
   * many instances are alive, this one included.
   */
  async heartbeat(ttlMs: number, full = false): Promise<{ liveInstances: number }> {
    let res;
    try {
      res = await this.store.pool.query({
      name: 'ta_heartbeat_v1',
      text: `WITH ${HEARTBEAT_CTE}
       SELECT 1 + (SELECT count(*) FROM instances WHERE expires_at > now() AND id <> $1) AS live`,
      values: [this.store.instance, Math.round(ttlMs), full, this.store.life],
      });
    } catch (e) {
      this.store.heartbeatFailed(); // readiness follows the store with no traffic too (issue 32)
      throw e;
    }
    // The heartbeat is a committed write: the store can commit again (after a restart of PostgreSQL, say), even when
    // no export has come to prove it (a load balancer that waits for readiness sends none).
    this.store.heartbeatLanded();
    return { liveInstances: Number(res.rows[0].live) };
  }

  /**
   * Joins the cluster's trust configuration: `digest` names this instance's ingest trust (its --ingest-tokens). In one
   * transaction under the migration lock, with a first heartbeat: when another instance is alive and the cluster's
   * recorded digest differs, nothing changes and this throws (the instance must not join); otherwise the digest is
   * recorded (the first instance, or every one restarted with a new file once none of the old ones is alive).
   */
  async joinTrust(digest: string, ttlMs: number): Promise<void> {
    await inTransaction(this.store.pool, async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
      const res = await client.query(
        `SELECT (SELECT value FROM meta WHERE key = 'ingest_trust') AS digest,
           (SELECT string_agg(id, ', ' ORDER BY id) FROM instances WHERE expires_at > now() AND id <> $1) AS live`,
        [this.store.instance],
      );
      const recorded = (res.rows[0].digest as string | null) ?? null;
      const live = (res.rows[0].live as string | null) ?? null;
      if (recorded !== null && recorded !== digest && live !== null) {
        throw new TrustMismatchError(`postgres store: this instance's ingest trust configuration (--ingest-tokens) differs from the cluster's (live instances: ${live}); every instance must be given the same token file (refusing to join)`);
      }
      await client.query(`INSERT INTO meta (key, value) VALUES ('ingest_trust', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, [digest]);
      await client.query(
        `INSERT INTO instances (id, seen_at, expires_at, at_limit, life) VALUES ($1, now(), now() + $2::bigint * interval '1 millisecond', false, $3)
         ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at, life = excluded.life`,
        [this.store.instance, Math.round(ttlMs), this.store.life],
      );
    });
  }

  /**
   * The renewal step of a coordinator (every ttl/5, at most 500 ms) in one statement and one round trip: heartbeat
   * (as `heartbeat`), lease renewal (as `renewLeases`: the fence follows it) and the partitions of other instances at
   * their live limit (as `fullPartitions`), from one snapshot. Readiness follows it as the heartbeat's.
   */
  async beat(ttlMs: number, full: boolean): Promise<{ liveInstances: number; held: number[]; fullParts: number[]; dbNow: number }> {
    let res;
    const movesSent = this.fence.moves;
    try {
      const client = await this.beatConnection();
      res = await client.query({
        name: 'ta_beat_v2',
        text: `WITH ${HEARTBEAT_CTE}, renewed AS (
           UPDATE leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
           WHERE owner = $1 AND expires_at > now() RETURNING part, epoch
         )
         SELECT 1 + (SELECT count(*) FROM instances WHERE expires_at > now() AND id <> $1) AS live,
           (SELECT coalesce(json_agg(json_build_array(part, epoch)), '[]'::json) FROM renewed) AS held,
           (SELECT coalesce(json_agg(l.part ORDER BY l.part), '[]'::json) FROM leases l JOIN instances i ON i.id = l.owner
            WHERE i.at_limit AND i.expires_at > now() AND l.expires_at > now() AND l.owner <> $1) AS full_parts,
           (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS db_now`,
        values: [this.store.instance, Math.round(ttlMs), full, this.store.life],
        query_timeout: this.beatTimeoutMs,
      } as pg.QueryConfig);
    } catch (e) {
      this.store.heartbeatFailed(); // readiness follows the store with no traffic too (issue 32)
      this.dropBeatConnection();
      // No answer at all (not an error answer): the network may hold every connection of the pool dead without a
      // reset (a black hole, a half-open connection), where each would wait for its own deadline. New connections
      // replace them; statements still on the old ones fail at their deadlines.
      // Once per outage (until a heartbeat lands): a long black hole does not pile up pools of dead sockets.
      if (!this.poolReplacedInOutage && (isReadTimeout(e) || /connection timeout/i.test((e as Error)?.message ?? ''))) {
        this.poolReplacedInOutage = true;
        this.replacePool();
      }
      // Appends waiting for a commit behind a connection that may hang: refused now (nothing was acknowledged).
      this.store.beatOverdue();
      throw e;
    }
    this.store.beatLanded();
    this.poolReplacedInOutage = false;
    const row = res.rows[0] as Row;
    const held = new Map<number, number>();
    for (const [part, epoch] of row.held as [number, number | string][]) held.set(part, Number(epoch));
    this.fence.renewedAsOf(movesSent, held);
    return { liveInstances: Number(row.live), held: [...held.keys()].sort((a, b) => a - b), fullParts: row.full_parts as number[], dbNow: Number(row.db_now) };
  }

  /** Swaps the store's pool for a new one; the old one closes once its connections are released (by answer or deadline). */
  private replacePool(): void {
    if (this.store.replacePool()) this.poolsReplaced++;
  }

  /** Heartbeats that failed and pools replaced since open (for metrics and tests). */
  beatStats(): { down: boolean; poolsReplaced: number } {
    return { down: this.store.beatDown, poolsReplaced: this.poolsReplaced };
  }

  /**
   * The coordinator's renewal is overdue (its step has not come back within the beat's deadline: a hung statement
   * ahead of it): not ready, appends refused, as for a failed beat, until a beat lands.
   */
  beatOverdue(): void {
    this.store.beatOverdue();
  }

  /** The heartbeat's connection, opened when missing (every deadline its own: connect, statement, answer). */
  private async beatConnection(): Promise<pg.Client> {
    if (this.beatClient !== null) return this.beatClient;
    const client = this.store.openClient({
      connectionTimeoutMillis: this.beatTimeoutMs,
      statement_timeout: this.beatTimeoutMs,
      query_timeout: this.beatTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
      application_name: `topology-audit/${this.store.instance}/beat`.slice(0, 63),
    });
    client.on('error', noop);
    try {
      await client.connect();
    } catch (e) {
      destroyClient(client);
      throw e;
    }
    this.beatClient = client;
    return client;
  }

  /** A failed or late heartbeat: its connection is dropped (the socket destroyed: it may hang) and the next beat opens another. */
  dropBeatConnection(): void {
    const client = this.beatClient;
    this.beatClient = null;
    if (client) destroyClient(client);
  }
}
