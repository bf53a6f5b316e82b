/** The receipt vocabulary (edge kinds, receipt types, statuses, handoff states): @topology-audit/receipt (packages/receipt). */
export { EDGE_KINDS, RECEIPT_TYPES, HANDOFF_STATES, EFFECT_STATUSES, type EdgeKind, type ReceiptType, type LocalStatus, type RunResult, type HandoffState, type EffectStatus } from '@topology-audit/receipt';
