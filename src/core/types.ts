/**
 * Shared domain types. Data flows one way:
 * bytes -> spans (src/otlp) -> receipts (src/ingest) -> store (src/store) -> run view -> verdict (src/core) -> outputs.
 */

export const VERDICTS = [
  'uncertain',
  'stale_contract',
  'unknown_agent',
  'forbidden_edge',
  'ambiguous_route',
  'false_complete',
  'waiting',
  'incomplete',
  'working',
  'healthy',
] as const;
export type Verdict = (typeof VERDICTS)[number];

/** Precedence: lower index wins. */
export const PRECEDENCE: Readonly<Record<Verdict, number>> = Object.freeze(Object.fromEntries(VERDICTS.map((v, i) => [v, i])) as Record<Verdict, number>);
export const precedence = (v: Verdict): number => PRECEDENCE[v] ?? -1;

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

/**
 * One content-free receipt, as in the NDJSON format of interfaces.md.
 * Only the fields listed for a type may be present (validated in src/core/receipt.ts).
 */
export interface Receipt {
  run: string;
  event: string;
  type: ReceiptType;
  /** RFC 3339 observation time. */
  at: string;
  version?: string;
  status?: LocalStatus;
  // run.start
  contract?: string;
  phase?: string;
  // edge (from/to/kind); from also on other types; to also on gap / handoff
  from?: string;
  to?: string;
  kind?: EdgeKind;
  // wait
  on?: string;
  edge?: string;
  deadline?: string;
  // outcome
  verified?: boolean;
  // run.end
  result?: RunResult;
  // gap
  reason?: string;
  // handoff (extension, second layer): lifecycle transition of one attempt
  handoff?: string;
  attempt?: number;
  state?: HandoffState;
  duplicateKey?: string;
  leaseExpiresAt?: string;
  stateVersion?: string;
  finalOwner?: string;
  onTimeout?: string;
  /** budget units reserved / consumed / released by this transition (content-free counts). */
  units?: { actions?: number; contextUnits?: number; effects?: number };
  budgetOp?: 'root' | 'reserve' | 'consume' | 'release' | 'reject';
  /** Capability names granted to the attempt (names only; see docs/handoffs.md). */
  capabilities?: string[];
  /** Effects the attempt caused or may have caused: effect ids and statuses, never arguments. */
  effects?: { id: string; status: EffectStatus }[];
}

/** The pin a run is audited against. */
/**
 * An operator's acknowledgement of a run's verdict: which verdict, who (an identity, not free text), when (ms since
 * epoch) and why (operator text, bounded by ACK_REASON_MAX; never in metrics). Stored, shown on the run, logged.
 */
export interface AckRecord {
  verdict: Verdict;
  by: string | null;
  at: number;
  reason: string | null;
}

/** Longest ack reason kept (characters). */
export const ACK_REASON_MAX = 280;

export interface Pin {
  contract: string;
  version: string;
  phase: string;
}

export interface Finding {
  verdict: Verdict;
  /** A stable machine code, e.g. "forbidden_edge", "conflict", "late_edge", "duplicate_active". */
  code: string;
  /** Edge key "a -> b : kind" where one is involved. */
  edge?: string;
  agents: string[];
  events: string[];
  /**
   * One line an operator can act on. It names absolute instants only (never "9m left" or "5m ago", which would
   * freeze at evaluation time): a display renders countdowns from `deadline` / `since` at display time.
   */
  message: string;
  /** RFC 3339, full precision: the deadline a wait/deadline finding is about (a plan edge's, a wait's, a stall limit's). */
  deadline?: string;
  /** RFC 3339, full precision: when the condition began (the edge became due, the deadline passed, the run ended). */
  since?: string;
  /** A settled finding can never be cleared by more receipts or time. */
  settled: boolean;
}

export type NaiveVerdict = 'green' | 'red';

export interface RunVerdict {
  run: string;
  pin: Pin | null;
  verdict: Verdict;
  naive: NaiveVerdict;
  findings: Finding[];
  /** Settled for the gate: any settled finding, or a settled verdict. */
  settled: boolean;
  /** Earliest future instant (ms since epoch) at which the verdict may change with `now` alone. */
  nextChangeAt: number | null;
}
