/**
 * Property tests: random contracts and random receipt sets for them.
 * - the fast classifier (src/core/classify.ts) equals the reference (test/reference/classify.ts);
 * - the verdict does not depend on arrival order or on duplicate delivery;
 * - a same-id receipt with different content is a conflict and the run is uncertain;
 * - advancing `now` never unsettles a run nor clears a settled finding.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ContractRegistry, classify, parseContract, parseInstant, type Contract, type Instant, type Receipt, type RunVerdict } from '../src/core/index.js';
import { EDGE_KINDS } from '../src/core/types.js';
import { at, receipt } from './helpers/receipts.js';
import { referenceClassify, type RefResult } from './reference/classify.js';
import type { LooseReceipt } from './helpers/receipt.js';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 200);
const AGENTS = ['a', 'b', 'c', 'd'] as const;
const KINDS = EDGE_KINDS;

interface Triple {
  from: string;
  to: string;
  kind: string;
}
const tkey = (t: Triple) => `${t.from} -> ${t.to} : ${t.kind}`;
const writeSpec = (from: string, to: string[], kind: string) => (to.length === 1 ? `${from} -> ${to[0]} : ${kind}` : `${from} -> [${to.join(', ')}] : ${kind}`);

// ---------------------------------------------------------------------------------------------
// Random contracts
// ---------------------------------------------------------------------------------------------

const agentArb = fc.constantFrom(...AGENTS);
const kindArb = fc.constantFrom(...KINDS);

/** One candidate allow entry: a source, one or two targets, a kind, a max. */
const allowCandidateArb = fc.record({
  from: agentArb,
  to: fc.uniqueArray(agentArb, { minLength: 1, maxLength: 2 }),
  kind: kindArb,
  max: fc.constantFrom(1, 1, 2, 3),
});

/** Raw material for one plan step; resolved against the allowed triples in `buildContract`. */
const stepSeedArb = fc.record({
  pick: fc.nat(),
  choice: fc.boolean(), // try a bounded choice of two allowed targets
  afterMode: fc.constantFrom('default', 'default', 'none', 'some'),
  afterPicks: fc.array(fc.nat(), { maxLength: 2 }),
  within: fc.option(fc.constantFrom('1m', '2m', '5m', '10m'), { nil: undefined }),
  dependency: fc.option(agentArb, { nil: undefined }),
});

const phaseSeedArb = fc.record({
  outcome: fc.constantFrom('required', 'optional'),
  steps: fc.array(stepSeedArb, { maxLength: 4 }),
  // run-level stall limits (rule 9)
  progressWithin: fc.constantFrom<string | undefined>(undefined, undefined, undefined, undefined, undefined, '0s', '1m', '3m', '5m'),
  maxDuration: fc.constantFrom<string | undefined>(undefined, undefined, undefined, undefined, undefined, undefined, '5m', '10m', '20m'),
});

const contractSeedArb = fc.record({
  allow: fc.array(allowCandidateArb, { minLength: 1, maxLength: 6 }),
  phases: fc.array(phaseSeedArb, { minLength: 1, maxLength: 2 }),
  retired1: fc.boolean(),
  retired2: fc.boolean(),
});

type ContractSeed = typeof contractSeedArb extends fc.Arbitrary<infer T> ? T : never;

interface World {
  contracts: Contract[];
  registry: ContractRegistry;
  /** Edge triples the contract allows, expects, and some it does not. */
  allowed: Triple[];
  expected: Triple[];
  phases: string[];
}

