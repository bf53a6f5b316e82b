import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { diffConfigs, structuralDiff } from '../src/experiment/diff.js';
import { parseManifest, type Manifest } from '../src/experiment/manifest.js';
import { covers, parsePath } from '../src/experiment/paths.js';

const FIELDOPS = 'experiments/fieldops/experiment.yaml';
const fieldops = () => parseManifest(readFileSync(FIELDOPS, 'utf8'), FIELDOPS);
const specialist = (m: Manifest) => m.candidate.config.authority['manual-specialist'];

describe('experiment diff on FieldOps', () => {
  it('shows only the declared slice: the specialist identity and its handoff, no widening', () => {
    const d = diffConfigs(fieldops());
    expect(d.ok).toBe(true);
    expect(d.changes.map((c) => [c.path, c.change, c.inSlice])).toEqual([
      ['topology.agents[manual-specialist]', 'added', true],
      ['topology.handoffs[handoff-manual]', 'added', true],
      ['authority.manual-specialist', 'added', true],
    ]);
    const added = d.authority.identities.find((i) => i.identity === 'manual-specialist')!;
    expect(added).toMatchObject({
      status: 'added',
      delegatedBy: ['fieldops-agent-001'],
      tenants: { added: ['North'], removed: [] },
      capabilities: { added: ['search_manual'], removed: [] },
      budgets: { effects: { candidate: 0 } },
    });
    expect(d.authority.identities.find((i) => i.identity === 'fieldops-agent-001')!.status).toBe('unchanged');
    expect(d.authority.widening).toEqual([]);
  });

  it('fails on a candidate that also changes the model version, naming the field', () => {
    const m = fieldops();
    m.candidate.config.model.version = '0.2.0';
    const d = diffConfigs(m);
    expect(d.ok).toBe(false);
    expect(d.isolated).toBe(false);
    expect(d.outsideSlice).toEqual([{ path: 'model.version', change: 'changed', baseline: '0.1.0', candidate: '0.2.0', inSlice: false }]);
  });

  it('fails on a candidate that gives the worker reserve_part, naming the field', () => {
    const m = fieldops();
    specialist(m).capabilities.push('reserve_part');
    const d = diffConfigs(m);
    expect(d.ok).toBe(false);
    expect(d.isolated).toBe(true); // the change is inside the slice, and still refused
    expect(d.authority.widening).toEqual([
      {
        code: 'effects_in_read_slice',
        path: 'authority.manual-specialist.capabilities[reserve_part]',
        message: 'manual-specialist holds effect capability reserve_part in a read-only slice',
      },
    ]);
  });

  it('fails when the handoff grants reserve_part or an effect budget', () => {
    const m = fieldops();
    const h = m.candidate.config.topology.handoffs[0];
    h.allowedCapabilities.push('reserve_part');
    h.budgets.effects = 1;
    const paths = diffConfigs(m).authority.widening.map((w) => `${w.code} ${w.path}`);
    expect(paths).toEqual([
      'effects_in_read_slice topology.handoffs[handoff-manual].allowedCapabilities[reserve_part]',
      'effects_in_read_slice topology.handoffs[handoff-manual].budgets.effects',
    ]);
  });

  it('keeps the child inside the parent envelope: tenant, resource, expiry, budget', () => {
    const m = fieldops();
    const s = specialist(m);
    s.tenants.push('South');
    s.resources.push('hr-records');
    s.expiresAfter = '20m';
    s.budgets.actions = 13;
    const codes = diffConfigs(m).authority.widening.map((w) => `${w.code} ${w.path}`);
    expect(codes).toEqual([
      'tenant_outside_parent authority.manual-specialist.tenants[South]',
      'resource_outside_parent authority.manual-specialist.resources[hr-records]',
      'expiry_beyond_parent authority.manual-specialist.expiresAfter',
      'budget_exceeds_parent authority.manual-specialist.budgets.actions',
    ]);
  });

  it('refuses widening of an existing identity and a lease beyond delegation', () => {
    const m = fieldops();
    m.candidate.config.authority['fieldops-agent-001'] = { ...m.candidate.config.authority['fieldops-agent-001'], tenants: ['North', 'South'] };
    m.candidate.config.topology.handoffs[0].lease = '10m';
    const d = diffConfigs(m);
    expect(d.authority.widening.map((w) => `${w.code} ${w.path}`)).toEqual([
      'tenant_widened authority.fieldops-agent-001.tenants[South]',
      'lease_beyond_delegation topology.handoffs[handoff-manual].lease',
    ]);
    expect(d.outsideSlice.map((c) => c.path)).toEqual(['authority.fieldops-agent-001.tenants[South]']);
  });

  it('refuses a second final owner and an identity nobody delegates to', () => {
    const m = fieldops();
    m.candidate.config.topology.handoffs[0].finalOwner = 'manual-specialist';
    m.candidate.config.topology.agents.push('reviewer');
    m.candidate.config.authority.reviewer = { tenants: [], resources: [], capabilities: [], expiresAfter: '1m', budgets: { actions: 0, contextUnits: 0, effects: 0 } };
    const codes = diffConfigs(m).authority.widening.map((w) => `${w.code} ${w.path}`);
    expect(codes).toContain('final_owner_changed topology.handoffs[handoff-manual].finalOwner');
    expect(codes).toContain('identity_without_delegation authority.reviewer');
  });
});

describe('structural diff', () => {
  it('treats name lists as sets and keys object lists by id', () => {
    const a = { xs: ['a', 'b'], gs: [{ id: 'g1', version: '1' }, { id: 'g2', version: '1' }] };
    const b = { xs: ['b', 'a', 'c'], gs: [{ id: 'g2', version: '2' }, { id: 'g1', version: '1' }] };
    expect(structuralDiff(a, b).map((c) => [c.path, c.change])).toEqual([
      ['xs[c]', 'added'],
      ['gs[g2].version', 'changed'],
    ]);
  });

  it('falls back to indices and reports type changes', () => {
    expect(structuralDiff({ a: [1, { x: 1 }] }, { a: [1, { x: 2 }, 3] }).map((c) => c.path)).toEqual(['a[1].x', 'a[2]']);
    expect(structuralDiff({ seed: 1 }, { seed: '1' })).toMatchObject([{ path: 'seed', change: 'changed', baseline: 1, candidate: '1' }]);
  });

  it('paths: declared prefixes cover deeper fields, segment by segment', () => {
    expect(parsePath('topology.handoffs[handoff-manual].budgets')).toEqual(['topology', 'handoffs', 'handoff-manual', 'budgets']);
    expect(covers(parsePath('authority.manual-specialist'), parsePath('authority.manual-specialist.capabilities[x]'))).toBe(true);
    expect(covers(parsePath('authority.manual'), parsePath('authority.manual-specialist'))).toBe(false);
    expect(() => parsePath('a..b')).toThrow();
    expect(() => parsePath('a[b')).toThrow();
  });
});
