/**
 * One test per verdict, per precedence pair, and per rule of semantics.md sections 2 and 2a,
 * each built from a few receipts against small inline contracts.
 */
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, naiveVerdict, resolvePin, type Receipt } from '../src/core/index.js';
import { at, codes, edge, end, finding, gap, ms, outcome, receipt, registryOf, start, tinyContract, verdictAt, wait } from './helpers/receipts.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const T_V2 = `
contract: t
version: "2"
owner: o
agents: [o, r, v, p, w1, w2]
allow:
  - o -> r : delegate
  - r -> v : handoff
  - v -> o : return
  - o -> p : delegate
  - p -> o : return
  - { from: o, to: [w1, w2], kind: delegate, max: 2 }
phases:
  main:
    expect:
      - o -> r : delegate
      - r -> v : handoff
      - v -> o : return
        dependency: v
        within: 10m
  lite:
    outcome: optional
    expect:
      - o -> r : delegate
  par:
    outcome: optional
    expect:
      - o -> r : delegate
        within: 5m
      - edge: "o -> p : delegate"
        after: []
        dependency: p
        within: 20m
      - edge: "v -> o : return"
        after: ["o -> r : delegate", "o->p:delegate"]
        within: 10m
  choice:
    outcome: optional
    expect:
      - o -> [w1, w2] : delegate
      - edge: "p -> o : return"
        after: ["o -> [w1, w2] : delegate"]
        within: 5m
`;

const T_V1_RETIRED = tinyContract('1', true);

const T_V3_RETIRED = tinyContract('3', true);

/** A contract whose first edge has a deadline, to see when a run without run.start starts. */
const D_V1 = `
contract: d
version: "1"
owner: a
agents: [a, b]
allow:
  - a -> b : delegate
phases:
  first:
    outcome: optional
    expect:
      - { edge: "a -> b : delegate", dependency: b, within: 5m }
`;

const ONLY_RETIRED = `
contract: gone
version: "1"
retired: true
owner: a
agents: [a]
phases:
  p: {}
