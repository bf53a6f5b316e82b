/**
 * The overlay model: its states agree with the classifier's findings on random runs (it never judges on its own),
 * its deadlines agree with the deadlines the findings state, and it does not depend on receipt order.
 * Also the contract graph and the version-to-version changes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EDGE_KINDS, classify, parseContract, parseEdge, parseReceiptFile, type EdgeKind, type Receipt } from '../src/core/index.js';
import { contractGraph, diffContracts, overlay, type EdgeState, type Overlay } from '../src/render/index.js';
import { ROOT } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(ROOT, 'contracts'));
const v3 = registry.get('research-publish', '3')!;
const v2 = registry.get('research-publish', '2')!;
const T0 = Date.parse('2026-03-01T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

const AGENTS = [...v3.agents, 'ghost'];
const ALLOWED = v3.allow.flatMap((r) => r.spec.to.map((to) => ({ from: r.spec.from, to, kind: r.spec.kind as string })));

/** Random runs pinned to research-publish@3 (either phase): edges among known and unknown agents, waits, ends. */
const runArb = fc
  .record({
    phase: fc.constantFrom('research', 'publish'),
    edges: fc.array(
      fc.record({
        // mostly the contract's own edges (so plans progress, run late or repeat), sometimes anything at all
        edge: fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom(...ALLOWED) },
          { weight: 1, arbitrary: fc.record({ from: fc.constantFrom(...AGENTS), to: fc.constantFrom(...AGENTS), kind: fc.constantFrom(...EDGE_KINDS) }) },
        ),
        at: fc.integer({ min: 0, max: 40 * 60 }),
      }).map(({ edge, at }) => ({ ...edge, at })),
      { maxLength: 12 },
    ),
    wait: fc.option(fc.record({ at: fc.integer({ min: 0, max: 20 * 60 }), within: fc.integer({ min: 1, max: 30 * 60 }), edge: fc.integer({ min: 0, max: v3.allow.length - 1 }) })),
    end: fc.option(fc.record({ at: fc.integer({ min: 0, max: 50 * 60 }), result: fc.constantFrom('completed', 'failed') as fc.Arbitrary<'completed' | 'failed'> })),
    outcome: fc.boolean(),
    now: fc.integer({ min: 0, max: 60 * 60 }),
  })
  .map(({ phase, edges, wait, end, outcome, now }) => {
    const rs: Receipt[] = [{ run: 'p', event: 'start', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase }];
    edges.filter((e) => e.from !== e.to).forEach((e, i) => rs.push({ run: 'p', event: `e${i}`, type: 'edge', at: iso(T0 + e.at * 1000), from: e.from, to: e.to, kind: e.kind as EdgeKind }));
    if (wait) {
      const rule = v3.allow[wait.edge];
      rs.push({ run: 'p', event: 'w', type: 'wait', at: iso(T0 + wait.at * 1000), from: 'orchestrator', on: rule.spec.to[0], edge: `${rule.spec.from} -> ${rule.spec.to[0]} : ${rule.spec.kind}`, deadline: iso(T0 + (wait.at + wait.within) * 1000) });
    }
    if (outcome) rs.push({ run: 'p', event: 'o', type: 'outcome', at: iso(T0 + 45 * 60_000), from: 'orchestrator', verified: true });
    if (end) rs.push({ run: 'p', event: 'end', type: 'run.end', at: iso(T0 + end.at * 1000), from: 'orchestrator', result: end.result });
    return { receipts: rs, now: T0 + now * 1000, phase };
  });

const STATE_OF_CODE: Record<string, EdgeState> = {
  forbidden_edge: 'forbidden',
  multiplicity: 'over_max',
  waiting: 'waiting',
  declared_wait: 'waiting',
  late_edge: 'late',
  missed_deadline: 'late',
  late_wait: 'late',
  missed_wait: 'late',
  pending: 'absent',
  false_complete: 'absent',
};

