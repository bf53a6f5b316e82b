// The live engine keeps one RunState per run and evaluates it after every batch. RunState keeps incremental
// aggregates (sorted event ids merged on read, the earliest observation per edge, parsed waits, shared strings)
// so that an evaluation does not re-read the run. These properties pin that the aggregates never go stale:
// evaluating after every receipt gives the verdict of a state folded in one go, in any order.
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, resolvePin } from '../src/core/classify.js';
import type { Receipt, RunVerdict } from '../src/core/types.js';
import type { Instant } from '../src/core/time.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 15, 10);
const iso = (ms: number) => new Date(ms).toISOString();
const AGENTS = ['orchestrator', 'researcher', 'verifier', 'publisher', 'web-search', 'doc-search', 'shadow'];
const EDGES = [
  { from: 'orchestrator', to: 'researcher', kind: 'delegate' as const },
  { from: 'researcher', to: 'verifier', kind: 'handoff' as const },
  { from: 'verifier', to: 'orchestrator', kind: 'return' as const },
  { from: 'orchestrator', to: 'web-search', kind: 'delegate' as const },
  { from: 'orchestrator', to: 'doc-search', kind: 'delegate' as const },
  { from: 'researcher', to: 'publisher', kind: 'delegate' as const },
];
const WAIT_EDGES = ['verifier -> orchestrator : return', 'researcher->verifier:handoff', 'orchestrator -> [web-search, doc-search] : delegate'];

const common = {
  event: fc.constantFrom('e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9', 'e10', 'e11', 'e12'),
  at: fc.integer({ min: 0, max: 20 }).map((m) => iso(T0 + m * 60_000)), // coarse: equal times are common
  version: fc.constantFrom('3', '3', '3', '2'),
};
const receiptArb: fc.Arbitrary<Receipt> = fc.oneof(
  fc.record({ ...common, type: fc.constant('run.start' as const), contract: fc.constant('research-publish'), phase: fc.constantFrom('research', 'publish'), from: fc.constant('orchestrator') }),
  fc.record({ ...common, type: fc.constant('edge' as const), from: fc.constantFrom(...AGENTS), to: fc.constantFrom(...AGENTS), kind: fc.constantFrom('delegate' as const, 'handoff' as const, 'return' as const) }),
  // a few edges, allowed and forbidden, so that edges repeat (multiplicity, sorted event lists, earliest ties)
  fc.record({ ...common, type: fc.constant('edge' as const), edge: fc.constantFrom(...EDGES) }).map(({ edge, ...r }) => ({ ...r, ...edge })),
  fc.record({ ...common, type: fc.constant('edge' as const), edge: fc.constantFrom(...EDGES) }).map(({ edge, ...r }) => ({ ...r, ...edge })),
  fc.record({
    ...common,
    type: fc.constant('wait' as const),
    on: fc.constantFrom(...AGENTS),
    edge: fc.constantFrom(...WAIT_EDGES),
    deadline: fc.integer({ min: 0, max: 40 }).map((m) => iso(T0 + m * 60_000)),
  }),
  fc.record({ ...common, type: fc.constant('outcome' as const), verified: fc.boolean() }),
  fc.record({ ...common, type: fc.constant('run.end' as const), result: fc.constantFrom('completed' as const, 'failed' as const) }),
).map((r) => ({ run: 'r1', ...r }) as Receipt);

const verdictOf = (s: RunState, now: number) => JSON.stringify(evaluate(s, resolvePin(s, registry, 'research-publish'), now, { registry }));

