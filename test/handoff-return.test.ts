import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RETURN_CODES, admitReturn } from '../src/handoff/return.js';
import type { Handoff, HandoffResult, HandoffStateDoc } from '../src/handoff/schema.js';
import { handoffResultSchema, handoffSchema, handoffStateDocSchema } from '../src/handoff/schema.js';

const dir = new URL('./fixtures/handoff/happy/', import.meta.url);
const load = (f: string): unknown => JSON.parse(readFileSync(new URL(f, dir), 'utf8'));
const H: Handoff = handoffSchema.parse(load('handoff.json'));
const R: HandoffResult = handoffResultSchema.parse(load('result.json'));
const S: HandoffStateDoc = handoffStateDocSchema.parse(load('state.json'));

type Docs = { r: HandoffResult; h: Handoff; s: HandoffStateDoc };
type Mutation = (d: Docs) => void;

function run(m: Mutation) {
  const d: Docs = structuredClone({ r: R, h: H, s: S });
  m(d);
  return admitReturn(handoffResultSchema.parse(d.r), handoffSchema.parse(d.h), handoffStateDocSchema.parse(d.s));
}
const codes = (m: Mutation): string[] => {
  const a = run(m);
  return a.admitted ? [] : a.denials.map((x) => x.code).sort();
};
const T = (hms: string): string => `2025-03-14T${hms}Z`;

interface Row {
  code: (typeof RETURN_CODES)[number];
  name: string;
  trigger: Mutation;
  expect: string[];
  nearMiss: Mutation;
}

const noEvidence = { corpus: 'North manual-corpus', version: 'edition-set-7', scope: 'EQ-104 compatibility', stopReason: 'corpus exhausted', limitations: ['edition 8 not yet indexed'] };

const rows: Row[] = [
  { code: 'wrong_handoff', name: 'another handoff id', trigger: (d) => { d.r.handoffId = 'handoff-manual-08'; }, expect: ['wrong_handoff'], nearMiss: (d) => { d.r.handoffId = 'handoff-manual-08'; d.h.handoffId = 'handoff-manual-08'; d.s.activeLeases = []; } },
  { code: 'wrong_attempt', name: 'another attempt number', trigger: (d) => { d.r.attempt = 2; }, expect: ['wrong_attempt'], nearMiss: (d) => { d.r.attempt = 2; d.h.attempt = 2; d.s.activeLeases = []; } },
  { code: 'wrong_attempt', name: 'the work key is held by a replacement', trigger: (d) => { d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: d.h.handoffId, attempt: 2, leaseExpiresAt: T('10:08:00') }); }, expect: ['wrong_attempt'], nearMiss: (d) => { d.s.activeLeases.push({ duplicateKey: d.h.duplicateKey, handoffId: d.h.handoffId, attempt: 2, leaseExpiresAt: T('10:03:10') }); } },
  { code: 'wrong_target', name: 'another agent returns', trigger: (d) => { d.r.target = 'manual-specialist-b'; }, expect: ['wrong_target'], nearMiss: (d) => { d.r.target = 'manual-specialist-b'; d.h.target = 'manual-specialist-b'; } },
  { code: 'stale_incompatible', name: 'observed an older version', trigger: (d) => { d.r.observedStateVersion = 6; }, expect: ['stale_incompatible'], nearMiss: (d) => { d.r.observedStateVersion = '7'; } },
  { code: 'stale_incompatible', name: 'parent advanced while it worked', trigger: (d) => { d.s.stateVersion = 8; }, expect: ['stale_incompatible'], nearMiss: (d) => { d.s.stateVersion = '7'; } },
  { code: 'stale_incompatible', name: 'claims a version the parent never issued', trigger: (d) => { d.r.observedStateVersion = 8; }, expect: ['stale_incompatible'], nearMiss: (d) => { d.r.observedStateVersion = 7; } },
  { code: 'stale_incompatible', name: 'observed 7.0 where the parent issued 7 (opaque text)', trigger: (d) => { d.r.observedStateVersion = '7.0'; }, expect: ['stale_incompatible'], nearMiss: (d) => { d.r.observedStateVersion = '7'; } },
  { code: 'late', name: 'one second after the lease', trigger: (d) => { d.r.returnedAt = T('10:04:01'); }, expect: ['late'], nearMiss: (d) => { d.r.returnedAt = T('10:04:00'); } },
  { code: 'late', name: 'the registry renewal extends the lease', trigger: (d) => { d.r.returnedAt = T('10:04:30'); }, expect: ['late'], nearMiss: (d) => { d.s.activeLeases[0].leaseExpiresAt = T('10:05:00'); d.r.returnedAt = T('10:04:30'); } },
  { code: 'late_after_cancel', name: 'cancelled at the same instant (tie goes to the cancellation)', trigger: (d) => { d.s.cancelled = true; d.s.cancelledAt = T('10:03:10'); }, expect: ['late_after_cancel'], nearMiss: (d) => { d.s.now = T('10:03:11'); d.s.cancelled = true; d.s.cancelledAt = T('10:03:11'); } },
  { code: 'late_after_cancel', name: 'cancelled with no recorded time', trigger: (d) => { d.s.cancelled = true; }, expect: ['late_after_cancel'], nearMiss: (d) => { d.s.cancelled = false; } },
  { code: 'over_budget', name: 'one action too many', trigger: (d) => { d.r.usage.actions = 3; }, expect: ['over_budget'], nearMiss: (d) => { d.r.usage.actions = 2; d.r.usage.contextUnits = 40; } },
  { code: 'capability_outside_grant', name: 'used an ungranted capability', trigger: (d) => { d.r.capabilitiesUsed.push('lookup_manual_index'); }, expect: ['capability_outside_grant'], nearMiss: (d) => { d.r.capabilitiesUsed.push('lookup_manual_index'); d.h.allowedCapabilities.push('lookup_manual_index'); } },
  { code: 'effect_in_read_slice', name: 'an effect reported by a read slice', trigger: (d) => { d.h.budgets.effects = 1; d.r.usage.effects = 1; }, expect: ['effect_in_read_slice'], nearMiss: (d) => { d.h.budgets.effects = 1; d.r.usage.effects = 1; d.h.consequence = 'effect'; } },
  { code: 'missing_citations', name: 'evidence without citations', trigger: (d) => { d.r.citations = []; }, expect: ['missing_citations'], nearMiss: (d) => { d.r.citations = [d.r.citations![0]]; } },
  { code: 'missing_citations', name: 'a citation without edition', trigger: (d) => { delete d.r.citations![1].edition; }, expect: ['missing_citations'], nearMiss: (d) => { d.r.citations![1].edition = 'rev-B-2019'; } },
  { code: 'missing_citations', name: '"done" with no citations field', trigger: (d) => { delete d.r.citations; }, expect: ['missing_citations'], nearMiss: (d) => { delete d.r.citations; d.r.outcome = 'no_evidence'; d.r.noEvidence = { ...noEvidence }; } },
  { code: 'malformed_no_evidence', name: 'no block at all', trigger: (d) => { delete d.r.citations; d.r.outcome = 'no_evidence'; }, expect: ['malformed_no_evidence'], nearMiss: (d) => { delete d.r.citations; d.r.outcome = 'no_evidence'; d.r.noEvidence = { ...noEvidence }; } },
  { code: 'malformed_no_evidence', name: 'empty limitations', trigger: (d) => { d.r.outcome = 'no_evidence'; d.r.noEvidence = { ...noEvidence, limitations: [] }; }, expect: ['malformed_no_evidence'], nearMiss: (d) => { d.r.outcome = 'no_evidence'; d.r.noEvidence = { ...noEvidence, limitations: 'none beyond the corpus' }; } },
];

