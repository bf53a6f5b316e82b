/**
 * Issue 47, item 3, third attack: the handoff audit of a live run is folded receipt by receipt
 * (src/core/rules/handoff/fold.ts) and must give exactly what the full audit gives (handoffAudit of the run's
 * handoff receipts, run ends and verified outcomes), at every `now`. Random handoff receipt sequences (a few handoffs
 * and attempts sharing work keys, every state, leases and renewals, state versions, budget receipts and roots,
 * completed and cancelled run ends, verified outcomes, instants that tie) are delivered in random order with
 * duplicates and conflicting contents under one event id, through a RunState (which keeps out duplicates and
 * conflicts, as on a live server); after every delivery the fold is audited at a random `now` (earlier than the
 * last one too) and compared with the full audit of the same receipts, findings and nextChangeAt.
 * Then the cost: an attempt of 10,000 in-order heartbeats and 10,000 handoffs each cost a flat few steps per receipt.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RunState, handoffAudit, handoffWork, type Receipt } from '../src/core/index.js';
import { receipt } from './helpers/receipts.js';

const T0 = Date.parse('2026-03-01T08:00:00Z');
/** RFC 3339 text of T0 + `s` seconds + `ns` nanoseconds (nine fraction digits). */
const text = (s: number, ns = 0): string => `${new Date(T0 + s * 1000).toISOString().slice(0, 19)}.${String(ns).padStart(9, '0')}Z`;
const instant = (s: number, ns = 0) => ({ ms: T0 + s * 1000 + Math.floor(ns / 1e6), ns: ns % 1e6 });

const STATES = ['PROPOSED', 'ADMITTED', 'DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED', 'REJECTED', 'CANCELLED', 'TIMED_OUT', 'FAILED'] as const;
const agent = fc.constantFrom('orchestrator', 'planner', 'worker-a', 'worker-b');
const time = fc.record({ s: fc.integer({ min: 0, max: 12 }), ns: fc.constantFrom(0, 1, 500_000) });
const units = fc.record({ actions: fc.integer({ min: 0, max: 6 }), contextUnits: fc.integer({ min: 0, max: 6 }), effects: fc.integer({ min: 0, max: 2 }) }, { requiredKeys: [] });

const handoffArb = fc.record(
  {
    handoff: fc.constantFrom('h1', 'h2', 'h3'),
    attempt: fc.constantFrom(1, 2),
    state: fc.constantFrom(...STATES),
    t: time,
    from: agent,
    to: agent,
    duplicateKey: fc.constantFrom('k1', 'k2'),
    lease: fc.record({ s: fc.integer({ min: 0, max: 14 }), ns: fc.constantFrom(0, 1) }),
    stateVersion: fc.constantFrom(1, 2, '2'),
    finalOwner: agent,
    onTimeout: fc.constantFrom('cancel', 'retry'),
    budgetOp: fc.constantFrom('reserve', 'consume', 'release', 'reject'),
    units,
  },
  { requiredKeys: ['handoff', 'state', 't'] },
).map((x) => {
  const r: Record<string, unknown> = { type: 'handoff', handoff: x.handoff, state: x.state, at: text(x.t.s, x.t.ns) };
  for (const k of ['attempt', 'from', 'to', 'duplicateKey', 'stateVersion', 'finalOwner', 'onTimeout', 'budgetOp', 'units'] as const) if (x[k] !== undefined) r[k] = x[k];
  if (x.lease !== undefined) r.leaseExpiresAt = text(x.lease.s, x.lease.ns);
  if (r.units !== undefined && r.budgetOp === undefined) delete r.units;
  return r;
});
const otherArb = fc.oneof(
  fc.record({ t: time, from: agent, units }).map((x) => ({ type: 'handoff', budgetOp: 'root', at: text(x.t.s, x.t.ns), from: x.from, units: x.units })),
  fc.record({ t: time, from: agent, budgetOp: fc.constantFrom('reserve', 'consume'), units, handoff: fc.constantFrom('h1', 'h2') }).map((x) => ({ type: 'handoff', at: text(x.t.s, x.t.ns), from: x.from, handoff: x.handoff, budgetOp: x.budgetOp, units: x.units })),
  fc.record({ t: time, from: agent, result: fc.constantFrom('completed', 'cancelled', 'failed') }).map((x) => ({ type: 'run.end', at: text(x.t.s, x.t.ns), from: x.from, result: x.result })),
  fc.record({ t: time, from: agent, verified: fc.boolean() }).map((x) => ({ type: 'outcome', at: text(x.t.s, x.t.ns), from: x.from, verified: x.verified })),
);

/** A delivery: receipts with event ids, some delivered twice, some with a second content under their id, shuffled. */
const deliveryArb = fc
  .array(fc.oneof({ weight: 4, arbitrary: handoffArb }, { weight: 1, arbitrary: otherArb }), { minLength: 1, maxLength: 40 })
  .chain((bodies) => {
    const rs = bodies.map((b, i) => receipt({ run: 'r1', event: `e${i}`, ...b }));
    const extra = fc.array(
      fc.record({ i: fc.nat({ max: rs.length - 1 }), conflict: fc.boolean(), t: time }).map(({ i, conflict, t }) => (conflict ? receipt({ ...rs[i], at: text(t.s, t.ns) === rs[i].at ? text(t.s, t.ns + 7) : text(t.s, t.ns) }) : { ...rs[i] })),
      { maxLength: 6 },
    );
    return fc.tuple(fc.constant(rs), extra).chain(([base, again]) => fc.shuffledSubarray([...base, ...again], { minLength: base.length + again.length, maxLength: base.length + again.length }));
  });

