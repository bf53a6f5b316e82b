// Issue 30.3: a run naming 20,000 agents (40,001 findings) is evaluated in steps (`evaluateSteps`) that a server
// yields between, and the verdict is exactly the one a single `evaluate` gave: every finding, in the same order.
// Agents named once need no walk over the run; an agent named again later still gets all its events.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, evaluateSteps, resolvePin } from '../src/core/classify.js';
import { PRECEDENCE, type Finding, type Receipt } from '../src/core/types.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const start: Receipt = { run: 'wide', event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' };
const edge = (i: number, to: string): Receipt => ({ run: 'wide', event: `e${i}`, type: 'edge', at: iso(T0 + i + 1), from: 'orchestrator', to, kind: 'delegate' });

function wide(agents: number): Receipt[] {
  const rs = [start];
  for (let i = 0; i < agents; i++) rs.push(edge(i, `unknown-${i}`));
  return rs;
}

function stateOf(receipts: Receipt[], withSource: boolean): RunState {
  const s = withSource ? new RunState('wide', () => receipts) : new RunState('wide');
  for (const r of receipts) s.add(r);
  return s;
}

/** The documented findings order (precedence, code, edge, agents, events, message; lists comma-joined), by a plain sort. */
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const reference = (fs: readonly Finding[]) =>
  [...fs].sort((a, b) => PRECEDENCE[a.verdict] - PRECEDENCE[b.verdict] || cmp(a.code, b.code) || cmp(a.edge ?? '', b.edge ?? '') || cmp(a.agents.join(','), b.agents.join(',')) || cmp(a.events.join(','), b.events.join(',')) || cmp(a.message, b.message));

const codes = (fs: readonly Finding[]) => {
  const out: Record<string, number> = {};
  for (const f of fs) out[f.code] = (out[f.code] ?? 0) + 1;
  return out;
};

describe('a run naming 20,000 agents, evaluated in steps', () => {
  it('every finding (count, codes, order) and the verdict as one evaluate; pauses many times; the verdict cached', () => {
    const receipts = wide(20000);
    const now = T0 + 60_000;
    const one = evaluate(stateOf(receipts, false), resolvePin(stateOf([start], false), registry, undefined), now, { registry });
    const state = stateOf(receipts, true);
    const steps = evaluateSteps(state, resolvePin(state, registry, undefined), now, { registry });
    let pauses = 0;
    let r = steps.next();
    while (!r.done) {
      pauses++;
      r = steps.next();
    }
    const v = r.value;
    expect(v.findings).toHaveLength(40001);
    expect(codes(v.findings)).toEqual({ unknown_agent: 20000, forbidden_edge: 20000, pending: 1 });
    expect(v.verdict).toBe('unknown_agent');
    expect(v).toEqual(one);
    expect(v.findings).toEqual(reference(v.findings));
    expect(v.findings.find((f) => f.code === 'unknown_agent' && f.agents[0] === 'unknown-12345')?.events).toEqual(['e12345']);
    expect(pauses).toBeGreaterThanOrEqual(20);
    // remembered: evaluate at the same instant returns it as it is
    expect(evaluate(state, resolvePin(state, registry, undefined), now, { registry })).toBe(v);
  });

  it('a run changed while its steps run: the verdict is not remembered, the next evaluate sees the change', () => {
    const receipts = wide(5000);
    const state = stateOf(receipts, false);
    const now = T0 + 60_000;
    const steps = evaluateSteps(state, resolvePin(state, registry, undefined), now, { registry });
    steps.next();
    state.add(edge(5000, 'late-agent'));
    let r = steps.next();
    while (!r.done) r = steps.next();
    const after = evaluate(state, resolvePin(state, registry, undefined), now, { registry });
    expect(after).not.toBe(r.value);
    expect(after.findings.some((f) => f.code === 'unknown_agent' && f.agents[0] === 'late-agent')).toBe(true);
    expect(after.findings.filter((f) => f.code === 'unknown_agent')).toHaveLength(5001);
  });

  for (const withSource of [false, true]) {
    it(`an agent named once, then again after an evaluation, then again: all its events each time (${withSource ? 'receipts from a source' : 'kept copies'})`, () => {
      const receipts = [start, edge(0, 'a-once'), edge(1, 'b-twice'), { ...edge(2, 'x'), to: 'b-twice', from: 'c-from' } as Receipt];
      const all = [...receipts];
      const state = new RunState('wide', withSource ? () => all : undefined);
      for (const r of receipts) state.add(r);
      const ev = (agent: string, at: number) => evaluate(state, resolvePin(state, registry, undefined), at, { registry }).findings.find((f) => f.code === 'unknown_agent' && f.agents[0] === agent)?.events;
      expect(ev('a-once', T0 + 10)).toEqual(['e0']);
      expect(ev('b-twice', T0 + 10)).toEqual(['e1', 'e2']);
      expect(ev('c-from', T0 + 10)).toEqual(['e2']);
      const more = [edge(3, 'a-once'), { ...edge(4, 'y'), from: 'c-from', to: 'a-once' } as Receipt];
      for (const r of more) {
        all.push(r);
        state.add(r);
      }
      expect(ev('a-once', T0 + 20)).toEqual(['e0', 'e3', 'e4']);
      expect(ev('c-from', T0 + 20)).toEqual(['e2', 'e4']);
      const last = edge(5, 'a-once');
      all.push(last);
      state.add(last);
      expect(ev('a-once', T0 + 30)).toEqual(['e0', 'e3', 'e4', 'e5']);
      // the same as a fresh fold of every receipt
      const fresh = evaluate(stateOf(all, false), resolvePin(state, registry, undefined), T0 + 30, { registry });
      expect(evaluate(state, resolvePin(state, registry, undefined), T0 + 30, { registry }).findings).toEqual(fresh.findings);
    });
  }
});