describe('admitReturn', () => {
  it('admits the happy fixture', () => {
    expect(admitReturn(R, H, S)).toEqual({ admitted: true });
  });

  it('covers every return code', () => {
    expect(new Set(rows.map((r) => r.code))).toEqual(new Set(RETURN_CODES));
  });

  it.each(rows)('$code ($name): triggered, and the near miss is admitted', (row) => {
    expect(codes(row.trigger)).toEqual(row.expect);
    expect(run(row.nearMiss)).toEqual({ admitted: true });
  });

  it('names each missing no-evidence field', () => {
    const a = run((d) => { delete d.r.citations; d.r.outcome = 'no_evidence'; d.r.noEvidence = { corpus: 'North manual-corpus', version: 7 }; });
    expect(a.admitted).toBe(false);
    if (a.admitted) return;
    expect(a.denials.map((x) => x.field)).toEqual(['noEvidence.scope', 'noEvidence.stopReason', 'noEvidence.limitations']);
  });

  it('reports every failed predicate, not only the first', () => {
    const all = codes((d) => {
      d.r.handoffId = 'other';
      d.r.attempt = 3;
      d.r.target = 'manual-specialist-b';
      d.r.observedStateVersion = 6;
      d.r.returnedAt = T('10:04:30');
      d.s.now = T('10:04:30');
      d.s.cancelled = true;
      d.s.cancelledAt = T('10:04:00');
      d.r.usage = { actions: 9, contextUnits: 90, effects: 1 };
      d.r.capabilitiesUsed = ['search_manual', 'reserve_part'];
      d.r.citations = [];
    });
    // malformed_no_evidence needs the other outcome; everything else fires at once.
    expect([...new Set(all)]).toEqual([...RETURN_CODES].filter((c) => c !== 'malformed_no_evidence').sort());
  });

  it('a late result after cancellation is refused on three counts (the article trace)', () => {
    const dir2 = new URL('./fixtures/handoff/cancel-late-return/', import.meta.url);
    const l = (f: string): unknown => JSON.parse(readFileSync(new URL(f, dir2), 'utf8'));
    const a = admitReturn(handoffResultSchema.parse(l('result.json')), handoffSchema.parse(l('handoff.json')), handoffStateDocSchema.parse(l('state.json')));
    expect(a.admitted ? [] : a.denials.map((x) => x.code)).toEqual(['stale_incompatible', 'late', 'late_after_cancel']);
  });
});
