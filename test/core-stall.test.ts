/**
 * Run-level stall limits (semantics 2 rule 9): a phase's `progress_within` (no_progress) and `max_duration`
 * (max_duration_exceeded), settled like missed deadlines and scheduled through nextChangeAt; `validate` warns
 * about a phase with neither and an expected edge without `within`.
 */
import { describe, expect, it } from 'vitest';
import { classify, contractFromCanonical, contractJsonSchema, parseContract, parseInstant, type Receipt } from '../src/core/index.js';
import { validateCommand } from '../src/cli/validate.js';
import { codes, finding, receipt, registryOf } from './helpers/receipts.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const contract = (phaseExtra: string, thirdWithin = '') => `
contract: s
version: "1"
owner: o
agents: [o, a, b, c]
allow:
  - o -> a : delegate
  - a -> b : handoff
  - b -> c : handoff
phases:
  main:
    outcome: optional
${phaseExtra}
    expect:
      - o -> a : delegate
      - a -> b : handoff
      - b -> c : handoff${thirdWithin}
`;
const T = '2026-11-30T11:';
const r = (type: string, at: string, extra: Record<string, unknown>, event: string): Receipt => receipt({ run: 'r1', event, type, at: `${T}${at}`, ...extra });
const start = r('run.start', '00:00Z', { contract: 's' }, 'start');
const e = (at: string, from: string, to: string, kind: string, event: string) => r('edge', at, { from, to, kind }, event);
const now = (at: string) => parseInstant(`${T}${at}`);

describe('progress_within', () => {
  const registry = registryOf(contract('    progress_within: 5m'));

  it('working while the plan advances within the window; incomplete (no_progress) 5m after the last progress, exactly at it', () => {
    const rs = [start, e('03:00Z', 'o', 'a', 'delegate', 'd')];
    const before = classify(rs, now('07:59.999999999Z'), registry);
    expect(before.verdict).toBe('working');
    expect(before.nextChangeAt).toBe(Date.parse(`${T}08:00Z`));
    const at = classify(rs, now('08:00Z'), registry);
    expect(at.verdict).toBe('incomplete');
    expect(finding(at, 'no_progress')).toMatchObject({ settled: true, deadline: `${T}08:00.000Z`, since: `${T}08:00.000Z` });
    expect(at.settled).toBe(true);
  });

  it('repeated or off-plan edges are not progress; a receipt timed after the stall does not clear it, one timed before does', () => {
    const rs = [start, e('03:00Z', 'o', 'a', 'delegate', 'd'), e('04:00Z', 'o', 'a', 'delegate', 'd2')];
    expect(codes(classify(rs, now('08:00Z'), registry))).toContain('no_progress');
    // the next planned edge, timed after the stall: settled, stays
    expect(codes(classify([...rs, e('08:00.000000001Z', 'a', 'b', 'handoff', 'h')], now('09:00Z'), registry))).toContain('no_progress');
    // the same edge timed 1 ns before the window ended, delivered late: progress, the stall moves to 12:59.999999999 + ...
    const corrected = classify([...rs, e('07:59.999999999Z', 'a', 'b', 'handoff', 'h')], now('09:00Z'), registry);
    expect(codes(corrected)).not.toContain('no_progress');
    expect(corrected.verdict).toBe('ambiguous_route'); // o -> a twice: precedence, the stall clock still runs
    expect(corrected.nextChangeAt).toBe(Date.parse(`${T}13:00Z`)); // 12:59.999999999 rounded up to the millisecond
  });

  it('a running deadline or a declared wait explains the silence; when it ends unexplained, the run stalls', () => {
    const reg = registryOf(contract('    progress_within: 1m', '\n        dependency: c\n        within: 10m'));
    const rs = [start, e('00:10Z', 'o', 'a', 'delegate', 'd'), e('00:20Z', 'a', 'b', 'handoff', 'h')];
    // b -> c is due at 00:20 with a deadline at 10:20: a running deadline, so waiting, not no_progress
    const w = classify(rs, now('05:00Z'), reg);
    expect(w.verdict).toBe('waiting');
    expect(codes(w)).not.toContain('no_progress');
    // a declared wait before that (for an off-plan edge) explains the silence until its deadline
    const reg2 = registryOf(contract('    progress_within: 1m'));
    const wait = r('wait', '01:30Z', { on: 'c', edge: 'o -> a : delegate', deadline: `${T}04:00Z` }, 'w');
    // nothing since the start at 00:00: stalled at 01:00, before the wait was declared
    expect(finding(classify([start, wait], now('03:00Z'), reg2), 'no_progress').since).toBe(`${T}01:00.000Z`);
    const rs3 = [start, e('00:10Z', 'o', 'a', 'delegate', 'd'), r('wait', '00:30Z', { on: 'c', edge: 'b -> c : handoff', deadline: `${T}04:00Z` }, 'w')];
    const waiting = classify(rs3, now('03:00Z'), reg2);
    expect(waiting.verdict).toBe('waiting');
    expect(codes(waiting)).not.toContain('no_progress');
    // wait: 00:30 is before 01:10 (the window's end): the wait explains until 04:00, then the run stalls at 04:00
    expect(waiting.nextChangeAt).toBe(Date.parse(`${T}04:00Z`));
    const after = classify(rs3, now('04:00Z'), reg2);
    expect(finding(after, 'no_progress')).toMatchObject({ deadline: `${T}01:10.000Z`, since: `${T}04:00.000Z` });
  });

  it('a finished plan or an end before the window closes never stalls', () => {
    const done = [start, e('01:00Z', 'o', 'a', 'delegate', 'd'), e('02:00Z', 'a', 'b', 'handoff', 'h'), e('03:00Z', 'b', 'c', 'handoff', 'c')];
    expect(classify(done, now('30:00Z'), registry).verdict).toBe('healthy');
    const ended = [start, e('01:00Z', 'o', 'a', 'delegate', 'd'), r('run.end', '05:59.999999999Z', { result: 'failed' }, 'end')];
    expect(codes(classify(ended, now('30:00Z'), registry))).toEqual(['run_failed']);
    const endedAt = [start, e('01:00Z', 'o', 'a', 'delegate', 'd'), r('run.end', '06:00Z', { result: 'failed' }, 'end')];
    expect(codes(classify(endedAt, now('30:00Z'), registry))).toEqual(['no_progress', 'run_failed']);
  });
});

describe('max_duration', () => {
  const registry = registryOf(contract('    max_duration: 20m'));
  it('a run unfinished 20m after its start is incomplete (max_duration_exceeded), 1 ns either side', () => {
    const s = r('run.start', '00:00.000000001Z', { contract: 's' }, 'start');
    const rs = [s, e('01:00Z', 'o', 'a', 'delegate', 'd')];
    const before = classify(rs, now('20:00Z'), registry);
    expect(before.verdict).toBe('working');
    expect(before.nextChangeAt).toBe(Date.parse(`${T}20:00.001Z`));
    const at = classify(rs, now('20:00.000000001Z'), registry);
    expect(finding(at, 'max_duration_exceeded')).toMatchObject({ verdict: 'incomplete', settled: true, deadline: `${T}20:00.000000001Z` });
    // finished in time: healthy however late now is
    const done = [...rs, e('02:00Z', 'a', 'b', 'handoff', 'h'), e('20:00.000000001Z', 'b', 'c', 'handoff', 'c')];
    expect(classify(done, now('59:00Z'), registry).verdict).toBe('healthy');
    // finished 1 ns too late: the limit stays
    const late = [...rs, e('02:00Z', 'a', 'b', 'handoff', 'h'), e('20:00.000000002Z', 'b', 'c', 'handoff', 'c')];
    expect(codes(classify(late, now('59:00Z'), registry))).toContain('max_duration_exceeded');
  });
});

describe('contract loading', () => {
  it('reads progress_within and max_duration, keeps them through the canonical copy, refuses bad durations', () => {
    const c = parseContract(contract('    progress_within: 5m\n    max_duration: 2h'), 'c.yaml');
    expect(c.phases[0]).toMatchObject({ progressWithinMs: 300_000, maxDurationMs: 7_200_000 });
    expect(c.warnings).toBeUndefined();
    const copy = contractFromCanonical(c.canonical);
    expect(copy.phases[0]).toMatchObject({ progressWithinMs: 300_000, maxDurationMs: 7_200_000 });
    expect(copy.hash).toBe(c.hash);
    expect(() => parseContract(contract('    progress_within: 5 minutes'), 'c.yaml')).toThrow(/progress_within/);
    // a contract without them keeps the hash it had (no new fields in its canonical content)
    expect(parseContract(contract(''), 'c.yaml').canonical).not.toContain('progress');
    const schema = JSON.stringify(contractJsonSchema());
    expect(schema).toContain('progress_within');
    expect(schema).toContain('max_duration');
  });

  it('warns (not errors) about a phase with neither limit and an expected edge without `within`; validate exits 0', async () => {
    const c = parseContract(contract(''), 'c.yaml');
    expect(c.warnings!.map((w) => w.field)).toEqual(['phases.main.expect[0]', 'phases.main.expect[1]', 'phases.main.expect[2]']);
    expect(c.warnings![0].message).toMatch(/no `within`.*neither progress_within nor max_duration/);
    expect(c.warnings![0].line).toBeGreaterThan(1);
    expect(parseContract(contract('    max_duration: 1h'), 'c.yaml').warnings).toBeUndefined();
    const dir = mkdtempSync(join(tmpdir(), 'ta-stall-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, contract(''));
    let out = '';
    let err = '';
    const code = await validateCommand([file], { stdout: (s) => (out += s), stderr: (s) => (err += s) });
    expect(code).toBe(0);
    expect(out).toContain('ok');
    expect(err).toMatch(/c\.yaml:\d+:\d+: phases\.main\.expect\[0\]: warning: /);
  });
});

describe('a run.start timed after the stall (issue 48)', () => {
  // progress_within 90s; the first expected edge at 10:00:00, the run's own run.start at 10:01:31: the window from the
  // edge ends at 10:01:30, and the start (progress, rule 9) is timed after it, so the stall is shown passed (2a): the
  // run is incomplete (no_progress since 10:01:30) at any now, before 10:01:30 as well as at it.
  const registry = registryOf(contract('    progress_within: 90s'));
  const D = '2026-11-30T10:';
  const rs = [
    receipt({ run: 'r1', event: 'start', type: 'run.start', at: `${D}01:31Z`, contract: 's' }),
    receipt({ run: 'r1', event: 'd', type: 'edge', at: `${D}00:00Z`, from: 'o', to: 'a', kind: 'delegate' }),
  ];
  for (const at of ['00:00Z', '01:00Z', '01:29.999999999Z', '01:30Z']) {
    it(`incomplete with no_progress since 10:01:30 at now = 10:${at}`, () => {
      const v = classify(rs, parseInstant(`${D}${at}`), registry);
      expect(v.verdict).toBe('incomplete');
      expect(finding(v, 'no_progress')).toMatchObject({ settled: true, since: `${D}01:30.000Z` });
      expect(v.settled).toBe(true);
    });
  }
  it('a run.start timed before the stall does not show it passed: working until 10:01:30', () => {
    const early = [receipt({ run: 'r1', event: 'start', type: 'run.start', at: `${D}00:00Z`, contract: 's' }), rs[1]];
    const v = classify(early, parseInstant(`${D}01:29.999Z`), registry);
    expect(v.verdict).toBe('working');
    expect(codes(v)).not.toContain('no_progress');
  });
});