/** Build a valid contract (JSON form) from a seed: overlaps dropped, plans only of allowed edges, acyclic `after`. */
function buildWorld(seed: ContractSeed): World {
  const allow: { from: string; to: string[]; kind: string; max: number }[] = [];
  const allowed: Triple[] = [];
  const taken = new Set<string>();
  for (const c of seed.allow) {
    const to = c.to.filter((t) => t !== c.from);
    if (to.length === 0 || to.some((t) => taken.has(tkey({ from: c.from, to: t, kind: c.kind })))) continue;
    allow.push({ from: c.from, to, kind: c.kind, max: c.max });
    for (const t of to) {
      taken.add(tkey({ from: c.from, to: t, kind: c.kind }));
      allowed.push({ from: c.from, to: t, kind: c.kind });
    }
  }
  const expected: Triple[] = [];
  const phases: Record<string, unknown> = {};
  seed.phases.forEach((ph, pi) => {
    const used = new Set<string>();
    const steps: { text: string; entry: Record<string, unknown> }[] = [];
    for (const s of ph.steps) {
      if (allowed.length === 0) break;
      const first = allowed[s.pick % allowed.length];
      if (used.has(tkey(first))) continue;
      const targets = [first.to];
      if (s.choice) {
        const second = allowed.find((t) => t.from === first.from && t.kind === first.kind && t.to !== first.to && !used.has(tkey(t)));
        if (second) targets.push(second.to);
      }
      for (const t of targets) {
        used.add(tkey({ from: first.from, to: t, kind: first.kind }));
        expected.push({ from: first.from, to: t, kind: first.kind });
      }
      const text = writeSpec(first.from, targets, first.kind);
      const entry: Record<string, unknown> = { edge: text };
      const i = steps.length;
      if (s.afterMode === 'none') entry.after = [];
      if (s.afterMode === 'some') entry.after = [...new Set(s.afterPicks.filter(() => i > 0).map((p) => steps[p % i].text))];
      if (s.within !== undefined) {
        entry.within = s.within;
        if (s.dependency !== undefined) entry.dependency = s.dependency;
      }
      steps.push({ text, entry });
    }
    phases[`p${pi}`] = {
      outcome: ph.outcome,
      expect: steps.map((s) => s.entry),
      ...(ph.progressWithin !== undefined ? { progress_within: ph.progressWithin } : {}),
      ...(ph.maxDuration !== undefined ? { max_duration: ph.maxDuration } : {}),
    };
  });
  const body = (version: string, retired: boolean) =>
    JSON.stringify({ contract: 't', version, retired, owner: 'a', agents: [...AGENTS], allow: allow.map((a) => ({ from: a.from, to: a.to.length === 1 ? a.to[0] : a.to, kind: a.kind, max: a.max })), phases }, null, 1);
  const contracts = [parseContract(body('1', seed.retired1), 'v1.json'), parseContract(body('2', seed.retired2), 'v2.json')];
  return { contracts, registry: ContractRegistry.fromContracts(contracts), allowed, expected, phases: Object.keys(phases) };
}

// ---------------------------------------------------------------------------------------------
// Random receipts for a world
// ---------------------------------------------------------------------------------------------

/** Minutes after T0 on a coarse grid (so ties and "exactly at the deadline" happen), sometimes before 0. */
const minuteGridArb = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: -1, max: 25 }) }, { weight: 1, arbitrary: fc.integer({ min: -2, max: 50 }).map((n) => n / 2) });
/**
 * Sub-millisecond offsets from a small set (so ties, "1 ns either side" and "0.4 ms after" all happen), and how
 * many fraction digits the text carries (9 digits even for whole milliseconds, to exercise normalisation).
 */
const subMsArb = fc.constantFrom(0, 0, 0, 1, 2, 400_000, 999_999);
/** RFC 3339 text of `minutes` after T0 plus `ns` nanoseconds. */
const atNs = (minutes: number, ns: number, long: boolean) => (ns === 0 && !long ? at(minutes) : `${at(minutes).slice(0, -1)}${String(ns).padStart(6, '0')}Z`);
const timeArb = fc.record({ m: minuteGridArb, ns: subMsArb, long: fc.boolean() });
const minuteArb = timeArb.map(({ m, ns, long }) => atNs(m, ns, long));
const versionArb = fc.constantFrom<string | undefined>(undefined, undefined, undefined, '2', '2', '1', '3');
const statusArb = fc.constantFrom<string | undefined>(undefined, undefined, 'ok', 'ok', 'error', 'unset');

