/**
 * A deliberately simple reference for the time-dependent handoff findings, written from semantics.md section 5
 * ("Handoff details that implementations must agree on") alone. It shares no code with src/core/rules/handoff/:
 * its time arithmetic is BigInt nanoseconds, and it re-scans the receipt list for every question.
 *
 * - Times at full precision: a return 0.4 ms after the lease is late; one 0.4 ms before a cancellation is before it.
 * - A return exactly at the attempt's cancellation (or a cancelled run.end) is after it; a return exactly at lease
 *   expiry is on time; `now` at the lease is past it (`lease_expired_open`).
 * - Without a RETURNED record, the acceptance time stands for the return time.
 * - A renewal timed exactly at the lease in force counts; a replacement starting exactly at the previous attempt's
 *   CANCELLED does not overlap it.
 *
 * Receipts here have distinct event ids and no duplicates (the generator makes them so).
 */
// A reference reads receipts field by field, without narrowing on `type`: the flat view of test/helpers/receipt.ts.
import type { LooseReceipt as Receipt } from '../helpers/receipt.js';

export interface RefHandoffFinding {
  code: 'accepted_after_cancel' | 'accepted_after_expiry' | 'lease_expired_open' | 'duplicate_active';
  /** `handoff#attempt` of the attempts concerned, sorted. */
  attempts: string[];
}

/** Nanoseconds since the epoch: whole seconds from Date.parse of the text without its fraction, plus the fraction. */
export const nanos = (t: string): bigint => {
  const m = /^(.{19})(?:\.(\d{1,9}))?(.*)$/.exec(t);
  if (!m) throw new Error(`not a time: ${t}`);
  return BigInt(Date.parse(m[1] + m[3])) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
};

const TERMINAL = ['ACCEPTED', 'REJECTED', 'CANCELLED', 'TIMED_OUT', 'FAILED'];
const GRANTED = ['ADMITTED', 'DISPATCHED', 'RUNNING', 'RETURNED', 'ACCEPTED'];
const byTime = (a: Receipt, b: Receipt) => {
  const d = nanos(a.at) - nanos(b.at);
  return d < 0n ? -1 : d > 0n ? 1 : a.event < b.event ? -1 : a.event > b.event ? 1 : 0;
};
const min = (xs: bigint[]): bigint | null => (xs.length === 0 ? null : xs.reduce((a, b) => (b < a ? b : a)));

export function referenceHandoffFindings(receipts: Receipt[], nowText: string): RefHandoffFinding[] {
  const now = nanos(nowText);
  const sorted = [...receipts].sort(byTime);
  const runCancel = min(sorted.filter((r) => r.type === 'run.end' && r.result === 'cancelled').map((r) => nanos(r.at)));
  const transitions = sorted.filter((r) => r.type === 'handoff' && r.handoff !== undefined && r.state !== undefined && r.budgetOp !== 'root');
  const ids = [...new Set(transitions.map((r) => `${r.handoff}#${r.attempt ?? 1}`))];
  const out: RefHandoffFinding[] = [];
  const facts = ids.map((id) => {
    const rs = transitions.filter((r) => `${r.handoff}#${r.attempt ?? 1}` === id);
    const first = (s: string) => rs.find((r) => r.state === s);
    // The lease in force: the first grant; a later lease counts when its receipt is timed at or before the lease then in force.
    let lease: bigint | null = null;
    for (const r of rs) {
      if (r.leaseExpiresAt === undefined) continue;
      if (lease === null || nanos(r.at) <= lease) lease = nanos(r.leaseExpiresAt);
    }
    const returned = first('RETURNED');
    const accepted = first('ACCEPTED');
    const returnAt = returned ? nanos(returned.at) : accepted ? nanos(accepted.at) : null;
    const cancelAt = min([...(first('CANCELLED') ? [nanos(first('CANCELLED')!.at)] : []), ...(runCancel !== null ? [runCancel] : [])]);
    const terminal = rs.find((r) => TERMINAL.includes(r.state!));
    const granted = rs.find((r) => GRANTED.includes(r.state!));
    const activeFrom = granted ? nanos(granted.at) : null;
    const ends = [...(terminal ? [nanos(terminal.at)] : []), ...(lease !== null ? [lease] : [])];
    const activeUntil = min(ends); // null: never ends
    const key = rs.map((r) => r.duplicateKey).find((k) => k !== undefined) ?? transitions.filter((r) => r.handoff === rs[0].handoff).map((r) => r.duplicateKey).find((k) => k !== undefined);
    if (accepted && returnAt !== null && cancelAt !== null && returnAt >= cancelAt) out.push({ code: 'accepted_after_cancel', attempts: [id] });
    if (accepted && returnAt !== null && lease !== null && returnAt > lease) out.push({ code: 'accepted_after_expiry', attempts: [id] });
    if (!terminal && lease !== null && activeFrom !== null && now >= lease && !returned) out.push({ code: 'lease_expired_open', attempts: [id] });
    return { id, key, activeFrom, activeUntil };
  });
  const live = facts.filter((f) => f.activeFrom !== null && f.key !== undefined);
  for (let i = 0; i < live.length; i++) {
    for (let j = i + 1; j < live.length; j++) {
      const [a, b] = [live[i], live[j]];
      if (a.key !== b.key) continue;
      const before = (x: bigint, until: bigint | null) => until === null || x < until;
      if (before(a.activeFrom!, b.activeUntil) && before(b.activeFrom!, a.activeUntil)) out.push({ code: 'duplicate_active', attempts: [a.id, b.id].sort() });
    }
  }
  return out;
}