describe('RunState incremental aggregates', () => {
  it('evaluating after every receipt gives the verdict of one fold, in either order', () => {
    fc.assert(
      fc.property(fc.array(receiptArb, { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 50 }), (receipts, minutes) => {
        const now = T0 + minutes * 60_000;
        const live = new RunState('r1');
        // A state whose every receipt conflicts has no time to be due from (evaluated separately, not here).
        for (const r of receipts) {
          live.add(r);
          if (live.size > 0) verdictOf(live, now); // reads (and so merges) the aggregates after every receipt
        }
        const once = new RunState('r1');
        for (const r of receipts) once.add(r);
        fc.pre(once.size > 0);
        const reversed = new RunState('r1');
        for (const r of [...receipts].reverse()) reversed.add(r);
        const expected = verdictOf(once, now);
        expect(verdictOf(live, now)).toBe(expected);
        expect(verdictOf(reversed, now)).toBe(expected);
      }),
      { numRuns: 1000 },
    );
  });

  it('a state over a receipt source holds no receipt: its verdicts equal a self-contained state, conflicts included', () => {
    fc.assert(
      fc.property(fc.array(receiptArb, { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 50 }), (receipts, minutes) => {
        const now = T0 + minutes * 60_000;
        // The source is the store's view: every stored version (first contents and conflicting ones), in arrival order.
        const stored: Receipt[] = [];
        let reads = 0;
        const backed = new RunState('r1', () => {
          reads++;
          return stored;
        });
        const plain = new RunState('r1');
        let listed = false; // a finding listed the events of an unknown agent or a foreign version
        for (const r of receipts) {
          const a = plain.add(r);
          if (a !== 'duplicate') stored.push(r);
          expect(backed.add(r)).toBe(a);
          if (plain.size > 0) {
            const v = verdictOf(backed, now);
            expect(v).toBe(verdictOf(plain, now));
            listed ||= v.includes('"code":"unknown_agent"') || v.includes('"code":"version_mismatch"');
          }
        }
        // read back only to rebuild after a conflict or to list events
        if (backed.conflicts.size === 0 && !listed) expect(reads).toBe(0);
        expect(backed.size).toBe(plain.size);
        expect([...backed.conflicts.keys()]).toEqual([...plain.conflicts.keys()]);
      }),
      { numRuns: 300 },
    );
  });

  it('the verdict cache and the incremental fold equal a fresh evaluation at every step (conflicts, time past deadlines)', () => {
    type Step = { kind: 'receipt'; r: Receipt } | { kind: 'advance'; ms: number } | { kind: 'toNext' } | { kind: 'beforeNext' } | { kind: 'subms'; ns: number } | { kind: 'back'; ms: number } | { kind: 'again' };
    const stepArb: fc.Arbitrary<Step> = fc.oneof(
      { weight: 6, arbitrary: receiptArb.map((r): Step => ({ kind: 'receipt', r })) },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 15 }).map((m): Step => ({ kind: 'advance', ms: m * 60_000 })) },
      { weight: 2, arbitrary: fc.constant<Step>({ kind: 'toNext' }) }, // exactly the last verdict's nextChangeAt
      { weight: 2, arbitrary: fc.constant<Step>({ kind: 'beforeNext' }) }, // the last instant before it
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 999_999 }).map((ns): Step => ({ kind: 'subms', ns })) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 30 }).map((m): Step => ({ kind: 'back', ms: m * 60_000 })) },
      { weight: 2, arbitrary: fc.constant<Step>({ kind: 'again' }) },
    );
    let reused = 0;
    let evaluations = 0;
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 60 }), fc.boolean(), (steps, backed) => {
        const stored: Receipt[] = [];
        const live = new RunState('r1', backed ? () => stored : undefined);
        const all: Receipt[] = [];
        let now: Instant = { ms: T0, ns: 0 };
        let last: RunVerdict | null = null;
        for (const step of steps) {
          if (step.kind === 'receipt') {
            all.push(step.r);
            if (live.add(step.r) !== 'duplicate') stored.push(step.r);
          } else if (step.kind === 'advance') now = { ms: now.ms + step.ms, ns: 0 };
          else if (step.kind === 'back') now = { ms: now.ms - step.ms, ns: 0 };
          else if (step.kind === 'subms') now = { ms: now.ms, ns: step.ns };
          else if (step.kind === 'toNext' && last?.nextChangeAt != null) now = { ms: last.nextChangeAt, ns: 0 };
          else if (step.kind === 'beforeNext' && last?.nextChangeAt != null) now = { ms: last.nextChangeAt - 1, ns: 999_999 };
          if (live.size === 0 && live.conflicts.size === 0) continue;
          const v = evaluate(live, resolvePin(live, registry, 'research-publish'), now, { registry });
          evaluations++;
          if (v === last) reused++;
          const fresh = new RunState('r1');
          for (const r of all) fresh.add(r);
          const expected = evaluate(fresh, resolvePin(fresh, registry, 'research-publish'), now, { registry });
          // everything, nextChangeAt included
          expect(JSON.stringify(v)).toBe(JSON.stringify(expected));
          last = v;
        }
      }),
      { numRuns: 1500 },
    );
    // the cached path was taken (not a vacuous property), and not always
    expect(reused).toBeGreaterThan(evaluations / 20);
    expect(reused).toBeLessThan(evaluations);
  });

  it('a cached verdict is not reused across a registry change, another pin or an earlier now', () => {
    const reg = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
    const s = new RunState('r1');
    s.add({ run: 'r1', event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research' });
    // a later run.start naming the contract only: the newest version, whatever the registry holds when evaluated
    s.add({ run: 'r1', event: 'later', type: 'run.start', at: iso(T0 + 1000), contract: 'research-publish' });
    const pin = resolvePin(s, reg);
    const v1 = evaluate(s, pin, T0 + 60_000, { registry: reg });
    expect(v1.findings.map((f) => f.code)).not.toContain('repinned');
    expect(evaluate(s, pin, T0 + 60_000, { registry: reg })).toBe(v1);
    expect(evaluate(s, resolvePin(s, reg), T0 + 61_000, { registry: reg })).toBe(v1); // an equal pin, later
    expect(evaluate(s, pin, T0 + 59_000, { registry: reg })).not.toBe(v1); // time went back
    const v2 = evaluate(s, { ok: false, reason: 'no pin here' }, T0 + 61_000, { registry: reg });
    expect(v2.verdict).toBe('uncertain'); // another pinning
    const v3 = evaluate(s, pin, T0 + 62_000, { registry: reg });
    expect(v3.verdict).toBe(v1.verdict);
    // version 4 published: the later run.start now names it, so the run is repinned (stale_contract)
    const c = reg.get('research-publish', '3')!;
    expect(reg.add({ ...c, version: '4', hash: 'another' })).toBeNull();
    const v4 = evaluate(s, pin, T0 + 62_000, { registry: reg });
    expect(v4).not.toBe(v3);
    expect(v4.findings.map((f) => f.code)).toContain('repinned');
    expect(v4.verdict).toBe('stale_contract');
  });

  it('names the earliest observation by time, then event id, whatever the arrival order', () => {
    const at = (m: number) => iso(T0 + m * 60_000);
    const start: Receipt = { run: 'r1', event: 's', type: 'run.start', at: at(0), contract: 'research-publish', phase: 'research' };
    const edge = (event: string, m: number, from: string, to: string, kind: 'delegate' | 'handoff' | 'return'): Receipt => ({ run: 'r1', event, type: 'edge', at: at(m), from, to, kind });
    const returns = [edge('e9', 15, 'verifier', 'orchestrator', 'return'), edge('e3', 15, 'verifier', 'orchestrator', 'return')];
    const lateEvents = (order: Receipt[]) => {
      const s = new RunState('r1');
      for (const r of [start, edge('d', 1, 'orchestrator', 'researcher', 'delegate'), edge('h', 2, 'researcher', 'verifier', 'handoff'), ...order]) {
        s.add(r);
        verdictOf(s, T0 + 20 * 60_000);
      }
      const v = evaluate(s, resolvePin(s, registry), T0 + 20 * 60_000, { registry });
      return v.findings.filter((f) => f.code === 'late_edge').map((f) => f.events);
    };
    expect(lateEvents(returns)).toEqual([['e3']]);
    expect(lateEvents([...returns].reverse())).toEqual([['e3']]);
  });
});
