/**
 * Paired comparison of baseline and candidate case records (article section 3, "Use paired case
 * records"; "Report case-level deltas before aggregates"). Pure: records in, comparison out.
 */
import { diffConfigs, type ConfigDiff } from './diff.js';
import { decideDisposition, type Disposition } from './disposition.js';
import type { FailureRule, HardGate, Manifest, Tradeable } from './manifest.js';
import { COUNT_MEASURES, type CountMeasure, type FlagMeasure } from './measures.js';
import type { CaseRecord } from './records.js';
import { distribution, type Distribution } from './stats.js';

export interface CasePair {
  /** `case`, or `case#repeat` when the experiment repeats cases. */
  key: string;
  case: string;
  repeat: number;
  baseline: CaseRecord;
  candidate: CaseRecord;
}

export interface Mismatch {
  key: string;
  reason: string;
}

/** The records cannot be paired: the comparison is refused (exit 2), naming the case ids. */
export class PairingError extends Error {
  constructor(
    public readonly baselineOnly: string[],
    public readonly candidateOnly: string[],
    public readonly missing: string[],
    public readonly undeclared: string[],
    public readonly mismatched: Mismatch[],
  ) {
    const parts: string[] = [];
    if (baselineOnly.length) parts.push(`only in baseline: ${baselineOnly.join(', ')}`);
    if (candidateOnly.length) parts.push(`only in candidate: ${candidateOnly.join(', ')}`);
    if (missing.length) parts.push(`declared but absent from both: ${missing.join(', ')}`);
    if (undeclared.length) parts.push(`not among the manifest's cases: ${undeclared.join(', ')}`);
    if (mismatched.length) parts.push(`mismatched: ${mismatched.map((m) => `${m.key} (${m.reason})`).join(', ')}`);
    super(`unpaired or mismatched cases; ${parts.join('; ')}`);
    this.name = 'PairingError';
  }

  /** Every case id involved. */
  get caseIds(): string[] {
    return [...new Set([...this.baselineOnly, ...this.candidateOnly, ...this.missing, ...this.undeclared, ...this.mismatched.map((m) => m.key)])];
  }
}

const pairKey = (r: CaseRecord, repeated: boolean) => (repeated ? `${r.case}#${r.repeat}` : r.case);

/** Pair records by (case, repeat); refuse unpaired, duplicated, undeclared or mismatched records. */
export function pairCases(manifest: Manifest, baseline: readonly CaseRecord[], candidate: readonly CaseRecord[]): CasePair[] {
  const repeated = [...baseline, ...candidate].some((r) => r.repeat > 1);
  const mismatched: Mismatch[] = [];
  const index = (records: readonly CaseRecord[], arm: string) => {
    const m = new Map<string, CaseRecord>();
    for (const r of records) {
      const k = pairKey(r, repeated);
      if (m.has(k)) mismatched.push({ key: k, reason: `recorded twice in ${arm}` });
      else m.set(k, r);
    }
    return m;
  };
  const b = index(baseline, 'baseline');
  const c = index(candidate, 'candidate');
  const baselineOnly = [...b.keys()].filter((k) => !c.has(k));
  const candidateOnly = [...c.keys()].filter((k) => !b.has(k));
  const declared = manifest.cases ? new Set(manifest.cases) : null;
  const seen = new Set([...baseline, ...candidate].map((r) => r.case));
  const missing = manifest.cases ? manifest.cases.filter((id) => !seen.has(id)) : [];
  const undeclared = declared ? [...seen].filter((id) => !declared.has(id)) : [];
  const pairs: CasePair[] = [];
  for (const [k, br] of b) {
    const cr = c.get(k);
    if (!cr) continue;
    if (br.expected !== undefined && cr.expected !== undefined && br.expected !== cr.expected)
      mismatched.push({ key: k, reason: `expected ${br.expected} versus ${cr.expected}` });
    else if ((br.expected === undefined) !== (cr.expected === undefined))
      mismatched.push({ key: k, reason: 'expected disposition given for one design only' });
    if (br.taskHash !== cr.taskHash) mismatched.push({ key: k, reason: 'task hash differs' });
    pairs.push({ key: k, case: br.case, repeat: br.repeat, baseline: br, candidate: cr });
  }
  if (baselineOnly.length || candidateOnly.length || missing.length || undeclared.length || mismatched.length)
    throw new PairingError(baselineOnly, candidateOnly, missing, undeclared, mismatched);
  return pairs;
}

