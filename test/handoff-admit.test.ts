import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ADMISSION_CODES, admitHandoff } from '../src/handoff/admit.js';
import type { Handoff, HandoffStateDoc, ParentEnvelope } from '../src/handoff/schema.js';
import { handoffSchema, handoffStateDocSchema, parentEnvelopeSchema } from '../src/handoff/schema.js';

const dir = new URL('./fixtures/handoff/happy/', import.meta.url);
const load = (f: string): unknown => JSON.parse(readFileSync(new URL(f, dir), 'utf8'));
const H: Handoff = handoffSchema.parse(load('handoff.json'));
const P: ParentEnvelope = parentEnvelopeSchema.parse(load('parent.json'));
const S: HandoffStateDoc = handoffStateDocSchema.parse(load('state.json'));

type Docs = { h: Handoff; p: ParentEnvelope; s: HandoffStateDoc };
type Mutation = (d: Docs) => void;

function run(m: Mutation) {
  const d: Docs = structuredClone({ h: H, p: P, s: S });
  m(d);
  return admitHandoff(handoffSchema.parse(d.h), parentEnvelopeSchema.parse(d.p), handoffStateDocSchema.parse(d.s));
}
const codes = (m: Mutation): string[] => {
  const a = run(m);
  return a.admitted ? [] : a.denials.map((x) => x.code).sort();
};

interface Row {
  code: (typeof ADMISSION_CODES)[number];
  name: string;
  trigger: Mutation;
  expect: string[];
  nearMiss: Mutation;
}

const T = (hms: string): string => `2025-03-14T${hms}Z`;

