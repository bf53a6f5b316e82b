/**
 * Test helpers for the handoff board: turning the handoff document fixtures (test/fixtures/handoff) into the
 * receipts a parent using `admitHandoff` / `admitReturn` would emit, and the agreement check between a board
 * and the lifecycle findings and ledger computed independently from the same receipts.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Finding, Receipt } from '../../src/core/types.js';
import { admitHandoff } from '../../src/handoff/admit.js';
import type { HandoffBoard } from '../../src/handoff/board.js';
import { funnel } from '../../src/handoff/funnel.js';
import { ledger } from '../../src/core/rules/handoff/ledger.js';
import { HANDOFF_FINDING_VERDICTS } from '../../src/core/rules/handoff/lifecycle.js';
import { admitReturn } from '../../src/handoff/return.js';
import type { Handoff, HandoffResult, HandoffStateDoc, ParentEnvelope } from '../../src/handoff/schema.js';
import { handoffResultSchema, handoffSchema, handoffStateDocSchema, parentEnvelopeSchema } from '../../src/handoff/schema.js';
import { TERMINAL_STATES, dedupe } from '../../src/core/rules/handoff/trace.js';
import { asReceipt, type LooseReceipt } from './receipt.js';

const iso = (t: number) => new Date(t).toISOString();
const idOf = (s: string) => s.replace(/[^A-Za-z0-9_.:@#+=-]+/g, '-');
const json = (f: string) => JSON.parse(readFileSync(f, 'utf8'));

/** Receipts of one document fixture directory, as run `fx-<dir>`. */
export function fixtureRun(dir: string): Receipt[] {
  const name = dir.split('/').filter(Boolean).at(-1)!;
  const run = `fx-${name}`;
  const files = readdirSync(dir);
  const parent: ParentEnvelope = parentEnvelopeSchema.parse(json(join(dir, 'parent.json')));
  const state: HandoffStateDoc = handoffStateDocSchema.parse(json(join(dir, 'state.json')));
  const handoffs: Handoff[] = files.filter((f) => /^handoff.*\.json$/.test(f)).sort().map((f) => handoffSchema.parse(json(join(dir, f))));
  const results: HandoffResult[] = files.filter((f) => /^result.*\.json$/.test(f)).sort().map((f) => handoffResultSchema.parse(json(join(dir, f))));
  // A result of an attempt with no document of its own (an earlier attempt) belongs to the same contract.
  for (const r of results) {
    if (!handoffs.some((h) => h.handoffId === r.handoffId && h.attempt === r.attempt)) {
      const base = handoffs.find((h) => h.handoffId === r.handoffId)!;
      const lease = state.activeLeases.find((l) => l.handoffId === r.handoffId && l.attempt === r.attempt)?.leaseExpiresAt ?? base.leaseExpiresAt;
      handoffs.unshift({ ...base, attempt: r.attempt, target: r.target, leaseExpiresAt: lease });
    }
  }
  const t0 = Date.parse('2025-03-14T10:00:00Z');
  const out: Receipt[] = [];
  let n = 0;
  const add = (t: number, r: Omit<LooseReceipt, 'run' | 'event' | 'at'>) => out.push(asReceipt({ run, event: `e${String(++n).padStart(3, '0')}`, at: iso(t), ...r }));
  add(t0, { type: 'run.start', contract: 'fieldops-manual', version: '1', phase: 'specialist', from: parent.agent });
  add(t0 + 1000, { type: 'handoff', budgetOp: 'root', units: { ...parent.budgets }, from: parent.agent });
  const cancelAt = state.cancelled && state.cancelledAt ? Date.parse(state.cancelledAt) : null;
  const open: Handoff[] = [];
  handoffs.forEach((h, i) => {
    const t = t0 + 2000 + i * 3000;
    const common = { type: 'handoff' as const, handoff: h.handoffId, attempt: h.attempt, from: h.source, to: h.target };
    add(t, {
      ...common, state: 'PROPOSED', duplicateKey: h.duplicateKey, stateVersion: String(h.stateRef.version), leaseExpiresAt: h.leaseExpiresAt,
      ...(h.finalOwner ? { finalOwner: h.finalOwner } : {}), ...(h.onTimeout ? { onTimeout: idOf(h.onTimeout) } : {}),
    });
    if (!admitHandoff(h, parent, { ...state, now: iso(t), stateVersion: h.stateRef.version, activeLeases: state.activeLeases.filter((l) => !(l.handoffId === h.handoffId && l.attempt === h.attempt)), cancelled: false }).admitted) {
      add(t + 1000, { ...common, state: 'REJECTED' });
      return;
    }
    add(t + 1000, { ...common, state: 'ADMITTED', duplicateKey: h.duplicateKey, stateVersion: String(h.stateRef.version), leaseExpiresAt: h.leaseExpiresAt, budgetOp: 'reserve', units: { ...h.budgets }, capabilities: [...h.allowedCapabilities] });
    add(t + 2000, { ...common, state: 'DISPATCHED' });
    open.push(h);
  });
  if (cancelAt !== null) {
    for (const h of open) add(cancelAt, { type: 'handoff', handoff: h.handoffId, attempt: h.attempt, from: h.source, to: h.target, state: 'CANCELLED', stateVersion: String(state.stateVersion), budgetOp: 'release', units: { ...h.budgets } });
    add(cancelAt + 1000, { type: 'run.end', result: 'cancelled', from: parent.agent });
  }
  for (const r of results) {
    const h = open.find((x) => x.handoffId === r.handoffId && x.attempt === r.attempt);
    if (h === undefined) continue;
    const t = Date.parse(r.returnedAt);
    const common = { type: 'handoff' as const, handoff: h.handoffId, attempt: h.attempt, from: h.source, to: h.target };
    const late = cancelAt !== null && t >= cancelAt;
    if (late) {
      add(t, { ...common, state: 'CANCELLED', stateVersion: String(r.observedStateVersion), budgetOp: 'reject', units: { ...r.usage } });
      continue;
    }
    add(t, { ...common, state: 'RETURNED', stateVersion: String(r.observedStateVersion), budgetOp: 'consume', units: { ...r.usage } });
    const ok = admitReturn(r, h, state).admitted;
    const unused = { actions: Math.max(h.budgets.actions - r.usage.actions, 0), contextUnits: Math.max(h.budgets.contextUnits - r.usage.contextUnits, 0), effects: Math.max(h.budgets.effects - r.usage.effects, 0) };
    add(t + 500, { ...common, state: ok ? 'ACCEPTED' : 'REJECTED', stateVersion: String(state.stateVersion), budgetOp: 'release', units: unused });
  }
  if (cancelAt === null) {
    const last = Math.max(...out.map((r) => Date.parse(r.at)));
    add(last + 1000, { type: 'outcome', verified: true, from: parent.agent });
    add(last + 2000, { type: 'run.end', result: 'completed', from: parent.agent });
  }
  return out;
}