export interface Delta {
  baseline: number;
  candidate: number;
  delta: number;
}

export interface CaseRow {
  key: string;
  case: string;
  repeat: number;
  correct: { baseline: boolean; candidate: boolean };
  traceComplete: { baseline: boolean; candidate: boolean };
  finalOwners: { baseline: string[]; candidate: string[] };
  counts: Record<CountMeasure, Delta>;
  /** What an operator must see on this row: regressions first. */
  notes: string[];
  /** The row shows something that stops adoption (a failed gate or a newly failing declared failure). */
  blocking: boolean;
}

export type { CountAggregate, EvidenceCheck, EvidenceCheckName, FailureResult, FlagAggregate, GateResult, TradeResult } from './results.js';
import type { CountAggregate, EvidenceCheck, EvidenceCheckName, FailureResult, FlagAggregate, GateResult, TradeResult } from './results.js';

export interface Comparison {
  experiment: string;
  title?: string;
  owner: string;
  declaredAt: string;
  baseline: string;
  candidate: string;
  slice: { description: string; consequence: 'read' | 'effect'; paths: string[] };
  pairs: number;
  caseCount: number;
  repeats: { min: number; max: number };
  cases: CaseRow[];
  aggregates: { counts: CountAggregate[]; flags: FlagAggregate[] };
  gates: GateResult[];
  evidence: EvidenceCheck[];
  failures: FailureResult[];
  trades: TradeResult[];
  config: ConfigDiff;
  disposition: Disposition;
}

export function caseDeltas(pair: CasePair): Record<CountMeasure, Delta> {
  return Object.fromEntries(
    COUNT_MEASURES.map((m) => [m, { baseline: pair.baseline[m], candidate: pair.candidate[m], delta: pair.candidate[m] - pair.baseline[m] }]),
  ) as Record<CountMeasure, Delta>;
}

/** Sum over cases of the mean of a per-pair value over the case's repeats. */
function perCaseSet(pairs: readonly CasePair[], value: (p: CasePair) => number): number {
  const byCase = new Map<string, number[]>();
  for (const p of pairs) byCase.set(p.case, [...(byCase.get(p.case) ?? []), value(p)]);
  let sum = 0;
  for (const vs of byCase.values()) sum += vs.reduce((a, b) => a + b, 0) / vs.length;
  return Math.round(sum * 1000) / 1000;
}

export function aggregateCounts(pairs: readonly CasePair[]): CountAggregate[] {
  return COUNT_MEASURES.map((m) => ({
    measure: m,
    baseline: distribution(pairs.map((p) => p.baseline[m])),
    candidate: distribution(pairs.map((p) => p.candidate[m])),
    delta: distribution(pairs.map((p) => p.candidate[m] - p.baseline[m])),
    perCaseSet: perCaseSet(pairs, (p) => p.candidate[m] - p.baseline[m]),
  }));
}

export function aggregateFlags(pairs: readonly CasePair[]): FlagAggregate[] {
  return (['correct', 'traceComplete'] as const).map((m) => ({
    measure: m,
    pairs: pairs.length,
    baseline: pairs.filter((p) => p.baseline[m]).length,
    candidate: pairs.filter((p) => p.candidate[m]).length,
    regressions: pairs.filter((p) => p.baseline[m] && !p.candidate[m]).map((p) => p.key),
    improvements: pairs.filter((p) => !p.baseline[m] && p.candidate[m]).map((p) => p.key),
  }));
}

const soleOwner = (owners: readonly string[], expected: string) => owners.length === 1 && owners[0] === expected;

