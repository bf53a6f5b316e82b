/**
 * @topology-audit/receipt: what a content-free receipt is (docs/receipts.md, interfaces.md "NDJSON receipts"): its
 * zod schema and types, the id patterns, edge kinds and the other words receipts use. Pure (zod only): the auditor's
 * core (src/core) and the receipt emitter (@topology-audit/emitter) both build on it.
 */
export { EDGE_KINDS, RECEIPT_TYPES, HANDOFF_STATES, EFFECT_STATUSES, type EdgeKind, type ReceiptType, type LocalStatus, type RunResult, type HandoffState, type EffectStatus } from './vocab.js';
export { EdgeSyntaxError, parseEdge, type EdgeSpec } from './edge-text.js';
export { RFC3339_TEXT, instantTextError, isInstantText } from './instant-text.js';
export {
  ID_PATTERN,
  RUN_ID_PATTERN,
  AGENT_ID_PATTERN,
  VERSION_PATTERN,
  RFC3339,
  Id,
  RunId,
  AgentId,
  Time,
  ReceiptSchema,
  runIdError,
  isRunId,
  isAgentId,
  type Receipt,
  type ReceiptOf,
  type ReceiptField,
  type RunStartReceipt,
  type EdgeReceipt,
  type WaitReceipt,
  type OutcomeReceipt,
  type RunEndReceipt,
  type GapReceipt,
  type HandoffReceipt,
} from './schema.js';
export { receiptJsonSchema, validateReceipt, type ReceiptParse } from './validate.js';
