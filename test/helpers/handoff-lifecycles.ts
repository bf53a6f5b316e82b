/**
 * Random handoff lifecycles for the precision tests (test/handoff-precision.test.ts, test/replay-reference.test.ts):
 * instants 1 ns, 1 µs and 0.4 ms either side of (or exactly at) leases, renewals, cancellations and cancelled run
 * ends, for one or two attempts on one work key, with a `now` on those instants too.
 */
import fc from 'fast-check';
import type { Receipt } from '../../src/core/types.js';
import { receipt } from './receipts.js';
import { nanos } from '../reference/handoff.js';

/** The instant offsets count from, unless a case is built around another base. */
export const BASE = nanos('2026-03-01T08:03:56Z');
const S = 1_000_000_000n;
/** 0, 1 ns, 1 µs and 0.4 ms either side. */
const DELTAS = [0n, 1n, -1n, 1_000n, -1_000n, 400_000n, -400_000n];
export const TIME_CODES = new Set(['accepted_after_cancel', 'accepted_after_expiry', 'lease_expired_open', 'duplicate_active']);

/** RFC 3339 text of BASE + offset ns: nine fraction digits, or the shortest form (both must read the same). */
export function text(offset: bigint, short: boolean, base = BASE): string {
  const total = base + offset;
  const secs = total / S;
  const frac = String(total % S).padStart(9, '0');
  const whole = new Date(Number(secs) * 1000).toISOString().slice(0, 19);
  if (!short) return `${whole}.${frac}Z`;
  const trimmed = frac.replace(/0+$/, '');
  return trimmed === '' ? `${whole}Z` : `${whole}.${trimmed}Z`;
}

const delta = fc.constantFrom(...DELTAS);
/** How an attempt ends. */
const ending = fc.constantFrom('return-accept', 'accept-only', 'return-open', 'cancel', 'cancel-then-accept', 'open', 'timed-out');
/** Which instant a time is placed around. */
const anchor = fc.constantFrom('lease', 'renewed', 'cancel', 'early');

const attemptArb = fc.record({
  admitted: fc.integer({ min: 0, max: 4 }),
  leaseLen: fc.integer({ min: 2, max: 6 }),
  skew: fc.boolean(), // ADMITTED 1 ns after DISPATCHED (clock skew)
  renewal: fc.option(fc.record({ at: delta, by: fc.integer({ min: 1, max: 5 }), within: delta }), { nil: undefined }),
  ending,
  cancelAt: fc.record({ anchor, d: delta }),
  returnAt: fc.record({ anchor, d: delta }),
  acceptAfter: fc.constantFrom(0n, 1n, 1_000n, 400_000n),
});
type AttemptSeed = typeof attemptArb extends fc.Arbitrary<infer T> ? T : never;

export const caseArb = fc.record({
  first: attemptArb,
  /** A replacement attempt of the same handoff, admitted around the first one's cancellation, or another handoff on the same key. */
  second: fc.option(fc.record({ seed: attemptArb, startAt: fc.record({ anchor, d: delta }), sameHandoff: fc.boolean() }), { nil: undefined }),
  runCancel: fc.option(fc.record({ anchor, d: delta }), { nil: undefined }),
  now: fc.record({ anchor: fc.constantFrom('lease', 'renewed', 'cancel', 'early', 'late'), d: delta }),
  short: fc.boolean(),
});

export type CaseSeed = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

export interface Built {
  receipts: Receipt[];
  nowText: string;
  /** `now` as an offset from the base (to build the case again so that its now falls on a given instant). */
  nowOffset: bigint;
}

/** Receipts of a generated case (distinct event ids; offsets in ns from BASE). */
export function build(c: CaseSeed, base = BASE, run = 'r'): Built {
  const out: Receipt[] = [];
  let n = 0;
  const at = (offset: bigint) => text(offset, c.short, base);
  const add = (offset: bigint, fields: Record<string, unknown>) => {
    n += 1;
    out.push(receipt({ run, event: `e${String(n).padStart(3, '0')}`, at: at(offset), ...fields }));
  };
  out.push(receipt({ run, event: 'e000', type: 'run.start', at: at(-10n * S), contract: 'h' }));
  const anchors: Record<string, bigint>[] = [];
  const attempt = (seed: AttemptSeed, handoff: string, number: number, startOffset: bigint) => {
    const admitted = startOffset + BigInt(seed.admitted) * S;
    const lease = admitted + BigInt(seed.leaseLen) * S;
    const party = { handoff, attempt: number, from: 'o', to: 'w', duplicateKey: 'k', finalOwner: 'o', onTimeout: 'cancel' };
    const renewed = seed.renewal ? lease + BigInt(seed.renewal.by) * S + seed.renewal.within : lease;
    const points: Record<string, bigint> = { lease, renewed, early: admitted + S, cancel: lease - S };
    const cancel = points[seed.cancelAt.anchor] + seed.cancelAt.d;
    points.cancel = cancel;
    anchors.push(points);
    add(admitted - 2n * S, { type: 'handoff', state: 'PROPOSED', ...party, leaseExpiresAt: at(lease) });
    add(seed.skew ? admitted + 1n : admitted, { type: 'handoff', state: 'ADMITTED', ...party, leaseExpiresAt: at(lease) });
    add(admitted, { type: 'handoff', state: 'DISPATCHED', handoff, attempt: number, from: 'o', to: 'w' });
    if (seed.renewal) add(lease + seed.renewal.at, { type: 'handoff', state: 'RUNNING', handoff, attempt: number, from: 'o', to: 'w', leaseExpiresAt: at(renewed) });
    const back = points[seed.returnAt.anchor] + seed.returnAt.d;
    const returned = back > admitted ? back : admitted + 1n;
    const e = seed.ending;
    if (e === 'cancel' || e === 'cancel-then-accept') add(cancel, { type: 'handoff', state: 'CANCELLED', handoff, attempt: number, from: 'o', to: 'w' });
    if (e === 'timed-out') add(lease, { type: 'handoff', state: 'TIMED_OUT', handoff, attempt: number, from: 'o', to: 'w' });
    if (e === 'return-accept' || e === 'return-open' || e === 'cancel-then-accept') add(returned, { type: 'handoff', state: 'RETURNED', handoff, attempt: number, from: 'w', to: 'o' });
    if (e === 'return-accept' || e === 'accept-only' || e === 'cancel-then-accept') add(returned + seed.acceptAfter, { type: 'handoff', state: 'ACCEPTED', handoff, attempt: number, from: 'o', to: 'w' });
  };
  attempt(c.first, 'h1', 1, 0n);
  if (c.second) {
    const p = anchors[0];
    const startAt = p[c.second.startAt.anchor] + c.second.startAt.d - BigInt(c.second.seed.admitted) * S;
    attempt(c.second.seed, c.second.sameHandoff ? 'h1' : 'h2', c.second.sameHandoff ? 2 : 1, startAt);
  }
  if (c.runCancel) add(anchors[0][c.runCancel.anchor] + c.runCancel.d, { type: 'run.end', result: 'cancelled', from: 'o' });
  const p = anchors[0];
  const nowOffset = c.now.anchor === 'late' ? p.renewed + 3600n * S : p[c.now.anchor] + c.now.d;
  return { receipts: out, nowText: text(nowOffset, false, base), nowOffset };
}