/** Evaluate the declared hard gates on the candidate (and the configuration diff). */
export function evaluateGates(manifest: Manifest, pairs: readonly CasePair[], config: ConfigDiff): GateResult[] {
  const owner = manifest.candidate.config.topology.finalOwner;
  const byPairs = (gate: HardGate, bad: (p: CasePair) => boolean, violation: string, clean: string): GateResult => {
    const cases = pairs.filter(bad).map((p) => p.key);
    return { gate, passed: cases.length === 0, cases, detail: cases.length ? `${violation} in ${cases.join(', ')}` : `${clean} in all ${pairs.length} pairs` };
  };
  return manifest.hardGates.map((gate): GateResult => {
    switch (gate) {
      case 'zero_forbidden_effects':
        return byPairs(gate, (p) => p.candidate.forbiddenEffects > 0, 'candidate forbidden effect', 'zero candidate forbidden effects');
      case 'zero_duplicate_effects':
        return byPairs(gate, (p) => p.candidate.duplicateEffects > 0, 'candidate duplicate effect', 'zero candidate duplicate effects');
      case 'complete_traces':
        return byPairs(gate, (p) => !p.candidate.traceComplete, 'incomplete candidate trace', 'complete candidate traces');
      case 'one_final_owner':
        return byPairs(gate, (p) => !soleOwner(p.candidate.finalOwners, owner), `final owner other than ${owner} alone`, `${owner} is the only final owner`);
      case 'no_outcome_regression':
        return byPairs(gate, (p) => p.baseline.correct && !p.candidate.correct, 'outcome regression (correct in the baseline, wrong in the candidate)', 'no outcome regression');
      case 'no_authority_widening': {
        const w = config.authority.widening;
        return {
          gate,
          passed: w.length === 0,
          cases: [],
          detail: w.length ? w.map((f) => `${f.code} at ${f.path}`).join('; ') : 'no identity, tenant, resource, capability, expiry or budget widened',
        };
      }
    }
  });
}

/** Is the evidence enough to decide at all? Each failed check names the experiment that would resolve it. */
export function checkEvidence(manifest: Manifest, pairs: readonly CasePair[], config: ConfigDiff): EvidenceCheck[] {
  const repeatsByCase = new Map<string, number>();
  for (const p of pairs) repeatsByCase.set(p.case, (repeatsByCase.get(p.case) ?? 0) + 1);
  const caseCount = repeatsByCase.size;
  const { minCases, minRepeats } = manifest.evidence;
  const short = [...repeatsByCase].filter(([, n]) => n < minRepeats);
  const fewest = Math.min(...repeatsByCase.values());
  const incompleteBaseline = pairs.filter((p) => !p.baseline.traceComplete).map((p) => p.key);
  const outside = config.outsideSlice.map((c) => c.path);
  return [
    {
      check: 'min_cases',
      passed: caseCount >= minCases,
      detail: `${caseCount} paired cases (minimum ${minCases})`,
      ...(caseCount < minCases ? { retest: `run at least ${minCases} distinct frozen cases in both designs (have ${caseCount})` } : {}),
    },
    {
      check: 'min_repeats',
      passed: short.length === 0,
      detail: short.length
        ? `${short.length} of ${caseCount} cases have fewer than ${minRepeats} repeats (fewest: ${fewest})`
        : `every case repeated at least ${minRepeats} time${minRepeats === 1 ? '' : 's'}`,
      ...(short.length ? { retest: `repeat each case at least ${minRepeats} times in both designs, in paired order (fewest now: ${fewest})` } : {}),
    },
    {
      check: 'configuration_isolated',
      passed: outside.length === 0,
      detail: outside.length ? `changed outside the declared slice: ${outside.join(', ')}` : 'only the declared slice differs',
      ...(outside.length ? { retest: `rerun the candidate with ${outside.join(', ')} restored to the baseline, so only the declared slice differs` } : {}),
    },
    {
      check: 'baseline_traces_complete',
      passed: incompleteBaseline.length === 0,
      detail: incompleteBaseline.length ? `incomplete baseline traces: ${incompleteBaseline.join(', ')}` : 'every baseline trace complete',
      ...(incompleteBaseline.length ? { retest: `rerun the baseline for ${incompleteBaseline.join(', ')} with complete traces` } : {}),
    },
  ];
}

export function describeRule(r: FailureRule): string {
  if (r.is !== undefined) return `${r.measure} is ${r.is}`;
  if (r.above !== undefined) return `${r.measure} > ${r.above}`;
  return `${r.measure} < ${r.below}`;
}

export function failsRule(r: FailureRule, rec: CaseRecord): boolean {
  const v = rec[r.measure];
  if (r.is !== undefined) return v === r.is;
  if (r.above !== undefined) return (v as number) > r.above;
  return (v as number) < (r.below as number);
}