const ATTEMPT_CODES = new Set(['resurrection', 'lifecycle_gap', 'accepted_after_cancel', 'accepted_after_expiry', 'accepted_stale', 'lease_expired_open']);
const sortStrings = (xs: string[]) => [...xs].sort();
/** A finding as code and message; the evaluation time inside `lease_expired_open` is left out (the verdict and the board may be computed at different moments). */
const key = (f: Pick<Finding, 'code' | 'message'>) => `${f.code}|${f.message.replace(/ is still open at \S+; /, ' is still open at (now); ')}`;

/**
 * The board agrees with the handoff findings (`findings`, e.g. auditHandoffs(receipts, now) or the verdict's
 * handoff findings) and the ledger of the same receipts. Each check derives its side from receipts or finding
 * text, not from the board's own code.
 */
export function expectAgreement(board: HandoffBoard, receipts: Receipt[], findings: Finding[]): void {
  const rs = dedupe(receipts.filter((r) => r.run === board.run));
  // Findings: the same set, message for message.
  expect(sortStrings(board.findings.map(key))).toEqual(sortStrings(findings.map(key)));
  const byBranch = (b: { handoff: string; attempt: number }) => `${b.handoff} attempt ${b.attempt}`;
  const transitions = rs.filter((r): r is LooseReceipt & Receipt => r.type === 'handoff' && r.budgetOp !== 'root' && r.handoff !== undefined && r.state !== undefined);
  const attempts = [...new Set(transitions.map((r) => `${r.handoff}#${r.attempt ?? 1}`))].sort();
  expect(board.branches.map((b) => b.branch).sort()).toEqual(attempts);
  const runCancelled = rs.some((r) => r.type === 'run.end' && r.result === 'cancelled');
  for (const b of board.branches) {
    const own = transitions.filter((r) => r.handoff === b.handoff && (r.attempt ?? 1) === b.attempt);
    const terminal = own.find((r) => TERMINAL_STATES.includes(r.state!));
    expect(b.live, b.branch).toBe(terminal === undefined);
    if (terminal) expect(b.state, b.branch).toBe(terminal.state);
    expect(b.admitted, b.branch).toBe(own.some((r) => r.state === 'ACCEPTED'));
    expect(b.cancelled, b.branch).toBe(runCancelled || own.some((r) => r.state === 'CANCELLED'));
    if (b.cancelled) expect(b.cancelPropagated).toBe(terminal !== undefined);
    // Attempt-level findings name the attempt at the start of their message.
    const mine = findings.filter((f) => ATTEMPT_CODES.has(f.code) && f.message.startsWith(`${byBranch(b)} `)).map((f) => f.code);
    const onRow = b.findings.filter((c) => ATTEMPT_CODES.has(c));
    expect(sortStrings([...new Set(mine)]), b.branch).toEqual(sortStrings(onRow));
    if (onRow.includes('lease_expired_open')) expect(b.live && b.leaseExpired).toBe(true);
    if (b.findings.some((c) => c.startsWith('accepted_'))) expect(b.admitted).toBe(true);
    const handoffLevel = findings.filter((f) => (f.code === 'missing_final_owner' || f.code === 'missing_timeout_disposition') && f.message.startsWith(`handoff ${b.handoff} was admitted`)).map((f) => f.code);
    expect(sortStrings(b.findings.filter((c) => c.startsWith('missing_'))), b.branch).toEqual(sortStrings(handoffLevel));
  }
  // Conflicts: exactly the attempts the duplicate_active findings name, per work key.
  const dup = findings.filter((f) => f.code === 'duplicate_active');
  const named = new Map<string, Set<string>>();
  for (const f of dup) {
    const m = /^work key '([^']+)' had two active leases: (\S+) attempt (\d+) from \S+ and (\S+) attempt (\d+) from/.exec(f.message)!;
    expect(m, f.message).not.toBeNull();
    const set = named.get(m[1]) ?? new Set<string>();
    set.add(`${m[2]}#${m[3]}`).add(`${m[4]}#${m[5]}`);
    named.set(m[1], set);
  }
  expect(board.conflicts.map((c) => [c.duplicateKey, c.branches]).sort()).toEqual([...named].map(([k, s]) => [k, [...s].sort()]).sort());
  for (const c of board.conflicts) expect(c.open).toBe(c.branches.some((id) => board.branches.find((b) => b.branch === id)!.live));
  // Budget: the ledger's counters, cumulative over the run; the rows add up to them.
  const l = ledger(rs);
  expect(board.budget).toEqual({ root: l.root, reserved: l.reserved, consumed: l.consumed, released: l.released, rejected: l.rejected, outstanding: l.outstanding, peakCommitted: l.peakCommitted });
  for (const k of ['reserved', 'consumed', 'released', 'rejected'] as const) {
    for (const u of ['actions', 'contextUnits', 'effects'] as const) expect(board.branches.reduce((s, b) => s + b[k][u], 0)).toBe(board.budget[k][u]);
  }
  expect(board.funnel).toEqual(funnel(rs));
  expect(board.funnel.admitted).toBeLessThanOrEqual(board.branches.filter((b) => b.admitted).length);
  const over = l.root !== null && (['actions', 'contextUnits', 'effects'] as const).some((u) => l.peakCommitted[u] > l.root![u]);
  expect(findings.some((f) => f.code === 'budget_overcommitted')).toBe(over);
  // Terminal predicate: never met while a branch is live or the run has not ended.
  if (board.terminal.met) {
    expect(board.branches.every((b) => !b.live)).toBe(true);
    expect(rs.some((r) => r.type === 'run.end')).toBe(true);
  }
  expect(board.terminal.met).toBe(board.terminal.remaining.length === 0);
}

const HANDOFF_CODES = new Set(Object.keys(HANDOFF_FINDING_VERDICTS));
/** The handoff layer's findings among a verdict's findings. */
export const handoffCodes = (fs: Finding[]) => fs.filter((f) => HANDOFF_CODES.has(f.code));
