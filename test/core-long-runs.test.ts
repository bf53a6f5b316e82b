// Long runs take the incremental paths short runs never reach: a run's event id set splits into shards past 256 ids
// (src/core/idset.ts), a rule's merged events gain new ids by binary search into a list 16 times longer
// (mergeSorted, routeEvents), and every wait met lets waitRules skip the waits. These properties pin that each
// equals the plain computation: the verdict of a live state evaluated along the way equals a fresh fold's. And a
// rebuild after a conflict resets every field a fold fills (RunState.rebuild lists them by hand).
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, resolvePin } from '../src/core/classify.js';
import { IdSet } from '../src/core/idset.js';
import { mergeSorted } from '../src/core/rules/context.js';
import type { Receipt } from '../src/core/types.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 15, 10);
const iso = (ms: number) => new Date(ms).toISOString();
const EDGES = [
  { from: 'orchestrator', to: 'researcher', kind: 'delegate' },
  { from: 'researcher', to: 'verifier', kind: 'handoff' },
  { from: 'verifier', to: 'orchestrator', kind: 'return' },
  { from: 'orchestrator', to: 'web-search', kind: 'delegate' },
  { from: 'orchestrator', to: 'doc-search', kind: 'delegate' },
  { from: 'researcher', to: 'publisher', kind: 'delegate' },
  { from: 'publisher', to: 'researcher', kind: 'delegate' }, // forbidden
] as const;
const WAIT_EDGES = ['verifier -> orchestrator : return', 'researcher->verifier:handoff', 'orchestrator -> [web-search, doc-search] : delegate'];

/**
 * A step of a long run: a new receipt (id `k`, hex-like or decimal), or (`again` 0-5) a redelivery of an earlier
 * receipt, or (`again` 6) another content under an earlier id (a conflict).
 */
