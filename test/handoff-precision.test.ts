/**
 * Handoff lifecycle times at full precision (semantics 5, "Times at full precision, as in 2a"). Random lifecycles
 * with instants 1 ns, 1 µs and 0.4 ms either side of (or exactly at) leases, renewals, cancellations and cancelled
 * run ends; the time-dependent findings (accepted_after_cancel, accepted_after_expiry, lease_expired_open,
 * duplicate_active) of the product's audit equal those of the reference written from section 5's wording alone
 * (test/reference/handoff.ts, BigInt nanoseconds), per attempt, at a `now` itself on those instants. The same
 * lifecycles through the full verdict (classify, with a pinned contract) carry the same findings.
 * Before this change the audit read instants with Date.parse (milliseconds): about one lifecycle in ten disagreed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify, parseInstant, type Receipt } from '../src/core/index.js';
import { factFindings, runFacts } from '../src/core/rules/handoff/lifecycle.js';
import { traceRuns } from '../src/core/rules/handoff/trace.js';
import { receipt, registryOf } from './helpers/receipts.js';
import { TIME_CODES, build, caseArb, type Built } from './helpers/handoff-lifecycles.js';
import { referenceHandoffFindings, type RefHandoffFinding } from './reference/handoff.js';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 3000);

const line = (f: RefHandoffFinding) => `${f.code} ${[...f.attempts].sort().join(',')}`;

/** The product's time-dependent findings, per attempt (the audit's tagged findings). */
function product(b: Built): string[] {
  const trace = traceRuns(b.receipts)[0];
  return factFindings(runFacts(trace, parseInstant(b.nowText)))
    .filter((t) => TIME_CODES.has(t.finding.code))
    .map((t) => line({ code: t.finding.code as RefHandoffFinding['code'], attempts: t.attempts }))
    .sort();
}
const reference = (b: Built): string[] => referenceHandoffFindings(b.receipts, b.nowText).map(line).sort();

const registry = registryOf(`
contract: h
version: "1"
owner: o
agents: [o, w]
allow:
  - o -> w : handoff
phases:
  main:
    outcome: optional
    max_duration: 1d
    expect: []
`);

