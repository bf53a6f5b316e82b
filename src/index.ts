/**
 * topology-audit as a library: the pure verdict, its formats, contract loading, validators and ids, as an explicit
 * list (test/public-api.test.ts pins it: a name added here is a public promise). The engine, stores, receivers and
 * CLI are not part of it. Receipt shapes and ids come from @topology-audit/receipt (packages/receipt), which the
 * receipt emitter (@topology-audit/emitter, packages/emitter) uses without this package.
 */

// The verdict: receipts of runs, a time and a contract registry in; one verdict per run out (semantics.md).
export { classify, type EvaluateOptions } from './core/classify.js';
export { groupByRun } from './core/state.js';
export { VERDICTS, PRECEDENCE, type Verdict, type RunVerdict, type Finding, type Pin, type NaiveVerdict } from './core/types.js';
export { verdictJson, displayMessage } from './core/meaning.js';

// Formats: NDJSON receipt files and lines, JSON Schemas, durations and edges as written.
export { parseReceiptFile, parseReceiptLine, parseNdjson, ReceiptFileError, MAX_LISTED_LINE_ERRORS, type LineResult } from './core/receipt.js';
export { parseDuration, formatDuration } from './core/edge.js';
export { formatInstant } from './core/time.js';

// Contracts: parsing, the registry of versions, a directory of contract files.
export { parseContract, contractJsonSchema, compareContractVersions, formatIssue, ContractError, type Contract, type ContractIssue } from './core/contract.js';
export { ContractRegistry } from './core/registry.js';
export { loadContractDir } from './audit/contracts-dir.js';

// Validators and ids (the receipt schema): one source, the shared package.
export {
  validateReceipt,
  receiptJsonSchema,
  ReceiptSchema,
  parseEdge,
  EdgeSyntaxError,
  ID_PATTERN,
  RUN_ID_PATTERN,
  AGENT_ID_PATTERN,
  VERSION_PATTERN,
  RFC3339_TEXT,
  isRunId,
  isAgentId,
  runIdError,
  instantTextError,
  isInstantText,
  EDGE_KINDS,
  RECEIPT_TYPES,
  HANDOFF_STATES,
  EFFECT_STATUSES,
  type ReceiptParse,
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
  type EdgeSpec,
  type EdgeKind,
  type ReceiptType,
  type RunResult,
  type HandoffState,
  type EffectStatus,
} from '@topology-audit/receipt';
