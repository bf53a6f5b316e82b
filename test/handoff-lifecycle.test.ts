import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Finding, Receipt, Verdict } from '../src/core/types.js';
import { precedence } from '../src/core/types.js';
import { HANDOFF_FINDING_VERDICTS, auditHandoffs } from '../src/core/rules/handoff/lifecycle.js';
import { ledger, ledgerByRun } from '../src/core/rules/handoff/ledger.js';
import { funnel, funnelByRun } from '../src/handoff/funnel.js';
import { aggregateEvidence } from '../src/handoff/aggregate.js';
import { parseReceiptLines } from '../src/handoff/ndjson.js';
import { handoffResultSchema } from '../src/handoff/schema.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const receiptsDir = new URL('../receipts/handoffs/', import.meta.url);
const files = readdirSync(receiptsDir).filter((f) => f.endsWith('.ndjson')).sort();
const byRun = new Map(files.map((f) => {
  const rs = parseReceiptLines(readFileSync(new URL(f, receiptsDir), 'utf8'));
  return [rs[0].run, rs] as const;
}));
const expected = JSON.parse(readFileSync(new URL('expected.json', receiptsDir), 'utf8')) as Record<string, { verdict: Verdict; codes: string[] }>;
const latest = (rs: Receipt[]): number => Math.max(...rs.map((r) => Date.parse(r.at)));
const allReceipts = [...byRun.values()].flat();
const globalNow = latest(allReceipts);
const codeSet = (fs: Finding[]): string[] => [...new Set(fs.map((f) => f.code))].sort();

// Small trace builder: seconds after 10:00:00.
const base = Date.UTC(2025, 2, 14, 10, 0, 0);
const T = (s: number): string => new Date(base + s * 1000).toISOString();
let seq = 0;
function h(sec: number, handoff: string, attempt: number, state: LooseReceipt['state'], extra: Partial<LooseReceipt> = {}): Receipt {
  seq += 1;
  return asReceipt({ run: 'r', event: `x${String(seq).padStart(3, '0')}`, type: 'handoff', at: T(sec), handoff, attempt, state, from: 'main', to: 'spec', ...extra });
}
const OWN = { finalOwner: 'main', onTimeout: 'return-ownership', duplicateKey: 'k' };
function admitted(handoff: string, attempt: number, t0: number, lease: number, extra: Partial<LooseReceipt> = {}): Receipt[] {
  return [
    h(t0, handoff, attempt, 'PROPOSED', { ...OWN, leaseExpiresAt: T(lease), ...extra }),
    h(t0 + 1, handoff, attempt, 'ADMITTED', { ...OWN, leaseExpiresAt: T(lease), ...extra }),
    h(t0 + 2, handoff, attempt, 'DISPATCHED', extra),
    h(t0 + 3, handoff, attempt, 'RUNNING', extra),
  ];
}
const other = (type: Receipt['type'], sec: number, extra: Partial<LooseReceipt>): Receipt => {
  seq += 1;
  return asReceipt({ run: 'r', event: `x${String(seq).padStart(3, '0')}`, type, at: T(sec), ...extra });
};
const audit = (rs: Receipt[], now = base + 3600_000): Finding[] => auditHandoffs(rs, now);
const codesOf = (rs: Receipt[], now?: number): string[] => codeSet(audit(rs, now));

