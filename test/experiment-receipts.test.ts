import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { ExperimentInputError, formatInputIssue } from '../src/experiment/errors.js';
import { loadExperiment } from '../src/experiment/load.js';
import { deriveRunMeasures, parseReceiptsCore, type ReceiptParser } from '../src/experiment/receipts.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const P = 'fieldops-agent-001';
const S = 'manual-specialist';
let n = 0;
const r = (fields: Partial<LooseReceipt> & Pick<Receipt, 'type'>): Receipt => asReceipt({ run: 'r1', event: `e${++n}`, at: '2025-01-06T10:00:00Z', ...fields });

describe('deriving measures from one run', () => {
  it('counts handoff edges plus handoff receipts as messages, and other edges as actions of their source', () => {
    const receipts = [
      r({ type: 'run.start', contract: 'c', from: P }),
      r({ type: 'edge', from: P, to: 'lookup_equipment', kind: 'delegate' }),
      r({ type: 'edge', from: P, to: S, kind: 'handoff' }),
      r({ type: 'edge', from: S, to: 'search_manual', kind: 'delegate' }),
      r({ type: 'edge', from: S, to: P, kind: 'return' }),
      r({ type: 'handoff', handoff: 'h1', state: 'RETURNED', from: S, to: P, finalOwner: P }),
      r({ type: 'edge', from: P, to: 'reserve_part', kind: 'delegate' }),
      r({ type: 'run.end', result: 'completed', from: P }),
    ];
    const m = deriveRunMeasures(receipts, P);
    expect(m).toEqual({
      parentActions: 2,
      totalActions: 4,
      actionsByAgent: { [P]: 2, [S]: 2 },
      handoffMessages: 2,
      traceComplete: true,
      finalOwners: [P],
    });
  });

  it('counts a duplicate delivery once', () => {
    const e = r({ type: 'edge', from: P, to: 'x', kind: 'delegate' });
    const m = deriveRunMeasures([e, { ...e }, r({ type: 'run.end', result: 'completed', from: P })], P);
    expect(m.totalActions).toBe(1);
    expect(m.traceComplete).toBe(true);
  });

  it('a gap, a missing run.end or a conflicting duplicate makes the trace incomplete', () => {
    const end = r({ type: 'run.end', result: 'completed', from: P });
    expect(deriveRunMeasures([r({ type: 'gap', reason: 'caller_unresolved' }), end], P).traceComplete).toBe(false);
    expect(deriveRunMeasures([r({ type: 'edge', from: P, to: 'x', kind: 'delegate' })], P).traceComplete).toBe(false);
    const e = r({ type: 'edge', from: P, to: 'x', kind: 'delegate' });
    expect(deriveRunMeasures([e, asReceipt({ ...e, to: 'y' }), end], P).traceComplete).toBe(false);
  });

  it('collects every final owner named, so a second owner is visible', () => {
    const m = deriveRunMeasures(
      [r({ type: 'handoff', handoff: 'h', state: 'ACCEPTED', finalOwner: S }), r({ type: 'run.end', result: 'completed', from: P })],
      P,
    );
    expect(m.finalOwners).toEqual([P, S]);
  });
});

describe('the receipt parser', () => {
  it('names the file and line of a bad receipt', () => {
    const text = '{"run":"a","event":"e1","type":"edge","at":"2026-01-01T00:00:00Z","from":"x","to":"y","kind":"delegate"}\n\n{"run":"a","event":"e2","type":"nonsense","at":"2026-01-01T00:00:00Z"}\n';
    try {
      parseReceiptsCore(text, 'x.ndjson');
      expect.unreachable();
    } catch (e) {
      const issues = (e as ExperimentInputError).issues.map(formatInputIssue);
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatch(/^x\.ndjson:3: .*type/);
    }
  });
});

describe('loading records with receipts', () => {
  let dir: string;
  afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));

  /** Copy the FieldOps fixture into a temporary directory, with one file rewritten. */
  function copyFieldops(edit: { file: string; from: string; to: string }): string {
    dir = mkdtempSync(join(tmpdir(), 'experiment-'));
    for (const sub of ['cases', 'receipts']) mkdirSync(join(dir, sub));
    for (const f of ['experiment.yaml', 'cases/baseline.ndjson', 'cases/candidate.ndjson', 'receipts/baseline.ndjson', 'receipts/candidate.ndjson']) {
      let text = readFileSync(join('experiments/fieldops', f), 'utf8');
      if (f === edit.file) {
        expect(text).toContain(edit.from);
        text = text.replace(edit.from, edit.to);
      }
      writeFileSync(join(dir, f), text);
    }
    return join(dir, 'experiment.yaml');
  }

  it('refuses a given measure that disagrees with the receipts, naming file, line and field', async () => {
    const path = copyFieldops({ file: 'cases/candidate.ndjson', from: '"case":"stale-inventory",', to: '"case":"stale-inventory","handoffMessages":1,' });
    const err = await loadExperiment(path).catch((e) => e);
    expect(err).toBeInstanceOf(ExperimentInputError);
    const [issue] = (err as ExperimentInputError).issues;
    expect(issue).toMatchObject({ line: 4, field: 'handoffMessages', message: '1 disagrees with 2 derived from the run\'s receipts' });
    expect(issue.file).toMatch(/cases\/candidate\.ndjson$/);
  });

  it('reports a run the receipts do not hold', async () => {
    const path = copyFieldops({ file: 'cases/baseline.ndjson', from: '"run":"fo-base-cancellation"', to: '"run":"fo-base-nothing"' });
    const err = (await loadExperiment(path).catch((e) => e)) as ExperimentInputError;
    expect(err.issues).toMatchObject([{ line: 7, field: 'run', message: 'no receipts for run fo-base-nothing' }]);
  });

  it('uses the receipt parser it is given, once per receipts file', async () => {
    const parsed: string[] = [];
    const counting: ReceiptParser = (text, file) => {
      parsed.push(file);
      return parseReceiptsCore(text, file);
    };
    const loaded = await loadExperiment('experiments/fieldops/experiment.yaml', { parseReceipts: counting });
    expect(parsed.map((f) => f.split('/').pop())).toEqual(['baseline.ndjson', 'candidate.ndjson']);
    expect(loaded.candidate.reduce((a, x) => a + x.handoffMessages, 0)).toBe(6);
  });
});
