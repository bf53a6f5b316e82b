import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { METRIC_NAMES, createAuditMetrics } from '../src/metrics/audit-metrics.js';
import { runPromtool } from './helpers/prometheus.js';

const GRAFANA = 'collector/grafana';
const DATASOURCE_UID = 'topology-audit-prometheus';

/** Every sample name the registry exposes, found by touching every metric once and rendering. */
function exposedSampleNames(): Set<string> {
  const m = createAuditMetrics({ version: 'test' });
  m.setRunsGauge([{ contract: 'c', version: '1', verdict: 'healthy', runs: 1 }]);
  m.setAlertingGauges(['c'], [{ contract: 'c', verdict: 'forbidden_edge', count: 1 }], [{ contract: 'c', count: 1 }]);
  m.verdictEntered('c', 'healthy', 'r');
  m.receipt('edge', 'accepted');
  m.otlpSpans('http', 'receipt');
  m.ingestRequest('http', 200);
  m.ingestRejected('http', 'too_large');
  m.storeCommit(0.001, 1);
  m.setLiveRuns(1);
  m.setPendingParentSpans(1);
  m.pendingParentEvicted();
  m.callerUnresolved();
  m.setIngestQueueDepth(1);
  m.setIngestSaturated(false);
  m.setStoreHealthy(true);
  m.shadowVerdictEntered('c', '2', 'forbidden_edge', true);
  m.unmappedTrace('langgraph', 'no_edges');
  const names = new Set<string>();
  for (const line of m.render('prometheus').split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (match) names.add(match[1]!);
  }
  return names;
}

/** Series Prometheus itself creates for every target; not exposed by the auditor. */
const PROMETHEUS_SYNTHETIC = new Set(['up']);

const PROMQL_KEYWORDS = new Set([
  // operators and modifiers
  'and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'atan2',
  // aggregations (may be followed by `by (...)` rather than `(`)
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile',
  'limitk', 'limit_ratio',
  // literals
  'inf', 'nan', 'Inf', 'NaN',
]);

/**
 * Metric names referred to by a PromQL expression: identifiers that are not followed by `(` (functions), not
 * keywords or aggregations, not inside `{...}` (label matchers), `[...]` (ranges), strings, or the label lists of
 * by/without/on/ignoring/group_left/group_right, and not Grafana variables ($name, $__rate_interval).
 */
function metricNamesIn(expr: string): string[] {
  let s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?[a-zA-Z0-9_:.]+\}?/g, ' ');
  s = s.replace(/\boffset\s+-?[0-9a-z]+/g, ' ');
  const names: string[] = [];
  const ident = /(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)/g;
  for (const m of s.matchAll(ident)) {
    const name = m[1]!;
    const after = s.slice(m.index! + name.length);
    if (/^\s*\(/.test(after)) continue; // a function call
    if (PROMQL_KEYWORDS.has(name)) continue;
    names.push(name);
  }
  return names;
}

interface Target {
  where: string;
  expr: string;
}

function collectExprs(node: unknown, where: string, out: Target[]): void {
  if (Array.isArray(node)) {
    node.forEach((n, i) => collectExprs(n, `${where}[${i}]`, out));
  } else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === 'expr' && typeof v === 'string') out.push({ where, expr: v });
      else collectExprs(v, `${where}.${k}`, out);
    }
  }
}

async function dashboard(): Promise<any> {
  return JSON.parse(await readFile(join(GRAFANA, 'dashboards/topology-audit.json'), 'utf8'));
}

async function grafanaAlerts(): Promise<any> {
  return parse(await readFile(join(GRAFANA, 'provisioning/alerting/topology-audit-alerts.yml'), 'utf8'));
}

async function prometheusRules(): Promise<
  Array<{ alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> }>
> {
  const doc = parse(await readFile('collector/prometheus/topology-audit.rules.yml', 'utf8'));
  return doc.groups.flatMap((g: any) => g.rules);
}

