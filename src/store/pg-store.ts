/**
 * The shared PostgreSQL store's public names, where callers outside src/store (serve's composition, src/cluster/, the
 * benches) import them from; the store itself is split by job in src/store/pg/ (pg-store.ts there is its facade).
 * The cluster's coordination (src/cluster/: leases, heartbeat, fence, tail) runs its statements beside the store's
 * with the helpers below.
 */
export { PgStore } from './pg/pg-store.js';
export { partitionOf } from './pg/partition.js';
export type { OwnerFence } from './pg/fence.js';
export { MIGRATION_LOCK } from './pg/schema.js';
export { KEEPALIVE_IDLE_MS, destroyClient, inTransaction, isReadTimeout, type PgStoreOptions } from './pg/shared.js';
export { parseBody, type AckSince, type ListedRun, type Row } from './pg/rows.js';