`;

const registry = registryOf(T_V2, T_V1_RETIRED, T_V3_RETIRED, D_V1, ONLY_RETIRED);
const V = { version: '2' };
const main = (extra: Partial<LooseReceipt> = {}) => start('s', 0, { version: '2', phase: 'main', ...extra });
const phase = (name: string) => start('s', 0, { version: '2', phase: name });
/** The whole `main` plan, on time. */
const mainPlan = () => [main(), edge('e1', 1, 'o -> r : delegate', V), edge('e2', 2, 'r -> v : handoff', V), edge('e3', 3, 'v -> o : return', V)];

describe('each verdict', () => {
  it('healthy: the plan is finished with a verified outcome; no run.end needed', () => {
    const v = verdictAt(registry, [...mainPlan(), outcome('out', 4)], 5);
    expect(v.verdict).toBe('healthy');
    expect(v.pin).toEqual({ contract: 't', version: '2', phase: 'main' });
    expect(v.findings).toEqual([]);
    expect(v.settled).toBe(true);
    expect(verdictAt(registry, [...mainPlan(), outcome('out', 4), end('end', 5)], 6).verdict).toBe('healthy');
  });

  it('working: what is observed conforms and the plan is not finished', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate')], 5);
    expect(v.verdict).toBe('working');
    expect(codes(v)).toEqual(['pending r -> v : handoff']);
    expect(v.settled).toBe(false);
  });

  it('waiting: a due edge naming a dependency, before its deadline', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff')], 5);
    expect(v.verdict).toBe('waiting');
    const f = finding(v, 'waiting', 'v -> o : return');
    expect(f.agents).toEqual(['v']);
    expect(f.settled).toBe(false);
    expect(v.nextChangeAt).toBe(ms(12));
    expect(v.settled).toBe(false);
  });

  it('incomplete: the same edge still absent at its deadline', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff')], 30);
    expect(v.verdict).toBe('incomplete');
    const f = finding(v, 'missed_deadline', 'v -> o : return');
    expect(f.verdict).toBe('incomplete');
    expect(f.agents).toEqual(['v']);
    expect(f.message).toContain(at(12).slice(0, 16));
    expect(v.settled).toBe(true);
  });

  it('stale_contract: a receipt carries another version than the pin', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate', { version: '1' })], 2);
    expect(v.verdict).toBe('stale_contract');
    const f = finding(v, 'version_mismatch');
    expect(f.events).toEqual(['e1']);
    expect(f.message).toContain('"1"');
  });

  it('unknown_agent: an agent outside the contract joins the graph', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> x : delegate')], 2);
    expect(v.verdict).toBe('unknown_agent');
    expect(finding(v, 'unknown_agent').agents).toEqual(['x']);
  });

  it('forbidden_edge: the directed edge with its kind is not allowed; the finding carries edge, agents, events, message', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> p : delegate')], 3);
    expect(v.verdict).toBe('forbidden_edge');
    const f = finding(v, 'forbidden_edge');
    expect(f).toMatchObject({ verdict: 'forbidden_edge', edge: 'r -> p : delegate', agents: ['p', 'r'], events: ['e2'], settled: true });
    expect(f.message).toMatch(/not allowed by t@2/);
    // kind matters: an allowed pair with another kind is forbidden
    expect(verdictAt(registry, [main(), edge('e1', 1, 'o -> r : handoff')], 3).verdict).toBe('forbidden_edge');
  });

  it('ambiguous_route: an allowed edge observed more often (distinct event ids) than its max', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'o -> r : delegate')], 3);
    expect(v.verdict).toBe('ambiguous_route');
    expect(finding(v, 'multiplicity', 'o -> r : delegate').events).toEqual(['e1', 'e2']);
  });

  it('false_complete: run.end completed while an expected edge is absent', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff'), end('end', 3, 'completed', { from: 'o' })], 4);
    expect(v.verdict).toBe('false_complete');
    const f = finding(v, 'false_complete');
    expect(f.edge).toBe('v -> o : return');
    expect(f.events).toEqual(['end']);
    expect(f.agents).toEqual(['o']);
    expect(f.message).toMatch(/no verified outcome/);
  });

  it('false_complete: run.end completed with every edge but without the required verified outcome', () => {
    const v = verdictAt(registry, [...mainPlan(), outcome('o1', 4, false), end('end', 5)], 6);
    expect(v.verdict).toBe('false_complete');
    expect(finding(v, 'false_complete').edge).toBeUndefined();
  });

  it('uncertain: no resolvable pin (no run.start, no default contract)', () => {
    const v = verdictAt(registry, [edge('e1', 1, 'o -> r : delegate')], 2);
    expect(v.verdict).toBe('uncertain');
    expect(v.pin).toBeNull();
    expect(codes(v)).toEqual(['no_pin']);
    expect(v.settled).toBe(false);
  });
});

describe('precedence', () => {
  const late = () => [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff')];

  it('forbidden_edge beats incomplete (a forbidden route in a late run)', () => {
    const v = verdictAt(registry, [...late(), edge('f', 3, 'r -> p : delegate')], 30);
    expect(v.verdict).toBe('forbidden_edge');
    expect(codes(v)).toEqual(['forbidden_edge r -> p : delegate', 'missed_deadline v -> o : return']);
  });

  it('stale_contract beats unknown, forbidden, ambiguous, false_complete and incomplete', () => {
    const rs = [...late(), edge('x', 3, 'o -> x : delegate'), edge('f', 3, 'r -> p : delegate'), edge('d', 3, 'o -> r : delegate'), edge('old', 4, 'o -> p : delegate', { version: '1' }), end('end', 40, 'completed')];
    const v = verdictAt(registry, rs, 41);
    expect(v.verdict).toBe('stale_contract');
    const got = new Set(v.findings.map((f) => f.verdict));
    for (const w of ['stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete', 'incomplete'] as const) expect(got.has(w), w).toBe(true);
  });

  it('uncertain beats stale_contract (a gap)', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate', { version: '1' }), gap('g', 2, 'caller_unresolved', { to: 'r' })], 3);
    expect(v.verdict).toBe('uncertain');
    expect(finding(v, 'gap').agents).toEqual(['r']);
    expect(finding(v, 'version_mismatch').verdict).toBe('stale_contract');
  });

  it('unknown_agent beats forbidden_edge', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> x : delegate')], 2);
    expect(v.verdict).toBe('unknown_agent');
    expect(codes(v)).toContain('forbidden_edge o -> x : delegate');
  });

  it('forbidden_edge beats ambiguous_route', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 1, 'o -> r : delegate'), edge('f', 2, 'v -> r : return')], 3);
    expect(v.verdict).toBe('forbidden_edge');
    expect(codes(v)).toContain('multiplicity o -> r : delegate');
  });

  it('ambiguous_route beats false_complete', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 1, 'o -> r : delegate'), end('end', 2)], 3);
    expect(v.verdict).toBe('ambiguous_route');
    expect(codes(v)).toContain('false_complete r -> v : handoff');
  });

  it('false_complete beats waiting: a run that ends completed while waiting waits for nothing', () => {
    const waitingRun = late();
    expect(verdictAt(registry, waitingRun, 5).verdict).toBe('waiting');
    const v = verdictAt(registry, [...waitingRun, end('end', 4)], 5);
    expect(v.verdict).toBe('false_complete');
    expect(v.findings.some((f) => f.verdict === 'waiting')).toBe(false);
  });

  it('false_complete beats incomplete', () => {
    const v = verdictAt(registry, [...late(), end('end', 20)], 21);
    expect(v.verdict).toBe('false_complete');
    expect(codes(v)).toContain('missed_deadline v -> o : return');
  });

  it('waiting beats incomplete on parallel branches, both findings reported, settled for the gate', () => {
    // par: o->r within 5m (no dependency) is missed at 6; o->p (dependency p, 20m) is still awaited.
    const v = verdictAt(registry, [phase('par')], 6);
    expect(v.verdict).toBe('waiting');
    expect(codes(v)).toEqual(['waiting o -> p : delegate', 'missed_deadline o -> r : delegate']);
    expect(finding(v, 'missed_deadline').settled).toBe(true);
    expect(v.settled).toBe(true);
  });

  it('uncertain beats all: a conflicting event id (neither copy used)', () => {
    const a = edge('e1', 1, 'o -> r : delegate');
    const b = edge('e1', 1, 'r -> p : delegate');
    const v = verdictAt(registry, [main(), a, b, edge('f', 2, 'o -> x : delegate', { version: '1' })], 30);
    expect(v.verdict).toBe('uncertain');
    expect(finding(v, 'conflict').events).toEqual(['e1']);
    // neither copy is used: no forbidden r -> p, and o -> r is absent
    expect(codes(v)).not.toContain('forbidden_edge r -> p : delegate');
    expect(codes(v)).toContain('pending o -> r : delegate');
    expect(codes(v)).toContain('version_mismatch');
  });

  it('uncertain: no pin, unknown contract, unknown version, unknown phase, default with only retired versions', () => {
    const bad = [
      [edge('e1', 1, 'o -> r : delegate')],
      [start('s', 0, { contract: 'nope' }), edge('e1', 1, 'o -> r : delegate')],
      [start('s', 0, { version: '7' }), edge('e1', 1, 'o -> r : delegate')],
      [start('s', 0, { version: '2', phase: 'nope' }), edge('e1', 1, 'o -> r : delegate')],
    ];
    for (const rs of bad) {
      const v = verdictAt(registry, [...rs, edge('f', 2, 'r -> p : delegate')], 3);
      expect(v.verdict).toBe('uncertain');
      expect(finding(v, 'no_pin').verdict).toBe('uncertain');
    }
    expect(verdictAt(registry, [edge('e1', 1, 'a -> a : delegate')], 2, 'gone').verdict).toBe('uncertain');
  });
});

describe('deadlines and now', () => {
  const run = [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff')];
  // v -> o is due at 2 (when r -> v is observed) with 10m: deadline at minute 12.

  it('now equal to the deadline is past it; one millisecond before is not', () => {
    const before = verdictAt(registry, run, 12 - 1 / 60_000);
    expect(before.verdict).toBe('waiting');
    const atDeadline = verdictAt(registry, run, 12);
    expect(atDeadline.verdict).toBe('incomplete');
  });

  it('a receipt exactly at the deadline is on time', () => {
    const v = verdictAt(registry, [...run, edge('e3', 12, 'v -> o : return'), outcome('out', 13)], 20);
    expect(v.verdict).toBe('healthy');
  });

  it('a late receipt keeps incomplete, with how late it came', () => {
    const v = verdictAt(registry, [...run, edge('e3', 14.5, 'v -> o : return'), outcome('out', 15)], 20);
    expect(v.verdict).toBe('incomplete');
    const f = finding(v, 'late_edge', 'v -> o : return');
    expect(f.events).toEqual(['e3']);
    expect(f.message).toContain('2m30s');
    expect(f.settled).toBe(true);
  });

  it('verdicts move with now alone: waiting becomes incomplete without a new receipt', () => {
    expect([5, 11, 12, 100].map((n) => verdictAt(registry, run, n).verdict)).toEqual(['waiting', 'waiting', 'incomplete', 'incomplete']);
  });

  it('an observation satisfies its edge whatever its time relative to becoming due (clocks disagree)', () => {
    const v = verdictAt(registry, [main(), edge('e2', 0.5, 'r -> v : handoff'), edge('e1', 1, 'o -> r : delegate'), edge('e3', 1.5, 'v -> o : return'), outcome('out', 2)], 3);
    expect(v.verdict).toBe('healthy');
  });

  it('an ended run\'s deadline at or before its end has passed even when now is earlier (the end receipt proves the time)', () => {
    // Receipt clocks ahead of the evaluator: the run ended at minute 5, the wait's deadline is 3, now is 2.
    const rs = [phase('lite'), edge('e1', 1, 'o -> r : delegate'), wait('w', 1, 'p', 'o -> p : delegate', 3), end('end', 5)];
    const before = verdictAt(registry, rs, 2);
    expect(before.findings.some((f) => f.verdict === 'waiting')).toBe(false); // an ended run waits for nothing
    expect(finding(before, 'missed_wait').verdict).toBe('incomplete');
    expect(before.nextChangeAt).toBeNull(); // nothing left to move with time: the verdict is the same at 3 and later
    expect(verdictAt(registry, rs, 3).findings).toEqual(before.findings);
    const plan = [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff'), end('end', 20, 'failed')];
    expect(codes(verdictAt(registry, plan, 5))).toContain('missed_deadline v -> o : return');
    expect(verdictAt(registry, plan, 5).nextChangeAt).toBeNull();
  });

  it('an edge is due at the latest observation time of its `after` edges, even when that is before the run.start time', () => {
    // run.start says minute 5 but the agents' clocks put r -> v at minute 1: v -> o is due at 1, deadline 11.
    const skewed = [start('s', 5, { version: '2', phase: 'main' }), edge('e1', 0, 'o -> r : delegate'), edge('e2', 1, 'r -> v : handoff')];
    expect(verdictAt(registry, skewed, 10.9).verdict).toBe('waiting');
    expect(verdictAt(registry, skewed, 11).verdict).toBe('incomplete');
  });
});

describe('plans: parallel branches, joins, bounded choice', () => {
  it('after: [] starts a parallel branch due at the run start; the branches can arrive in any order', () => {
    const v = verdictAt(registry, [phase('par'), edge('p1', 1, 'o -> p : delegate')], 2);
    expect(v.verdict).toBe('working');
    expect(codes(v)).toEqual(['pending o -> r : delegate']); // the join is not due until both are observed
  });

  it('a join is due at the latest of its after edges\' observation times', () => {
    const rs = [phase('par'), edge('r1', 1, 'o -> r : delegate'), edge('p1', 4, 'o -> p : delegate')];
    // due at 4 (not 1): deadline 14
    expect(verdictAt(registry, rs, 13.9).verdict).toBe('working');
    expect(finding(verdictAt(registry, rs, 13.9), 'pending', 'v -> o : return').message).toContain(at(4).slice(0, 16));
    expect(verdictAt(registry, rs, 14).verdict).toBe('incomplete');
    expect(verdictAt(registry, [...rs, edge('j', 14, 'v -> o : return')], 20).verdict).toBe('healthy');
  });

  it('a bounded-choice expected entry is satisfied by any one target', () => {
    for (const t of ['w1', 'w2']) {
      const v = verdictAt(registry, [phase('choice'), edge('c', 1, `o -> ${t} : delegate`), edge('b', 2, 'p -> o : return')], 3);
      expect(v.verdict, t).toBe('healthy');
    }
  });

  it('the earliest observation of a bounded choice counts for due time', () => {
    const rs = [phase('choice'), edge('c2', 3, 'o -> w1 : delegate'), edge('c1', 1, 'o -> w2 : delegate')];
    // p -> o is due at 1 with 5m: missed at 6
    expect(verdictAt(registry, rs, 5.9).verdict).toBe('working');
    expect(verdictAt(registry, rs, 6).verdict).toBe('incomplete');
    expect(finding(verdictAt(registry, rs, 6), 'missed_deadline', 'p -> o : return').message).toContain(at(6).slice(0, 16));
  });

  it('max bounds a bounded-choice allow entry as a whole', () => {
    const two = [phase('choice'), edge('c1', 1, 'o -> w1 : delegate'), edge('c2', 1, 'o -> w2 : delegate'), edge('b', 2, 'p -> o : return')];
    expect(verdictAt(registry, two, 3).verdict).toBe('healthy');
    const three = [...two, edge('c3', 2, 'o -> w1 : delegate')];
    const v = verdictAt(registry, three, 3);
    expect(v.verdict).toBe('ambiguous_route');
    const f = finding(v, 'multiplicity', 'o -> [w1, w2] : delegate');
    expect(f.events).toEqual(['c1', 'c2', 'c3']);
    expect(f.agents).toEqual(['o', 'w1', 'w2']);
  });

  it('multiplicity counts distinct event ids: a duplicate delivery counts once', () => {
    const e1 = edge('e1', 1, 'o -> r : delegate');
    expect(verdictAt(registry, [phase('lite'), e1, e1, { ...e1 }], 2).verdict).toBe('healthy');
    expect(verdictAt(registry, [phase('lite'), e1, edge('e1b', 1, 'o -> r : delegate')], 2).verdict).toBe('ambiguous_route');
  });
});

describe('waits', () => {
  const lite = () => [phase('lite'), edge('e1', 1, 'o -> r : delegate')];

  it('a declared wait before its deadline is waiting, not a stall; at the deadline it is incomplete', () => {
    const rs = [...lite(), wait('w', 2, 'p', 'o -> p : delegate', 5, { from: 'o' })];
    const v = verdictAt(registry, rs, 4);
    expect(v.verdict).toBe('waiting');
    expect(finding(v, 'declared_wait', 'o -> p : delegate')).toMatchObject({ agents: ['p'], events: ['w'] });
    const late = verdictAt(registry, rs, 5);
    expect(late.verdict).toBe('incomplete');
    expect(finding(late, 'missed_wait', 'o -> p : delegate').events).toEqual(['w']);
  });

  it('is satisfied by an observation at or before the deadline (the edge need not be in the plan)', () => {
    for (const t of [3, 5]) {
      const v = verdictAt(registry, [...lite(), wait('w', 2, 'p', 'o->p:delegate', 5), edge('p1', t, 'o -> p : delegate')], 10);
      expect(v.verdict, `observed at ${t}`).toBe('healthy');
    }
  });

  it('a later observation leaves it incomplete', () => {
    const v = verdictAt(registry, [...lite(), wait('w', 2, 'p', 'o -> p : delegate', 5), edge('p1', 6, 'o -> p : delegate')], 7);
    expect(v.verdict).toBe('incomplete');
    expect(finding(v, 'late_wait').events).toEqual(['p1', 'w']);
  });

  it('a wait timed after the run end is void', () => {
    const v = verdictAt(registry, [...lite(), end('end', 2), wait('w', 3, 'p', 'o -> p : delegate', 5)], 10);
    expect(v.verdict).toBe('healthy');
    expect(v.findings).toEqual([]);
  });

  it('a wait whose deadline falls after the run end is void', () => {
    const v = verdictAt(registry, [...lite(), wait('w', 1.5, 'p', 'o -> p : delegate', 20), end('end', 2)], 30);
    expect(v.verdict).toBe('healthy');
    expect(v.findings).toEqual([]);
  });

  it('unknown agents are looked for exactly where rule 3 says: not in a gap\'s `to`, nor in a wait\'s edge', () => {
    const lite = [phase('lite'), edge('e1', 1, 'o -> r : delegate')];
    const g = verdictAt(registry, [...lite, gap('g', 2, 'caller_unresolved', { to: 'ghost' })], 3);
    expect(g.verdict).toBe('uncertain');
    expect(codes(g)).toEqual(['gap']);
    const w = verdictAt(registry, [...lite, wait('w', 2, 'p', 'ghost -> o : return', 5)], 6);
    expect(codes(w)).toEqual(['missed_wait ghost -> o : return']);
    for (const r of [outcome('x', 2, true, { from: 'ghost' }), end('x', 2, 'completed', { from: 'ghost' }), start('x', 3, { version: '2', phase: 'lite', from: 'ghost' }), gap('x', 2, 'caller_unresolved', { from: 'ghost' })]) {
      const v = verdictAt(registry, [...lite, r], 4);
      expect(finding(v, 'unknown_agent').agents, r.type).toEqual(['ghost']);
    }
  });

  it('a wait names its agent for unknown_agent', () => {
    expect(verdictAt(registry, [...lite(), wait('w', 2, 'ghost', 'o -> p : delegate', 5)], 3).verdict).toBe('unknown_agent');
  });
});

describe('outcome and run end', () => {
  it('outcome required: every edge observed but no verified outcome is working, not healthy', () => {
    const v = verdictAt(registry, mainPlan(), 5);
    expect(v.verdict).toBe('working');
    expect(codes(v)).toEqual(['awaiting_outcome']);
    expect(verdictAt(registry, [...mainPlan(), outcome('out', 4, false)], 5).verdict).toBe('working');
  });

  it('outcome optional: the plan alone is healthy', () => {
    expect(verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate')], 2).verdict).toBe('healthy');
  });

  it.each(['failed', 'cancelled'] as const)('run.end %s is incomplete, even with the plan finished', (result) => {
    const v = verdictAt(registry, [...mainPlan(), outcome('out', 4), end('end', 5, result, { from: 'o' })], 6);
    expect(v.verdict).toBe('incomplete');
    expect(finding(v, `run_${result}`)).toMatchObject({ events: ['end'], agents: ['o'], settled: true });
  });

  it('the run end is its earliest run.end', () => {
    const v = verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate'), end('a', 3, 'failed'), end('b', 2, 'completed')], 4);
    expect(v.verdict).toBe('healthy');
  });

  it('receipts after the run end satisfy nothing', () => {
    const v = verdictAt(registry, [main(), edge('e1', 1, 'o -> r : delegate'), edge('e2', 2, 'r -> v : handoff'), end('end', 3), edge('e3', 4, 'v -> o : return'), outcome('out', 5)], 6);
    expect(v.verdict).toBe('false_complete');
    expect(finding(v, 'false_complete').message).toMatch(/v -> o : return is absent.*no verified outcome/);
  });

  it('receipts after the run end still give stale, unknown, forbidden and multiplicity findings', () => {
    const rs = [
      phase('lite'),
      edge('e1', 1, 'o -> r : delegate'),
      end('end', 2),
      edge('x', 3, 'o -> x : delegate'),
      edge('f', 3, 'r -> p : delegate'),
      edge('d', 3, 'o -> r : delegate'),
      edge('old', 3, 'o -> p : delegate', { version: '1' }),
    ];
    const v = verdictAt(registry, rs, 4);
    expect(v.verdict).toBe('stale_contract');
    expect(codes(v).sort()).toEqual(['forbidden_edge o -> x : delegate', 'forbidden_edge r -> p : delegate', 'multiplicity o -> r : delegate', 'unknown_agent', 'version_mismatch'].sort());
  });
});

describe('uncertain evidence', () => {
  it('a gap counts whenever it is timed, also after the run end', () => {
    const v = verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate'), end('end', 2), gap('g', 3)], 4);
    expect(v.verdict).toBe('uncertain');
    expect(codes(v)).toEqual(['gap']);
  });

  it('uncertain clears when the missing pin arrives', () => {
    const rs = [edge('e1', 1, 'o -> r : delegate')];
    expect(verdictAt(registry, rs, 2).verdict).toBe('uncertain');
    expect(verdictAt(registry, [...rs, phase('lite')], 2).verdict).toBe('healthy');
  });
});

describe('pins', () => {
  it('a later run.start naming another pin is stale_contract; one naming the same pin (after defaults) is not', () => {
    const rs = [start('s1', 0, { version: '2', phase: 'lite' }), edge('e1', 1, 'o -> r : delegate')];
    expect(verdictAt(registry, [...rs, start('s2', 2, { phase: 'lite' })], 3).verdict).toBe('healthy');
    for (const other of [start('s2', 2, { version: '2', phase: 'main' }), start('s2', 2, { version: '1', phase: 'main' }), start('s2', 2, { contract: 'nope' })]) {
      const v = verdictAt(registry, [...rs, other], 3);
      expect(v.verdict).toBe('stale_contract');
      expect(finding(v, 'repinned').events).toEqual(['s2']);
      expect(v.pin).toEqual({ contract: 't', version: '2', phase: 'lite' });
    }
  });

  it('the earliest run.start pins, by time then event id, whatever the arrival order', () => {
    const a = start('b-late', 2, { version: '2', phase: 'main' });
    const b = start('a-early', 1, { version: '2', phase: 'lite' });
    const c = start('a-same', 2, { version: '2', phase: 'par' });
    for (const rs of [[a, b, c], [c, a, b]]) expect(verdictAt(registry, [...rs, edge('e1', 3, 'o -> r : delegate')], 4).pin?.phase).toBe('lite');
    expect(verdictAt(registry, [a, c], 4).pin?.phase).toBe('par');
  });

  it('run.start without version pins the newest non-retired version, without phase the first phase', () => {
    const v = verdictAt(registry, [start('s', 0), edge('e1', 1, 'o -> r : delegate')], 2);
    expect(v.pin).toEqual({ contract: 't', version: '2', phase: 'main' });
  });

  it('a run that names a retired version is pinned to it and is stale_contract', () => {
    const v = verdictAt(registry, [start('s', 0, { version: '1' }), edge('e1', 1, 'o -> r : delegate', { version: '1' })], 2);
    expect(v.pin).toEqual({ contract: 't', version: '1', phase: 'main' });
    expect(v.verdict).toBe('stale_contract');
    expect(codes(v)).toEqual(['retired_version']);
  });

  it('--contract (the default contract) pins runs without run.start to the newest non-retired version and first phase', () => {
    const rs = [edge('e1', 1, 'o -> r : delegate', V), edge('e2', 2, 'r -> v : handoff', V)];
    const v = verdictAt(registry, rs, 5, 't');
    expect(v.pin).toEqual({ contract: 't', version: '2', phase: 'main' });
    expect(v.verdict).toBe('waiting');
    expect(verdictAt(registry, rs, 5).verdict).toBe('uncertain');
  });

  it('without run.start the first edges are due at the run\'s earliest receipt', () => {
    const rs = [outcome('o1', 2, false, { from: 'a' })];
    expect(verdictAt(registry, rs, 6.9, 'd').verdict).toBe('waiting');
    expect(verdictAt(registry, rs, 7, 'd').verdict).toBe('incomplete');
  });
});

describe('gate and naive rule', () => {
  it('a settled finding under a waiting verdict makes the run settled for the gate', () => {
    const onlyWaiting = verdictAt(registry, [phase('par'), edge('r1', 1, 'o -> r : delegate')], 6);
    expect(onlyWaiting.verdict).toBe('waiting');
    expect(onlyWaiting.settled).toBe(false);
    const v = verdictAt(registry, [phase('par'), edge('r1', 1, 'o -> r : delegate'), edge('r2', 2, 'o -> r : delegate')], 6);
    expect(v.verdict).toBe('ambiguous_route');
    const settledWaiting = verdictAt(registry, [phase('par')], 6);
    expect(settledWaiting.verdict).toBe('waiting');
    expect(settledWaiting.findings.filter((f) => f.settled).map((f) => f.code)).toEqual(['missed_deadline']);
    expect(settledWaiting.settled).toBe(true);
  });

  it('naive rule: green when events exist, every status is ok and the parent did not fail; it never decides', () => {
    const forbidden = verdictAt(registry, [main(), edge('f', 1, 'r -> p : delegate', { status: 'ok' })], 2);
    expect([forbidden.naive, forbidden.verdict]).toEqual(['green', 'forbidden_edge']);
    const errorButHealthy = verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate', { status: 'error' })], 2);
    expect([errorButHealthy.naive, errorButHealthy.verdict]).toEqual(['red', 'healthy']);
    expect(verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate', { status: 'unset' })], 2).naive).toBe('red');
    expect(verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate'), end('end', 2, 'failed')], 3).naive).toBe('red');
    expect(verdictAt(registry, [phase('lite'), edge('e1', 1, 'o -> r : delegate'), end('end', 2, 'cancelled')], 3).naive).toBe('green');
    expect(naiveVerdict(new RunState('empty'))).toBe('red');
  });
});

describe('receipts are a set', () => {
  it('duplicates compare after normalisation: default status, instants, edge spacing', () => {
    const w = wait('w', 2, 'p', 'o -> p : delegate', 5);
    const same = receipt({ ...w, status: 'ok', at: '2026-01-15T11:02:00+01:00', edge: 'o->p:delegate', deadline: '2026-01-15T10:05:00.000Z' });
    const s = new RunState('r1');
    expect(s.add(w)).toBe('accepted');
    expect(s.add(same)).toBe('duplicate');
    expect(s.add(asReceipt({ ...w, deadline: at(6) }))).toBe('conflict');
    expect(s.add(asReceipt({ ...w, deadline: at(6) }))).toBe('duplicate');
    const reg = registry;
    const v = evaluate(s, resolvePin(s, reg, 't'), ms(10), { registry: reg });
    expect(v.verdict).toBe('uncertain');
    expect(finding(v, 'conflict').message).toContain('w');
  });
});
