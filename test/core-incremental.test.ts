// The live engine keeps one RunState per run and evaluates it after every batch. RunState keeps incremental
// aggregates (sorted event ids merged on read, the earliest observation per edge, parsed waits, shared strings)
// so that an evaluation does not re-read the run. These properties pin that the aggregates never go stale:
// evaluating after every receipt gives the verdict of a state folded in one go, in any order.
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, resolvePin } from '../src/core/classify.js';
import type { Receipt } from '../src/core/types.js';
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

  it('keeps an equal copy of every accepted receipt, never the caller object', () => {
    fc.assert(
      fc.property(fc.array(receiptArb, { minLength: 1, maxLength: 30 }), (receipts) => {
        const s = new RunState('r1');
        const accepted: Receipt[] = [];
        for (const r of receipts) if (s.add(r) === 'accepted') accepted.push(r);
        const kept = [...s.byEvent.values(), ...[...s.conflicts.values()].flat()];
        for (const r of accepted) {
          const k = kept.find((x) => x.event === r.event && JSON.stringify(x) === JSON.stringify(r));
          if (s.conflicts.has(r.event)) continue;
          expect(k).toBeDefined();
          expect(k).not.toBe(r);
        }
      }),
      { numRuns: 200 },
    );
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