describe('handoff lifecycles at full precision (semantics 5)', () => {
  it('the audit equals the reference from section 5 on lifecycles timed 1 ns, 1 µs and 0.4 ms around leases, renewals and cancellations', () => {
    const seen = new Map<string, number>();
    fc.assert(
      fc.property(caseArb, (c) => {
        const b = build(c);
        const got = product(b);
        expect(got, `${b.nowText}\n${b.receipts.map((r) => JSON.stringify(r)).join('\n')}`).toEqual(reference(b));
        for (const l of got) seen.set(l.split(' ')[0], (seen.get(l.split(' ')[0]) ?? 0) + 1);
        // the full verdict carries the same handoff findings
        const v = classify(b.receipts, parseInstant(b.nowText), registry);
        expect([...new Set(v.findings.filter((f) => TIME_CODES.has(f.code)).map((f) => f.code))].sort()).toEqual([...new Set(got.map((l) => l.split(' ')[0]))].sort());
      }),
      { numRuns: RUNS, seed: 28 },
    );
    // not vacuous: every code occurs, on both sides of its boundary (checked by the examples below)
    for (const code of TIME_CODES) expect(seen.get(code) ?? 0, code).toBeGreaterThan(RUNS / 100);
  });

  // Section 5's sentences, one by one (each failed when instants were milliseconds).
  const lease = '2026-03-01T08:03:56.543Z';
  const h = (event: string, at: string, state: string, extra: Record<string, unknown> = {}) =>
    receipt({ run: 'r', event, type: 'handoff', at, handoff: 'h1', attempt: 1, state, from: 'o', to: 'w', duplicateKey: 'k', finalOwner: 'o', onTimeout: 'cancel', ...extra });
  const startReceipt = receipt({ run: 'r', event: 'a0', type: 'run.start', at: '2026-03-01T08:02:00Z', contract: 'h' });
  const admitted = [startReceipt, h('a1', '2026-03-01T08:03:00Z', 'ADMITTED', { leaseExpiresAt: lease }), h('a2', '2026-03-01T08:03:01Z', 'DISPATCHED')];
  const codesAt = (rs: Receipt[], now: string) => [...new Set(factFindings(runFacts(traceRuns(rs)[0], parseInstant(now))).map((t) => t.finding.code))].filter((c) => TIME_CODES.has(c)).sort();

  it('a return 0.4 ms after the lease is late; one exactly at it is on time', () => {
    const late = [...admitted, h('r', '2026-03-01T08:03:56.5434Z', 'RETURNED'), h('x', '2026-03-01T08:03:57Z', 'ACCEPTED')];
    expect(codesAt(late, '2026-03-01T09:00:00Z')).toEqual(['accepted_after_expiry']);
    const classified = classify(late, parseInstant('2026-03-01T09:00:00Z'), registry);
    expect(classified.verdict).toBe('false_complete');
    const onTime = [...admitted, h('r', lease, 'RETURNED'), h('x', '2026-03-01T08:03:57Z', 'ACCEPTED')];
    expect(codesAt(onTime, '2026-03-01T09:00:00Z')).toEqual([]);
  });

  it('a return 0.4 ms before a cancellation is before it; exactly at it (or at a cancelled run.end) is after it', () => {
    const cancel = (at: string) => h('c', at, 'CANCELLED');
    const before = [...admitted, h('r', '2026-03-01T08:03:10.0006Z', 'RETURNED'), cancel('2026-03-01T08:03:10.001Z'), h('x', '2026-03-01T08:03:10.002Z', 'ACCEPTED')];
    expect(codesAt(before, '2026-03-01T08:03:20Z')).toEqual([]);
    const exactly = [...admitted, h('r', '2026-03-01T08:03:10.000000001Z', 'RETURNED'), cancel('2026-03-01T08:03:10.000000001Z'), h('x', '2026-03-01T08:03:10.002Z', 'ACCEPTED')];
    expect(codesAt(exactly, '2026-03-01T08:03:20Z')).toEqual(['accepted_after_cancel']);
    const runEnd = [...admitted, h('r', '2026-03-01T08:03:10.0000004Z', 'RETURNED'), h('x', '2026-03-01T08:03:10.001Z', 'ACCEPTED'), receipt({ run: 'r', event: 'end', type: 'run.end', at: '2026-03-01T08:03:10.0000004Z', result: 'cancelled', from: 'o' })];
    expect(codesAt(runEnd, '2026-03-01T08:03:20Z')).toEqual(['accepted_after_cancel']);
    // without a RETURNED record the acceptance time stands for the return: 1 ns before the cancellation is before it
    const acceptOnly = [...admitted, h('x', '2026-03-01T08:03:10Z', 'ACCEPTED'), cancel('2026-03-01T08:03:10.000000001Z')];
    expect(codesAt(acceptOnly, '2026-03-01T08:03:20Z')).toEqual([]);
  });

  it('now at the lease is past it (lease_expired_open); 1 ns before it is not; the timer fires at the next millisecond', () => {
    const rs = [startReceipt, { ...admitted[1], leaseExpiresAt: '2026-03-01T08:03:56.5430004Z' }, admitted[2]];
    expect(codesAt(rs, '2026-03-01T08:03:56.5430004Z')).toEqual(['lease_expired_open']);
    expect(codesAt(rs, '2026-03-01T08:03:56.543000399Z')).toEqual([]);
    const v = classify(rs, parseInstant('2026-03-01T08:03:56.543000399Z'), registry);
    expect(v.nextChangeAt).toBe(Date.parse('2026-03-01T08:03:56.544Z'));
    expect(classify(rs, parseInstant('2026-03-01T08:03:56.5430004Z'), registry).findings.map((f) => f.code)).toContain('lease_expired_open');
  });

  it('a renewal timed exactly at the lease in force counts; 1 µs after it does not', () => {
    const renew = (at: string) => h('n', at, 'RUNNING', { leaseExpiresAt: '2026-03-01T08:05:00Z' });
    const returned = [h('r', '2026-03-01T08:04:00Z', 'RETURNED'), h('x', '2026-03-01T08:04:01Z', 'ACCEPTED')];
    expect(codesAt([...admitted, renew(lease), ...returned], '2026-03-01T09:00:00Z')).toEqual([]);
    expect(codesAt([...admitted, renew('2026-03-01T08:03:56.543001Z'), ...returned], '2026-03-01T09:00:00Z')).toEqual(['accepted_after_expiry']);
  });

  it('a replacement starting exactly at the previous attempt\'s CANCELLED does not overlap it; 1 ns earlier does', () => {
    const second = (at: string) => receipt({ run: 'r', event: 'b1', type: 'handoff', at, handoff: 'h1', attempt: 2, state: 'ADMITTED', from: 'o', to: 'w', duplicateKey: 'k', leaseExpiresAt: '2026-03-01T08:10:00Z' });
    const cancelled = [...admitted, h('c', '2026-03-01T08:03:30.0000004Z', 'CANCELLED')];
    expect(codesAt([...cancelled, second('2026-03-01T08:03:30.0000004Z')], '2026-03-01T08:04:00Z')).toEqual([]);
    expect(codesAt([...cancelled, second('2026-03-01T08:03:30.000000399Z')], '2026-03-01T08:04:00Z')).toEqual(['duplicate_active']);
  });
});
