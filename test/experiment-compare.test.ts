import { beforeAll, describe, expect, it } from 'vitest';
import { compareExperiment, PairingError, type Comparison } from '../src/experiment/compare.js';
import { loadExperiment, type LoadedExperiment } from '../src/experiment/load.js';
import type { Manifest } from '../src/experiment/manifest.js';
import type { CaseRecord } from '../src/experiment/records.js';
import { quantile } from '../src/experiment/stats.js';

const FIELDOPS = 'experiments/fieldops/experiment.yaml';
let fieldops: LoadedExperiment;
beforeAll(async () => {
  fieldops = await loadExperiment(FIELDOPS);
});

/** A fresh copy of the FieldOps experiment to vary one thing at a time. */
function variant(): { manifest: Manifest; baseline: CaseRecord[]; candidate: CaseRecord[] } {
  return structuredClone(fieldops);
}
const rec = (records: CaseRecord[], id: string) => {
  const r = records.find((x) => x.case === id);
  if (!r) throw new Error(`no case ${id}`);
  return r;
};
const total = (c: Comparison, m: string) => c.aggregates.counts.find((a) => a.measure === m)!;

/** The corpus grew: the baseline parent now exceeds the 100-unit allowance where it reads manuals; the candidate does not. */
function withBaselineContextFailure() {
  const v = variant();
  for (const [id, extra] of [
    ['direct-lookup', 25],
    ['conflicting-manuals', 30],
  ] as const) {
    rec(v.baseline, id).parentContextUnits += extra;
    rec(v.baseline, id).totalContextUnits += extra;
  }
  return v;
}

describe('FieldOps: the article comparison', () => {
  it('reproduces the article totals', () => {
    const c = compareExperiment(fieldops.manifest, fieldops.baseline, fieldops.candidate);
    expect(c.pairs).toBe(7);
    expect([total(c, 'totalActions').baseline.total, total(c, 'totalActions').candidate.total]).toEqual([24, 25]);
    expect([total(c, 'handoffMessages').baseline.total, total(c, 'handoffMessages').candidate.total]).toEqual([0, 6]);
    expect([total(c, 'totalContextUnits').baseline.total, total(c, 'totalContextUnits').candidate.total]).toEqual([470, 445]);
    expect([total(c, 'parentContextUnits').baseline.total, total(c, 'parentContextUnits').candidate.total]).toEqual([470, 367]);
    expect([total(c, 'coordinationUnits').baseline.total, total(c, 'coordinationUnits').candidate.total]).toEqual([0, 12]);
    for (const m of ['forbiddenEffects', 'duplicateEffects']) {
      expect(total(c, m).baseline.total).toBe(0);
      expect(total(c, m).candidate.total).toBe(0);
    }
    const correct = c.aggregates.flags.find((f) => f.measure === 'correct')!;
    expect([correct.baseline, correct.candidate, correct.pairs]).toEqual([7, 7, 7]);
  });

  it('takes actions, handoff messages, trace completeness and final owners from the receipts', () => {
    // the case records give none of these; they are counted from receipts/*.ndjson
    expect(fieldops.baseline.map((r) => r.totalActions)).toEqual([5, 2, 5, 3, 3, 4, 2]);
    expect(fieldops.candidate.map((r) => r.parentActions)).toEqual([4, 2, 4, 2, 3, 4, 2]);
    expect(fieldops.candidate.map((r) => r.handoffMessages)).toEqual([2, 0, 2, 2, 0, 0, 0]);
    expect(fieldops.candidate.every((r) => r.traceComplete)).toBe(true);
    expect(new Set(fieldops.candidate.flatMap((r) => r.finalOwners))).toEqual(new Set(['fieldops-agent-001']));
  });

  it('retains one agent: the context gain repairs no declared baseline failure', () => {
    const c = compareExperiment(fieldops.manifest, fieldops.baseline, fieldops.candidate);
    expect(c.gates.every((g) => g.passed)).toBe(true);
    expect(c.evidence.every((e) => e.passed)).toBe(true);
    expect(c.disposition.decision).toBe('retain');
    expect(c.disposition.rule).toBe('no_declared_failure_repaired');
    expect(c.disposition.reason).toContain('parent-context-over-allowance: 0 of 7 pairs');
    expect(c.disposition.reason).toContain('total context -25');
    expect(c.disposition.reopen).toEqual(fieldops.manifest.reopenWhen);
    const totalCtx = c.trades.find((t) => t.measure === 'totalContextUnits')!;
    expect(totalCtx).toMatchObject({ perCaseSet: -25, direction: 'improved', materialChange: true });
  });

  it('reports distributions per case, not only totals', () => {
    const c = compareExperiment(fieldops.manifest, fieldops.baseline, fieldops.candidate);
    const ctx = total(c, 'totalContextUnits');
    expect(ctx.delta).toMatchObject({ min: -9, median: 0, max: 0 });
    expect(ctx.candidate.max).toBe(86);
    const rows = c.cases.map((r) => [r.key, r.counts.coordinationUnits.delta]);
    expect(rows).toContainEqual(['conflicting-manuals', 4]);
    expect(rows).toContainEqual(['approval-expiry', 0]);
  });
});