async function allExpressions(): Promise<Target[]> {
  const out: Target[] = [];
  const dash = await dashboard();
  collectExprs(dash.panels, 'dashboard.panels', out);
  for (const v of dash.templating.list) {
    const q: string = typeof v.query === 'string' ? v.query : v.query.query;
    const m = /^label_values\(\s*([^,]+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$/.exec(q);
    expect(m, `templating ${v.name}: ${q}`).not.toBeNull();
    out.push({ where: `dashboard.templating.${v.name}`, expr: m![1]! });
  }
  collectExprs((await grafanaAlerts()).groups, 'grafana.alerts', out);
  for (const r of await prometheusRules()) out.push({ where: `prometheus.${r.alert}`, expr: r.expr });
  return out;
}

/** Grafana variables replaced by values Prometheus accepts, so promtool can parse dashboard queries. */
function substituteGrafanaVariables(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, '5m').replace(/\$contract/g, '.*');
}

describe('the metric-name tokenizer', () => {
  it('finds metric names and ignores functions, keywords, labels, ranges, strings and variables', () => {
    expect(
      metricNamesIn(
        'sum by (verdict) (increase(topology_verdicts_total{contract=~"$contract",verdict!="x y"}[$__rate_interval])) > 0 or vector(0)',
      ),
    ).toEqual(['topology_verdicts_total']);
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket[5m]))) / on (instance) group_left (version) b_info offset 1h',
      ),
    ).toEqual(['a_bucket', 'b_info']);
    expect(metricNamesIn('(1 - up{job="x"}) or absent(up{job="x"})')).toEqual(['up', 'up']);
    expect(metricNamesIn('max without (instance) (topology_bogus_total) * 1e3')).toEqual(['topology_bogus_total']);
  });
});

