/**
 * The article's race orderings (Stage 6 and Exercise 4): result before cancel and cancel before
 * result; lease renewal before and after expiry; the first attempt completing before and after its
 * replacement. For every generated timing, whatever the delivery order of the receipts (shuffled,
 * with duplicate deliveries), auditHandoffs gives the same findings, and those findings agree with
 * the document-level admission decisions on the same timings.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { auditHandoffs } from '../src/core/rules/handoff/lifecycle.js';
import { admitHandoff } from '../src/handoff/admit.js';
import { admitReturn } from '../src/handoff/return.js';
import type { Handoff, HandoffResult, HandoffStateDoc, ParentEnvelope } from '../src/handoff/schema.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const base = Date.UTC(2025, 2, 14, 10, 0, 0);
const T = (s: number): string => new Date(base + s * 1000).toISOString();
const NOW = base + 3600_000;

function receiptFactory(run: string) {
  let n = 0;
  return (sec: number, fields: Partial<LooseReceipt>): Receipt => {
    n += 1;
    return asReceipt({ run, event: `e${String(n).padStart(3, '0')}`, type: 'handoff', at: T(sec), from: 'fieldops-main', to: 'manual-specialist', ...fields });
  };
}
const OWN = { finalOwner: 'fieldops-main', onTimeout: 'return-ownership', duplicateKey: 'EQ-104:manual:edition-set-7' };

function startAttempt(r: ReturnType<typeof receiptFactory>, attempt: number, t0: number, lease: number): Receipt[] {
  return [
    r(t0, { handoff: 'h07', attempt, state: 'PROPOSED', leaseExpiresAt: T(lease), ...OWN }),
    r(t0 + 1, { handoff: 'h07', attempt, state: 'ADMITTED', leaseExpiresAt: T(lease), ...OWN, budgetOp: 'reserve', units: { actions: 2, contextUnits: 40 } }),
    r(t0 + 2, { handoff: 'h07', attempt, state: 'DISPATCHED' }),
    r(t0 + 3, { handoff: 'h07', attempt, state: 'RUNNING' }),
  ];
}

/** A delivery: the receipts in some order, some delivered twice. */
const delivery = (rs: Receipt[]) =>
  fc.tuple(fc.shuffledSubarray(rs, { minLength: rs.length, maxLength: rs.length }), fc.subarray(rs)).map(([order, again]) => [...order, ...again.map((r) => ({ ...r }))]);

const codes = (rs: Receipt[]): string[] => [...new Set(auditHandoffs(rs, NOW).map((f) => f.code))].sort();

// Documents for the admission side of the same timings.
const parent: ParentEnvelope = {
  agent: 'fieldops-main', agents: ['fieldops-main', 'manual-specialist'], tenants: ['North'], resources: ['manual-corpus'],
  capabilities: { search_manual: 'read' }, expiresAt: T(3000), budgets: { actions: 22, contextUnits: 430, effects: 0 },
};
const handoff = (attempt: number, lease: number): Handoff => ({
  handoffId: 'h07', attempt, source: 'fieldops-main', target: 'manual-specialist', taskSlice: 'slice', consequence: 'read',
  stateRef: { id: 'state-1042', version: 7 }, ownerDuringSlice: 'manual-specialist', finalOwner: 'fieldops-main',
  allowedCapabilities: ['search_manual'], delegation: { tenant: 'North', resource: 'manual-corpus', expiresAt: T(2000) },
  budgets: { actions: 2, contextUnits: 40, effects: 0 }, duplicateKey: OWN.duplicateKey, leaseExpiresAt: T(lease),
  completeWhen: 'cited passages or explicit no-evidence', cancelRef: 'cancel-run-1042', onTimeout: OWN.onTimeout,
});
const result = (attempt: number, returnedAt: number): HandoffResult => ({
  handoffId: 'h07', attempt, target: 'manual-specialist', observedStateVersion: 7, returnedAt: T(returnedAt),
  usage: { actions: 2, contextUnits: 30, effects: 0 }, capabilitiesUsed: ['search_manual'], outcome: 'evidence',
  citations: [{ source: 'EQ-104-service-manual', edition: 'rev-C-2023', passage: 'sec-4.2', trust: 'authoritative' }],
});
const denialCodes = (a: { admitted: true } | { admitted: false; denials: { code: string }[] }): string[] => (a.admitted ? [] : a.denials.map((d) => d.code));

