/**
 * The run page's timeline line for handoff receipts (src/ui/client/run.ts): a budget-only receipt (no
 * handoff id, e.g. the root budget or a reserve) is labelled by its budget operation and units, never
 * "handoff undefined".
 */
import { describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/index.js';
import { receiptDetail } from '../src/ui/client/run.js';

const base = { run: 'r1', event: 'e1', at: '2026-01-15T10:00:00Z', type: 'handoff' } as const;

describe('timeline detail of handoff receipts', () => {
  it('labels a budget-only receipt by its budget operation and units', () => {
    const root: Receipt = { ...base, budgetOp: 'root', units: { actions: 120 } };
    expect(receiptDetail(root)).toBe('budget root 120 actions');
    const reserve: Receipt = { ...base, budgetOp: 'reserve', units: { actions: 120, effects: 2 }, from: 'orchestrator' };
    expect(receiptDetail(reserve)).toBe('budget reserve 120 actions, 2 effects from orchestrator');
    for (const r of [root, reserve]) expect(receiptDetail(r)).not.toMatch(/undefined/);
  });

  it('keeps the handoff, attempt, state and parties, with the budget beside them', () => {
    const r: Receipt = { ...base, handoff: 'h1', attempt: 2, state: 'ACCEPTED', from: 'a', to: 'b', budgetOp: 'consume', units: { contextUnits: 3 } };
    expect(receiptDetail(r)).toBe('handoff h1 #2 ACCEPTED budget consume 3 contextUnits a → b');
    expect(receiptDetail({ ...base, handoff: 'h2', state: 'PROPOSED', from: 'a', to: 'b' })).toBe('handoff h2 PROPOSED a → b');
  });
});
