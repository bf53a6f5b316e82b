/**
 * The cluster's coordination in the shared store, for one instance: the fence its owner writes are checked against
 * (fence.ts, given to the store), the leases (leases.ts), the heartbeat and the trust it joins with (heartbeat.ts) and
 * the tail it folds (tail.ts), their statements beside the store's on its pool. The store stays a store: what it knows
 * of the cluster is the fence it was given and the heartbeat's outcome.
 */
import type { PgStore } from '../store/pg-store.js';
import { Fence } from './fence.js';
import { PgHeartbeat } from './heartbeat.js';
import { PgLeases } from './leases.js';
import { PgTail } from './tail.js';

export interface CoordinationOptions {
  /** The deadline of a heartbeat (`beat`, on its own connection): past it the beat failed. Default 3,000 ms. */
  beatTimeoutMs?: number;
}

export class Coordination {
  readonly fence = new Fence();
  readonly leases: PgLeases;
  readonly beats: PgHeartbeat;
  readonly tail: PgTail;
  private leaving: Promise<void> | null = null;

  /**
   * Gives the store this instance's fence: from now on its owner writes are checked against these leases; and leaves
   * the cluster when the store closes, if not before.
   */
  constructor(readonly store: PgStore, opts: CoordinationOptions = {}) {
    store.fenceWith(this.fence);
    store.beforeClose(() => this.leave());
    this.leases = new PgLeases(store, this.fence);
    this.beats = new PgHeartbeat(store, this.fence, opts.beatTimeoutMs);
    this.tail = new PgTail(store);
  }

  /**
   * Leaves the cluster (once): closes the heartbeat's connection, gives up every lease of this instance and its
   * liveness, so the others take over at once. With the database gone, the leases expire by themselves.
   */
  leave(): Promise<void> {
    this.leaving ??= this.leaveOnce();
    return this.leaving;
  }

  private async leaveOnce(): Promise<void> {
    this.beats.dropBeatConnection();
    this.fence.clear();
    try {
      await this.store.pool.query('UPDATE leases SET owner = NULL, expires_at = now() WHERE owner = $1', [this.store.instance]);
      await this.store.pool.query('UPDATE instances SET expires_at = now() WHERE id = $1', [this.store.instance]);
    } catch {
      // The database is gone: the leases expire by themselves.
    }
  }
}