describe('race: result before cancel vs cancel before result', () => {
  // Times in whole seconds within a small window so that ties (equal instants) are frequent.
  const timing = fc.record({ ret: fc.integer({ min: 10, max: 40 }), cancel: fc.integer({ min: 10, max: 40 }), acceptDelay: fc.integer({ min: 0, max: 5 }) });

  it('the findings do not depend on delivery order, and agree with return admission', () => {
    fc.assert(
      fc.property(timing.chain((t) => {
        const r = receiptFactory('race-cancel');
        const rs = [
          ...startAttempt(r, 1, 0, 600),
          r(t.ret, { handoff: 'h07', attempt: 1, state: 'RETURNED', stateVersion: '7' }),
          r(t.ret + t.acceptDelay, { handoff: 'h07', attempt: 1, state: 'ACCEPTED', stateVersion: '7' }),
          asReceipt({ ...r(t.cancel, {}), type: 'run.end', result: 'cancelled', to: undefined }),
        ];
        return fc.tuple(fc.constant(t), fc.constant(rs), delivery(rs));
      }), ([t, rs, delivered]) => {
        const reference = auditHandoffs(rs, NOW);
        expect(auditHandoffs(delivered, NOW)).toEqual(reference);
        const cancelledFirst = t.cancel <= t.ret;
        expect(reference.some((f) => f.code === 'accepted_after_cancel')).toBe(cancelledFirst);
        const state: HandoffStateDoc = { now: T(Math.max(t.ret, t.cancel)), stateVersion: 7, cancelled: true, cancelledAt: T(t.cancel), activeLeases: [] };
        expect(denialCodes(admitReturn(result(1, t.ret), handoff(1, 600), state)).includes('late_after_cancel')).toBe(cancelledFirst);
      }),
    );
  });
});

describe('race: lease renewal before and after expiry', () => {
  // The renewal is made while the attempt runs (before it returns).
  const timing = fc.record({ renew: fc.integer({ min: 30, max: 90 }), after: fc.integer({ min: 1, max: 120 }) }).map((t) => ({ renew: t.renew, ret: t.renew + t.after }));
  const LEASE = 60;
  const RENEWED = 180;

  it('a renewal extends the lease only when made at or before expiry, in any delivery order', () => {
    fc.assert(
      fc.property(timing.chain((t) => {
        const r = receiptFactory('race-renewal');
        const rs = [
          ...startAttempt(r, 1, 0, LEASE),
          r(t.renew, { handoff: 'h07', attempt: 1, state: 'RUNNING', leaseExpiresAt: T(RENEWED) }),
          r(t.ret, { handoff: 'h07', attempt: 1, state: 'RETURNED', stateVersion: '7' }),
          r(t.ret + 1, { handoff: 'h07', attempt: 1, state: 'ACCEPTED', stateVersion: '7' }),
        ];
        return fc.tuple(fc.constant(t), fc.constant(rs), delivery(rs));
      }), ([t, rs, delivered]) => {
        const reference = auditHandoffs(rs, NOW);
        expect(auditHandoffs(delivered, NOW)).toEqual(reference);
        const inForce = t.renew <= LEASE ? RENEWED : LEASE;
        const late = t.ret > inForce;
        expect(codes(rs)).toEqual(late ? ['accepted_after_expiry'] : []);
        // The registry holds the renewed lease only if the renewal was granted before expiry.
        const state: HandoffStateDoc = {
          now: T(t.ret), stateVersion: 7, cancelled: false,
          activeLeases: [{ duplicateKey: OWN.duplicateKey, handoffId: 'h07', attempt: 1, leaseExpiresAt: T(inForce) }],
        };
        expect(denialCodes(admitReturn(result(1, t.ret), handoff(1, LEASE), state))).toEqual(late ? ['late'] : []);
      }),
    );
  });
});