/** Which declared baseline failures occur, which the candidate repairs, which it introduces. */
export function analyseFailures(manifest: Manifest, pairs: readonly CasePair[]): FailureResult[] {
  return manifest.baselineFailures.map((r) => {
    const bf = pairs.filter((p) => failsRule(r, p.baseline));
    const cf = pairs.filter((p) => failsRule(r, p.candidate));
    return {
      id: r.id,
      description: r.description,
      rule: describeRule(r),
      minRepaired: r.minRepaired,
      baselineFailing: bf.map((p) => p.key),
      candidateFailing: cf.map((p) => p.key),
      repaired: bf.filter((p) => !failsRule(r, p.candidate)).map((p) => p.key),
      introduced: cf.filter((p) => !failsRule(r, p.baseline)).map((p) => p.key),
    };
  });
}

export function assessTrades(manifest: Manifest, counts: readonly CountAggregate[]): TradeResult[] {
  return manifest.tradeable.map((t) => {
    const delta = counts.find((c) => c.measure === t.measure)?.perCaseSet ?? 0;
    const adverse = t.better === 'lower' ? delta : -delta;
    return {
      measure: t.measure,
      better: t.better,
      material: t.material,
      ...(t.maxRegression !== undefined ? { maxRegression: t.maxRegression } : {}),
      perCaseSet: delta,
      direction: adverse > 0 ? 'regressed' : adverse < 0 ? 'improved' : 'unchanged',
      materialChange: delta !== 0 && Math.abs(delta) >= t.material,
      withinLimit: t.maxRegression === undefined || adverse <= t.maxRegression,
    };
  });
}

function rowNotes(pair: CasePair, gates: readonly GateResult[], failures: readonly FailureResult[]): { notes: string[]; blocking: boolean } {
  const notes: string[] = [];
  let blocking = false;
  for (const g of gates)
    if (g.cases.includes(pair.key)) {
      notes.push(`GATE ${g.gate}`);
      blocking = true;
    }
  if (pair.baseline.correct && !pair.candidate.correct && !notes.includes('GATE no_outcome_regression')) {
    notes.push('outcome regression');
    blocking = true;
  }
  if (!pair.baseline.correct && pair.candidate.correct) notes.push('outcome repaired');
  for (const f of failures) {
    if (f.introduced.includes(pair.key)) {
      notes.push(`introduces ${f.id}`);
      blocking = true;
    } else if (f.repaired.includes(pair.key)) notes.push(`repairs ${f.id}`);
    else if (f.baselineFailing.includes(pair.key)) notes.push(`still fails ${f.id}`);
  }
  if (!pair.baseline.traceComplete) notes.push('baseline trace incomplete');
  return { notes, blocking };
}

/** The whole comparison: pairs, case rows, aggregates, gates, evidence, failures, trades, disposition. */
export function compareExperiment(manifest: Manifest, baseline: readonly CaseRecord[], candidate: readonly CaseRecord[]): Comparison {
  const pairs = pairCases(manifest, baseline, candidate);
  const config = diffConfigs(manifest);
  const gates = evaluateGates(manifest, pairs, config);
  const evidence = checkEvidence(manifest, pairs, config);
  const failures = analyseFailures(manifest, pairs);
  const counts = aggregateCounts(pairs);
  const flags = aggregateFlags(pairs);
  const trades = assessTrades(manifest, counts);
  const cases: CaseRow[] = pairs.map((p) => ({
    key: p.key,
    case: p.case,
    repeat: p.repeat,
    correct: { baseline: p.baseline.correct, candidate: p.candidate.correct },
    traceComplete: { baseline: p.baseline.traceComplete, candidate: p.candidate.traceComplete },
    finalOwners: { baseline: p.baseline.finalOwners, candidate: p.candidate.finalOwners },
    counts: caseDeltas(p),
    ...rowNotes(p, gates, failures),
  }));
  const repeatCounts = [...new Set(pairs.map((p) => p.case))].map((c) => pairs.filter((p) => p.case === c).length);
  const disposition = decideDisposition({ manifest, gates, evidence, failures, trades, counts, flags, pairs: pairs.length });
  return {
    experiment: manifest.experiment,
    ...(manifest.title ? { title: manifest.title } : {}),
    owner: manifest.owner,
    declaredAt: manifest.declaredAt,
    baseline: manifest.baseline.label,
    candidate: manifest.candidate.label,
    slice: { ...manifest.changedSlice },
    pairs: pairs.length,
    caseCount: repeatCounts.length,
    repeats: { min: Math.min(...repeatCounts), max: Math.max(...repeatCounts) },
    cases,
    aggregates: { counts, flags },
    gates,
    evidence,
    failures,
    trades,
    config,
    disposition,
  };
}