describe('failure-trace fixtures (receipts/handoffs)', () => {
  it('every fixture run has an expectation and vice versa', () => {
    expect([...byRun.keys()].sort()).toEqual(Object.keys(expected).sort());
  });

  it.each([...byRun.keys()])('%s: the handoff findings are the expected codes', (run) => {
    const rs = byRun.get(run)!;
    // The same with replay's default `now` over all files and over this file alone.
    expect(codeSet(auditHandoffs(rs, globalNow))).toEqual([...expected[run].codes].sort());
    expect(codeSet(auditHandoffs(rs, latest(rs)))).toEqual([...expected[run].codes].sort());
  });

  it.each([...byRun.keys()])('%s: the expected verdict agrees with the highest-precedence handoff finding', (run) => {
    const fs = auditHandoffs(byRun.get(run)!, globalNow);
    for (const f of fs) expect(f.verdict).toBe(HANDOFF_FINDING_VERDICTS[f.code as keyof typeof HANDOFF_FINDING_VERDICTS]);
    if (fs.length === 0) return; // the run classifier decides from the topology layer alone
    const top = fs.map((f) => f.verdict).sort((a, b) => precedence(a) - precedence(b))[0];
    expect(expected[run].verdict).toBe(top);
  });

  it('auditing all runs at once is the union of auditing each run', () => {
    const each = [...byRun.values()].flatMap((rs) => auditHandoffs(rs, globalNow));
    const together = auditHandoffs(allReceipts, globalNow);
    expect(together).toHaveLength(each.length);
    expect(new Set(together.map((f) => JSON.stringify(f)))).toEqual(new Set(each.map((f) => JSON.stringify(f))));
  });

  it('is independent of receipt order and of duplicate delivery', () => {
    const reference = auditHandoffs(allReceipts, globalNow);
    const reversed = [...allReceipts].reverse();
    const doubled = [...allReceipts, ...allReceipts.filter((_, i) => i % 3 === 0).map((r) => ({ ...r }))];
    expect(auditHandoffs(reversed, globalNow)).toEqual(reference);
    expect(auditHandoffs(doubled, globalNow)).toEqual(reference);
  });

  it('every finding names its events and agents, and all handoff findings except lifecycle gaps are settled', () => {
    const fs = auditHandoffs(allReceipts, globalNow);
    expect(fs.length).toBeGreaterThan(0);
    for (const f of fs) {
      expect(f.events.length).toBeGreaterThan(0);
      expect(f.agents.length).toBeGreaterThan(0);
      expect(f.settled).toBe(f.code !== 'lifecycle_gap');
    }
  });
});