describe('race: first attempt completing before and after its replacement', () => {
  const LEASE = 60;
  const timing = fc.record({
    replacementAt: fc.integer({ min: 30, max: 90 }),
    firstReturn: fc.integer({ min: 10, max: 120 }),
    firstAccepted: fc.boolean(),
  });

  it('duplicate_active iff the replacement starts while the first attempt still holds its lease, in any delivery order', () => {
    fc.assert(
      fc.property(timing.chain((t) => {
        const r = receiptFactory('race-replacement');
        const rs = [...startAttempt(r, 1, 0, LEASE)];
        // The first attempt returns; the owner accepts it only if asked to (else it times out at the lease).
        rs.push(r(t.firstReturn, { handoff: 'h07', attempt: 1, state: 'RETURNED', stateVersion: '7' }));
        if (t.firstAccepted) rs.push(r(t.firstReturn + 1, { handoff: 'h07', attempt: 1, state: 'ACCEPTED', stateVersion: '7' }));
        else if (t.firstReturn < LEASE) rs.push(r(LEASE, { handoff: 'h07', attempt: 1, state: 'TIMED_OUT' }));
        rs.push(
          r(t.replacementAt, { handoff: 'h07', attempt: 2, state: 'ADMITTED', leaseExpiresAt: T(t.replacementAt + LEASE), ...OWN }),
          r(t.replacementAt + 1, { handoff: 'h07', attempt: 2, state: 'DISPATCHED' }),
          r(t.replacementAt + 30, { handoff: 'h07', attempt: 2, state: 'RETURNED', stateVersion: '7' }),
          r(t.replacementAt + 31, { handoff: 'h07', attempt: 2, state: 'REJECTED', stateVersion: '7' }),
        );
        return fc.tuple(fc.constant(t), fc.constant(rs), delivery(rs));
      }), ([t, rs, delivered]) => {
        const reference = auditHandoffs(rs, NOW);
        expect(auditHandoffs(delivered, NOW)).toEqual(reference);
        // When the first attempt's lease interval ends: its first terminal state or its lease.
        const terminalAt = t.firstAccepted ? t.firstReturn + 1 : t.firstReturn < LEASE ? LEASE : Infinity;
        const firstActiveUntil = Math.min(terminalAt, LEASE);
        const duplicate = t.replacementAt < firstActiveUntil;
        expect(reference.some((f) => f.code === 'duplicate_active')).toBe(duplicate);
        expect(reference.some((f) => f.code === 'accepted_after_expiry')).toBe(t.firstAccepted && t.firstReturn > LEASE);
        // Admission of the replacement against the registry at that moment (a closed attempt leaves the registry).
        const registry = firstActiveUntil > t.replacementAt ? [{ duplicateKey: OWN.duplicateKey, handoffId: 'h07', attempt: 1, leaseExpiresAt: T(LEASE) }] : [];
        const state: HandoffStateDoc = { now: T(t.replacementAt), stateVersion: 7, cancelled: false, activeLeases: registry };
        expect(denialCodes(admitHandoff(handoff(2, t.replacementAt + LEASE), parent, state))).toEqual(duplicate ? ['duplicate_active'] : []);
      }),
    );
  });
});

describe('admission is deterministic', () => {
  const lease = fc.record({
    duplicateKey: fc.constantFrom(OWN.duplicateKey, `${OWN.duplicateKey}:b`),
    handoffId: fc.constantFrom('h07', 'h08'),
    attempt: fc.integer({ min: 1, max: 3 }),
    leaseExpiresAt: fc.integer({ min: 0, max: 120 }).map(T),
  });

  it('the decision does not depend on the order of the lease registry', () => {
    fc.assert(
      fc.property(fc.array(lease, { maxLength: 6 }).chain((ls) => fc.tuple(fc.constant(ls), fc.shuffledSubarray(ls, { minLength: ls.length, maxLength: ls.length }))), fc.integer({ min: 0, max: 120 }), ([ls, shuffled], now) => {
        const s = (activeLeases: typeof ls): HandoffStateDoc => ({ now: T(now), stateVersion: 7, cancelled: false, activeLeases });
        const h = handoff(1, Math.min(now + 60, 2000));
        expect(admitHandoff(h, parent, s(shuffled))).toEqual(admitHandoff(h, parent, s(ls)));
        expect(admitReturn(result(1, now), h, s(shuffled))).toEqual(admitReturn(result(1, now), h, s(ls)));
        const holder = ls.some((l) => l.duplicateKey === OWN.duplicateKey && Date.parse(l.leaseExpiresAt) > base + now * 1000 && !(l.handoffId === 'h07' && l.attempt === 1));
        expect(denialCodes(admitHandoff(h, parent, s(ls)))).toEqual(holder ? ['duplicate_active'] : []);
      }),
    );
  });
});