const step = fc.record({
  again: fc.integer({ min: 0, max: 99 }),
  back: fc.nat(),
  hex: fc.boolean(),
  what: fc.integer({ min: 0, max: 99 }),
  minute: fc.integer({ min: 0, max: 600 }),
  edge: fc.integer({ min: 0, max: EDGES.length - 1 }),
  wait: fc.integer({ min: 0, max: WAIT_EDGES.length - 1 }),
  late: fc.integer({ min: 0, max: 300 }),
});
type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;
function receiptOf(s: Step, id: number): Receipt {
  const event = s.hex ? (0x1000 + id).toString(16).padStart(16, 'a') : `e${id}`;
  const at = iso(T0 + s.minute * 60_000);
  if (s.what < 2) return { run: 'r1', event, type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt;
  if (s.what < 12) return { run: 'r1', event, type: 'wait', at, from: 'researcher', on: 'verifier', edge: WAIT_EDGES[s.wait], deadline: iso(T0 + (s.minute + s.late) * 60_000) } as Receipt;
  if (s.what < 13) return { run: 'r1', event, type: 'run.end', at: iso(T0 + (550 + (s.minute % 100)) * 60_000), result: 'completed' } as Receipt;
  // edges from minute 100 on: a wait before then whose deadline also falls before is met late (late_wait)
  return { run: 'r1', event, type: 'edge', at: iso(T0 + (100 + Math.floor((s.minute * 5) / 6)) * 60_000), version: '3', ...EDGES[s.edge] } as Receipt;
}
const verdictOf = (s: RunState, now: number) => JSON.stringify(evaluate(s, resolvePin(s, registry, 'research-publish'), now, { registry }));

describe('long runs: the incremental paths equal a fresh fold', () => {
  it('evaluated every few receipts over 300 to 700 receipts, a state over a source equals a fresh self-contained fold', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 300, maxLength: 700 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 900 }), (steps, every, minutes) => {
        const now = T0 + minutes * 60_000;
        const stored: Receipt[] = [];
        const live = new RunState('r1', () => stored);
        const all: Receipt[] = [];
        let n = 0;
        for (const s of steps) {
          const prev = all.length > 0 ? all[s.back % all.length] : undefined;
          const r = prev !== undefined && s.again < 6 ? { ...prev } : prev !== undefined && s.again === 6 ? receiptOf(s, Number(prev.event.replace(/^e/, '')) || n) : receiptOf(s, n);
          all.push(r);
          if (live.add(r) !== 'duplicate') stored.push(r);
          if (++n % every !== 0 || live.size === 0) continue;
          const fresh = new RunState('r1');
          for (const x of all) fresh.add(x);
          fresh.waitEdgesTracked = false; // the oracle checks every wait one by one
          expect(verdictOf(live, now)).toBe(verdictOf(fresh, now));
        }
      }),
      { numRuns: 25, endOnFailure: true },
    );
  });

  it('a run of 1,100 receipts whose waits are all met, or all open, gives the fresh verdict after every receipt', () => {
    for (const open of [false, true]) {
      const live = new RunState('r1', () => []);
      const all: Receipt[] = [];
      const now = T0 + 3 * 86_400_000;
      for (let k = 0; k < 1100; k++) {
        const at = iso(T0 + k * 1000);
        const r: Receipt =
          k === 0
            ? ({ run: 'r1', event: `e${k}`, type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt)
            : k % 4 === 2
              ? ({ run: 'r1', event: `e${k}`, type: 'wait', at, from: 'researcher', on: 'verifier', edge: WAIT_EDGES[0], deadline: iso(T0 + k * 1000 + 600_000) } as Receipt)
              : ({ run: 'r1', event: `e${k}`, type: 'edge', at, version: '3', ...EDGES[k % 4 === 0 && !open ? 2 : [0, 1, 3][k % 3]] } as Receipt);
        all.push(r);
        live.add(r);
        const v = verdictOf(live, now);
        if (k % 97 === 0 || k > 1090) {
          const fresh = new RunState('r1');
          for (const x of all) fresh.add(x);
          fresh.waitEdgesTracked = false;
          expect(v).toBe(verdictOf(fresh, now));
        }
      }
      const findings = JSON.parse(verdictOf(live, now)).findings as { code: string }[];
      // the shapes differ where the waits do: every wait met (none reported), or every one missed
      expect(findings.filter((f) => f.code === 'missed_wait').length).toBe(open ? 275 : 0);
    }
  });

  it('a run naming many agents (past the scanned list) reports each unknown one once, with its events', () => {
    const all: Receipt[] = [];
    const live = new RunState('r1', () => all); // the source: every receipt stored so far
    all.push(
      { run: 'r1', event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt,
    );
    live.add(all[0]);
    const expected = new Map<string, string[]>();
    for (let k = 0; k < 120; k++) {
      const name = `agent-${k % 40}`;
      const r = { run: 'r1', event: `x${k}`, type: 'edge', at: iso(T0 + k * 1000), version: '3', from: 'orchestrator', to: name, kind: 'delegate' } as Receipt;
      all.push(r);
      live.add(r);
      expected.set(name, [...(expected.get(name) ?? []), r.event]);
      if (k % 7 === 0) verdictOf(live, T0);
    }
    const v = JSON.parse(verdictOf(live, T0)) as { findings: { code: string; agents: string[]; events: string[] }[] };
    const unknown = v.findings.filter((f) => f.code === 'unknown_agent');
    expect(unknown.map((f) => f.agents[0]).sort()).toEqual([...expected.keys()].sort());
    for (const f of unknown) expect(f.events).toEqual([...expected.get(f.agents[0])!].sort());
    const fresh = new RunState('r1');
    for (const r of all) fresh.add(r);
    expect(verdictOf(live, T0)).toBe(verdictOf(fresh, T0));
    expect(live.agentNames.length).toBe(41);
  });

  it('IdSet is a set: the same answers and size as a Set, from its short list through one Set to the split into shards', () => {
    // short runs too (the list), and ids alike in length and last character (what the list's scan compares first)
    const alike = fc.tuple(fc.string({ unit: fc.constantFrom(...'ab'), minLength: 1, maxLength: 3 }), fc.constantFrom('0', '1')).map(([a, b]) => a + b);
    fc.assert(
      fc.property(fc.array(fc.oneof(alike, fc.constant('')), { maxLength: 40 }), (ids) => {
        const a = new IdSet();
        const b = new Set<string>();
        for (const id of ids) {
          expect(a.has(id)).toBe(b.has(id));
          expect(a.add(id)).toBe(!b.has(id));
          b.add(id);
          expect(a.size).toBe(b.size);
        }
      }),
      { numRuns: 300, endOnFailure: true },
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.integer({ min: 0, max: 2000 }).map((i) => `e${i}`), fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), maxLength: 3 }), fc.constant('')), { minLength: 300, maxLength: 3000 }), (ids) => {
        const a = new IdSet();
        const b = new Set<string>();
        for (const id of ids) {
          expect(a.add(id)).toBe(!b.has(id));
          b.add(id);
          expect(a.size).toBe(b.size);
        }
        for (const id of ids.slice(0, 200)) expect(a.has(id)).toBe(true);
        expect(a.has('not-an-id')).toBe(false);
      }),
      { numRuns: 60, endOnFailure: true },
    );
  });

  it('mergeSorted merges either way round, long into short or short into long, as a sort of the union', () => {
    const sortedDistinct = fc.uniqueArray(fc.string({ maxLength: 4 }), { maxLength: 400 }).map((a) => a.sort());
    fc.assert(
      fc.property(sortedDistinct, sortedDistinct, (a, b) => {
        const bOnly = b.filter((x) => !a.includes(x));
        expect(mergeSorted(a, bOnly)).toEqual([...a, ...bOnly].sort());
        expect(mergeSorted(bOnly, a)).toEqual([...a, ...bOnly].sort());
      }),
      { numRuns: 300, endOnFailure: true },
    );
  });
});

