/** `candidate: true`: accepted by the schema, never a pin; shadow evaluation judges only the candidate's design. */
import { describe, expect, it } from 'vitest';
import { ContractRegistry, contractFromCanonical, contractJsonSchema, evaluate, groupByRun, parseContract, parseShadowRef, resolvePin, resolveShadows, shadowEvaluate, summarizeShadows } from '../src/core/index.js';
import { receipt } from './helpers/receipts.js';

const V1 = `contract: shop
version: "1"
owner: orchestrator
agents: [orchestrator, researcher, verifier]
allow:
  - orchestrator -> researcher : delegate
  - researcher -> verifier : handoff
  - verifier -> orchestrator : return
phases:
  main:
    outcome: optional
    expect:
      - orchestrator -> researcher : delegate
      - researcher -> verifier : handoff
`;
const V2 = V1.replace('version: "1"', 'version: "2"\ncandidate: true').replace('  - researcher -> verifier : handoff\n  - verifier', '  - verifier').replace('      - researcher -> verifier : handoff\n', '').replace('  main:', '  other:');

const t = (s: number) => new Date(Date.parse('2026-03-01T09:00:00Z') + s * 1000).toISOString();

describe('candidate contracts', () => {
  it('the schema accepts candidate: true and the JSON Schema documents it', () => {
    const c = parseContract(V2, 'v2.yaml');
    expect(c.candidate).toBe(true);
    expect(parseContract(V1, 'v1.yaml').candidate).toBe(false);
    expect(JSON.stringify(contractJsonSchema())).toContain('"candidate"');
    expect(() => parseContract(V1.replace('owner:', 'candidate: "yes"\nowner:'), 'bad.yaml')).toThrow(/bad\.yaml:\d+:\d+: candidate/);
  });

  it('the mark is part of the content (hash) only when set, and survives the canonical round trip', () => {
    const plain = parseContract(V1, 'v1.yaml');
    const explicitFalse = parseContract(V1.replace('owner:', 'candidate: false\nowner:'), 'v1b.yaml');
    expect(explicitFalse.hash).toBe(plain.hash);
    const cand = parseContract(V1.replace('owner:', 'candidate: true\nowner:'), 'v1c.yaml');
    expect(cand.hash).not.toBe(plain.hash);
    expect(contractFromCanonical(cand.canonical).candidate).toBe(true);
    expect(contractFromCanonical(cand.canonical).hash).toBe(cand.hash);
  });

  it('is never chosen as a pin: not the default, not by run.start', () => {
    const reg = ContractRegistry.fromContracts([parseContract(V1, 'v1.yaml'), parseContract(V2, 'v2.yaml')]);
    expect(reg.newest('shop')!.version).toBe('1');
    const byStart = reg.resolve({ contract: 'shop', version: '2' });
    expect(byStart.ok).toBe(false);
    if (!byStart.ok) expect(byStart.reason).toContain('is a candidate');
    const onlyCandidate = ContractRegistry.fromContracts([parseContract(V2, 'v2.yaml')]);
    expect(onlyCandidate.newest('shop')).toBeUndefined();
    expect(onlyCandidate.resolve({ contract: 'shop' }).ok).toBe(false);
  });
});

describe('shadow evaluation (core)', () => {
  const reg = ContractRegistry.fromContracts([parseContract(V1, 'v1.yaml'), parseContract(V2, 'v2.yaml')]);
  const receipts = [
    receipt({ run: 'a', event: 's', type: 'run.start', at: t(0), contract: 'shop', version: '1', phase: 'main', from: 'orchestrator' }),
    receipt({ run: 'a', event: 'e1', type: 'edge', at: t(1), version: '1', from: 'orchestrator', to: 'researcher', kind: 'delegate' }),
    receipt({ run: 'a', event: 'e2', type: 'edge', at: t(2), version: '1', from: 'researcher', to: 'verifier', kind: 'handoff' }),
  ];

  it('judges the candidate design only: version stamps stay compared with the pin; a missing phase falls back to the first', () => {
    const state = groupByRun(receipts).get('a')!;
    const pinning = resolvePin(state, reg);
    const pinned = evaluate(state, pinning, Date.parse(t(3)), { registry: reg });
    expect(pinned.verdict).toBe('healthy');
    const [s] = shadowEvaluate(state, pinning, pinned, resolveShadows(reg, ['shop@2']), Date.parse(t(3)), { registry: reg });
    expect(s).toMatchObject({ contract: 'shop', version: '2', verdict: 'forbidden_edge', disagrees: true });
    // No stale_contract from the receipts' version "1", no repinned from the run.start: only the design differs.
    expect(s.findings.map((f) => f.code)).toEqual(['forbidden_edge']);
    expect(s.findings[0].message).toContain('shop@2');
    // The pinned verdict object is untouched.
    expect(pinned.verdict).toBe('healthy');
    expect(pinned.findings).toEqual([]);
    const [summary] = summarizeShadows(resolveShadows(reg, ['shop@2']), [{ verdict: pinned, shadow: [s] }]);
    expect(summary).toMatchObject({ runs: 1, disagreements: 1, verdicts: { forbidden_edge: 1 }, edges: [{ edge: 'researcher -> verifier : handoff', runs: 1 }] });
  });

  it('runs of other contracts, unpinned runs and the pinned version itself get no shadow', () => {
    const state = groupByRun(receipts).get('a')!;
    const pinning = resolvePin(state, reg);
    const pinned = evaluate(state, pinning, Date.parse(t(3)), { registry: reg });
    expect(shadowEvaluate(state, pinning, pinned, [reg.get('shop', '1')!], 0)).toEqual([]);
    expect(shadowEvaluate(state, { ok: false, reason: 'x' }, pinned, [reg.get('shop', '2')!], 0)).toEqual([]);
  });

  it('parses and resolves CONTRACT@VERSION with clear errors', () => {
    expect(parseShadowRef('a@b@3')).toEqual({ contract: 'a@b', version: '3' });
    expect(() => parseShadowRef('shop')).toThrow(/CONTRACT@VERSION/);
    expect(() => parseShadowRef('shop@')).toThrow(/CONTRACT@VERSION/);
    expect(() => resolveShadows(reg, ['shop@5'])).toThrow(/versions of shop: 1, 2/);
    expect(() => resolveShadows(reg, ['nope@1'])).toThrow(/no contract nope/);
  });
});
