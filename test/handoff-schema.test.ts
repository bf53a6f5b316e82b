import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HANDOFF_STATES } from '../src/core/types.js';
import { compareContractVersions } from '../src/core/contract.js';
import {
  sameStateVersion,
  handoffJsonSchemas,
  handoffReceiptSchema,
  handoffResultSchema,
  handoffSchema,
  handoffStateDocSchema,
  parentEnvelopeSchema,
} from '../src/handoff/schema.js';

const fixtures = new URL('./fixtures/handoff/', import.meta.url);
const doc = (c: string, f: string): Record<string, unknown> => JSON.parse(readFileSync(new URL(`${c}/${f}`, fixtures), 'utf8'));
const schemaFor = (file: string) =>
  file.startsWith('handoff') ? handoffSchema : file.startsWith('parent') ? parentEnvelopeSchema : file.startsWith('state') ? handoffStateDocSchema : handoffResultSchema;

describe('handoff document schemas', () => {
  const all = readdirSync(fixtures, { withFileTypes: true }).filter((d) => d.isDirectory()).flatMap((d) =>
    readdirSync(new URL(`${d.name}/`, fixtures)).filter((f) => f.endsWith('.json')).map((f) => [d.name, f] as const));

  it('there are document fixtures for every case', () => {
    expect(all.length).toBeGreaterThanOrEqual(36);
  });

  it.each(all)('%s/%s is a valid document', (c, f) => {
    expect(schemaFor(f).safeParse(doc(c, f)).success).toBe(true);
  });

  it('attempt defaults to 1', () => {
    const { attempt, ...rest } = doc('happy', 'handoff.json');
    expect(attempt).toBe(1);
    expect(handoffSchema.parse(rest).attempt).toBe(1);
  });

  it('refuses unknown fields at every level', () => {
    const h = doc('happy', 'handoff.json');
    const top = handoffSchema.safeParse({ ...h, priority: 'high' });
    expect(top.success).toBe(false);
    const nested = handoffSchema.safeParse({ ...h, budgets: { ...(h.budgets as object), tokens: 5 } });
    expect(nested.success).toBe(false);
    expect(nested.error!.issues[0].path).toEqual(['budgets']);
  });

  it('times must be RFC 3339 with an offset (the article shorthand "10:04Z" is not)', () => {
    const h = doc('happy', 'handoff.json');
    expect(handoffSchema.safeParse({ ...h, leaseExpiresAt: '10:04Z' }).success).toBe(false);
    expect(handoffSchema.safeParse({ ...h, leaseExpiresAt: '2025-03-14T10:04:00' }).success).toBe(false);
    expect(handoffSchema.safeParse({ ...h, leaseExpiresAt: '2025-03-14T11:04:00+01:00' }).success).toBe(true);
  });

  it('budgets are non-negative integers; consequence is read or effect', () => {
    const h = doc('happy', 'handoff.json');
    expect(handoffSchema.safeParse({ ...h, budgets: { actions: 1.5, contextUnits: 40, effects: 0 } }).success).toBe(false);
    expect(handoffSchema.safeParse({ ...h, budgets: { actions: 2, contextUnits: -1, effects: 0 } }).success).toBe(false);
    expect(handoffSchema.safeParse({ ...h, consequence: 'write' }).success).toBe(false);
  });

  it('accountability fields may be absent (admission refuses them with a code, not a schema error)', () => {
    const h = doc('orphaned-owner', 'handoff.json');
    expect(h.finalOwner).toBeUndefined();
    expect(handoffSchema.safeParse(h).success).toBe(true);
  });

  it('a state cannot be cancelled after its own now, nor carry cancelledAt when not cancelled', () => {
    const s = { now: '2025-03-14T10:00:00Z', stateVersion: 7, activeLeases: [] };
    expect(handoffStateDocSchema.safeParse({ ...s, cancelled: true, cancelledAt: '2025-03-14T10:00:00Z' }).success).toBe(true);
    expect(handoffStateDocSchema.safeParse({ ...s, cancelled: true, cancelledAt: '2025-03-14T10:00:01Z' }).success).toBe(false);
    expect(handoffStateDocSchema.safeParse({ ...s, cancelled: false, cancelledAt: '2025-03-14T09:00:00Z' }).success).toBe(false);
  });
});

