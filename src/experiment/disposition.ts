/**
 * The disposition (article section 5, "Use four dispositions"; section 6, "Write the disposition as an
 * engineering decision"). Rules, first that applies wins:
 *   1. reject   any declared hard gate fails (whatever else improves);
 *   2. retest   the evidence cannot decide: too few cases or repeats, a configuration change outside the
 *               declared slice, or incomplete baseline traces; the named experiment resolves it;
 *   3. retain   the candidate newly fails a declared baseline failure in some pair;
 *   4. retain   the candidate repairs no declared baseline failure (in at least its minRepaired pairs),
 *               however much a tradeable measure improves: a gain must repair a declared failure;
 *   5. retain   a tradeable measure regresses beyond the owner's declared limit;
 *   6. separate otherwise: adopt exactly the declared slice.
 */
import type { CountAggregate, EvidenceCheck, FailureResult, FlagAggregate, GateResult, TradeResult } from './results.js';
import type { Manifest } from './manifest.js';
import { MEASURE_LABELS } from './measures.js';

export const DISPOSITIONS = ['retain', 'separate', 'retest', 'reject'] as const;
export type DispositionName = (typeof DISPOSITIONS)[number];

export type DispositionRule =
  | 'hard_gate_failed'
  | 'evidence_inconclusive'
  | 'declared_failure_introduced'
  | 'no_declared_failure_repaired'
  | 'trade_beyond_limit'
  | 'repairs_declared_failure';

export interface Disposition {
  decision: DispositionName;
  rule: DispositionRule;
  reason: string;
  details: string[];
  /** The reopening condition(s): what makes another experiment rational. */
  reopen: string[];
}

export interface DispositionInput {
  manifest: Manifest;
  gates: readonly GateResult[];
  evidence: readonly EvidenceCheck[];
  failures: readonly FailureResult[];
  trades: readonly TradeResult[];
  counts: readonly CountAggregate[];
  flags: readonly FlagAggregate[];
  pairs: number;
}

export const signed = (n: number): string => (n > 0 ? `+${n}` : String(n));

function tradeLine(t: TradeResult): string {
  const label = MEASURE_LABELS[t.measure];
  const material = t.materialChange ? `material (threshold ${t.material})` : `not material (threshold ${t.material})`;
  return `${label} ${signed(t.perCaseSet)} per case set: ${t.direction}, ${material}`;
}

function outcomeLine(flags: readonly FlagAggregate[]): string {
  const c = flags.find((f) => f.measure === 'correct');
  if (!c) return '';
  const reg = c.regressions.length ? `; regressions: ${c.regressions.join(', ')}` : '';
  return `correct dispositions: baseline ${c.baseline}/${c.pairs}, candidate ${c.candidate}/${c.pairs}${reg}`;
}