const rows: Row[] = [
  { code: 'unknown_agent', name: 'target not in the envelope', trigger: (d) => { d.h.target = 'ghost-agent'; }, expect: ['unknown_agent'], nearMiss: (d) => { d.h.target = 'manual-specialist-b'; } },
  { code: 'unknown_agent', name: 'final owner not in the envelope', trigger: (d) => { d.h.finalOwner = 'ghost-owner'; }, expect: ['unknown_agent'], nearMiss: (d) => { d.h.finalOwner = 'manual-reviewer-a'; } },
  { code: 'unknown_agent', name: 'source is not the envelope agent', trigger: (d) => { d.h.source = 'manual-reviewer-a'; }, expect: ['unknown_agent'], nearMiss: (d) => { d.p.agent = 'manual-reviewer-a'; d.h.source = 'manual-reviewer-a'; } },
  { code: 'missing_final_owner', name: 'absent', trigger: (d) => { delete d.h.finalOwner; }, expect: ['missing_final_owner'], nearMiss: (d) => { d.h.finalOwner = 'manual-reviewer-a'; } },
  { code: 'missing_final_owner', name: 'blank', trigger: (d) => { d.h.finalOwner = '  '; }, expect: ['missing_final_owner'], nearMiss: (d) => { d.h.finalOwner = 'fieldops-main'; } },
  { code: 'missing_owner_during_slice', name: 'absent', trigger: (d) => { delete d.h.ownerDuringSlice; }, expect: ['missing_owner_during_slice'], nearMiss: (d) => { d.h.ownerDuringSlice = 'manual-specialist-b'; } },
  { code: 'capability_not_in_parent', name: 'effect slice asks for an unheld capability', trigger: (d) => { d.h.consequence = 'effect'; d.h.allowedCapabilities = ['search_manual', 'lookup_inventory']; }, expect: ['capability_not_in_parent'], nearMiss: (d) => { d.h.consequence = 'effect'; d.h.allowedCapabilities = ['search_manual', 'lookup_manual_index']; } },
  { code: 'tenant_outside_parent', name: 'another tenant', trigger: (d) => { d.h.delegation.tenant = 'South'; }, expect: ['tenant_outside_parent'], nearMiss: (d) => { d.p.tenants = ['North', 'South']; d.h.delegation.tenant = 'South'; } },
  { code: 'resource_outside_parent', name: 'another resource', trigger: (d) => { d.h.delegation.resource = 'inventory-db'; }, expect: ['resource_outside_parent'], nearMiss: (d) => { d.p.resources = ['manual-corpus', 'inventory-db']; d.h.delegation.resource = 'inventory-db'; } },
  { code: 'expiry_beyond_parent', name: 'one second past the parent', trigger: (d) => { d.h.delegation.expiresAt = T('10:30:01'); }, expect: ['expiry_beyond_parent'], nearMiss: (d) => { d.h.delegation.expiresAt = T('10:30:00'); } },
  { code: 'expiry_beyond_parent', name: 'delegation already expired at now', trigger: (d) => { d.h.delegation.expiresAt = T('10:03:10'); d.h.leaseExpiresAt = T('10:03:10'); }, expect: ['expiry_beyond_parent'], nearMiss: (d) => { d.h.delegation.expiresAt = T('10:03:11'); d.h.leaseExpiresAt = T('10:03:11'); } },
  { code: 'lease_beyond_delegation', name: 'one second past the delegation', trigger: (d) => { d.h.leaseExpiresAt = T('10:05:01'); }, expect: ['lease_beyond_delegation'], nearMiss: (d) => { d.h.leaseExpiresAt = T('10:05:00'); } },
  { code: 'budget_exceeds_parent', name: 'one context unit more than unreserved', trigger: (d) => { d.h.budgets.contextUnits = 431; }, expect: ['budget_exceeds_parent'], nearMiss: (d) => { d.h.budgets.contextUnits = 430; } },
  { code: 'budget_exceeds_parent', name: 'actions over', trigger: (d) => { d.h.budgets.actions = 23; }, expect: ['budget_exceeds_parent'], nearMiss: (d) => { d.h.budgets.actions = 22; } },
  { code: 'effects_in_read_slice', name: 'effect budget in a read slice', trigger: (d) => { d.p.budgets.effects = 1; d.h.budgets.effects = 1; }, expect: ['effects_in_read_slice'], nearMiss: (d) => { d.p.budgets.effects = 1; d.h.budgets.effects = 1; d.h.consequence = 'effect'; } },
  { code: 'effects_in_read_slice', name: 'effect capability in a read slice', trigger: (d) => { d.p.capabilities.reserve_part = 'effect'; d.h.allowedCapabilities.push('reserve_part'); }, expect: ['effects_in_read_slice'], nearMiss: (d) => { d.p.capabilities.reserve_part = 'effect'; d.h.allowedCapabilities.push('reserve_part'); d.h.consequence = 'effect'; } },
  { code: 'missing_cancel_ref', name: 'absent', trigger: (d) => { delete d.h.cancelRef; }, expect: ['missing_cancel_ref'], nearMiss: (d) => { d.h.cancelRef = 'cancel-run-1042-b'; } },
  { code: 'missing_timeout_disposition', name: 'empty', trigger: (d) => { d.h.onTimeout = ''; }, expect: ['missing_timeout_disposition'], nearMiss: (d) => { d.h.onTimeout = 'escalate to the final owner'; } },
  { code: 'missing_completion', name: 'absent', trigger: (d) => { delete d.h.completeWhen; }, expect: ['missing_completion'], nearMiss: (d) => { d.h.completeWhen = 'explicit no-evidence only'; } },
  { code: 'stale_state_version', name: 'older', trigger: (d) => { d.h.stateRef.version = 6; }, expect: ['stale_state_version'], nearMiss: (d) => { d.h.stateRef.version = '7'; } },
  { code: 'stale_state_version', name: 'newer', trigger: (d) => { d.h.stateRef.version = 8; }, expect: ['stale_state_version'], nearMiss: (d) => { d.h.stateRef.version = '7'; } },
  { code: 'stale_state_version', name: 'text 7.0 where the parent issued 7 (versions are opaque text)', trigger: (d) => { d.h.stateRef.version = '7.0'; }, expect: ['stale_state_version'], nearMiss: (d) => { d.h.stateRef.version = 7; } },
  { code: 'duplicate_active', name: 'another attempt holds the key', trigger: (d) => { d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: d.h.handoffId, attempt: 2, leaseExpiresAt: T('10:03:11') }); }, expect: ['duplicate_active'], nearMiss: (d) => { d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: d.h.handoffId, attempt: 2, leaseExpiresAt: T('10:03:10') }); } },
  { code: 'duplicate_active', name: 'another handoff holds the key', trigger: (d) => { d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: 'handoff-manual-99', attempt: 1, leaseExpiresAt: T('10:09:00') }); }, expect: ['duplicate_active'], nearMiss: (d) => { d.s.activeLeases.push({ duplicateKey: `${d.h.duplicateKey}:edition-8`, handoffId: 'handoff-manual-99', attempt: 1, leaseExpiresAt: T('10:09:00') }); } },
  { code: 'parent_cancelled', name: 'cancelled', trigger: (d) => { d.s.cancelled = true; d.s.cancelledAt = T('10:03:00'); }, expect: ['parent_cancelled'], nearMiss: (d) => { d.s.cancelled = false; } },
];

