/**
 * explicitReceipt checks the fields it set directly (src/ingest/extract.ts, checkedReceipt) and asks the receipt
 * schema (validateReceipt, zod) only when that check fails. Differential property: over receipt-shaped objects as
 * explicitReceipt builds them (valid and invalid ids, agents, times, versions, enums, edges, booleans), the direct
 * check accepts exactly what the schema accepts and builds the same receipt, byte for byte as stored.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateReceipt } from '../src/core/receipt.js';
import { compactReceiptJson } from '../src/core/canonical.js';
import { checkedReceipt, explicitReceipt } from '../src/ingest/extract.js';

const TYPES = ['run.start', 'edge', 'wait', 'outcome', 'run.end', 'gap'] as const;

const validAgent = fc.constantFrom('orchestrator', 'researcher', 'a', 'A.b_c@d#e+f=g-h', 'x'.repeat(200));
const anyText = fc.oneof(
  validAgent,
  fc.constantFrom('', ' ', 'a b', 'a:b', '-lead', 'x'.repeat(201), 'tenant/run', 'a\nb', 'über', 'lead:'),
  fc.string({ maxLength: 12 }),
);
const anyScalar = fc.oneof(anyText, fc.integer({ min: -5, max: 5 }), fc.double({ noNaN: false }), fc.boolean(), fc.constant(undefined));
const runId = fc.oneof({ arbitrary: fc.constantFrom('run-1', 'tenant-7/run-42', 'a500000005001201', 'r:1.2@3#4+5=6', 'x'.repeat(200)), weight: 6 }, { arbitrary: anyText, weight: 1 });
const time = fc.oneof(
  fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms).toISOString()),
  fc.constantFrom('2026-01-02T03:04:05.123456789Z', '2026-01-02T03:04:05+02:00', '2026-01-02 03:04:05z', '2026-13-01T00:00:00Z', '2026-02-30T00:00:00Z', '2026-01-02T03:04:05.1234567890Z', 'yesterday', ''),
  anyScalar,
);
const version = fc.oneof(fc.constantFrom('3', '1.2.3', 'v_2+b', 'x'.repeat(64), 'x'.repeat(65), 'a b', '', '-3'), fc.double(), fc.boolean(), fc.constant(undefined));
const edgeText = fc.oneof(
  fc.constantFrom(
    'verifier -> orchestrator : return',
    'a->b:handoff',
    '  a  ->  b  :  delegate  ',
    'a -> [b, c] : delegate',
    'a -> [b] : delegate',
    'a -> b : bogus',
    'a: -> b : return',
    '-a -> b : return',
    'a -> b c : return',
    'a -> b',
    `a -> ${'b'.repeat(496)} : return`,
    `a -> ${'b'.repeat(500)} : return`,
  ),
  anyScalar,
);
const kind = fc.oneof(fc.constantFrom('delegate', 'handoff', 'return', 'Return', 'call'), anyScalar);
const result = fc.oneof(fc.constantFrom('completed', 'failed', 'cancelled', 'done'), anyScalar);
const verified = fc.oneof(fc.boolean(), fc.constantFrom('true', 1, 0, null), fc.constant(undefined));
const agentOrAny = fc.oneof({ arbitrary: validAgent, weight: 6 }, { arbitrary: anyScalar, weight: 1 });

/** A receipt-shaped object as explicitReceipt builds it: run, event, type, at, then the type's fields (undefined ones absent). */
const raw = fc
  .record({
    type: fc.constantFrom(...TYPES),
    run: runId,
    event: runId,
    at: time,
    status: fc.constantFrom(undefined, 'error'),
    version,
    contract: agentOrAny,
    phase: agentOrAny,
    from: agentOrAny,
    to: agentOrAny,
    kind,
    on: agentOrAny,
    edge: edgeText,
    deadline: time,
    verified,
    result,
    reason: agentOrAny,
  })
  .map((g) => {
    const r: Record<string, unknown> = { run: g.run, event: g.event, type: g.type, at: g.at };
    if (g.status !== undefined) r.status = g.status;
    const set = (k: keyof typeof g) => {
      if (g[k] !== undefined) r[k] = g[k];
    };
    // explicitReceipt turns an integer version into its text before validation
    if (g.version !== undefined) r.version = typeof g.version === 'number' && Number.isInteger(g.version) ? String(g.version) : g.version;
    const fields: Record<(typeof TYPES)[number], (keyof typeof g)[]> = {
      'run.start': ['contract', 'phase', 'from'],
      edge: ['from', 'to', 'kind'],
      wait: ['on', 'edge', 'deadline', 'from'],
      outcome: ['from'],
      'run.end': ['result', 'from'],
      gap: ['reason', 'to', 'from'],
    };
    for (const k of fields[g.type]) set(k);
    if (g.type === 'outcome') r.verified = g.verified; // set even when undefined, as explicitReceipt does
    return r;
  });

describe('explicit receipts: the direct check against the receipt schema', () => {
  it('accepts exactly what the schema accepts, with the same receipt (fields, order, stored JSON)', () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(raw, (r) => {
        const fast = checkedReceipt(r.type as string, r);
        const schema = validateReceipt(r);
        expect(fast !== null).toBe(schema.ok);
        if (fast !== null && schema.ok) {
          accepted++;
          expect(JSON.stringify(fast)).toBe(JSON.stringify(schema.receipt));
          expect(compactReceiptJson(fast)).toBe(compactReceiptJson(schema.receipt));
        } else refused++;
      }),
      { numRuns: 10_000 },
    );
    // Both sides of the property were exercised.
    expect(accepted).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(500);
  });

  it('explicitReceipt takes the direct path for well-formed spans and the schema words rejections', () => {
    const attrs = {
      'topology.event.type': 'wait',
      'topology.wait.on': 'verifier',
      'topology.wait.edge': 'verifier -> orchestrator : return',
      'topology.wait.deadline': '2026-01-02T03:14:05Z',
      'topology.edge.from': 'researcher',
      'topology.contract.version': 3,
    };
    const ok = explicitReceipt(attrs, { run: 'run-1', event: 'a500000005001c01' }, Date.UTC(2026, 0, 2, 3, 4, 5), 2, 250);
    expect(ok).toEqual({
      receipt: { run: 'run-1', event: 'a500000005001c01', at: '2026-01-02T03:04:05.00000025Z', version: '3', status: 'error', type: 'wait', on: 'verifier', edge: 'verifier -> orchestrator : return', deadline: '2026-01-02T03:14:05Z', from: 'researcher' },
    });
    expect(Object.keys((ok as { receipt: object }).receipt)).toEqual(['run', 'event', 'at', 'version', 'status', 'type', 'on', 'edge', 'deadline', 'from']);
    const bad = explicitReceipt({ ...attrs, 'topology.wait.on': 'two words' }, { run: 'run-1', event: 'e1' }, 0, 0);
    expect(bad).toEqual({ reason: expect.stringContaining('on:'), code: 'agent_id_invalid' });
  });
});