const nowArb = fc.record({ s: fc.integer({ min: 0, max: 16 }), ns: fc.constantFrom(0, 1, 999_999, 500_000) });

describe('the folded handoff audit is the full audit', () => {
  it('on random deliveries with duplicates, conflicts and out-of-order times, at every delivery and random nows', () => {
    fc.assert(
      fc.property(deliveryArb, fc.array(nowArb, { minLength: 1, maxLength: 60 }), (delivered: Receipt[], nows) => {
        const state = new RunState('r1');
        delivered.forEach((r, i) => {
          state.add(r);
          const n = nows[i % nows.length];
          const now = instant(n.s, n.ns);
          const full = handoffAudit(state.handoffReceipts(), now);
          expect(state.handoffAudit(now)).toEqual(full);
        });
        // then again at every now with no new receipt (later and earlier ones)
        for (const n of nows) {
          const now = instant(n.s, n.ns);
          expect(state.handoffAudit(now)).toEqual(handoffAudit(state.handoffReceipts(), now));
        }
      }),
      { numRuns: 400 },
    );
  });

  it('a finding-rich case: resurrections, gaps, late and stale acceptances, open leases, overlaps, budgets, target completions', () => {
    const h = (event: string, s: number, x: Record<string, unknown>) => receipt({ run: 'r1', event, type: 'handoff', at: text(s), ...x });
    const rs = [
      h('root', 0, { budgetOp: 'root', from: 'orchestrator', units: { actions: 4, contextUnits: 4 } }),
      h('a1', 1, { handoff: 'h1', state: 'ADMITTED', from: 'orchestrator', to: 'worker-a', duplicateKey: 'k', leaseExpiresAt: text(5), budgetOp: 'reserve', units: { actions: 4, contextUnits: 4 } }),
      h('a2', 2, { handoff: 'h2', state: 'ADMITTED', from: 'orchestrator', to: 'worker-b', duplicateKey: 'k', leaseExpiresAt: text(9), finalOwner: 'orchestrator', onTimeout: 'cancel', budgetOp: 'reserve', units: { actions: 2 } }),
      h('r1', 6, { handoff: 'h1', state: 'RETURNED', from: 'orchestrator', to: 'worker-a', stateVersion: 1 }),
      h('c1', 7, { handoff: 'h1', state: 'ACCEPTED', from: 'orchestrator', to: 'worker-a', stateVersion: 2 }),
      h('x1', 8, { handoff: 'h1', state: 'RUNNING', from: 'orchestrator', to: 'worker-a' }),
      h('d3', 3, { handoff: 'h3', state: 'DISPATCHED', from: 'orchestrator', to: 'worker-a' }),
      receipt({ run: 'r1', event: 'end', type: 'run.end', at: text(10), from: 'worker-b', result: 'completed' }),
    ];
    const state = new RunState('r1');
    for (const r of rs) state.add(r);
    for (const s of [0, 5, 9, 12]) {
      const fold = state.handoffAudit(instant(s));
      expect(fold).toEqual(handoffAudit(state.handoffReceipts(), instant(s)));
      if (s === 12) {
        expect(new Set(fold.findings.map((f) => f.code))).toEqual(
          new Set(['budget_overcommitted', 'budget_copied', 'resurrection', 'accepted_after_expiry', 'accepted_stale', 'missing_final_owner', 'missing_timeout_disposition', 'duplicate_active', 'lifecycle_gap', 'lease_expired_open', 'target_completed_parent']),
        );
      }
    }
  });
});

describe('the cost of the next handoff receipt does not grow with the receipts held', () => {
  const per = (n: number, make: (i: number) => Receipt) => {
    const state = new RunState('r1');
    const costs: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = make(i);
      const before = handoffWork.steps;
      state.add(r);
      state.handoffAudit(instant(0));
      costs.push(handoffWork.steps - before);
    }
    return costs;
  };

  it('one attempt with 10,000 heartbeats (lease renewals)', () => {
    const costs = per(10_000, (i) =>
      receipt({ run: 'r1', event: `hb${i}`, type: 'handoff', handoff: 'h', state: i === 0 ? 'ADMITTED' : 'RUNNING', at: text(i), from: 'o', to: 'w', leaseExpiresAt: text(i + 60), finalOwner: 'o', onTimeout: 'cancel', duplicateKey: 'k' }),
    );
    // a step, a trace, the handoff's and the work key's one attempt: the same for the first receipt and the last
    expect(Math.max(...costs.slice(1))).toBeLessThanOrEqual(4);
  });

  it('10,000 handoffs of 5 receipts each', () => {
    const states = ['PROPOSED', 'ADMITTED', 'DISPATCHED', 'RETURNED', 'ACCEPTED'];
    const costs = per(50_000, (i) =>
      receipt({ run: 'r1', event: `e${i}`, type: 'handoff', handoff: `h${Math.floor(i / 5)}`, state: states[i % 5], at: text(i), from: 'o', to: 'w', leaseExpiresAt: text(i + 60), finalOwner: 'o', onTimeout: 'cancel', duplicateKey: `k${Math.floor(i / 5)}` }),
    );
    expect(Math.max(...costs)).toBeLessThanOrEqual(4);
  });
});
