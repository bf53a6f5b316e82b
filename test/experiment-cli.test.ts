import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { experimentCommand } from '../src/cli/experiment.js';

const FIELDOPS = 'experiments/fieldops/experiment.yaml';

async function run(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await experimentCommand(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

/** The FieldOps fixture copied to a temporary directory with text edits applied to its files. */
function fieldopsWith(edits: { file: string; from: string | RegExp; to: string }[]): string {
  dir = mkdtempSync(join(tmpdir(), 'experiment-cli-'));
  for (const sub of ['cases', 'receipts']) mkdirSync(join(dir, sub));
  for (const f of ['experiment.yaml', 'cases/baseline.ndjson', 'cases/candidate.ndjson', 'receipts/baseline.ndjson', 'receipts/candidate.ndjson']) {
    let text = readFileSync(join('experiments/fieldops', f), 'utf8');
    for (const e of edits.filter((x) => x.file === f)) {
      const next = text.replace(e.from, e.to);
      expect(next, `edit of ${f}`).not.toBe(text);
      text = next;
    }
    writeFileSync(join(dir, f), text);
  }
  return join(dir, 'experiment.yaml');
}

describe('experiment compare', () => {
  it('prints case-level deltas first, then aggregates, hard gates and the disposition', async () => {
    const { code, stdout, stderr } = await run('compare', FIELDOPS);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const order = ['case-level deltas', 'aggregates over 7 pairs', 'hard gates', 'disposition: RETAIN'].map((s) => stdout.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(stdout).toMatch(/total context\s+470\s+445\s+-25/);
    expect(stdout).toMatch(/total actions\s+24\s+25\s+\+1/);
    expect(stdout).toMatch(/handoff messages\s+0\s+6\s+\+6/);
    expect(stdout).toMatch(/coordination units\s+0\s+12\s+\+12/);
    expect(stdout).toContain('reopen when:');
  });

  it('--json gives the comparison object', async () => {
    const { code, stdout } = await run('compare', FIELDOPS, '--json');
    expect(code).toBe(0);
    const c = JSON.parse(stdout);
    expect(c.disposition.decision).toBe('retain');
    expect(c.cases).toHaveLength(7);
    expect(c.aggregates.counts.find((a: { measure: string }) => a.measure === 'handoffMessages').candidate.total).toBe(6);
  });

  it('--markdown gives a pull-request report with tables', async () => {
    const { code, stdout } = await run('compare', FIELDOPS, '--markdown');
    expect(code).toBe(0);
    expect(stdout).toContain('## Topology experiment `fieldops-manual-specialist`: **retain**');
    expect(stdout).toContain('### Case-level deltas');
    expect(stdout).toMatch(/\| direct-lookup \| yes→yes \|/);
    expect(stdout.indexOf('### Case-level deltas')).toBeLessThan(stdout.indexOf('### Aggregates'));
  });

  it('--fail-on makes a disposition a failing exit', async () => {
    expect((await run('compare', FIELDOPS, '--fail-on', 'reject,retest')).code).toBe(0);
    expect((await run('compare', FIELDOPS, '--fail-on', 'retain')).code).toBe(1);
    expect((await run('compare', FIELDOPS, '--fail-on', 'pilot')).code).toBe(2);
  });

  it('refuses unpaired cases with exit 2, naming them', async () => {
    const path = fieldopsWith([{ file: 'cases/candidate.ndjson', from: /^.*"case":"cancellation".*\n/m, to: '' }]);
    const { code, stdout, stderr } = await run('compare', path);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('only in baseline: cancellation');
  });

  it('refuses mismatched cases with exit 2, naming them', async () => {
    const path = fieldopsWith([{ file: 'cases/candidate.ndjson', from: '"expected":"approval-expired"', to: '"expected":"part-reserved"' }]);
    const { code, stderr } = await run('compare', path);
    expect(code).toBe(2);
    expect(stderr).toContain('mismatched: approval-expiry (expected approval-expired versus part-reserved)');
  });

  it('gives reject in the report when the candidate adds a forbidden effect', async () => {
    const path = fieldopsWith([
      { file: 'cases/candidate.ndjson', from: '"case":"direct-lookup","expected":"part-reserved","correct":true,"forbiddenEffects":0', to: '"case":"direct-lookup","expected":"part-reserved","correct":true,"forbiddenEffects":1' },
    ]);
    const { code, stdout } = await run('compare', path, '--fail-on', 'reject');
    expect(code).toBe(1);
    expect(stdout).toContain('FAIL  zero_forbidden_effects: candidate forbidden effect in direct-lookup');
    expect(stdout).toContain('disposition: REJECT');
    expect(stdout).toMatch(/direct-lookup .*GATE zero_forbidden_effects/);
  });

  it('reports invalid input with file, line and field, exit 2', async () => {
    const path = fieldopsWith([{ file: 'cases/baseline.ndjson', from: '"correct":true', to: '"correct":"yes"' }]);
    const { code, stderr } = await run('compare', path);
    expect(code).toBe(2);
    expect(stderr).toMatch(/cases\/baseline\.ndjson:1: correct: /);
  });
});

describe('experiment diff', () => {
  it('exits 0 on FieldOps', async () => {
    const { code, stdout } = await run('diff', FIELDOPS);
    expect(code).toBe(0);
    expect(stdout).toContain('result: only the declared slice changed, and no authority widened');
    const j = await run('diff', FIELDOPS, '--json');
    expect(JSON.parse(j.stdout).ok).toBe(true);
  });

  it('exits 1 when the candidate also changes the model version, naming the field', async () => {
    const path = fieldopsWith([
      { file: 'experiment.yaml', from: '    <<: *baseline ', to: '    <<: *baseline\n    model: { id: fieldops-model-double, version: "0.2.0" } ' },
    ]);
    const { code, stdout, stderr } = await run('diff', path);
    expect(code).toBe(1);
    expect(stdout).toContain('~ model.version  OUTSIDE THE DECLARED SLICE  "0.1.0" → "0.2.0"');
    expect(stderr).toContain(': model.version: changed outside the declared slice');
  });

  it('exits 1 when the worker gets reserve_part, naming the field', async () => {
    const path = fieldopsWith([
      { file: 'experiment.yaml', from: 'capabilities: [search_manual]\n        expiresAfter: 5m', to: 'capabilities: [search_manual, reserve_part]\n        expiresAfter: 5m' },
    ]);
    const { code, stderr } = await run('diff', path, '--json');
    expect(code).toBe(1);
    expect(stderr).toContain(': authority.manual-specialist.capabilities[reserve_part]: effects_in_read_slice:');
  });

  it('exits 2 on usage errors and unreadable manifests', async () => {
    expect((await run('diff')).code).toBe(2);
    expect((await run('frobnicate', FIELDOPS)).code).toBe(2);
    expect((await run('compare', FIELDOPS, '--json', '--markdown')).code).toBe(2);
    const missing = await run('diff', 'no/such/manifest.yaml');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no/such/manifest.yaml: (root): file not found');
    expect((await run('--help')).code).toBe(0);
  });
});

describe('docs/experiments.md', () => {
  it('shows the real output of compare on the FieldOps fixture', async () => {
    const doc = readFileSync('docs/experiments.md', 'utf8');
    const block = /<!-- fieldops-compare:begin -->\n```\n([\s\S]*?)```\n<!-- fieldops-compare:end -->/.exec(doc);
    expect(block).not.toBeNull();
    const { stdout } = await run('compare', FIELDOPS);
    expect(block![1]).toBe(stdout);
  });
});
