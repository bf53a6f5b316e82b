import { mkdtemp, readFile, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { UNSAFE_VERDICTS } from '../src/metrics/audit-metrics.js';
import { loadRunbooks, runbooksHtml } from '../src/alerting/runbooks.js';
import { PROMTOOL_BIN, requireBinary, runPromtool } from './helpers/prometheus.js';

const RULES = 'collector/prometheus/topology-audit.rules.yml';
const TESTS_DIR = 'test/prometheus-rules';

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

async function loadRules(): Promise<Rule[]> {
  const doc = parse(await readFile(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> };
  return doc.groups.flatMap((g) => g.rules);
}

async function ruleTestFiles(): Promise<string[]> {
  return (await readdir(TESTS_DIR)).filter((f) => f.endsWith('.test.yml')).map((f) => join(TESTS_DIR, f));
}

/** The operator meaning of each verdict (seed article's drift table; semantics.md). */
const OPERATOR_MEANING: Record<string, string> = {
  stale_contract: 'Stop comparing the run with the wrong design',
  unknown_agent: 'Verify identity and authority',
  forbidden_edge: 'Contain the route before retrying work',
  ambiguous_route: 'Reconcile ownership and possible duplicate effects',
  false_complete: 'Reopen the run; completion lacks required evidence',
  incomplete: 'Investigate the first absent expected edge',
};

describe('promtool', () => {
  it('is installed (Debian package prometheus)', () => {
    expect(() => requireBinary(PROMTOOL_BIN)).not.toThrow();
  });

  it('check rules accepts the rule file', () => {
    const r = runPromtool(['check', 'rules', RULES]);
    expect(r.output).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });

  it('test rules passes every unit test file', async () => {
    const files = await ruleTestFiles();
    expect(files.length).toBeGreaterThanOrEqual(2);
    const r = runPromtool(['test', 'rules', ...files]);
    expect(r.output).not.toContain('FAILED');
    expect(r.output.match(/SUCCESS/g)).toHaveLength(files.length);
    expect(r.code).toBe(0);
  });
});

describe('the unit tests can fail', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'topology-rules-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function runAgainst(mutated: string): Promise<{ code: number | null; output: string }> {
    // Same layout as the repository, so the test files' relative rule_files path resolves to the mutant.
    await mkdir(join(dir, 'collector/prometheus'), { recursive: true });
    await mkdir(join(dir, TESTS_DIR), { recursive: true });
    await writeFile(join(dir, RULES), mutated);
    const files = await ruleTestFiles();
    for (const f of files) await writeFile(join(dir, f), await readFile(f, 'utf8'));
    return runPromtool(['test', 'rules', ...files], dir);
  }

  it('fails when the forbidden-edge rule selects healthy runs instead', async () => {
    const rules = await readFile(RULES, 'utf8');
    const mutated = rules.replace('topology_alerting_runs{verdict="forbidden_edge"}', 'topology_alerting_runs{verdict="healthy"}');
    expect(mutated).not.toBe(rules);
    const r = await runAgainst(mutated);
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('FAILED');
    expect(r.output).toContain('TopologyForbiddenEdge');
  });

  it('fails when a verdict rule goes back to topology_runs (an alert that never resolves)', async () => {
    const rules = await readFile(RULES, 'utf8');
    const mutated = rules.replace('(topology_alerting_runs{verdict="forbidden_edge"}) > 0', '(topology_runs{verdict="forbidden_edge"}) > 0');
    expect(mutated).not.toBe(rules);
    const r = await runAgainst(mutated);
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('TopologyForbiddenEdge');
  });

  it('fails when the store-unhealthy rule loses its for: duration', async () => {
    const rules = await readFile(RULES, 'utf8');
    const mutated = rules.replace(
      /(min by \(instance, job\) \(topology_store_healthy\) < 1\n\s+for: )1m/,
      '$10s',
    );
    expect(mutated).not.toBe(rules);
    const r = await runAgainst(mutated);
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('TopologyStoreUnhealthy');
  });
});

describe('rule file structure', () => {
  it('gives every alert a severity, a summary, a description and a runbook', async () => {
    const rules = await loadRules();
    expect(rules.length).toBeGreaterThanOrEqual(12);
    for (const r of rules) {
      expect(['critical', 'warning', 'info'], r.alert).toContain(r.labels.severity);
      expect(r.annotations.summary, r.alert).toBeTruthy();
      expect(r.annotations.description, r.alert).toBeTruthy();
      expect(r.annotations.runbook, r.alert).toBeTruthy();
    }
  });

  it("links every alert to its section of the auditor's runbook page (runbook_url)", async () => {
    const rules = await loadRules();
    const page = runbooksHtml(loadRunbooks(RULES));
    for (const r of rules) {
      expect(r.annotations.runbook_url, r.alert).toBe(`http://127.0.0.1:9464/runbooks#${r.alert}`);
      expect(page, r.alert).toContain(`<section id="${r.alert}">`);
    }
  });

  it('has a rule for each unsafe, false-complete and incomplete verdict, naming contract and verdict', async () => {
    const rules = await loadRules();
    for (const verdict of [...UNSAFE_VERDICTS, 'incomplete']) {
      const rule = rules.find((r) => r.expr.includes(`topology_alerting_runs{verdict="${verdict}"}`));
      expect(rule, verdict).toBeDefined();
      // Alerts read only the windowed, acknowledgeable gauge: topology_runs (held until retention) would fire for days.
      expect(rule!.expr).not.toContain('topology_runs');
      expect(rule!.annotations.description).toContain('{{ $labels.contract }}');
      expect(rule!.annotations.description).toContain('{{ $labels.verdict }}');
      expect(rule!.annotations.runbook.startsWith(OPERATOR_MEANING[verdict]!), `${rule!.alert} runbook`).toBe(true);
      expect(rule!.for ?? '0s', `${rule!.alert} waits before alerting`).toBe('0s');
    }
  });

  it('never selects healthy, working or waiting', async () => {
    const rules = await loadRules();
    for (const r of rules) expect(r.expr, r.alert).not.toMatch(/verdict\s*(=|!=|=~|!~)\s*"[^"]*(healthy|working|waiting)/);
    // Every verdict selector is an exact match or a regex of listed verdicts, so the check above sees them all.
    const selectors = rules.flatMap((r) => [...r.expr.matchAll(/verdict\s*(=~?)\s*"([^"]*)"/g)].map((m) => m[2]!));
    expect(selectors.length).toBeGreaterThanOrEqual(7);
  });

  it('has promtool tests that see every alert fire and every alert stay silent', async () => {
    const fired = new Set<string>();
    const silent = new Set<string>();
    for (const f of await ruleTestFiles()) {
      const doc = parse(await readFile(f, 'utf8')) as {
        tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
      };
      for (const t of doc.tests) {
        for (const a of t.alert_rule_test ?? []) (a.exp_alerts?.length ? fired : silent).add(a.alertname);
      }
    }
    for (const r of await loadRules()) {
      expect(fired.has(r.alert), `${r.alert} is tested firing`).toBe(true);
      expect(silent.has(r.alert), `${r.alert} is tested silent`).toBe(true);
    }
  });
});
