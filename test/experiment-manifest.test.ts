import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ExperimentInputError, formatInputIssue } from '../src/experiment/errors.js';
import { manifestJsonSchema, parseManifest } from '../src/experiment/manifest.js';
import { completeCaseRecord, parseCaseRecordLines } from '../src/experiment/records.js';

const FIELDOPS = 'experiments/fieldops/experiment.yaml';
const text = readFileSync(FIELDOPS, 'utf8');

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof ExperimentInputError) return e.issues.map(formatInputIssue);
    throw e;
  }
  throw new Error('expected an ExperimentInputError');
}

const lineOf = (needle: string, src = text) => src.split('\n').findIndex((l) => l.includes(needle)) + 1;

describe('manifest', () => {
  it('parses the FieldOps manifest; the merge key holds the candidate to the baseline', () => {
    const m = parseManifest(text, FIELDOPS);
    expect(m.experiment).toBe('fieldops-manual-specialist');
    expect(m.candidate.config.model).toEqual(m.baseline.config.model);
    expect(m.candidate.config.taskSet.hash).toBe(m.baseline.config.taskSet.hash);
    expect(m.baseline.config.topology.handoffs).toEqual([]);
    expect(m.candidate.config.topology.agents).toEqual(['fieldops-agent-001', 'manual-specialist']);
    expect(m.evidence).toEqual({ minCases: 7, minRepeats: 1 });
  });

  it('names file, line, column and field path of a wrong value', () => {
    const bad = text.replace('model: { id: fieldops-model-double, version: "0.1.0" }', 'model: { id: fieldops-model-double, version: 0.1 }');
    const line = lineOf('model: { id: fieldops-model-double');
    const issues = issuesOf(() => parseManifest(bad, 'x.yaml'));
    // the candidate merges the baseline (<<: *baseline), so both designs carry the bad value
    expect(issues).toHaveLength(2);
    expect(issues[0]).toMatch(new RegExp(`^x\\.yaml:${line}:\\d+: baseline\\.config\\.model\\.version: `));
    expect(issues[1]).toMatch(/^x\.yaml:\d+:\d+: candidate\.config\.model\.version: /);
  });

  it('names unknown fields, missing fields and the required gates', () => {
    const bad = text
      .replace('owner: fieldops-architecture\n', '')
      .replace('  minRepeats: 1 ', '  minRepeat: 1 ')
;
    const issues = issuesOf(() => parseManifest(bad, 'x.yaml'));
    expect(issues).toContain(`x.yaml:${lineOf('experiment:', bad)}:1: owner: required (expected string)`);
    expect(issues).toContain(`x.yaml:${lineOf('minRepeat', bad)}:3: evidence: unknown field(s) "minRepeat"`);
    const noGate = text.replace('  - zero_duplicate_effects\n', '');
    expect(issuesOf(() => parseManifest(noGate, 'x.yaml'))).toEqual([
      `x.yaml:${lineOf('hardGates:')}:1: hardGates: the hard gate zero_duplicate_effects is required`,
    ]);
  });

  it('checks consistency: final owner among agents, known capabilities, one predicate per failure rule', () => {
    const bad = text
      .replace('finalOwner: fieldops-agent-001\n      handoffs: []', 'finalOwner: someone-else\n      handoffs: []')
      .replace('capabilities: [search_manual]\n        expiresAfter: 5m', 'capabilities: [search_manuals]\n        expiresAfter: 5m')
      .replace('    above: 100\n', '    above: 100\n    is: true\n');
    const issues = issuesOf(() => parseManifest(bad, 'x.yaml'));
    expect(issues.some((i) => i.includes('baseline.config.topology.finalOwner: final owner someone-else is not one of the agents'))).toBe(true);
    expect(issues.some((i) => i.includes('candidate.config.authority.manual-specialist.capabilities[0]: unknown capability search_manuals'))).toBe(true);
    expect(issues.some((i) => i.includes('baselineFailures[0]: give exactly one of above, below or is'))).toBe(true);
  });

  it('refuses slice paths that are not field paths', () => {
    const bad = text.replace('    - authority.manual-specialist\n', '    - "authority..manual"\n');
    expect(issuesOf(() => parseManifest(bad, 'x.yaml')).some((i) => i.includes('changedSlice.paths[2]'))).toBe(true);
  });

  it('reports YAML syntax errors with their line', () => {
    const issues = issuesOf(() => parseManifest('experiment: a\nowner: [b\n', 'y.yaml'));
    expect(issues[0]).toMatch(/^y\.yaml:\d+:\d+: \(root\): /);
  });

  it('gives a JSON Schema from the same zod schema', () => {
    const s = manifestJsonSchema() as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(s.properties)).toContain('changedSlice');
    expect(s.required).toEqual(expect.arrayContaining(['experiment', 'baseline', 'candidate', 'hardGates', 'reopenWhen']));
  });
});

describe('case records', () => {
  it('name file, line and field of every invalid record', () => {
    const ndjson = ['{"case":"a","correct":true}', '{"case":"b","correct":"yes"}', 'not json', '{"case":"c","colour":1}'].join('\n');
    const issues = issuesOf(() => parseCaseRecordLines(ndjson, 'r.ndjson'));
    expect(issues).toHaveLength(3);
    expect(issues[0]).toMatch(/^r\.ndjson:2: correct: /);
    expect(issues[1]).toMatch(/^r\.ndjson:3: \(root\): invalid JSON/);
    expect(issues[2]).toBe('r.ndjson:4: (root): unknown field(s) "colour"');
  });

  it('need every measure unless receipts can derive it', () => {
    const [n] = parseCaseRecordLines('{"case":"a","correct":true,"forbiddenEffects":0}', 'r.ndjson');
    const { record, issues } = completeCaseRecord(n, 'r.ndjson');
    expect(record).toBeUndefined();
    const fields = issues.map((i) => i.field);
    expect(fields).toContain('duplicateEffects');
    expect(fields).toContain('handoffMessages');
    expect(issues.find((i) => i.field === 'handoffMessages')!.message).toContain('receipts');
  });
});
