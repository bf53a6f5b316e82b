/**
 * The receipt vocabulary: edge kinds, receipt types, statuses, handoff states and effect statuses. No imports, so
 * both the receipt schema (src/core/receipt-schema.ts) and the shared types (src/core/types.ts) can build on it.
 */

export const EDGE_KINDS = ['delegate', 'handoff', 'return'] as const;
export type EdgeKind = (typeof EDGE_KINDS)[number];

export const RECEIPT_TYPES = ['run.start', 'edge', 'wait', 'outcome', 'run.end', 'gap', 'handoff'] as const;
export type ReceiptType = (typeof RECEIPT_TYPES)[number];

export type LocalStatus = 'ok' | 'error' | 'unset';
export type RunResult = 'completed' | 'failed' | 'cancelled';

/** Lifecycle states of a handoff (semantics section 5). */
export const HANDOFF_STATES = [
  'PROPOSED', 'ADMITTED', 'DISPATCHED', 'RUNNING', 'RETURNED',
  'ACCEPTED', 'REJECTED', 'CANCELLED', 'TIMED_OUT', 'FAILED',
] as const;
export type HandoffState = (typeof HANDOFF_STATES)[number];

/** Status of an external effect a handoff branch may have caused (ids only, never arguments). */
export const EFFECT_STATUSES = ['attempted', 'committed', 'failed', 'compensated', 'unknown'] as const;
export type EffectStatus = (typeof EFFECT_STATUSES)[number];