describe('Grafana provisioning and PromQL', () => {
  it('parses every JSON and YAML file under collector/grafana', async () => {
    const files: string[] = [];
    const walk = async (dir: string) => {
      for (const e of await readdir(dir, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(join(dir, e.name));
        else files.push(join(dir, e.name));
      }
    };
    await walk(GRAFANA);
    expect(files.sort()).toEqual(
      [
        'collector/grafana/dashboards/topology-audit.json',
        'collector/grafana/provisioning/alerting/topology-audit-alerts.yml',
        'collector/grafana/provisioning/dashboards/topology-audit.yml',
        'collector/grafana/provisioning/datasources/topology-audit.yml',
      ].sort(),
    );
    for (const f of files) {
      const text = await readFile(f, 'utf8');
      const doc = f.endsWith('.json') ? JSON.parse(text) : parse(text);
      expect(doc, f).toBeTypeOf('object');
    }
  });

  it('refers only to metric names the registry exposes (dashboard, Grafana alerts, Prometheus rules)', async () => {
    const exposed = exposedSampleNames();
    // Touching every metric must have made every one of them appear (histograms as _bucket/_sum/_count).
    for (const name of Object.values(METRIC_NAMES)) {
      const present = exposed.has(name) || exposed.has(`${name}_bucket`);
      expect(present || name === METRIC_NAMES.seriesRefused, name).toBe(true);
    }
    const exprs = await allExpressions();
    expect(exprs.length).toBeGreaterThan(40);
    const used = new Set<string>();
    for (const { where, expr } of exprs) {
      const names = metricNamesIn(expr);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const n of names) {
        expect(exposed.has(n) || PROMETHEUS_SYNTHETIC.has(n), `${where} refers to ${n}, which is not exposed`).toBe(true);
        used.add(n);
      }
    }
    for (const fixed of ['topology_runs', 'topology_verdicts_total', 'topology_receipts_total', 'topology_otlp_spans_total']) {
      expect(used.has(fixed), fixed).toBe(true);
    }
  });

  it('holds only valid PromQL (promtool parses every expression as a recording rule)', async () => {
    const exprs = await allExpressions();
    const rules = exprs.map((e, i) => ({ record: `check:expr_${i}`, expr: substituteGrafanaVariables(e.expr) }));
    const dir = await mkdtemp(join(tmpdir(), 'topology-promql-'));
    try {
      const file = join(dir, 'exprs.rules.yml');
      await writeFile(file, JSON.stringify({ groups: [{ name: 'exprs', rules }] }));
      const r = runPromtool(['check', 'rules', file]);
      expect(r.output).toContain(`SUCCESS: ${rules.length} rules found`);
      expect(r.code).toBe(0);
      // and promtool does refuse a broken expression
      await writeFile(file, JSON.stringify({ groups: [{ name: 'x', rules: [{ record: 'x:y', expr: 'sum by (a (b)' }] }] }));
      expect(runPromtool(['check', 'rules', file]).code).not.toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('provisions a Prometheus datasource with the uid every query uses', async () => {
    const ds = parse(await readFile(join(GRAFANA, 'provisioning/datasources/topology-audit.yml'), 'utf8'));
    expect(ds.apiVersion).toBe(1);
    expect(ds.datasources).toHaveLength(1);
    expect(ds.datasources[0]).toMatchObject({ type: 'prometheus', uid: DATASOURCE_UID });
    expect(ds.datasources[0].jsonData.exemplarTraceIdDestinations[0].name).toBe('run_id');

    const uids = new Set<string>();
    const visit = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(visit);
      else if (node !== null && typeof node === 'object') {
        const o = node as Record<string, unknown>;
        if (o.type === 'prometheus' && typeof o.uid === 'string') uids.add(o.uid);
        if (typeof o.datasourceUid === 'string' && o.datasourceUid !== '__expr__') uids.add(o.datasourceUid);
        Object.values(o).forEach(visit);
      }
    };
    visit(await dashboard());
    visit(await grafanaAlerts());
    expect([...uids]).toEqual([DATASOURCE_UID]);
  });

  it('provisions the dashboard from a file provider', async () => {
    const p = parse(await readFile(join(GRAFANA, 'provisioning/dashboards/topology-audit.yml'), 'utf8'));
    expect(p.apiVersion).toBe(1);
    expect(p.providers[0]).toMatchObject({ type: 'file', options: { path: expect.any(String) } });
    const d = await dashboard();
    expect(d.uid).toBe('topology-audit');
    const titles = d.panels.map((x: any) => x.title);
    for (const t of ['Runs by verdict', 'Unsafe runs now', 'Receipts by result', 'Rejected ingest requests by reason', 'Store healthy']) {
      expect(titles).toContain(t);
    }
    const ids = d.panels.map((x: any) => x.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('has a Grafana alert rule for each Prometheus alert, with the same labels, for and runbook', async () => {
    const prom = await prometheusRules();
    const groups = (await grafanaAlerts()).groups;
    expect((await grafanaAlerts()).apiVersion).toBe(1);
    const rules = groups.flatMap((g: any) => g.rules);
    expect(rules.map((r: any) => r.title).sort()).toEqual(prom.map((r) => r.alert).sort());
    for (const p of prom) {
      const g = rules.find((r: any) => r.title === p.alert);
      expect(g.labels, p.alert).toEqual(p.labels);
      expect(g.for, p.alert).toBe(p.for ?? '0s');
      expect(g.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
      expect(g.condition).toBe('C');
      const [a, b, c] = g.data;
      expect(a).toMatchObject({ refId: 'A', datasourceUid: DATASOURCE_UID, model: { instant: true } });
      expect(b).toMatchObject({ refId: 'B', datasourceUid: '__expr__', model: { type: 'reduce', expression: 'A' } });
      expect(c).toMatchObject({ refId: 'C', datasourceUid: '__expr__', model: { type: 'threshold', expression: 'B' } });
      expect(c.model.conditions[0].evaluator).toEqual({ type: 'gt', params: [0] });
      expect(metricNamesIn(a.model.expr).sort(), p.alert).toEqual(metricNamesIn(p.expr).sort());
      const promRules = await prometheusRules();
      expect(g.annotations.runbook).toBe(promRules.find((r) => r.alert === p.alert)!.annotations.runbook);
      expect(g.annotations.runbook_url).toBe(promRules.find((r) => r.alert === p.alert)!.annotations.runbook_url);
    }
    expect(new Set(rules.map((r: any) => r.uid)).size).toBe(rules.length);
  });
});
