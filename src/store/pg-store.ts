/**
 * The shared PostgreSQL store's public names, where callers outside src/store (serve's composition, src/cluster/, the
 * benches) import them from; the store itself is split by job in src/store/pg/ (pg-store.ts there is its facade).
 */
export { PgStore } from './pg/pg-store.js';
export { partitionOf } from './pg/partition.js';
export { TrustMismatchError } from './pg/heartbeat.js';
export type { PgStoreOptions } from './pg/shared.js';
export type { AckSince, LeaseRow, ListedRun, TailedReceipt } from './pg/rows.js';
