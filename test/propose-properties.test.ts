/**
 * Properties of `propose` and shadow evaluation over random plans: runs generated from a random acyclic plan
 * (random predecessors, random delays) are all healthy under their own draft once it is published; a candidate
 * with the same content always agrees with the pinned verdict; dropping an expected edge or adding an unseen one
 * is never healthy under the draft.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ContractRegistry, classify, evaluate, groupByRun, parseContract, resolvePin, shadowEvaluate, type Receipt } from '../src/core/index.js';
import { draftYaml, proposeDraft } from '../src/propose/draft.js';
import { receipt } from './helpers/receipts.js';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const AGENTS = ['a0', 'a1', 'a2', 'a3', 'a4'];
const KINDS = ['delegate', 'handoff', 'return'] as const;
const T0 = Date.parse('2026-03-01T09:00:00Z');

interface Step {
  from: string;
  to: string;
  kind: string;
  preds: number[];
}

const stepsArb = fc
  .uniqueArray(
    fc.record({ from: fc.constantFrom(...AGENTS), to: fc.constantFrom(...AGENTS), kind: fc.constantFrom(...KINDS) }).filter((e) => e.from !== e.to),
    { minLength: 1, maxLength: 5, selector: (e) => `${e.from}>${e.to}:${e.kind}` },
  )
  .chain((edges) =>
    fc.tuple(...edges.map((_, i) => fc.subarray([...Array(i).keys()]))).map((preds) => edges.map((e, i): Step => ({ ...e, preds: preds[i] }))),
  );

const caseArb = stepsArb.chain((steps) =>
  fc.record({
    steps: fc.constant(steps),
    // Per run, per step: the delay (ms) after its predecessors.
    delays: fc.array(fc.array(fc.integer({ min: 1, max: 90_000 }), { minLength: steps.length, maxLength: steps.length }), { minLength: 3, maxLength: 8 }),
  }),
);

function runsOf(steps: Step[], delays: number[][]): Receipt[] {
  const out: Receipt[] = [];
  delays.forEach((d, r) => {
    const run = `r${r}`;
    const base = T0 + r * 3_600_000;
    const at = new Array<number>(steps.length);
    out.push(receipt({ run, event: 's', type: 'run.start', at: new Date(base).toISOString(), contract: 'p', version: '1', from: steps[0].from }));
    steps.forEach((s, i) => {
      at[i] = Math.max(base, ...s.preds.map((p) => at[p])) + d[i];
      out.push(receipt({ run, event: `e${i}`, type: 'edge', at: new Date(at[i]).toISOString(), from: s.from, to: s.to, kind: s.kind }));
    });
    const last = Math.max(...at);
    out.push(receipt({ run, event: 'o', type: 'outcome', at: new Date(last + 1).toISOString(), from: steps[0].from, verified: true }));
    out.push(receipt({ run, event: 'end', type: 'run.end', at: new Date(last + 2).toISOString(), from: steps[0].from, result: 'completed' }));
  });
  return out;
}

function published(receipts: Receipt[]) {
  const yaml = draftYaml(proposeDraft(receipts, { minShare: 0 }));
  const v1 = parseContract(yaml.replace(/^version: .*$/m, 'version: "1"').replace(/^candidate: true.*\n/m, ''), 'p1.yaml');
  const v2 = parseContract(yaml.replace(/^version: .*$/m, 'version: "2"'), 'p2.yaml');
  return { registry: ContractRegistry.fromContracts([v1, v2]), v2 };
}

describe('propose over random plans', () => {
  it('every generated run is healthy under its own published draft, and an identical candidate agrees', () => {
    fc.assert(
      fc.property(caseArb, ({ steps, delays }) => {
        const receipts = runsOf(steps, delays);
        const { registry, v2 } = published(receipts);
        const now = Math.max(...receipts.map((r) => Date.parse(r.at)));
        for (const [run, state] of groupByRun(receipts)) {
          const pinning = resolvePin(state, registry);
          const v = evaluate(state, pinning, now, { registry });
          expect(v.verdict, `${run}: ${JSON.stringify(v.findings)}`).toBe('healthy');
          const [s] = shadowEvaluate(state, pinning, v, [v2], now, { registry });
          expect(s.verdict).toBe(v.verdict);
          expect(s.disagrees).toBe(false);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('a run missing an expected edge, or with an unseen edge, is never healthy under the draft', () => {
    fc.assert(
      fc.property(caseArb, fc.nat(), ({ steps, delays }, pick) => {
        const receipts = runsOf(steps, delays);
        const { registry } = published(receipts);
        const now = Math.max(...receipts.map((r) => Date.parse(r.at)));
        const r0 = receipts.filter((r) => r.run === 'r0');
        const drop = `e${pick % steps.length}`;
        const missing = classify(r0.filter((r) => r.event !== drop), now, registry);
        expect(missing.verdict).not.toBe('healthy');
        // An edge none of the runs shows: the generator never makes a self edge.
        const extra = [...r0, receipt({ run: 'r0', event: 'x', type: 'edge', at: r0[1].at, from: steps[0].from, to: steps[0].from, kind: 'handoff' })];
        expect(classify(extra, now, registry).verdict).toBe('forbidden_edge');
      }),
      { numRuns: RUNS },
    );
  });
});
