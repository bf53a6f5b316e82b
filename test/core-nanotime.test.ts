/**
 * Issue 20, "Exact to the nanosecond and to the letter" (semantics 2a): every instant at full precision,
 * at every boundary: 1 ns either side of a deadline and of the run's end, conflicts 1 ns apart, ties by code point.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ContractError, classify, formatInstant, millisOf, parseContract, parseInstant, parseReceiptFile, ReceiptFileError, validateReceipt, type Receipt } from '../src/core/index.js';
import { replayCommand } from '../src/cli/replay.js';
import { codes, finding, receipt, registryOf } from './helpers/receipts.js';

const C = `
contract: t
version: "1"
owner: o
agents: [o, r, v, w1, w2]
allow:
  - o -> r : delegate
  - r -> v : handoff
  - { from: o, to: [w1, w2], kind: delegate }
phases:
  main:
    outcome: optional
    expect:
      - o -> r : delegate
      - r -> v : handoff
        dependency: v
        within: 2m
`;
const registry = registryOf(C);
const T = '2026-11-30T11:00:00';
let n = 0;
const r = (type: string, at: string, extra: Record<string, unknown> = {}, event = `e${n++}`): Receipt => receipt({ run: 'r1', event, type, at, ...extra });
const startAt = (at: string) => r('run.start', at, { contract: 't' }, 'start');
const e = (at: string, from: string, to: string, kind: string, event?: string) => r('edge', at, { from, to, kind }, event);
const now = (t: string) => parseInstant(t);

describe('instants exact to the nanosecond', () => {
  it('millisOf reads RFC 3339 texts as Date.parse does (its direct path and its fallback)', () => {
    // Date.parse reads the ISO form (uppercase T and Z); a space or lowercase t goes to its legacy parser, which
    // reads years 0000-0099 as 1950-2049. millisOf reads every form as the ISO one.
    const isoForm = (t: string) => t.replace(/^(\d{4}-\d{2}-\d{2})[t ]/, '$1T').replace(/z$/, 'Z');
    expect(millisOf('0050-01-01 00:00:00Z')).toBe(Date.parse('0050-01-01T00:00:00Z'));
    expect(millisOf('0000-01-01t00:00:00z')).toBe(Date.parse('0000-01-01T00:00:00Z'));
    const d2 = (lo: number, hi: number) => fc.integer({ min: lo, max: hi }).map((x) => String(x).padStart(2, '0'));
    const text = fc
      .record({
        year: fc.integer({ min: 0, max: 9999 }).map((x) => String(x).padStart(4, '0')),
        month: d2(0, 13),
        day: d2(0, 32),
        hour: d2(0, 24),
        minute: d2(0, 60),
        second: d2(0, 60),
        sep: fc.constantFrom('T', 'T', 'T', 't', ' '),
        fraction: fc.option(fc.stringMatching(/^[0-9]{1,10}$/), { nil: undefined }),
        zone: fc.oneof(fc.constantFrom('Z', 'Z', 'z', ''), fc.tuple(fc.constantFrom('+', '-'), d2(0, 24), d2(0, 60)).map(([s, h, m]) => `${s}${h}:${m}`)),
      })
      .map((t) => `${t.year}-${t.month}-${t.day}${t.sep}${t.hour}:${t.minute}:${t.second}${t.fraction === undefined ? '' : `.${t.fraction}`}${t.zone}`);
    fc.assert(
      fc.property(fc.oneof(text, fc.string({ maxLength: 30 })), (t) => {
        expect(Object.is(millisOf(t), Date.parse(isoForm(t))), t).toBe(true);
      }),
      { numRuns: 20_000 },
    );
    for (const t of ['2024-02-29T23:59:59.999Z', '2026-02-30T00:00:00Z', '1969-12-31T23:59:59.9999Z', '0000-01-01T00:00:00+23:59', '9999-12-31T23:59:59-23:59', '2026-01-01T00:00:00.Z', '2026-01-01T00:00:00.1234567891Z']) {
      expect(Object.is(millisOf(t), Date.parse(t)), t).toBe(true);
    }
  });

  it('parses and prints up to nine fraction digits; the printed form keeps the precision given', () => {
    expect(parseInstant('2026-11-30T11:02:00.0004Z')).toEqual({ ms: Date.parse('2026-11-30T11:02:00Z'), ns: 400_000 });
    expect(parseInstant('2026-11-30T11:02:00.999999999+01:00')).toEqual({ ms: Date.parse('2026-11-30T10:02:00.999Z'), ns: 999_999 });
    expect(formatInstant(Date.parse('2026-11-30T11:02:00Z'), 400_000)).toBe('2026-11-30T11:02:00.0004Z');
    expect(formatInstant(Date.parse('2026-11-30T11:02:00Z'), 1)).toBe('2026-11-30T11:02:00.000000001Z');
    expect(formatInstant(Date.parse('2026-11-30T11:02:00.5Z'), 0)).toBe('2026-11-30T11:02:00.500Z');
  });

  it('refuses more than nine fraction digits, with the line', () => {
    const ok = `{"run":"x","event":"a","type":"gap","at":"${T}.123456789Z","reason":"r"}`;
    const bad = `{"run":"x","event":"b","type":"gap","at":"${T}.1234567891Z","reason":"r"}`;
    expect(parseReceiptFile(ok, 'f.ndjson')).toHaveLength(1);
    let err: unknown;
    try {
      parseReceiptFile(`${ok}\n${bad}\n`, 'f.ndjson');
    } catch (x) {
      err = x;
    }
    expect(err).toBeInstanceOf(ReceiptFileError);
    expect((err as ReceiptFileError).line).toBe(2);
    expect((err as Error).message).toMatch(/f\.ndjson:2: at: .*nine fraction digits/);
  });

  it('1 ns either side of a deadline: at the deadline is on time, 1 ns after is late; now at the deadline is past it', () => {
    // r -> v is due when o -> r is observed, 11:00:00.000000001; its deadline is 2m later, keeping the nanosecond
    const first = [startAt(`${T}Z`), e(`${T}.000000001Z`, 'o', 'r', 'delegate', 'd')];
    const onTime = classify([...first, e('2026-11-30T11:02:00.000000001Z', 'r', 'v', 'handoff', 'h')], now('2026-11-30T12:00:00Z'), registry);
    expect(onTime.verdict).toBe('healthy');
    const late = classify([...first, e('2026-11-30T11:02:00.000000002Z', 'r', 'v', 'handoff', 'h')], now('2026-11-30T12:00:00Z'), registry);
    expect(late.verdict).toBe('incomplete');
    expect(finding(late, 'late_edge').message).toContain('came 1ns after its deadline 2026-11-30T11:02:00.000000001Z');
    // o -> r observed at 11:00:00.5: the handoff's deadline is 11:02:00.5
    const base = [startAt(`${T}Z`), e(`${T}.5Z`, 'o', 'r', 'delegate', 'd')];
    const waiting = classify(base, now('2026-11-30T11:02:00.499999999Z'), registry);
    expect(waiting.verdict).toBe('waiting');
    // the verdict can change at the deadline: the first whole millisecond at or after it
    expect(waiting.nextChangeAt).toBe(Date.parse('2026-11-30T11:02:00.500Z'));
    expect(classify(base, now('2026-11-30T11:02:00.500Z'), registry).verdict).toBe('incomplete');
    // a sub-millisecond deadline: waiting 1 ns before it, incomplete at it; the timer is rounded up
    const sub = [startAt(`${T}Z`), e(`${T}.0000004Z`, 'o', 'r', 'delegate', 'd')];
    const before = classify(sub, now('2026-11-30T11:02:00.000000399Z'), registry);
    expect(before.verdict).toBe('waiting');
    expect(before.nextChangeAt).toBe(Date.parse('2026-11-30T11:02:00.001Z'));
    expect(classify(sub, now('2026-11-30T11:02:00.0000004Z'), registry).verdict).toBe('incomplete');
  });

  it('1 ns either side of the run\'s end: an edge after the end satisfies nothing; a deadline after the end is void', () => {
    const end = (at: string, result = 'completed') => r('run.end', at, { result }, 'end');
    const plan = [startAt(`${T}Z`), e(`${T}.1Z`, 'o', 'r', 'delegate', 'd')];
    const at = (t: string) => classify([...plan, e('2026-11-30T11:01:00.000000005Z', 'r', 'v', 'handoff', 'h'), end(t)], now('2026-11-30T12:00:00Z'), registry);
    expect(at('2026-11-30T11:01:00.000000005Z').verdict).toBe('healthy'); // the edge exactly at the end counts
    expect(at('2026-11-30T11:01:00.000000004Z').verdict).toBe('false_complete'); // 1 ns after the end: satisfies nothing
    // the handoff's deadline is 11:02:00.1 (2m after o -> r); a run that ends failed 1 ns before it voids it,
    // one that ends at it (or later) missed it
    const failed = (t: string) => classify([...plan, end(t, 'failed')], now('2026-11-30T12:00:00Z'), registry);
    expect(codes(failed('2026-11-30T11:02:00.099999999Z'))).toEqual(['run_failed']);
    expect(codes(failed('2026-11-30T11:02:00.100Z'))).toEqual(['missed_deadline r -> v : handoff', 'run_failed']);
    // a wait whose deadline is 1 ns after the end is void; at the end it counts
    const w = (deadline: string) => r('wait', `${T}.2Z`, { on: 'v', edge: 'o -> w1 : delegate', deadline }, 'w');
    const withWait = (deadline: string) => classify([...plan, w(deadline), end('2026-11-30T11:01:00.000000001Z', 'failed')], now('2026-11-30T12:00:00Z'), registry);
    expect(codes(withWait('2026-11-30T11:01:00.000000002Z'))).toEqual(['run_failed']);
    expect(codes(withWait('2026-11-30T11:01:00.000000001Z'))).toEqual(['missed_wait o -> w1 : delegate', 'run_failed']);
  });

  it('two receipts 1 ns apart under one event id conflict; the same instant written differently is one delivery', () => {
    const a = e('2026-11-30T11:01:00.000000001Z', 'o', 'r', 'delegate', 'x');
    const b = e('2026-11-30T11:01:00.000000002Z', 'o', 'r', 'delegate', 'x');
    const same = e('2026-11-30T12:01:00.000000001+01:00', 'o', 'r', 'delegate', 'x');
    const s = startAt(`${T}Z`);
    expect(finding(classify([s, a, b], now('2026-11-30T11:05:00Z'), registry), 'conflict').events).toEqual(['x']);
    expect(classify([s, a, same], now('2026-11-30T11:05:00Z'), registry).findings.map((f) => f.code)).not.toContain('conflict');
  });

  it('a tie of two run.ends at one instant: the end is the one whose event id is first by code point', () => {
    const s = startAt(`${T}Z`);
    const d = e(`${T}.1Z`, 'o', 'r', 'delegate', 'd');
    const h = e(`${T}.2Z`, 'r', 'v', 'handoff', 'h');
    const t = '2026-11-30T11:01:00.000000007Z';
    // "B" (U+0042) sorts before "a" (U+0061) by code point
    const ends = [r('run.end', t, { result: 'failed' }, 'a'), r('run.end', t, { result: 'completed' }, 'B')];
    for (const order of [ends, [...ends].reverse()]) expect(classify([s, d, h, ...order], now('2026-11-30T12:00:00Z'), registry).verdict).toBe('healthy');
    // one nanosecond earlier wins over the code point order
    const earlier = r('run.end', '2026-11-30T11:01:00.000000006Z', { result: 'failed' }, 'c');
    expect(classify([s, d, h, ...ends, earlier], now('2026-11-30T12:00:00Z'), registry).verdict).toBe('incomplete');
  });

  it('a delayed receipt timed before a finding\'s instant corrects it, whatever the arrival order', () => {
    const s = startAt(`${T}Z`);
    const d = e(`${T}.1Z`, 'o', 'r', 'delegate', 'd');
    const h = e(`${T}.2Z`, 'r', 'v', 'handoff', 'h');
    const failedEnd = r('run.end', '2026-11-30T11:05:00.0000005Z', { result: 'failed' }, 'end-2');
    expect(classify([s, d, h, failedEnd], now('2026-11-30T12:00:00Z'), registry).verdict).toBe('incomplete');
    // a completed run.end 100 ns earlier, delivered later: the run ended completed
    const completedEnd = r('run.end', '2026-11-30T11:05:00.0000004Z', { result: 'completed' }, 'end-1');
    expect(classify([s, d, h, failedEnd, completedEnd], now('2026-11-30T12:00:00Z'), registry).verdict).toBe('healthy');
    expect(classify([completedEnd, s, h, failedEnd, d], now('2026-11-30T12:00:00Z'), registry).verdict).toBe('healthy');
  });

  it('duplicate checks fill only status: run.start with and without phase under one event id conflict', () => {
    const withPhase = r('run.start', `${T}Z`, { contract: 't', phase: 'main' }, 's');
    const without = r('run.start', `${T}Z`, { contract: 't' }, 's');
    expect(finding(classify([withPhase, without], now(`${T}.1Z`), registry), 'conflict').events).toEqual(['s']);
    const okStatus = r('edge', `${T}.1Z`, { from: 'o', to: 'r', kind: 'delegate', status: 'ok' }, 'd');
    const noStatus = r('edge', `${T}.1Z`, { from: 'o', to: 'r', kind: 'delegate' }, 'd');
    expect(classify([withPhase, okStatus, noStatus], now(`${T}.2Z`), registry).findings.map((f) => f.code)).not.toContain('conflict');
  });

  it('a wait names exactly one edge: brackets are refused', () => {
    const w = (edge: string) => validateReceipt({ run: 'r1', event: 'w', type: 'wait', at: `${T}Z`, on: 'v', edge, deadline: `${T}.5Z` });
    expect(w('o -> w1 : delegate').ok).toBe(true);
    const bad = w('o -> [w1, w2] : delegate');
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/exactly one edge/);
    expect(w('o -> [w1] : delegate').ok).toBe(false);
  });

  it('`after` names a bounded-choice entry with its targets in the plan\'s order; one of its edges alone does not name it', () => {
    const contract = (after: string) => `
contract: t
version: "1"
owner: o
agents: [o, r, w1, w2]
allow:
  - { from: o, to: [w1, w2], kind: delegate }
  - o -> r : delegate
phases:
  main:
    expect:
      - { from: o, to: [w1, w2], kind: delegate }
      - edge: "o -> r : delegate"
        after: ["${after}"]
`;
    expect(() => parseContract(contract('o->[w1,w2]:delegate'), 'c.yaml')).not.toThrow();
    expect(() => parseContract(contract('o -> [w2, w1] : delegate'), 'c.yaml')).toThrow(ContractError);
    expect(() => parseContract(contract('o -> w1 : delegate'), 'c.yaml')).toThrow(/not an edge of phase/);
  });
});

describe('issue 20 reproducer (replay --now)', () => {
  const dir = 'test/fixtures/nanotime';
  const run = async (args: string[]) => {
    let out = '';
    let err = '';
    const code = await replayCommand([`${dir}/reproducer.ndjson`, '--contracts', `${dir}/contracts`, '--now', '2026-11-30T12:00:00Z', '--fail-on', 'none', ...args], { stdout: (s) => (out += s), stderr: (s) => (err += s) });
    return { code, out, err };
  };

  it('a handoff 0.4 ms after its deadline is incomplete; two receipts 0.4 ms apart under one event id are uncertain', async () => {
    const { code, out } = await run(['--json']);
    expect(code).toBe(0);
    const byRun = Object.fromEntries(out.trim().split('\n').map((l) => JSON.parse(l)).map((v) => [v.run, v]));
    expect(byRun['late-sub-ms'].verdict).toBe('incomplete');
    expect(byRun['late-sub-ms'].findings[0]).toMatchObject({ code: 'late_edge', events: ['b'] });
    expect(byRun['late-sub-ms'].findings[0].message).toContain('came 400µs after its deadline 2026-11-30T11:02:00.000Z');
    expect(byRun['conflict-sub-ms'].verdict).toBe('uncertain');
    expect(byRun['conflict-sub-ms'].findings[0]).toMatchObject({ code: 'conflict', events: ['b'] });
    // the next step is due at the late observation's instant, printed with the fraction it had
    expect(JSON.stringify(byRun['late-sub-ms'])).toContain('2026-11-30T11:02:00.0004Z');
    expect(readFileSync(`${dir}/reproducer.ndjson`, 'utf8')).toContain('"2026-11-30T11:02:00.0004Z"');
  });

  it('--now is exact to the nanosecond; ten fraction digits are refused', async () => {
    let out = '';
    const code = await replayCommand([`${dir}/reproducer.ndjson`, '--contracts', `${dir}/contracts`, '--now', '2026-11-30T11:02:00.000000001Z', '--fail-on', 'none'], { stdout: (s) => (out += s), stderr: () => {} });
    expect(code).toBe(0);
    expect(out).toContain('now 2026-11-30T11:02:00.000000001Z');
    await expect(replayCommand([`${dir}/reproducer.ndjson`, '--contracts', `${dir}/contracts`, '--now', '2026-11-30T11:02:00.0000000001Z'], { stdout: () => {}, stderr: () => {} })).rejects.toThrow(/nine fraction digits/);
  });
});

describe('finding instants (deadline, since) instead of countdowns in messages', () => {
  const s = startAt(`${T}Z`);
  const d = e(`${T}.0000004Z`, 'o', 'r', 'delegate', 'd');

  it('waiting: deadline and since (when it became due); the message names the instant, no "left"', () => {
    const v1 = classify([s, d], now('2026-11-30T11:00:30Z'), registry);
    const v2 = classify([s, d], now('2026-11-30T11:01:59Z'), registry);
    const f = finding(v1, 'waiting');
    expect(f).toMatchObject({ deadline: '2026-11-30T11:02:00.0000004Z', since: '2026-11-30T11:00:00.0000004Z' });
    expect(f.message).toContain('until 2026-11-30T11:02:00.0000004Z');
    expect(f.message).not.toMatch(/left|ago/);
    expect(v2.findings).toEqual(v1.findings); // nothing in a finding moves with now alone
  });

  it('missed deadline: deadline and since are the deadline; no "ago"', () => {
    const f = finding(classify([s, d], now('2026-11-30T11:30:00Z'), registry), 'missed_deadline');
    expect(f).toMatchObject({ deadline: '2026-11-30T11:02:00.0000004Z', since: '2026-11-30T11:02:00.0000004Z' });
    expect(f.message).not.toMatch(/left|ago/);
  });

  it('declared wait: deadline, since the wait was declared; late edge and missed wait carry the deadline', () => {
    const w = r('wait', `${T}.25Z`, { on: 'w1', edge: 'o -> w1 : delegate', deadline: '2026-11-30T11:05:00.000000009Z' }, 'w');
    const dw = finding(classify([s, d, w], now('2026-11-30T11:01:00Z'), registry), 'declared_wait');
    expect(dw).toMatchObject({ deadline: '2026-11-30T11:05:00.000000009Z', since: '2026-11-30T11:00:00.250Z' });
    expect(dw.message).not.toMatch(/left|ago/);
    const mw = finding(classify([s, d, w], now('2026-11-30T11:06:00Z'), registry), 'missed_wait');
    expect(mw).toMatchObject({ deadline: '2026-11-30T11:05:00.000000009Z', since: '2026-11-30T11:05:00.000000009Z' });
    const late = finding(classify([s, d, e('2026-11-30T11:02:00.0000005Z', 'r', 'v', 'handoff', 'h')], now('2026-11-30T11:06:00Z'), registry), 'late_edge');
    expect(late).toMatchObject({ deadline: '2026-11-30T11:02:00.0000004Z', since: '2026-11-30T11:02:00.0000004Z' });
  });

  it('an ended run: since is the end', () => {
    const f = finding(classify([s, d, r('run.end', '2026-11-30T11:00:01.000000001Z', { result: 'cancelled' }, 'x')], now('2026-11-30T11:06:00Z'), registry), 'run_cancelled');
    expect(f.since).toBe('2026-11-30T11:00:01.000000001Z');
    expect(f.deadline).toBeUndefined();
  });
});
