/**
 * Freshness (semantics 2 rule 9) as 2a now decides its corners, one test per decision:
 * - a wait or expected-edge deadline that the run's end makes void still explained the silence before the end;
 * - a plan finished, or progress made, only by a receipt timed after the cap or the stall is late like an expected
 *   edge: max_duration_exceeded / no_progress hold at any `now`, even one before the cap (a settled verdict does not
 *   change with time);
 * - the boundary sentences of rule 9 (window end and cap as deadlines, the stall when the explanation ends, a wait
 *   declared after a window's end does not reach back, the verified outcome is not progress, no exemption for waits).
 * Each case is also checked against the independent reference (test/reference/classify.ts).
 */
import { describe, expect, it } from 'vitest';
import { classify, parseInstant, type Receipt } from '../src/core/index.js';
import { codes, finding, receipt, registryOf } from './helpers/receipts.js';
import { referenceClassify } from './reference/classify.js';

const contract = (phaseExtra: string, outcome = 'optional', lastWithin = '') => `
contract: f
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
    outcome: ${outcome}
${phaseExtra}
    expect:
      - o -> a : delegate
      - a -> b : handoff${lastWithin}
`;
const T = '2026-11-30T11:';
let n = 0;
const r = (type: string, at: string, extra: Record<string, unknown> = {}): Receipt => receipt({ run: 'r1', event: `e${String(n++).padStart(3, '0')}`, type, at: `${T}${at}`, ...extra });
const start = () => r('run.start', '00:00Z', { contract: 'f' });
const edge = (at: string, from: string, to: string, kind: string) => r('edge', at, { from, to, kind });
const wait = (at: string, edgeText: string, deadline: string) => r('wait', at, { on: 'c', edge: edgeText, deadline: `${T}${deadline}` });
const end = (at: string, result = 'completed') => r('run.end', at, { result });
const now = (at: string) => parseInstant(`${T}${at}`);

/** The product's verdict, checked against the reference on the same input. */
function verdict(yaml: string, rs: Receipt[], at: string) {
  const registry = registryOf(yaml);
  const v = classify(rs, now(at), registry);
  const ref = referenceClassify(rs, `${T}${at}`, registry.all());
  expect({ verdict: v.verdict, codes: [...new Set(v.findings.map((f) => f.code))].sort() }).toEqual({ verdict: ref.verdict, codes: [...new Set(ref.findings.map((f) => f.code))].sort() });
  return v;
}

describe('a void wait or deadline still explains the silence before the end', () => {
  const yaml = contract('    progress_within: 1m');

  it('a run that waited across a window end (deadline after its end) and then completed is healthy', () => {
    // start 00:00; o -> a at 00:30; wait at 00:45 for an off-plan edge until 30:00 (after the end); the plan's
    // last edge at 05:00 (the wait explained 01:30..05:00); completed at 05:30, before the wait's deadline.
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('00:45Z', 'c -> o : return', '30:00Z'), edge('05:00Z', 'a', 'b', 'handoff'), end('05:30Z')];
    for (const at of ['05:30Z', '10:00Z', '59:00Z']) {
      const v = verdict(yaml, rs, at);
      expect(v.verdict, at).toBe('healthy');
      expect(codes(v)).not.toContain('no_progress');
    }
  });

  it('the same run failing after the wait: run_failed only, no stall inside the explained silence', () => {
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('00:45Z', 'c -> o : return', '30:00Z'), end('05:30Z', 'failed')];
    expect(codes(verdict(yaml, rs, '40:00Z'))).toEqual(['run_failed']);
  });

  it('a wait declared after the window ended does not reach back, even when void: the stall at the window end stays', () => {
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('01:30.000000001Z', 'c -> o : return', '30:00Z'), edge('05:00Z', 'a', 'b', 'handoff'), end('05:30Z')];
    const v = verdict(yaml, rs, '10:00Z');
    expect(finding(v, 'no_progress')).toMatchObject({ since: `${T}01:30.000Z` });
    // declared exactly at the window's end: it reaches (no stall)
    const exactly = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('01:30Z', 'c -> o : return', '30:00Z'), edge('05:00Z', 'a', 'b', 'handoff'), end('05:30Z')];
    expect(verdict(yaml, exactly, '10:00Z').verdict).toBe('healthy');
  });

  it('an expected-edge deadline after the end is void, and explained the silence before the end', () => {
    const withDeadline = contract('    progress_within: 1m', 'optional', '\n        within: 30m');
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), end('05:30Z', 'failed')];
    expect(codes(verdict(withDeadline, rs, '59:00Z'))).toEqual(['run_failed']);
  });
});