describe('a rebuild after a conflict', () => {
  /** Every kind of receipt (handoff included), 20 agents (past the scanned list) and 10 edges (past the scanned aggregates), two versions. */
  function receipts(): Receipt[] {
    const out: Receipt[] = [];
    const at = (m: number) => iso(T0 + m * 60_000);
    out.push({ run: 'r1', event: 's1', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt);
    for (let i = 0; i < 20; i++) out.push({ run: 'r1', event: `e${i}`, type: 'edge', at: at(1 + i), version: i === 7 ? '2' : '3', from: 'orchestrator', to: `agent-${i % 10}`, kind: 'delegate', ...(i === 3 ? { status: 'error' } : {}) } as Receipt);
    for (let i = 0; i < 10; i++) out.push({ run: 'r1', event: `x${i}`, type: 'edge', at: at(2 + i), version: '3', from: `agent-${i}`, to: `helper-${i}`, kind: 'handoff' } as Receipt);
    for (let i = 0; i < 5; i++) out.push({ run: 'r1', event: `w${i}`, type: 'wait', at: at(3 + i), from: 'researcher', on: 'verifier', edge: WAIT_EDGES[i % WAIT_EDGES.length], deadline: at(30 + i) } as Receipt);
    out.push({ run: 'r1', event: 'o1', type: 'outcome', at: at(40), verified: true, from: 'verifier' } as Receipt);
    out.push({ run: 'r1', event: 'g1', type: 'gap', at: at(41), reason: 'caller_unresolved' } as Receipt);
    out.push({ run: 'r1', event: 'h1', type: 'handoff', at: at(42), handoff: 'hand-1', state: 'PROPOSED', from: 'orchestrator', to: 'researcher' } as Receipt);
    out.push({ run: 'r1', event: 'n1', type: 'run.end', at: at(50), result: 'completed', from: 'orchestrator' } as Receipt);
    return out;
  }
  // What a rebuild does not reset by design: the ids and copies it folds again, the conflicts, the change counter and
  // the verdict cache (invalidated through the counter).
  const KEPT = new Set(['run', 'source', 'ids', 'kept', 'conflictMap', 'version']);
  const aggregates = (s: RunState) => Object.fromEntries(Object.entries(s).filter(([k]) => !KEPT.has(k) && !k.startsWith('cached')));

  it('leaves every field of the state as a fresh fold of the receipts without the conflicted one (a field the reset forgets fails here)', () => {
    // The conflicted receipt: an edge, the run.start, the run.end, a wait, the verified outcome, the gap, the handoff.
    for (const [withSource, conflicted] of [false, true].flatMap((w) => ['e5', 's1', 'n1', 'w2', 'o1', 'g1', 'h1'].map((e) => [w, e] as const))) {
      const all = receipts();
      const stored: Receipt[] = [];
      const live = withSource ? new RunState('r1', () => stored) : new RunState('r1');
      for (const r of all) if (live.add(r) !== 'duplicate') stored.push(r);
      // Fill what evaluation and listings keep (memos, event lists of agents and versions) before the conflict.
      evaluate(live, resolvePin(live, registry), T0 + 45 * 60_000, { registry });
      expect(live.agentEvents('agent-3').length).toBeGreaterThan(0);
      expect(live.versionEvents('2')).toEqual(['e7']);
      const other = { ...all.find((r) => r.event === conflicted)!, at: iso(T0 + 99 * 60_000) };
      stored.push(other);
      expect(live.add(other)).toBe('conflict');
      const fresh = new RunState('r1');
      for (const r of all) if (r.event !== other.event) fresh.add(r);
      const got = aggregates(live);
      expect(Object.keys(got)).toEqual(expect.arrayContaining(['starts', 'ends', 'edgeList', 'edgeMap', 'agentList', 'agentIndex', 'agentOnce', 'waitTimes', 'waitRefs', 'gaps', 'notOk', 'verifiedOutcomes', 'handoffs', 'agentLists', 'routeMemo']));
      expect(got).toEqual(aggregates(fresh));
      expect(live.conflicts.has(other.event)).toBe(true);
    }
  });
});
