/**
 * The per-measure results of a paired comparison, shared by the comparison (compare.ts) and the adoption decision
 * (disposition.ts), kept apart so that neither imports the other back.
 */
import type { HardGate, Tradeable } from './manifest.js';
import type { CountMeasure, FlagMeasure } from './measures.js';
import type { Distribution } from './stats.js';

export interface CountAggregate {
  measure: CountMeasure;
  baseline: Distribution;
  candidate: Distribution;
  /** Distribution of per-pair deltas (candidate minus baseline); its total is the total delta. */
  delta: Distribution;
  /** Sum over cases of the mean delta over that case's repeats: the change for one run of the case set. */
  perCaseSet: number;
}

export interface FlagAggregate {
  measure: FlagMeasure;
  pairs: number;
  baseline: number;
  candidate: number;
  /** Pairs true in the baseline and false in the candidate. */
  regressions: string[];
  improvements: string[];
}

export interface GateResult {
  gate: HardGate;
  passed: boolean;
  /** Pair keys that violate the gate (empty for configuration gates). */
  cases: string[];
  detail: string;
}

export type EvidenceCheckName = 'min_cases' | 'min_repeats' | 'configuration_isolated' | 'baseline_traces_complete';

export interface EvidenceCheck {
  check: EvidenceCheckName;
  passed: boolean;
  detail: string;
  /** The named experiment that would resolve a failed check. */
  retest?: string;
}

export interface FailureResult {
  id: string;
  description: string;
  rule: string;
  minRepaired: number;
  baselineFailing: string[];
  candidateFailing: string[];
  /** Failing in the baseline, passing in the candidate. */
  repaired: string[];
  /** Passing in the baseline, failing in the candidate. */
  introduced: string[];
}

export interface TradeResult {
  measure: Tradeable['measure'];
  better: 'lower' | 'higher';
  material: number;
  maxRegression?: number;
  perCaseSet: number;
  direction: 'improved' | 'regressed' | 'unchanged';
  /** |change| reaches the materiality threshold. */
  materialChange: boolean;
  /** The adverse change, if any, is within the owner's accepted limit. */
  withinLimit: boolean;
}