describe('progress or a finish timed after the cap or the stall is late at any now', () => {
  it('max_duration: a plan finished only after the cap is max_duration_exceeded even at a now before the cap', () => {
    const yaml = contract('    max_duration: 10m');
    const rs = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('10:00.0000004Z', 'a', 'b', 'handoff')];
    for (const at of ['02:00Z', '09:59.999999999Z', '10:00Z', '30:00Z']) {
      const v = verdict(yaml, rs, at);
      expect(v.verdict, at).toBe('incomplete');
      expect(finding(v, 'max_duration_exceeded')).toMatchObject({ settled: true, deadline: `${T}10:00.000Z` });
    }
    // finished exactly at the cap: on time, healthy at any now
    const onTime = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('10:00Z', 'a', 'b', 'handoff')];
    for (const at of ['02:00Z', '30:00Z']) expect(verdict(yaml, onTime, at).verdict, at).toBe('healthy');
  });

  it('max_duration: the verified outcome that finishes the plan after the cap is late too', () => {
    const yaml = contract('    max_duration: 10m', 'required');
    const rs = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('02:00Z', 'a', 'b', 'handoff'), r('outcome', '10:00.000001Z', { verified: true })];
    expect(codes(verdict(yaml, rs, '03:00Z'))).toEqual(['max_duration_exceeded']);
  });

  it('no_progress: progress timed after the stall keeps the finding at a now before the stall', () => {
    const yaml = contract('    progress_within: 5m');
    const rs = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('06:00.000000001Z', 'a', 'b', 'handoff')];
    for (const at of ['02:00Z', '06:00Z', '30:00Z']) {
      const v = verdict(yaml, rs, at);
      expect(v.verdict, at).toBe('incomplete');
      expect(finding(v, 'no_progress')).toMatchObject({ settled: true, since: `${T}06:00.000Z` });
    }
    // progress exactly at the window's end is on time: healthy at any now
    const onTime = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('06:00Z', 'a', 'b', 'handoff')];
    for (const at of ['02:00Z', '30:00Z']) expect(verdict(yaml, onTime, at).verdict, at).toBe('healthy');
  });

  it('no_progress: an off-plan receipt after the stall does not move the clock (as for a missed deadline)', () => {
    const yaml = contract('    progress_within: 5m');
    const rs = [start(), edge('01:00Z', 'o', 'a', 'delegate'), edge('07:00Z', 'c', 'o', 'return')];
    const v = verdict(yaml, rs, '02:00Z');
    expect(v.verdict).toBe('working');
    expect(v.nextChangeAt).toBe(Date.parse(`${T}06:00Z`));
    expect(codes(verdict(yaml, rs, '06:00Z'))).toContain('no_progress');
  });
});

describe('the boundary sentences of rule 9', () => {
  it('now equal to the window end or the cap is past it; one exactly at the run end is not void', () => {
    const yaml = contract('    progress_within: 5m\n    max_duration: 6m');
    const rs = [start(), edge('01:00Z', 'o', 'a', 'delegate')];
    expect(verdict(yaml, rs, '05:59.999999999Z').verdict).toBe('working');
    expect(codes(verdict(yaml, rs, '06:00Z'))).toEqual(['max_duration_exceeded', 'no_progress', 'pending a -> b : handoff']);
    const endedAtCap = [...rs, end('06:00Z', 'failed')];
    expect(codes(verdict(yaml, endedAtCap, '01:30Z'))).toEqual(['max_duration_exceeded', 'no_progress', 'run_failed']);
    const endedBefore = [...rs, end('05:59.999999999Z', 'failed')];
    expect(codes(verdict(yaml, endedBefore, '30:00Z'))).toEqual(['run_failed']);
  });

  it('the stall comes when a waited edge arrives after the window end, not a window later', () => {
    const yaml = contract('    progress_within: 1m');
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('00:45Z', 'c -> o : return', '30:00Z'), edge('04:00Z', 'c', 'o', 'return')];
    expect(finding(verdict(yaml, rs, '04:00Z'), 'no_progress')).toMatchObject({ since: `${T}04:00.000Z` });
    // before it, the waited edge (a receipt timed after now) already shows the wait met: working, stall scheduled
    const before = verdict(yaml, rs, '03:59.999999999Z');
    expect(before.verdict).toBe('working');
    expect(before.nextChangeAt).toBe(Date.parse(`${T}04:00Z`));
  });

  it('the verified outcome finishes the plan but is not progress; max_duration makes no exemption for waits', () => {
    const yaml = contract('    progress_within: 2m', 'required');
    const rs = [start(), edge('00:30Z', 'o', 'a', 'delegate'), edge('01:00Z', 'a', 'b', 'handoff'), r('outcome', '02:30Z', { verified: true }), r('outcome', '04:00Z', { verified: false })];
    // finished at 02:30 (before the window end 03:00): healthy
    expect(verdict(yaml, rs, '30:00Z').verdict).toBe('healthy');
    const capped = contract('    max_duration: 5m');
    const waiting = [start(), edge('00:30Z', 'o', 'a', 'delegate'), wait('01:00Z', 'a -> b : handoff', '30:00Z')];
    const v = verdict(capped, waiting, '05:00Z');
    expect(v.verdict).toBe('waiting');
    expect(finding(v, 'max_duration_exceeded')).toMatchObject({ settled: true });
    expect(v.settled).toBe(true);
  });
});