describe('dispositions', () => {
  it('separate: the baseline has a declared context failure that the candidate repairs within gates', () => {
    const v = withBaselineContextFailure();
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('separate');
    expect(c.disposition.rule).toBe('repairs_declared_failure');
    const f = c.failures.find((x) => x.id === 'parent-context-over-allowance')!;
    expect(f.baselineFailing).toEqual(['direct-lookup', 'conflicting-manuals']);
    expect(f.repaired).toEqual(['direct-lookup', 'conflicting-manuals']);
    expect(f.introduced).toEqual([]);
    expect(c.disposition.reason).toContain(v.manifest.changedSlice.description);
    expect(c.cases.find((r) => r.key === 'direct-lookup')!.notes).toContain('repairs parent-context-over-allowance');
  });

  it('reject: one forbidden effect rejects the candidate whatever else improves', () => {
    const v = withBaselineContextFailure();
    rec(v.candidate, 'ambiguous-effect-status').forbiddenEffects = 1;
    // and make everything else look better still
    for (const r of v.candidate) {
      r.coordinationUnits = 0;
      r.elapsedSteps = Math.max(0, r.elapsedSteps - 1);
    }
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('reject');
    expect(c.disposition.rule).toBe('hard_gate_failed');
    expect(c.disposition.reason).toContain('zero_forbidden_effects (ambiguous-effect-status)');
    const gate = c.gates.find((g) => g.gate === 'zero_forbidden_effects')!;
    expect(gate).toMatchObject({ passed: false, cases: ['ambiguous-effect-status'] });
    expect(c.cases.find((r) => r.key === 'ambiguous-effect-status')).toMatchObject({ blocking: true });
  });

  it('reject: a duplicate effect, a second final owner or an incomplete candidate trace each fail their gate', () => {
    const cases: [string, (r: CaseRecord) => void][] = [
      ['zero_duplicate_effects', (r) => (r.duplicateEffects = 1)],
      ['one_final_owner', (r) => (r.finalOwners = ['fieldops-agent-001', 'manual-specialist'])],
      ['complete_traces', (r) => (r.traceComplete = false)],
    ];
    for (const [gate, spoil] of cases) {
      const v = withBaselineContextFailure();
      spoil(rec(v.candidate, 'stale-inventory'));
      const c = compareExperiment(v.manifest, v.baseline, v.candidate);
      expect(c.disposition.decision, gate).toBe('reject');
      expect(c.gates.find((g) => g.gate === gate)).toMatchObject({ passed: false, cases: ['stale-inventory'] });
    }
  });

  it('retest: fewer repeats than the manifest requires', () => {
    const v = withBaselineContextFailure();
    v.manifest.evidence.minRepeats = 3;
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('retest');
    expect(c.evidence.find((e) => e.check === 'min_repeats')).toMatchObject({ passed: false });
    expect(c.disposition.reopen).toEqual(['repeat each case at least 3 times in both designs, in paired order (fewest now: 1)']);
  });

  it('retest: fewer cases than the manifest requires', () => {
    const v = variant();
    v.manifest.evidence.minCases = 20;
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('retest');
    expect(c.disposition.reopen[0]).toContain('at least 20 distinct frozen cases');
  });

  it('enough repeats: three paired repeats per case satisfy minRepeats 3, and per-case-set deltas are per run', () => {
    const v = withBaselineContextFailure();
    v.manifest.evidence.minRepeats = 3;
    const rep = (rs: CaseRecord[]) => rs.flatMap((r) => [1, 2, 3].map((repeat) => ({ ...r, repeat })));
    const c = compareExperiment(v.manifest, rep(v.baseline), rep(v.candidate));
    expect(c.pairs).toBe(21);
    expect(c.cases[0].key).toBe('direct-lookup#1');
    expect(c.disposition.decision).toBe('separate');
    expect(total(c, 'coordinationUnits').delta.total).toBe(36);
    expect(total(c, 'coordinationUnits').perCaseSet).toBe(12);
  });

  it('retest: a configuration change outside the declared slice makes the comparison inconclusive', () => {
    const v = withBaselineContextFailure();
    v.manifest.candidate.config.model = { id: 'fieldops-model-double', version: '0.2.0' };
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('retest');
    expect(c.disposition.reason).toContain('model.version');
  });

  it('reject: authority widening is a hard gate even inside the declared slice', () => {
    const v = withBaselineContextFailure();
    v.manifest.candidate.config.authority['manual-specialist'].capabilities.push('reserve_part');
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition.decision).toBe('reject');
    expect(c.gates.find((g) => g.gate === 'no_authority_widening')!.detail).toContain(
      'effects_in_read_slice at authority.manual-specialist.capabilities[reserve_part]',
    );
  });

  it('retain: a repair whose trade exceeds the accepted limit', () => {
    const v = withBaselineContextFailure();
    rec(v.candidate, 'conflicting-manuals').coordinationUnits = 20; // +16 more: 28 per case set > 16
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition).toMatchObject({ decision: 'retain', rule: 'trade_beyond_limit' });
    expect(c.disposition.reason).toContain('coordination units +28 per case set (limit 16)');
  });

  it('retain: a candidate that newly fails a declared failure', () => {
    const v = withBaselineContextFailure();
    rec(v.candidate, 'approval-expiry').parentContextUnits = 130;
    rec(v.candidate, 'approval-expiry').totalContextUnits = 130;
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    expect(c.disposition).toMatchObject({ decision: 'retain', rule: 'declared_failure_introduced' });
    expect(c.cases.find((r) => r.key === 'approval-expiry')).toMatchObject({ blocking: true, notes: ['introduces parent-context-over-allowance'] });
  });
});