describe('state machine', () => {
  it('a forward run with RUNNING skipped is legal', () => {
    const rs = [...admitted('a', 1, 0, 100).filter((r: LooseReceipt) => r.state !== 'RUNNING'), h(50, 'a', 1, 'RETURNED', { stateVersion: '7' }), h(51, 'a', 1, 'ACCEPTED', { stateVersion: '7' })];
    expect(audit(rs)).toEqual([]);
  });

  it('leaving a terminal state is a resurrection; repeating it is not', () => {
    const cancelled = [...admitted('a', 1, 0, 100), h(20, 'a', 1, 'CANCELLED')];
    expect(audit([...cancelled, h(40, 'a', 1, 'CANCELLED', { budgetOp: 'reject', units: { actions: 1 } })])).toEqual([]);
    const revived = audit([...cancelled, h(40, 'a', 1, 'RUNNING')]);
    expect(revived.map((f) => [f.code, f.verdict, f.settled])).toEqual([['resurrection', 'false_complete', true]]);
    expect(codesOf([...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED'), h(51, 'a', 1, 'ACCEPTED'), h(52, 'a', 1, 'REJECTED')])).toEqual(['resurrection']);
  });

  it('a non-terminal receipt timed before progress already seen (clock skew) is not a finding', () => {
    const rs = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED'), h(50.5, 'a', 1, 'RUNNING'), h(51, 'a', 1, 'ACCEPTED')];
    expect(audit(rs)).toEqual([]);
  });

  it('a missing ADMITTED or RETURNED record is a lifecycle gap (uncertain, not settled)', () => {
    const noAdmission = [h(0, 'a', 1, 'PROPOSED', OWN), h(2, 'a', 1, 'DISPATCHED'), h(3, 'a', 1, 'RUNNING'), h(4, 'a', 1, 'FAILED')];
    const gaps = audit(noAdmission);
    expect(gaps.map((f) => [f.code, f.verdict, f.settled])).toEqual([['lifecycle_gap', 'uncertain', false]]);
    const noReturn = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'ACCEPTED')];
    expect(codesOf(noReturn)).toEqual(['lifecycle_gap']);
    // Admission refused: PROPOSED -> REJECTED needs nothing more.
    expect(audit([h(0, 'a', 1, 'PROPOSED', OWN), h(1, 'a', 1, 'REJECTED')])).toEqual([]);
  });
});

describe('acceptance rules', () => {
  const accepted = (ret: number, extra: Partial<Receipt> = {}): Receipt[] => [h(ret, 'a', 1, 'RETURNED', { stateVersion: '7', ...extra }), h(ret + 1, 'a', 1, 'ACCEPTED', { stateVersion: '7' })];

  it('a result returned at the instant of cancellation is accepted_after_cancel; one millisecond earlier is not', () => {
    const end = (sec: number): Receipt => other('run.end', sec, { result: 'cancelled', from: 'main' });
    expect(codesOf([...admitted('a', 1, 0, 100), ...accepted(30), end(30)])).toEqual(['accepted_after_cancel']);
    expect(codesOf([...admitted('a', 1, 0, 100), ...accepted(30), end(30.001)])).toEqual([]);
  });

  it('a result returned exactly at lease expiry is on time; a second later it is accepted_after_expiry', () => {
    expect(codesOf([...admitted('a', 1, 0, 60), ...accepted(60)])).toEqual([]);
    expect(codesOf([...admitted('a', 1, 0, 60), ...accepted(61)])).toEqual(['accepted_after_expiry']);
  });

  it('a renewal counts only when made before the lease expires', () => {
    const renew = (at: number): Receipt => h(at, 'a', 1, 'RUNNING', { leaseExpiresAt: T(200) });
    expect(codesOf([...admitted('a', 1, 0, 60), renew(60), ...accepted(150)])).toEqual([]);
    expect(codesOf([...admitted('a', 1, 0, 60), renew(61), ...accepted(150)])).toEqual(['accepted_after_expiry']);
  });

  it('accepting under a state version other than the observed one is accepted_stale', () => {
    const rs = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED', { stateVersion: '7' }), h(51, 'a', 1, 'ACCEPTED', { stateVersion: '8' })];
    expect(codesOf(rs)).toEqual(['accepted_stale']);
    const rejected = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED', { stateVersion: '7' }), h(51, 'a', 1, 'REJECTED', { stateVersion: '8' })];
    expect(codesOf(rejected)).toEqual([]);
  });
});

describe('ownership and leases', () => {
  it('an admitted handoff with no final owner or timeout disposition is incomplete; a refused proposal is not', () => {
    const bare = { duplicateKey: 'k', leaseExpiresAt: T(100) };
    const refused = [h(0, 'a', 1, 'PROPOSED', bare), h(1, 'a', 1, 'REJECTED')];
    expect(audit(refused)).toEqual([]);
    const orphan = [h(0, 'a', 1, 'PROPOSED', bare), h(1, 'a', 1, 'ADMITTED', bare), h(2, 'a', 1, 'DISPATCHED'), h(50, 'a', 1, 'RETURNED'), h(51, 'a', 1, 'ACCEPTED')];
    const fs = audit(orphan);
    expect(fs.map((f) => [f.code, f.verdict])).toEqual([['missing_final_owner', 'incomplete'], ['missing_timeout_disposition', 'incomplete']]);
    // Named on any receipt of the logical handoff: satisfied.
    expect(audit([...orphan, h(0.5, 'a', 1, 'PROPOSED', { finalOwner: 'main', onTimeout: 'escalate' })])).toEqual([]);
  });

  it('an open attempt past its lease at `now` is lease_expired_open; at now == lease it has expired', () => {
    const open = admitted('a', 1, 0, 60);
    expect(codesOf(open, base + 59_999)).toEqual([]);
    expect(codesOf(open, base + 60_000)).toEqual(['lease_expired_open']);
    expect(codesOf([...open, h(60, 'a', 1, 'TIMED_OUT')], base + 120_000)).toEqual([]);
    expect(codesOf([...open, h(50, 'a', 1, 'RETURNED')], base + 120_000)).toEqual([]);
  });

  it('a replacement admitted exactly at expiry is not a duplicate; one second earlier it is', () => {
    const first = admitted('a', 1, 0, 60);
    const replacement = (t: number): Receipt[] => [h(t, 'a', 2, 'ADMITTED', { ...OWN, leaseExpiresAt: T(t + 60) }), h(t + 1, 'a', 2, 'DISPATCHED'), h(t + 30, 'a', 2, 'RETURNED'), h(t + 31, 'a', 2, 'ACCEPTED')];
    expect(codesOf([...first, h(60, 'a', 1, 'TIMED_OUT'), ...replacement(60)])).toEqual([]);
    const dup = audit([...first, h(60, 'a', 1, 'TIMED_OUT'), ...replacement(59)]);
    expect(dup.map((f) => [f.code, f.verdict])).toEqual([['duplicate_active', 'ambiguous_route']]);
  });

  it('independent roles with distinct work keys are not duplicates', () => {
    const a = admitted('a', 1, 0, 60, { duplicateKey: 'k:reviewer-a' });
    const b = admitted('b', 1, 0, 60, { duplicateKey: 'k:reviewer-b', to: 'spec-b' });
    expect(audit([...a, ...b, h(30, 'a', 1, 'CANCELLED'), h(30, 'b', 1, 'CANCELLED')])).toEqual([]);
  });

  it('only the final owner completes the run: a target completion is target_completed_parent', () => {
    const done = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED'), h(51, 'a', 1, 'ACCEPTED')];
    expect(audit([...done, other('outcome', 60, { verified: true, from: 'main' }), other('run.end', 61, { result: 'completed', from: 'main' })])).toEqual([]);
    expect(audit([...done, other('outcome', 60, { verified: false, from: 'spec' })])).toEqual([]);
    const fs = audit([...done, other('run.end', 61, { result: 'completed', from: 'spec' })]);
    expect(fs.map((f) => [f.code, f.verdict, f.agents])).toEqual([['target_completed_parent', 'false_complete', ['main', 'spec']]]);
  });
});

describe('duplicate delivery and conflicts', () => {
  it('a repeat with equal content counts once; a repeat with different content is dropped', () => {
    const rs = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED'), h(51, 'a', 1, 'ACCEPTED')];
    expect(audit([...rs, ...rs.map((r) => ({ ...r, at: r.at.replace('Z', '+00:00') }))])).toEqual([]);
    const returned = rs.find((r: LooseReceipt) => r.state === 'RETURNED')!;
    // The same event id claims a different state: neither copy is used, so the acceptance has no return record.
    expect(codesOf([...rs, asReceipt({ ...returned, state: 'FAILED' })])).toEqual(['lifecycle_gap']);
  });
});

describe('ledger', () => {
  it('counts reserved, consumed, released and rejected units, with timed-out and duplicate attempts (duplicate dispatch trace)', () => {
    const l = ledger(byRun.get('ho-duplicate-dispatch')!);
    expect(l.root).toEqual({ actions: 24, contextUnits: 470, effects: 1 });
    expect(l.reserved).toEqual({ actions: 4, contextUnits: 80, effects: 0 });
    expect(l.consumed).toEqual({ actions: 3, contextUnits: 45, effects: 0 });
    expect(l.released).toEqual({ actions: 1, contextUnits: 35, effects: 0 });
    expect(l.rejected).toEqual({ actions: 2, contextUnits: 40, effects: 0 });
    expect(l.totalWork).toEqual({ actions: 5, contextUnits: 85, effects: 0 });
    expect(l.outstanding).toEqual({ actions: 0, contextUnits: 0, effects: 0 });
    expect(l.timedOut).toEqual({ attempts: 1, units: { actions: 1, contextUnits: 15, effects: 0 } });
    expect(l.duplicate).toEqual({ attempts: 1, units: { actions: 2, contextUnits: 40, effects: 0 } });
    expect(l.late.attempts).toBe(0);
    // Attempt 1 still holds the 1 action / 15 units it consumed when attempt 3 reserves.
    expect(l.peakCommitted).toEqual({ actions: 3, contextUnits: 55, effects: 0 });
  });

  it('a late return after cancellation is counted as rejected work, not charged (cancel trace)', () => {
    const l = ledger(byRun.get('ho-cancel-late-return')!);
    expect(l.consumed).toEqual({ actions: 0, contextUnits: 0, effects: 0 });
    expect(l.rejected).toEqual({ actions: 2, contextUnits: 35, effects: 0 });
    expect(l.late).toEqual({ attempts: 1, units: { actions: 2, contextUnits: 35, effects: 0 } });
  });

  it('reservations that were released do not count against later ones', () => {
    const root = other('handoff', 0, { budgetOp: 'root', units: { actions: 4, contextUnits: 80 }, from: 'main' });
    const seqRes = [
      root,
      ...admitted('a', 1, 1, 100), h(2, 'a', 1, 'ADMITTED', { budgetOp: 'reserve', units: { actions: 3, contextUnits: 60 } }),
      h(20, 'a', 1, 'RETURNED', { budgetOp: 'consume', units: { actions: 1, contextUnits: 10 } }),
      h(21, 'a', 1, 'ACCEPTED', { budgetOp: 'release', units: { actions: 2, contextUnits: 50 } }),
      ...admitted('b', 1, 30, 100, { duplicateKey: 'k2' }), h(31, 'b', 1, 'ADMITTED', { duplicateKey: 'k2', budgetOp: 'reserve', units: { actions: 3, contextUnits: 60 } }),
      h(50, 'b', 1, 'CANCELLED', { budgetOp: 'release', units: { actions: 3, contextUnits: 60 } }),
    ];
    expect(audit(seqRes)).toEqual([]);
    expect(ledger(seqRes).peakCommitted).toEqual({ actions: 4, contextUnits: 70, effects: 0 });
    // Without the release of `a`, the second reservation overcommits the root.
    const overlapping = seqRes.map((r: LooseReceipt) => asReceipt(r.handoff === 'a' && r.budgetOp === 'release' ? { ...r, budgetOp: undefined, units: undefined } : r));
    expect(codesOf(overlapping)).toEqual(['budget_overcommitted']);
  });

  it('work consumed beyond a reservation is committed too', () => {
    const root = other('handoff', 0, { budgetOp: 'root', units: { actions: 4, contextUnits: 80 }, from: 'main' });
    const rs = (consumed: number): Receipt[] => [
      root,
      ...admitted('a', 1, 1, 100), h(2, 'a', 1, 'ADMITTED', { budgetOp: 'reserve', units: { actions: 2, contextUnits: 40 } }),
      h(20, 'a', 1, 'RETURNED', { budgetOp: 'consume', units: { actions: consumed, contextUnits: 40 } }),
      h(21, 'a', 1, 'REJECTED'),
    ];
    expect(codesOf(rs(4))).toEqual([]);
    expect(codesOf(rs(5))).toEqual(['budget_overcommitted']);
    expect(ledger(rs(5)).peakCommitted.actions).toBe(5);
  });

  it('budget_copied: a reservation covering the whole root work budget; one unit less is not a copy', () => {
    const root = other('handoff', 0, { budgetOp: 'root', units: { actions: 24, contextUnits: 470, effects: 1 }, from: 'main' });
    const reserve = (a: number, c: number): Receipt[] => [...admitted('a', 1, 1, 100), h(2, 'a', 1, 'ADMITTED', { budgetOp: 'reserve', units: { actions: a, contextUnits: c } }), h(10, 'a', 1, 'CANCELLED')];
    expect(codesOf([root, ...reserve(24, 470)])).toEqual(['budget_copied']);
    expect(codesOf([root, ...reserve(24, 469)])).toEqual([]);
    // No root receipt: nothing to check against.
    expect(codesOf(reserve(24, 470))).toEqual([]);
  });

  it('ledger() takes one run; ledgerByRun() splits several', () => {
    expect(() => ledger(allReceipts)).toThrow(RangeError);
    const m = ledgerByRun(allReceipts);
    expect([...m.keys()].sort()).toEqual([...byRun.keys()].sort());
    expect(m.get('ho-budget-overcommitted')!.peakCommitted.actions).toBe(6);
  });
});

describe('funnel', () => {
  it('duplicate-active trace: two dispatched, one non-duplicate admitted', () => {
    expect(funnel(byRun.get('ho-duplicate-active')!)).toEqual({ dispatched: 2, completedBeforeLease: 2, structurallyValid: 2, inScopeAndCurrent: 2, nonDuplicate: 1, admitted: 1 });
  });

  it('stale-version trace: the stale artifact drops out at the currency stage', () => {
    expect(funnel(byRun.get('ho-stale-version')!)).toEqual({ dispatched: 2, completedBeforeLease: 2, structurallyValid: 2, inScopeAndCurrent: 1, nonDuplicate: 1, admitted: 1 });
  });

  it('duplicate-dispatch trace: the timed-out attempt never completes; the refused one was never dispatched', () => {
    expect(funnel(byRun.get('ho-duplicate-dispatch')!)).toEqual({ dispatched: 2, completedBeforeLease: 1, structurallyValid: 1, inScopeAndCurrent: 1, nonDuplicate: 1, admitted: 1 });
  });

  it('a returned artifact with status error is not structurally valid', () => {
    const rs = [...admitted('a', 1, 0, 100), h(50, 'a', 1, 'RETURNED', { status: 'error', stateVersion: '7' }), h(51, 'a', 1, 'REJECTED', { stateVersion: '7' })];
    expect(funnel(rs)).toEqual({ dispatched: 1, completedBeforeLease: 1, structurallyValid: 0, inScopeAndCurrent: 0, nonDuplicate: 0, admitted: 0 });
  });

  it('stages never grow, and the summed funnel equals the sum per run', () => {
    const per = [...funnelByRun(allReceipts).values()];
    const sum = funnel(allReceipts);
    const keys = ['dispatched', 'completedBeforeLease', 'structurallyValid', 'inScopeAndCurrent', 'nonDuplicate', 'admitted'] as const;
    for (const f of per) for (let i = 1; i < keys.length; i++) expect(f[keys[i]]).toBeLessThanOrEqual(f[keys[i - 1]]);
    for (const k of keys) expect(sum[k]).toBe(per.reduce((a, f) => a + f[k], 0));
  });
});

describe('aggregation of conflicting manuals', () => {
  const dir = new URL('./fixtures/handoff/conflicting-manuals/', import.meta.url);
  const load = (f: string) => handoffResultSchema.parse(JSON.parse(readFileSync(new URL(f, dir), 'utf8')));
  const a = load('result.json');
  const b = load('result-b.json');

  it('keeps both editions with provenance and escalates instead of voting', () => {
    const agg = aggregateEvidence([a, b]);
    expect(agg.decision).toBe('escalate');
    expect(agg.conflicts).toEqual([{
      code: 'conflicting_evidence',
      source: 'EQ-104-service-manual',
      editions: ['rev-B-2019', 'rev-C-2023'],
      provenance: [
        { handoffId: 'handoff-manual-11', attempt: 1, target: 'manual-reviewer-a' },
        { handoffId: 'handoff-manual-12', attempt: 1, target: 'manual-reviewer-b' },
      ],
    }]);
    expect(agg.citations.map((c) => `${c.source}@${c.edition}`)).toEqual(['EQ-104-parts-bulletin@2024-11', 'EQ-104-service-manual@rev-B-2019', 'EQ-104-service-manual@rev-C-2023']);
  });

  it('a majority does not resolve a conflict', () => {
    const b2 = { ...b, handoffId: 'handoff-manual-13', target: 'manual-specialist' };
    const agg = aggregateEvidence([a, b, b2]);
    expect(agg.decision).toBe('escalate');
    expect(agg.conflicts[0].editions).toEqual(['rev-B-2019', 'rev-C-2023']);
  });

  it('identical citations merge with both provenances; the order of results does not matter', () => {
    const b2 = { ...b, handoffId: 'handoff-manual-13', target: 'manual-specialist' };
    const agg = aggregateEvidence([b, b2]);
    expect(agg.decision).toBe('aggregate');
    expect(agg.citations.every((c) => c.provenance.length === 2)).toBe(true);
    expect(aggregateEvidence([b2, b])).toEqual(agg);
  });
});