describe('admitHandoff', () => {
  it('admits the happy fixture', () => {
    expect(admitHandoff(H, P, S)).toEqual({ admitted: true });
  });

  it('covers every admission code', () => {
    expect(new Set(rows.map((r) => r.code))).toEqual(new Set(ADMISSION_CODES));
  });

  it.each(rows)('$code ($name): triggered, and the near miss is admitted', (row) => {
    expect(codes(row.trigger)).toEqual(row.expect);
    expect(run(row.nearMiss)).toEqual({ admitted: true });
  });

  it('names the field at fault for each denial', () => {
    const a = run((d) => { d.h.allowedCapabilities = ['search_manual', 'reserve_part']; d.h.budgets.effects = 1; });
    expect(a.admitted).toBe(false);
    if (a.admitted) return;
    expect(a.denials.map((x) => [x.code, x.field])).toEqual([
      ['capability_not_in_parent', 'allowedCapabilities[1]'],
      ['budget_exceeds_parent', 'budgets.effects'],
      ['effects_in_read_slice', 'budgets.effects'],
      ['effects_in_read_slice', 'allowedCapabilities[1]'],
    ]);
  });

  it('reports every failed predicate, not only the first', () => {
    const all = codes((d) => {
      delete d.h.finalOwner;
      delete d.h.ownerDuringSlice;
      delete d.h.cancelRef;
      delete d.h.onTimeout;
      delete d.h.completeWhen;
      d.h.target = 'ghost-agent';
      d.h.allowedCapabilities = ['search_manual', 'reserve_part'];
      d.h.delegation = { tenant: 'South', resource: 'inventory-db', expiresAt: T('11:00:00') };
      d.h.leaseExpiresAt = T('11:00:01');
      d.h.budgets = { actions: 30, contextUnits: 40, effects: 0 };
      d.h.stateRef.version = 6;
      d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: 'other', attempt: 1, leaseExpiresAt: T('10:09:00') });
      d.s.cancelled = true;
    });
    expect(new Set(all)).toEqual(new Set(ADMISSION_CODES));
  });

  it('is pure: the same documents give the same denials, and inputs are not modified', () => {
    const d = structuredClone({ h: H, p: P, s: S });
    d.h.stateRef.version = 5;
    const before = JSON.stringify(d);
    const first = admitHandoff(d.h, d.p, d.s);
    expect(admitHandoff(d.h, d.p, d.s)).toEqual(first);
    expect(JSON.stringify(d)).toBe(before);
  });

  it('does not call an attempt a duplicate of itself', () => {
    expect(S.activeLeases.some((l) => l.handoffId === H.handoffId && l.attempt === H.attempt)).toBe(true);
    expect(admitHandoff(H, P, S).admitted).toBe(true);
  });
});