const edgeOf = (o: Overlay, from: string, to: string, kind: string) => o.edges.find((e) => e.from === from && e.to === to && e.kind === kind);

describe('overlay', () => {
  it('agrees with the findings: each finding marks its edges, and no mark exists without a finding', () => {
    const seen = new Map<string, number>();
    fc.assert(
      fc.property(runArb, ({ receipts, now, phase }) => {
        const v = classify(receipts, now, registry);
        const o = overlay(v3, phase, v, receipts, now);
        for (const f of v.findings) seen.set(f.code, (seen.get(f.code) ?? 0) + 1);
        const expectedMarks = new Map<string, Set<EdgeState>>();
        for (const f of v.findings) {
          if (!f.edge) continue;
          const spec = parseEdge(f.edge);
          const state = STATE_OF_CODE[f.code];
          expect(state, `a state for finding code ${f.code}`).toBeDefined();
          const targets = spec.to.map((t) => edgeOf(o, spec.from, t, spec.kind));
          for (const e of targets) {
            expect(e, f.edge).toBeDefined();
            expect(e!.findings).toContain(f.code);
          }
          const marked = targets.filter((e) => e!.states.includes(state));
          expect(marked.length, `${f.code} on ${f.edge}`).toBeGreaterThan(0);
          for (const e of marked) {
            const m = expectedMarks.get(e!.id) ?? new Set<EdgeState>();
            m.add(state);
            expectedMarks.set(e!.id, m);
          }
        }
        // Judgement states appear only where a finding put them.
        for (const e of o.edges) {
          for (const s of ['forbidden', 'over_max', 'waiting', 'late'] as EdgeState[]) {
            if (e.states.includes(s)) expect(expectedMarks.get(e.id)?.has(s), `${e.id} ${s}`).toBe(true);
          }
        }
        // Observed counts are distinct edge receipts; unknown agents are nodes marked unknown.
        for (const e of o.edges) {
          const n = receipts.filter((r) => r.type === 'edge' && r.from === e.from && r.to === e.to && r.kind === e.kind).length;
          expect(e.count).toBe(n);
          expect(e.states.includes('observed')).toBe(n > 0);
        }
        for (const f of v.findings.filter((x) => x.code === 'unknown_agent')) for (const a of f.agents) expect(o.nodes.find((x) => x.id === a)?.known).toBe(false);
        for (const node of o.nodes) expect(node.known).toBe(v3.agentSet.has(node.id));
      }),
      { numRuns: 400, seed: 20260301 },
    );
    // The generator reaches every finding that names an edge.
    for (const code of Object.keys(STATE_OF_CODE)) expect(seen.get(code) ?? 0, code).toBeGreaterThan(0);
  });

  it('names the same absent edges and deadlines as the classifier\'s messages', () => {
    // The deadline each finding states, by its own words.
    const STATED: Record<string, RegExp> = {
      waiting: /until (\S+Z)/,
      declared_wait: /until (\S+Z)/,
      missed_deadline: /at its deadline (\S+Z)/,
      late_edge: /after its deadline (\S+Z)/,
      missed_wait: /at the wait's deadline (\S+Z)/,
      late_wait: /after the wait's deadline (\S+Z)/,
      pending: /deadline (\S+Z)/,
    };
    fc.assert(
      fc.property(runArb, ({ receipts, now, phase }) => {
        const v = classify(receipts, now, registry);
        const o = overlay(v3, phase, v, receipts, now);
        const stated = new Map<string, number[]>();
        for (const f of v.findings) {
          const m = STATED[f.code]?.exec(f.message);
          if (!m || !f.edge) continue;
          const spec = parseEdge(f.edge);
          for (const t of spec.to) {
            const id = `${spec.from} -> ${t} : ${spec.kind}`;
            stated.set(id, [...(stated.get(id) ?? []), Date.parse(m[1])]);
          }
        }
        // An edge shows the earliest deadline its findings state.
        for (const [id, ds] of stated) expect(o.edges.find((e) => e.id === id)!.deadline, id).toBe(Math.min(...ds));
        for (const f of v.findings.filter((x) => x.code === 'false_complete')) {
          // "... but a -> b : kind is absent, c -> d : kind is absent, ...": exactly the overlay's absent plan edges.
          const absent = [...f.message.matchAll(/([^,:]+? -> [^,:]+? : \w+) is absent/g)].map((m) => m[1].replace(/^.* but /, '').trim());
          const plan = v3.phases.find((p) => p.name === phase)!.plan;
          for (const step of plan) {
            const isAbsent = step.spec.to.every((t) => edgeOf(o, step.spec.from, t, step.spec.kind)!.states.includes('absent'));
            expect(isAbsent, step.key).toBe(absent.includes(step.key));
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('does not depend on the order receipts arrived in, and leaves its inputs alone', () => {
    fc.assert(
      fc.property(runArb.chain((x) => fc.shuffledSubarray(x.receipts, { minLength: x.receipts.length }).map((shuffled) => ({ ...x, shuffled }))), ({ receipts, shuffled, now, phase }) => {
        const v = classify(receipts, now, registry);
        const before = JSON.stringify(receipts);
        const a = overlay(v3, phase, v, receipts, now);
        const b = overlay(v3, phase, classify(shuffled, now, registry), shuffled, now);
        expect(b).toEqual(a);
        expect(JSON.stringify(receipts)).toBe(before);
      }),
      { numRuns: 150 },
    );
  });

  it('leaves out an event delivered with different contents, as the verdict does', () => {
    const rs: Receipt[] = [
      { run: 'c', event: 'start', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'c', event: 'e1', type: 'edge', at: iso(T0 + 1000), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run: 'c', event: 'e1', type: 'edge', at: iso(T0 + 1000), from: 'orchestrator', to: 'publisher', kind: 'delegate' },
      { run: 'c', event: 'e2', type: 'edge', at: iso(T0 + 2000), from: 'researcher', to: 'verifier', kind: 'handoff' },
      { run: 'c', event: 'e2', type: 'edge', at: iso(T0 + 2000), from: 'researcher', to: 'verifier', kind: 'handoff' },
    ];
    const v = classify(rs, T0 + 3000, registry);
    expect(v.verdict).toBe('uncertain');
    const o = overlay(v3, 'research', v, rs, T0 + 3000);
    expect(edgeOf(o, 'orchestrator', 'researcher', 'delegate')!.count).toBe(0);
    expect(edgeOf(o, 'orchestrator', 'publisher', 'delegate')!.count).toBe(0);
    expect(edgeOf(o, 'researcher', 'verifier', 'handoff')!.count).toBe(1); // a duplicate delivery counts once
  });

  it('on the drift cases, draws what the spec\'s drift table says', () => {
    const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift');
    const now = Date.parse('2026-01-15T10:26:00Z');
    const of = (run: string) => {
      const rs = drift.filter((r) => r.run === run);
      return overlay(v3, 'research', classify(rs, now, registry), rs, now);
    };
    expect(edgeOf(of('drift-direct-route'), 'researcher', 'publisher', 'delegate')!.states).toEqual(['observed', 'forbidden']);
    expect(edgeOf(of('drift-shadow'), 'researcher', 'shadow-agent', 'handoff')!.states).toEqual(['observed', 'forbidden']);
    expect(of('drift-shadow').nodes.find((n) => n.id === 'shadow-agent')).toEqual({ id: 'shadow-agent', known: false, owner: false });
    expect(edgeOf(of('drift-twice'), 'orchestrator', 'researcher', 'delegate')).toMatchObject({ states: ['allowed', 'observed', 'expected', 'over_max'], count: 2, max: 1 });
    expect(edgeOf(of('drift-wait'), 'verifier', 'orchestrator', 'return')).toMatchObject({ states: ['allowed', 'expected', 'absent', 'waiting'], dependency: 'verifier', deadline: Date.parse('2026-01-15T10:36:00Z') });
    expect(edgeOf(of('drift-late'), 'verifier', 'orchestrator', 'return')).toMatchObject({ states: ['allowed', 'expected', 'absent', 'late'], deadline: Date.parse('2026-01-15T10:11:00Z') });
    expect(edgeOf(of('drift-premature'), 'verifier', 'orchestrator', 'return')!.findings).toEqual(['false_complete']);
    for (const e of of('drift-complete').edges) expect(e.states.filter((s) => !['allowed', 'observed', 'expected'].includes(s))).toEqual([]);
  });
});

describe('contract graph and version changes', () => {
  it('draws every allowed and expected edge of a phase, nothing observed', () => {
    const g = contractGraph(v3, 'publish');
    const allowedEdges = v3.allow.flatMap((r) => r.spec.to.map((t) => `${r.spec.from} -> ${t} : ${r.spec.kind}`));
    expect(g.edges.map((e) => e.id).sort()).toEqual(allowedEdges.sort());
    const plan = v3.phases.find((p) => p.name === 'publish')!.plan;
    for (const e of g.edges) {
      const step = plan.find((s) => s.spec.from === e.from && s.spec.to.includes(e.to) && s.spec.kind === e.kind);
      expect(e.states).toEqual(step ? ['allowed', 'expected'] : ['allowed']);
      expect(e.count).toBe(0);
      if (step?.withinMs) expect(e.withinMs).toBe(step.withinMs);
    }
    expect(g.nodes.map((n) => n.id)).toEqual(v3.agents);
    expect(g.nodes.filter((n) => n.owner).map((n) => n.id)).toEqual(['orchestrator']);
    expect(() => contractGraph(v3, 'nope')).toThrow(/no phase "nope"/);
  });

  it('lists added and removed agents, allow entries and plan steps between versions', () => {
    const c = diffContracts(v2, v3);
    expect(c.agents).toEqual({ added: ['verifier', 'web-search', 'doc-search'], removed: [] });
    expect(c.allow.removed).toEqual(['researcher -> publisher : delegate']);
    expect(c.allow.added).toEqual(['researcher -> verifier : handoff', 'verifier -> orchestrator : return', 'orchestrator -> publisher : delegate', 'orchestrator -> [web-search, doc-search] : delegate']);
    const research = c.phases.find((p) => p.phase === 'research')!;
    expect(research.status).toBe('changed');
    expect(research.outcome).toEqual({ from: 'optional', to: 'required' });
    expect(research.steps.removed).toEqual(['researcher -> publisher : delegate', 'publisher -> orchestrator : return']);
    expect(c.phases.find((p) => p.phase === 'publish')!.status).toBe('added');
    expect(c.same).toBe(false);
    expect(diffContracts(v3, v3).same).toBe(true);

    const v4 = parseContract(
      `
contract: research-publish
version: "4"
owner: orchestrator
agents: [orchestrator, researcher, verifier, publisher, web-search, doc-search]
allow:
  - orchestrator -> researcher : delegate
  - researcher -> verifier : handoff
  - verifier -> orchestrator : return
  - orchestrator -> publisher : delegate
  - publisher -> orchestrator : return
  - { from: orchestrator, to: [web-search, doc-search], kind: delegate, max: 3 }
phases:
  research:
    expect:
      - orchestrator -> researcher : delegate
      - researcher -> verifier : handoff
      - { edge: "verifier -> orchestrator : return", dependency: verifier, within: 5m }
`,
      'v4.yaml',
    );
    const d = diffContracts(v3, v4);
    expect(d.allow.changed).toEqual([{ item: 'orchestrator -> [web-search, doc-search] : delegate', what: ['max 2 → 3'] }]);
    expect(d.phases.find((p) => p.phase === 'research')!.steps.changed).toEqual([{ item: 'verifier -> orchestrator : return', what: ['within 10m → 5m'] }]);
    expect(d.phases.find((p) => p.phase === 'publish')!.status).toBe('removed');
  });
});
