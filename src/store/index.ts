export { ReceiptStore, DATABASE_FILE, type ReceiptStoreOptions } from './sqlite/receipt-store.js';
export {
  StoreCommitError,
  StoreRowError,
  type StoredReceipt,
  type SpanLogEntry,
  type AppendOutcome,
  type AppendResult,
  type AppendPin,
  type PinRecord,
  type LiveRun,
  type PrunableRun,
} from './types.js';
export { canonicalReceiptJson, compactReceiptJson, sameReceipt, storedReceiptFields } from '../core/canonical.js';
export { PgStore, partitionOf, type PgStoreOptions, type ListedRun } from './pg-store.js';
export { PG_MIGRATIONS, PG_SCHEMA_VERSION, LOG_LOCK, MIGRATION_LOCK, DEFAULT_PARTITIONS, migrate, type PgMigration } from './pg/schema.js';
export { SpanLogPruner, UNSLICED, PRUNE_PAGE_ROWS, type Slicer, type SpanLogKey, type SpanLogRows } from './span-log-prune.js';
