// Issue 48: loading a run's history is an explicit engine step, not an exception. The engine asks before a step
// whether it reads the run's receipts back from the store (RunState.readsBackToAdd before a fold, evaluationReadsBack
// before an evaluation) and loads the history first when it does. Here the answers are checked against what the
// steps really read: a source that counts its reads, over a run with repeats, conflicts, unknown agents named once
// and twice, and a foreign version; each answer must say exactly whether the step read.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, evaluationReadsBack, resolvePin, type AddResult } from '../src/core/classify.js';
import type { Receipt } from '../src/core/types.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const run = 'r';
const start: Receipt = { run, event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' };
const edge = (event: string, from: string, to: string, at: number, extra: object = {}): Receipt => ({ run, event, type: 'edge', at: iso(T0 + at), from, to, kind: 'delegate', ...extra }) as Receipt;

/** The batches as a store would answer them: each receipt with the store's answer (undefined: none known, the tail's fold). */
const steps: [Receipt, AddResult | undefined][] = [
  [start, 'accepted'],
  [edge('e1', 'orchestrator', 'researcher', 1), 'accepted'],
  [edge('m1', 'orchestrator', 'mallory', 2), 'accepted'], // an unknown agent named once: listed without a walk
  [edge('e1', 'orchestrator', 'researcher', 1), 'duplicate'], // the store's duplicate: nothing read
  [edge('m2', 'mallory', 'orchestrator', 3), 'accepted'], // named twice: its events need a walk
  [edge('m3', 'mallory', 'researcher', 4), 'accepted'], // listed already: no walk
  [edge('e1', 'orchestrator', 'researcher', 1), undefined], // a repeat with no answer: compared with the stored content
  [edge('v1', 'orchestrator', 'researcher', 5, { version: '2' }), 'accepted'], // a foreign version: its events walked
  [edge('c1', 'orchestrator', 'researcher', 6), 'conflict'], // a stored conflict under an id not folded here
  [edge('e1', 'orchestrator', 'researcher', 7), 'conflict'], // another content under a folded id: a rebuild
  [edge('e1', 'orchestrator', 'researcher', 7), 'conflict'], // that conflict again: known, nothing read
  [edge('n1', 'orchestrator', 'nobody', 8), 'accepted'],
  [edge('n2', 'nobody', 'orchestrator', 9), 'accepted'], // after the rebuild's reset, another agent named twice
];

describe('whether a step reads a run back is known before the step (issue 48)', () => {
  it('readsBackToAdd and evaluationReadsBack say exactly when the fold and the evaluation read the run back', () => {
    const stored: Receipt[] = [];
    let reads = 0;
    const state = new RunState(run, () => {
      reads++;
      return stored;
    });
    let predictedReads = 0;
    steps.forEach(([r, known], i) => {
      if (known !== 'duplicate') stored.push(r); // the store commits before the fold
      const addReads = state.readsBackToAdd(r, known);
      let before = reads;
      state.add(r, known);
      expect(reads > before, `step ${i}: add of ${r.event} (${known ?? 'no answer'}) reads back`).toBe(addReads);
      const pinning = resolvePin(state, registry);
      const evalReads = evaluationReadsBack(state, pinning);
      before = reads;
      evaluate(state, pinning, T0 + 100 + i, { registry });
      expect(reads > before, `step ${i}: the evaluation after ${r.event} reads back`).toBe(evalReads);
      predictedReads += (addReads ? 1 : 0) + (evalReads ? 1 : 0);
    });
    // the run exercises both kinds: reads the steps needed, and steps that needed none
    expect(predictedReads).toBeGreaterThanOrEqual(5);
    expect(predictedReads).toBeLessThan(steps.length * 2 - 5);
  });

  it('a state that keeps its receipts (no source) never reads anything back', () => {
    const state = new RunState(run);
    for (const [r, known] of steps) {
      expect(state.readsBackToAdd(r, known)).toBe(false);
      state.add(r, known);
      expect(evaluationReadsBack(state, resolvePin(state, registry))).toBe(false);
    }
  });
});
