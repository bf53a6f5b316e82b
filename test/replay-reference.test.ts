/**
 * `replay --json` (the built CLI, as users run it) agrees with the independent references on a few thousand random
 * runs of each kind, in one replay call each:
 * - freshness runs: stall limits (progress_within, max_duration), plan deadlines, declared waits, verified outcomes
 *   and run ends placed 1 ns, 1 µs and 0.4 ms around window ends, caps and deadlines, on either side of `now`
 *   (receipts timed after `now` included): verdict, settled and every finding (code, edge, events) equal
 *   test/reference/classify.ts;
 * - handoff lifecycles (test/helpers/handoff-lifecycles.ts), each built so that its own `now` falls on the replay's
 *   `--now`: the time-dependent handoff findings equal test/reference/handoff.ts.
 */
import fc from 'fast-check';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseContract, type Receipt } from '../src/core/index.js';
import { receipt } from './helpers/receipts.js';
import { runCli, tempDir } from './helpers/server.js';
import { TIME_CODES, build, caseArb } from './helpers/handoff-lifecycles.js';
import { referenceClassify } from './reference/classify.js';
import { nanos, referenceHandoffFindings } from './reference/handoff.js';

const RUNS = Number(process.env.REPLAY_RUNS ?? 2500);
const NOW = '2026-06-01T12:00:00Z';
const NOW_NS = nanos(NOW);
const S = 1_000_000_000n;
const DELTAS = [0n, 1n, -1n, 1_000n, -1_000n, 400_000n, -400_000n];

const CONTRACTS: Record<string, string> = {
  'fresh.yaml': `
contract: fresh
version: "1"
owner: o
agents: [o, a, b, c]
allow:
  - o -> a : delegate
  - a -> b : handoff
  - b -> c : handoff
  - c -> o : return
phases:
  main:
    outcome: required
    progress_within: 1m
    max_duration: 5m
    expect:
      - o -> a : delegate
      - edge: "a -> b : handoff"
        within: 2m
        dependency: b
      - b -> c : handoff
  parallel:
    outcome: optional
    progress_within: 2m
    expect:
      - o -> a : delegate
      - edge: "b -> c : handoff"
        after: []
        within: 1m
  capped:
    outcome: optional
    max_duration: 3m
    expect:
      - o -> a : delegate
      - a -> b : handoff
`,
  'h.yaml': `
contract: h
version: "1"
owner: o
agents: [o, w]
allow:
  - o -> w : handoff
phases:
  main:
    outcome: optional
    max_duration: 1d
    expect: []
`,
};

/** RFC 3339 text of NOW + offset ns (nine fraction digits, or the shortest form). */
function text(offset: bigint, short: boolean): string {
  const total = NOW_NS + offset;
  const secs = total / S;
  const frac = String(((total % S) + S) % S).padStart(9, '0');
  const whole = new Date(Number(secs - (total % S < 0n ? 1n : 0n)) * 1000).toISOString().slice(0, 19);
  const trimmed = frac.replace(/0+$/, '');
  return short ? (trimmed === '' ? `${whole}Z` : `${whole}.${trimmed}Z`) : `${whole}.${frac}Z`;
}

/** A time on a 30 s grid relative to the run's start, moved by one of the deltas. */
const timeArb = fc.record({ k: fc.integer({ min: -1, max: 14 }), d: fc.constantFrom(...DELTAS) });
const off = (start: bigint, t: { k: number; d: bigint }) => start + BigInt(t.k) * 30n * S + t.d;
const TRIPLES = [['o', 'a', 'delegate'], ['a', 'b', 'handoff'], ['b', 'c', 'handoff'], ['c', 'o', 'return']] as const;

const freshArb = fc.record({
  phase: fc.constantFrom('main', 'parallel', 'capped'),
  /** The run's start relative to now, in 30 s steps (so now falls anywhere in the run's life). */
  startK: fc.integer({ min: -16, max: 2 }),
  short: fc.boolean(),
  items: fc.array(
    fc.oneof(
      { weight: 6, arbitrary: fc.record({ kind: fc.constant('edge' as const), t: timeArb, e: fc.constantFrom(0, 0, 1, 1, 2, 2, 3) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('wait' as const), t: timeArb, span: fc.integer({ min: 0, max: 12 }), d: fc.constantFrom(...DELTAS), e: fc.constantFrom(1, 2, 3) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('outcome' as const), t: timeArb, verified: fc.boolean() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('end' as const), t: timeArb, result: fc.constantFrom('completed', 'completed', 'failed', 'cancelled') }) },
    ),
    { maxLength: 8 },
  ),
});

function freshRun(run: string, c: typeof freshArb extends fc.Arbitrary<infer T> ? T : never): Receipt[] {
  const start = BigInt(c.startK) * 30n * S;
  const at = (o: bigint) => text(o, c.short);
  const out = [receipt({ run, event: 's', type: 'run.start', at: at(start), contract: 'fresh', phase: c.phase })];
  c.items.forEach((x, i) => {
    const event = `e${String(i).padStart(2, '0')}`;
    const t = at(off(start, x.t));
    if (x.kind === 'edge') out.push(receipt({ run, event, type: 'edge', at: t, from: TRIPLES[x.e][0], to: TRIPLES[x.e][1], kind: TRIPLES[x.e][2] }));
    if (x.kind === 'wait') {
      const [from, to, kind] = TRIPLES[x.e];
      out.push(receipt({ run, event, type: 'wait', at: t, on: to, edge: `${from} -> ${to} : ${kind}`, deadline: at(off(start, x.t) + BigInt(x.span) * 30n * S + x.d) }));
    }
    if (x.kind === 'outcome') out.push(receipt({ run, event, type: 'outcome', at: t, verified: x.verified }));
    if (x.kind === 'end') out.push(receipt({ run, event, type: 'run.end', at: t, result: x.result }));
  });
  return out;
}

