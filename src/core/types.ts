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

/** Verdicts that alert (unsafe topology, false completion, incomplete and uncertain): a settled run in one stays live until pruned. */
export const ALERTING_VERDICTS = ['uncertain', 'stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete', 'incomplete'] as const satisfies readonly Verdict[];

/** Precedence: lower index wins. */
export const PRECEDENCE: Readonly<Record<Verdict, number>> = Object.freeze(Object.fromEntries(VERDICTS.map((v, i) => [v, i])) as Record<Verdict, number>);
export const precedence = (v: Verdict): number => PRECEDENCE[v] ?? -1;

export * from './vocab.js';
export type { Receipt, ReceiptField, ReceiptOf, RunStartReceipt, EdgeReceipt, WaitReceipt, OutcomeReceipt, RunEndReceipt, GapReceipt, HandoffReceipt } from './receipt-schema.js';

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