export function decideDisposition(input: DispositionInput): Disposition {
  const { manifest, gates, evidence, failures, trades, flags, pairs } = input;
  const failedGates = gates.filter((g) => !g.passed);
  if (failedGates.length > 0) {
    return {
      decision: 'reject',
      rule: 'hard_gate_failed',
      reason: `the candidate violates ${failedGates.length === 1 ? 'a hard gate' : 'hard gates'}: ${failedGates
        .map((g) => `${g.gate} (${g.cases.length ? g.cases.join(', ') : g.detail})`)
        .join('; ')}; no improvement elsewhere can trade against it`,
      details: [
        ...failedGates.map((g) => `${g.gate}: ${g.detail}`),
        ...trades.filter((t) => t.direction === 'improved').map(tradeLine),
        outcomeLine(flags),
      ].filter(Boolean),
      reopen: [
        `only a redesigned candidate that passes ${failedGates.map((g) => g.gate).join(', ')} on the same frozen cases, under a new manifest`,
        ...manifest.reopenWhen,
      ],
    };
  }

  const inconclusive = evidence.filter((e) => !e.passed);
  if (inconclusive.length > 0) {
    return {
      decision: 'retest',
      rule: 'evidence_inconclusive',
      reason: `the evidence cannot decide: ${inconclusive.map((e) => e.detail).join('; ')}`,
      details: inconclusive.map((e) => `${e.check}: ${e.detail}`),
      reopen: inconclusive.map((e) => e.retest as string),
    };
  }

  const introduced = failures.filter((f) => f.introduced.length > 0);
  if (introduced.length > 0) {
    return {
      decision: 'retain',
      rule: 'declared_failure_introduced',
      reason: `the candidate newly fails ${introduced.map((f) => `${f.id} in ${f.introduced.join(', ')}`).join('; ')}, which the baseline passes`,
      details: [...introduced.map((f) => `${f.id} (${f.rule}): ${f.description}`), ...trades.map(tradeLine), outcomeLine(flags)].filter(Boolean),
      reopen: manifest.reopenWhen,
    };
  }

  const repaired = failures.filter((f) => f.repaired.length >= f.minRepaired && f.repaired.length > 0);
  if (repaired.length === 0) {
    const shown = failures.filter((f) => f.baselineFailing.length > 0);
    const why =
      failures.length === 0
        ? 'the manifest declares no baseline failure to repair'
        : shown.length === 0
          ? `the baseline shows none of the declared failures (${failures.map((f) => `${f.id}: 0 of ${pairs} pairs`).join('; ')})`
          : `it does not repair enough of them (${shown
              .map((f) => `${f.id}: ${f.repaired.length} of ${f.baselineFailing.length} failing pairs repaired, ${f.minRepaired} needed`)
              .join('; ')})`;
    const improvedMaterially = trades.filter((t) => t.direction === 'improved' && t.materialChange);
    const added = trades.filter((t) => t.direction === 'regressed');
    return {
      decision: 'retain',
      rule: 'no_declared_failure_repaired',
      reason: `the candidate repairs no declared baseline failure: ${why}${
        improvedMaterially.length
          ? `; its ${improvedMaterially.map((t) => `${MEASURE_LABELS[t.measure]} ${signed(t.perCaseSet)}`).join(', ')} repairs nothing`
          : ''
      }${added.length ? ` while it adds ${added.map((t) => `${MEASURE_LABELS[t.measure]} ${signed(t.perCaseSet)}`).join(', ')}` : ''}`,
      details: [outcomeLine(flags), 'every hard gate passes', ...trades.map(tradeLine)].filter(Boolean),
      reopen: manifest.reopenWhen,
    };
  }

  const breached = trades.filter((t) => !t.withinLimit);
  if (breached.length > 0) {
    return {
      decision: 'retain',
      rule: 'trade_beyond_limit',
      reason: `the candidate repairs ${repaired.map((f) => `${f.id} in ${f.repaired.join(', ')}`).join('; ')}, but the trade exceeds the accepted limit: ${breached
        .map((t) => `${MEASURE_LABELS[t.measure]} ${signed(t.perCaseSet)} per case set (limit ${t.maxRegression})`)
        .join('; ')}`,
      details: [outcomeLine(flags), ...trades.map(tradeLine)].filter(Boolean),
      reopen: manifest.reopenWhen,
    };
  }

  const residual = repaired.filter((f) => f.candidateFailing.length > 0);
  return {
    decision: 'separate',
    rule: 'repairs_declared_failure',
    reason: `the candidate repairs ${repaired
      .map((f) => `${f.id} in ${f.repaired.length} of ${f.baselineFailing.length} failing pairs (${f.repaired.join(', ')})`)
      .join('; ')} with every hard gate passing and every trade within its limit; adopt exactly the declared slice: ${manifest.changedSlice.description}`,
    details: [
      outcomeLine(flags),
      ...residual.map((f) => `${f.id} still fails in ${f.candidateFailing.join(', ')}`),
      ...trades.map(tradeLine),
    ].filter(Boolean),
    reopen: [
      `revert to the baseline if a hard gate fails in operation, or if ${repaired.map((f) => f.id).join(', ')} no longer occurs in the baseline workload`,
      'rerun this manifest whenever the task set, model, policy, capabilities, budgets or graders change',
    ],
  };
}