type Draft = Record<string, unknown>;

function receiptArb(w: World): fc.Arbitrary<Draft> {
  const triples = [...w.expected, ...w.expected, ...w.allowed];
  const anyAgent = fc.constantFrom('a', 'b', 'c', 'd', 'x');
  const edgeTriple = fc.oneof(
    { weight: triples.length > 0 ? 6 : 0, arbitrary: triples.length > 0 ? fc.constantFrom(...triples) : fc.constant({ from: 'a', to: 'b', kind: 'delegate' }) },
    { weight: 1, arbitrary: fc.record({ from: anyAgent, to: anyAgent, kind: kindArb }) },
  );
  const common = { at: minuteArb, version: versionArb, status: statusArb };
  const phaseArb = fc.constantFrom<string | undefined>(undefined, ...w.phases, ...w.phases, 'nope');
  return fc.oneof(
    { weight: 10, arbitrary: fc.record({ ...common, type: fc.constant('edge'), t: edgeTriple }).map(({ t, ...r }) => ({ ...r, ...t })) },
    { weight: 2, arbitrary: fc.record({ ...common, type: fc.constant('run.start'), contract: fc.constantFrom('t', 't', 't', 'nope'), phase: phaseArb }) },
    {
      weight: 2,
      arbitrary: fc
        .record({ ...common, type: fc.constant('wait'), on: anyAgent, t: edgeTriple, start: timeArb, span: fc.integer({ min: 0, max: 10 }), dns: subMsArb })
        .map(({ t, start, span, dns, ...r }) => ({ ...r, at: atNs(start.m, start.ns, start.long), edge: tkey(t), deadline: atNs(start.m + span, dns, start.long) })),
    },
    { weight: 2, arbitrary: fc.record({ ...common, type: fc.constant('outcome'), verified: fc.boolean(), from: fc.option(anyAgent, { nil: undefined }) }) },
    { weight: 2, arbitrary: fc.record({ ...common, type: fc.constant('run.end'), result: fc.constantFrom('completed', 'completed', 'failed', 'cancelled'), from: fc.option(anyAgent, { nil: undefined }) }) },
    { weight: 1, arbitrary: fc.record({ ...common, type: fc.constant('gap'), reason: fc.constant('caller_unresolved') }) },
  );
}

/** Drop undefined fields and validate through the real ingest schema. */
function toReceipts(drafts: Draft[]): Receipt[] {
  return drafts.map((d, i) => receipt(Object.fromEntries(Object.entries({ run: 'r1', event: `e${i}`, ...d }).filter(([, v]) => v !== undefined))));
}

interface Case {
  world: World;
  receipts: Receipt[];
  /** Exact to the nanosecond: the product takes the Instant, the reference its RFC 3339 text. */
  now: Instant;
  nowText: string;
  defaultContract?: string;
}

const caseArb: fc.Arbitrary<Case> = contractSeedArb.chain((seed) => {
  const world = buildWorld(seed);
  // Usually a run.start at minute 0 naming the newest version, so that most runs have a pin.
  const usualStart = fc.constantFrom<Draft[]>([{ type: 'run.start', at: at(0), contract: 't', version: '2', phase: world.phases[0] }], [{ type: 'run.start', at: at(0), contract: 't' }], []);
  return fc.record({
    world: fc.constant(world),
    receipts: fc.tuple(usualStart, fc.array(receiptArb(world), { minLength: 1, maxLength: 12 })).map(([s, rest]) => toReceipts([...s, ...rest])),
    nowAt: fc.record({ n: fc.integer({ min: 0, max: 80 }), ns: subMsArb }),
    defaultContract: fc.constantFrom<string | undefined>(undefined, 't'),
  }).map(({ nowAt, ...c }) => {
    const nowText = atNs(nowAt.n / 2, nowAt.ns, true);
    return { ...c, now: parseInstant(nowText), nowText };
  });
});

/** `now` moved on by `msLater` whole milliseconds (the sub-ms part kept). */
const plus = (now: Instant, msLater: number): Instant => ({ ms: now.ms + msLater, ns: now.ns });