function contractsDir(): string {
  const dir = tempDir('ta-replay-ref-');
  mkdirSync(join(dir, 'contracts'));
  for (const [name, body] of Object.entries(CONTRACTS)) writeFileSync(join(dir, 'contracts', name), body);
  return dir;
}

async function replay(dir: string, runs: Receipt[][]): Promise<Map<string, { verdict: string; settled: boolean; findings: { verdict: string; code: string; edge?: string; events: string[] }[] }>> {
  const file = join(dir, 'receipts.ndjson');
  writeFileSync(file, runs.flat().map((r) => JSON.stringify(r)).join('\n') + '\n');
  const r = await runCli(['replay', file, '--contracts', join(dir, 'contracts'), '--now', NOW, '--json', '--fail-on', 'none'], { timeoutMs: 300_000 });
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return new Map(r.stdout.trim().split('\n').map((l) => JSON.parse(l)).map((v) => [v.run, v]));
}

const line = (f: { verdict: string; code: string; edge?: string; events: string[] }) => `${f.verdict}|${f.code}|${f.edge ?? ''}|${[...f.events].sort().join(',')}`;

describe('replay --json agrees with the references', () => {
  it(`${RUNS} random freshness runs: verdict, settled and every finding equal the reference`, async () => {
    const dir = contractsDir();
    const contracts = Object.values(CONTRACTS).map((b, i) => parseContract(b, `c${i}.yaml`));
    const seeds = fc.sample(freshArb, { numRuns: RUNS, seed: 2028 });
    const runs = seeds.map((c, i) => freshRun(`fresh-${i}`, c));
    const got = await replay(dir, runs);
    const verdicts = new Map<string, number>();
    let disagreements: string[] = [];
    runs.forEach((rs, i) => {
      const run = `fresh-${i}`;
      const ref = referenceClassify(rs, NOW, contracts);
      const v = got.get(run)!;
      verdicts.set(v.verdict, (verdicts.get(v.verdict) ?? 0) + 1);
      const a = { verdict: v.verdict, settled: v.settled, findings: v.findings.map(line).sort() };
      const b = { verdict: ref.verdict, settled: ref.settled, findings: ref.findings.map(line).sort() };
      if (JSON.stringify(a) !== JSON.stringify(b)) disagreements.push(`${run}: ${JSON.stringify(a)} vs reference ${JSON.stringify(b)}\n${rs.map((r) => JSON.stringify(r)).join('\n')}`);
    });
    disagreements = disagreements.slice(0, 3);
    expect(disagreements).toEqual([]);
    // not vacuous: the freshness verdicts all occur (healthy is the rarest: a whole plan on time by chance)
    for (const verdict of ['healthy', 'working', 'waiting', 'incomplete', 'false_complete']) expect(verdicts.get(verdict) ?? 0, verdict).toBeGreaterThan(RUNS / 500);
    const codes = new Set(runs.flatMap((_, i) => got.get(`fresh-${i}`)!.findings.map((f) => f.code)));
    for (const code of ['no_progress', 'max_duration_exceeded', 'missed_deadline', 'late_edge', 'declared_wait', 'missed_wait', 'late_wait']) expect(codes.has(code), code).toBe(true);
  }, 600_000);

  it(`${RUNS} random handoff lifecycles: the time-dependent handoff findings equal the reference`, async () => {
    const dir = contractsDir();
    const seeds = fc.sample(caseArb, { numRuns: RUNS, seed: 2028 });
    // each case built so that its own now falls on the replay's --now
    const built = seeds.map((c, i) => build(c, NOW_NS - build(c).nowOffset, `ho-${i}`));
    for (const b of built) expect(nanos(b.nowText)).toBe(NOW_NS);
    const got = await replay(dir, built.map((b) => b.receipts));
    const seen = new Map<string, number>();
    const disagreements: string[] = [];
    built.forEach((b, i) => {
      const run = `ho-${i}`;
      const mine = [...new Set(got.get(run)!.findings.map((f) => f.code).filter((c) => TIME_CODES.has(c)))].sort();
      const ref = [...new Set(referenceHandoffFindings(b.receipts, b.nowText).map((f) => f.code))].sort();
      for (const c of mine) seen.set(c, (seen.get(c) ?? 0) + 1);
      if (JSON.stringify(mine) !== JSON.stringify(ref)) disagreements.push(`${run}: ${mine} vs reference ${ref}\n${b.receipts.map((r) => JSON.stringify(r)).join('\n')}`);
    });
    expect(disagreements.slice(0, 3)).toEqual([]);
    for (const c of TIME_CODES) expect(seen.get(c) ?? 0, c).toBeGreaterThan(RUNS / 100);
  }, 600_000);
});