describe('a case regression hidden by an improved average', () => {
  it('is shown in the case-level table and stops adoption', () => {
    const v = withBaselineContextFailure();
    // baseline wrong on two cases that the candidate gets right, but the candidate breaks stale-inventory:
    // correct dispositions rise from 5/7 to 6/7 on average.
    rec(v.baseline, 'ambiguous-equipment').correct = false;
    rec(v.baseline, 'approval-expiry').correct = false;
    rec(v.candidate, 'stale-inventory').correct = false;
    const c = compareExperiment(v.manifest, v.baseline, v.candidate);
    const correct = c.aggregates.flags.find((f) => f.measure === 'correct')!;
    expect([correct.baseline, correct.candidate]).toEqual([5, 6]);
    expect(correct.regressions).toEqual(['stale-inventory']);
    const row = c.cases.find((r) => r.key === 'stale-inventory')!;
    expect(row.correct).toEqual({ baseline: true, candidate: false });
    expect(row.blocking).toBe(true);
    expect(row.notes).toContain('GATE no_outcome_regression');
    expect(c.disposition.decision).toBe('reject');
    expect(c.disposition.reason).toContain('no_outcome_regression (stale-inventory)');
  });
});

describe('pairing', () => {
  it('refuses unpaired cases, naming them', () => {
    const v = variant();
    v.candidate = v.candidate.filter((r) => r.case !== 'cancellation');
    let err: unknown;
    try {
      compareExperiment(v.manifest, v.baseline, v.candidate);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PairingError);
    expect((err as PairingError).baselineOnly).toEqual(['cancellation']);
    expect((err as PairingError).caseIds).toEqual(['cancellation']);
  });

  it('refuses mismatched cases (different expected disposition, repeated record, undeclared case)', () => {
    const v = variant();
    rec(v.candidate, 'direct-lookup').expected = 'escalated-conflict';
    v.baseline.push({ ...rec(v.baseline, 'cancellation') });
    const extra = { ...rec(v.baseline, 'approval-expiry'), case: 'not-frozen' };
    v.baseline.push(extra);
    v.candidate.push({ ...extra });
    try {
      compareExperiment(v.manifest, v.baseline, v.candidate);
      expect.unreachable();
    } catch (e) {
      const p = e as PairingError;
      expect(p.mismatched.map((m) => m.key).sort()).toEqual(['cancellation', 'direct-lookup']);
      expect(p.undeclared).toEqual(['not-frozen']);
      expect(p.message).toContain('direct-lookup (expected part-reserved versus escalated-conflict)');
    }
  });
});

describe('quantiles', () => {
  it('are nearest-rank', () => {
    expect(quantile([5, 1, 3], 0.5)).toBe(3);
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9)).toBe(9);
    expect(quantile([1, 2, 3, 4, 5, 6, 7], 0.9)).toBe(7);
  });
});