// ---------------------------------------------------------------------------------------------
// Comparison helpers
// ---------------------------------------------------------------------------------------------

const fast = (c: Case, receipts = c.receipts, now: Instant | number = c.now): RunVerdict => classify(receipts, now, c.world.registry, c.defaultContract);
const reference = (c: Case): RefResult => referenceClassify(c.receipts, c.nowText, c.world.contracts, c.defaultContract);
const line = (f: { verdict: string; code: string; edge?: string; events: string[] }) => `${f.verdict}|${f.code}|${f.edge ?? ''}|${[...f.events].sort().join(',')}`;
const summary = (v: RunVerdict | RefResult) => ({ pin: v.pin, verdict: v.verdict, naive: v.naive, settled: v.settled, findings: v.findings.map(line).sort() });

/** Readable counterexample: the contract and the receipts. */
const explain = (c: Case) => `now ${c.nowText} default ${c.defaultContract}\n${c.world.contracts[1].canonical}\n${c.receipts.map((r) => JSON.stringify(r)).join('\n')}`;

function shuffled<T>(items: T[], keys: number[]): T[] {
  return items.map((x, i) => ({ x, k: keys[i % Math.max(keys.length, 1)] ?? 0, i })).sort((p, q) => p.k - q.k || p.i - q.i).map((p) => p.x);
}

// ---------------------------------------------------------------------------------------------