describe('JSON Schemas', () => {
  const js = handoffJsonSchemas();

  it('one per document, all strict objects', () => {
    expect(Object.keys(js).sort()).toEqual(['handoff', 'handoff-receipt', 'parent', 'result', 'state']);
    for (const s of Object.values(js)) {
      expect(s.type).toBe('object');
      expect(s.additionalProperties).toBe(false);
    }
  });

  it('the handoff schema requires the article fields and leaves defaults optional', () => {
    const h = js.handoff as { required: string[]; properties: Record<string, { format?: string; enum?: string[] }> };
    expect(h.required.sort()).toEqual(['allowedCapabilities', 'budgets', 'consequence', 'delegation', 'duplicateKey', 'handoffId', 'leaseExpiresAt', 'source', 'stateRef', 'target', 'taskSlice'].sort());
    expect(h.required).not.toContain('attempt');
    expect(h.properties.leaseExpiresAt.format).toBe('date-time');
    expect(h.properties.consequence.enum).toEqual(['read', 'effect']);
  });

  it('the receipt schema lists every lifecycle state', () => {
    const r = js['handoff-receipt'] as { properties: { state: { enum: string[] } } };
    expect(r.properties.state.enum).toEqual([...HANDOFF_STATES]);
  });
});

describe('handoff receipts', () => {
  const dir = new URL('../receipts/handoffs/', import.meta.url);
  const lines = readdirSync(dir).filter((f) => f.endsWith('.ndjson')).flatMap((f) =>
    readFileSync(new URL(f, dir), 'utf8').trim().split('\n').map((l) => [f, JSON.parse(l) as Record<string, unknown>] as const));

  it('every fixture receipt has run, event, type and at, with unique event ids per run', () => {
    const seen = new Set<string>();
    for (const [, r] of lines) {
      for (const k of ['run', 'event', 'type', 'at']) expect(typeof r[k]).toBe('string');
      const key = `${r.run}/${r.event}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
    }
  });

  it('every handoff receipt in the fixtures is valid', () => {
    const handoffs = lines.filter(([, r]) => r.type === 'handoff');
    expect(handoffs.length).toBeGreaterThan(100);
    for (const [f, r] of handoffs) expect([f, handoffReceiptSchema.safeParse(r).success]).toEqual([f, true]);
  });

  it('a transition needs handoff and state; a budget operation needs units; a root needs neither handoff nor state', () => {
    const base = { run: 'r', event: 'e', type: 'handoff', at: '2025-03-14T10:00:00Z' };
    expect(handoffReceiptSchema.safeParse({ ...base, handoff: 'h', state: 'RUNNING' }).success).toBe(true);
    expect(handoffReceiptSchema.safeParse({ ...base, handoff: 'h' }).success).toBe(false);
    expect(handoffReceiptSchema.safeParse({ ...base, handoff: 'h', state: 'RUNNING', budgetOp: 'consume' }).success).toBe(false);
    expect(handoffReceiptSchema.safeParse({ ...base, budgetOp: 'root', units: { actions: 24 } }).success).toBe(true);
    expect(handoffReceiptSchema.safeParse({ ...base, handoff: 'h', state: 'RUNNING', prompt: 'x' }).success).toBe(false);
  });
});

describe('state versions (semantics 5: opaque identifiers compared as text)', () => {
  it('are the same only as the same text; a JSON number is its decimal text', () => {
    expect(sameStateVersion(7, '7')).toBe(true);
    expect(sameStateVersion('7', '7.0')).toBe(false);
    expect(sameStateVersion('1', '1.0')).toBe(false);
    expect(sameStateVersion('v9', 'v9')).toBe(true);
  });
  it('contract versions order instead (2a): ("1.0", "1") differ there too, and only contract versions order', () => {
    expect(compareContractVersions('1.0', '1')).toBeGreaterThan(0);
    expect(compareContractVersions('10', '9')).toBeGreaterThan(0);
  });
});
