export {
  ReceiptStore,
  StoreCommitError,
  StoreRowError,
  DATABASE_FILE,
  type StoredReceipt,
  type SpanLogEntry,
  type AppendOutcome,
  type AppendResult,
  type PinRecord,
  type LiveRun,
  type ReceiptStoreOptions,
} from './receipt-store.js';
export { canonicalReceiptJson, compactReceiptJson, sameReceipt, storedReceiptFields } from '../core/canonical.js';