describe('properties', () => {
  it('the generator yields a spread of verdicts (so the properties below are not vacuous)', () => {
    const seen = new Set<string>();
    const codes = new Set<string>();
    fc.assert(
      fc.property(caseArb, (c) => {
        const v = fast(c);
        seen.add(v.verdict);
        for (const f of v.findings) codes.add(f.code);
      }),
      { numRuns: 400, seed: 7 },
    );
    for (const code of ['no_progress', 'max_duration_exceeded', 'late_edge', 'missed_deadline', 'late_wait', 'missed_wait']) expect(codes, code).toContain(code);
    for (const v of ['uncertain', 'stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete', 'waiting', 'incomplete', 'working', 'healthy']) expect(seen, v).toContain(v);
  });

  it('the fast classifier equals the reference implementation (verdict, pin, naive, settled, findings)', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const f = summary(fast(c));
        const r = summary(reference(c));
        if (JSON.stringify(f) !== JSON.stringify(r)) throw new Error(`fast ${JSON.stringify(f, null, 1)}\nreference ${JSON.stringify(r, null, 1)}\n${explain(c)}`);
      }),
      { numRuns: RUNS },
    );
  });

  it('any permutation of a run\'s receipts gives the same verdict and findings', () => {
    fc.assert(
      fc.property(caseArb, fc.array(fc.nat(), { minLength: 1, maxLength: 16 }), (c, keys) => {
        expect(fast(c, shuffled(c.receipts, keys))).toEqual(fast(c));
      }),
      { numRuns: RUNS },
    );
  });

  it('delivering any receipt twice (also in an equivalent normalised form) changes nothing', () => {
    fc.assert(
      fc.property(caseArb, fc.nat(), fc.nat(), fc.constantFrom('exact', 'status', 'offset', 'millis'), (c, which, where, form) => {
        const r: LooseReceipt = c.receipts[which % c.receipts.length];
        const again: Record<string, unknown> = { ...r };
        if (form === 'status' && r.status === undefined) again.status = 'ok';
        // the same instant written another way: +01:00 (fraction kept), or nine fraction digits
        const t = parseInstant(r.at);
        const nine = (ms: number, ns: number) => new Date(ms).toISOString().slice(0, -1) + String(ns).padStart(6, '0');
        if (form === 'offset') again.at = (t.ns === 0 ? new Date(t.ms + 3_600_000).toISOString().replace(/\.000Z$/, 'Z') : nine(t.ms + 3_600_000, t.ns) + 'Z').replace('Z', '+01:00');
        if (form === 'millis') again.at = nine(t.ms, t.ns) + 'Z';
        if (form === 'offset' && r.deadline) {
          const d = parseInstant(r.deadline);
          again.deadline = nine(d.ms, d.ns) + 'Z';
        }
        if (r.edge) again.edge = r.edge.replace(/\s+/g, '');
        const twice = [...c.receipts];
        twice.splice(where % (twice.length + 1), 0, receipt(again));
        expect(fast(c, twice)).toEqual(fast(c));
      }),
      { numRuns: RUNS },
    );
  });

  it('a same-id receipt with different content is a conflict finding and the verdict is uncertain', () => {
    fc.assert(
      fc.property(caseArb, fc.nat(), fc.constantFrom('time', 'nanosecond', 'status', 'version'), (c, which, change) => {
        const r = c.receipts[which % c.receipts.length];
        const other: Record<string, unknown> = { ...r };
        if (change === 'time') other.at = new Date(Date.parse(r.at) + 1000).toISOString();
        if (change === 'nanosecond') {
          // 1 ns later (staying inside the millisecond: the offsets are at most 999_999)
          const t = parseInstant(r.at);
          const ns = t.ns === 999_999 ? 999_998 : t.ns + 1;
          other.at = `${new Date(t.ms).toISOString().slice(0, -1)}${String(ns).padStart(6, '0')}Z`;
        }
        if (change === 'status') other.status = (r.status ?? 'ok') === 'ok' ? 'error' : 'ok';
        if (change === 'version') other.version = r.version === '9' ? '8' : '9';
        const v = fast(c, [...c.receipts, receipt(other)]);
        expect(v.verdict).toBe('uncertain');
        expect(v.findings.filter((f) => f.code === 'conflict').map((f) => f.events)).toEqual([[r.event]]);
        // neither copy is used: the run equals the run without that event id, plus the conflict
        const without = c.receipts.filter((x) => x.event !== r.event);
        if (without.length > 0) {
          const rest = fast(c, without);
          expect(v.findings.filter((f) => f.code !== 'conflict').map(line).sort()).toEqual(rest.findings.map(line).sort());
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('advancing now never unsettles a run: incomplete never turns back into waiting, settled findings stay', () => {
    fc.assert(
      fc.property(caseArb, fc.integer({ min: 0, max: 60 }), (c, stepMinutes) => {
        const v1 = fast(c);
        const v2 = fast(c, c.receipts, plus(c.now, stepMinutes * 60_000));
        if (v1.verdict === 'incomplete') expect(v2.verdict).toBe('incomplete');
        if (['stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete'].includes(v1.verdict)) expect(v2.verdict).toBe(v1.verdict);
        if (v1.settled) expect(v2.settled).toBe(true);
        const later = new Set(v2.findings.map(line));
        for (const f of v1.findings.filter((x) => x.settled)) expect(later, line(f)).toContain(line(f));
      }),
      { numRuns: RUNS },
    );
  });

  it('nothing changes with now alone before nextChangeAt (what a server timer relies on)', () => {
    fc.assert(
      fc.property(caseArb, fc.double({ min: 0, max: 1, noNaN: true }), (c, frac) => {
        const v = fast(c);
        const horizon = v.nextChangeAt ?? c.now.ms + 1000 * 60_000;
        expect(horizon).toBeGreaterThan(c.now.ms);
        // nextChangeAt is the first whole millisecond at or after the change: any instant from now up to the
        // whole millisecond before it (sub-ms part 0) is before the change
        const step = Math.floor(frac * (horizon - 1 - c.now.ms));
        const later = fast(c, c.receipts, step === 0 ? c.now : { ms: c.now.ms + step, ns: 0 });
        expect(summary(later)).toEqual(summary(v));
        // and the findings themselves, messages included: no countdown frozen into a message
        expect(later.findings).toEqual(v.findings);
        if (v.nextChangeAt !== null) expect(summary(fast(c, c.receipts, v.nextChangeAt))).not.toEqual(summary(v));
      }),
      { numRuns: RUNS },
    );
  });
});
