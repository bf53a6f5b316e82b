import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReceiptFile } from '../src/core/index.js';
import { ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { startPrometheus, waitFor, type RunningPrometheus } from './helpers/prometheus.js';

const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');

/** The drift fixture moved so its latest receipt is 5 s old: `wait` stays waiting, `late` is past its deadline. */
function shiftedNdjson(): string {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 5000 - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r) => JSON.stringify({ ...r, at: move(r.at) })).join('\n') + '\n';
}

describe('a real Prometheus scraping a running topology-audit serve', () => {
  let srv: ServerProcess;
  let prom: RunningPrometheus;
  beforeAll(async () => {
    srv = await startServerProcess();
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: shiftedNdjson(), headers: { 'content-type': 'application/x-ndjson' } });
    expect((await res.json()).accepted).toBe(drift.length);
    prom = await startPrometheus({ scrapeUrl: `${srv.api}/metrics`, rulesFiles: [join(ROOT, 'collector', 'prometheus', 'topology-audit.rules.yml')], extraArgs: ['--enable-feature=exemplar-storage'] });
  }, 60_000);
  afterAll(async () => {
    await prom?.stop();
    await srv?.stop();
  });

  it('shows each verdict in topology_runs and fires the unsafe and false-completion alerts', async () => {
    const byVerdict = await waitFor(
      async () => {
        const data = await prom.query('sum by (verdict) (topology_runs{contract="research-publish"})');
        const m = new Map<string, number>(data.result.map((r: any) => [r.metric.verdict, Number(r.value[1])]));
        return m.get('healthy') === 1 && m.get('forbidden_edge') === 1 ? m : undefined;
      },
      { timeoutMs: 30_000 },
    );
    for (const v of ['healthy', 'working', 'waiting', 'incomplete', 'stale_contract', 'forbidden_edge', 'unknown_agent', 'ambiguous_route', 'false_complete']) {
      expect(byVerdict.get(v), v).toBe(1);
    }
    expect(byVerdict.get('uncertain')).toBe(0);
    const firing = await waitFor(
      async () => {
        const alerts = (await prom.alerts()).filter((a: any) => a.state === 'firing');
        const names = new Set<string>(alerts.map((a: any) => a.labels.alertname));
        const want = ['TopologyStaleContract', 'TopologyUnknownAgent', 'TopologyForbiddenEdge', 'TopologyAmbiguousRoute', 'TopologyFalseComplete', 'TopologyIncompleteRuns'];
        return want.every((w) => names.has(w)) ? alerts : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const forbidden = firing.find((a: any) => a.labels.alertname === 'TopologyForbiddenEdge');
    expect(forbidden.labels.contract).toBe('research-publish');
    expect(forbidden.labels.severity).toBe('critical');
    expect(forbidden.annotations.description).toContain('research-publish');
    // healthy, working and waiting runs fire nothing; no series carries a run id.
    for (const a of firing) expect(JSON.stringify(a.labels)).not.toMatch(/drift-/);
    const series = await prom.api('/api/v1/series?match[]=' + encodeURIComponent('{__name__=~"topology_.*"}'));
    expect(JSON.stringify(series)).not.toMatch(/drift-/);
  });
});

/**
 * The alert lifecycle on a real Prometheus: a new bad verdict goes pending -> firing -> resolved by itself when the
 * auditor's alert window passes (while topology_runs still counts the run), and an acknowledged run's alert resolves
 * at once. The shipped rules are used with one change: `for: 0s` becomes `for: 3s`, so the pending state is visible.
 */
describe('alert lifecycle on a real Prometheus: pending -> firing -> resolved', () => {
  let srv: ServerProcess;
  let prom: RunningPrometheus;
  const WINDOW_S = 20;
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--alert-window', `${WINDOW_S}s`] });
    const rules = readFileSync(join(ROOT, 'collector', 'prometheus', 'topology-audit.rules.yml'), 'utf8').replaceAll('for: 0s', 'for: 3s');
    expect(rules).toContain('for: 3s');
    const dir = tempDir('ta-rules-');
    writeFileSync(join(dir, 'rules.yml'), rules);
    prom = await startPrometheus({ scrapeUrl: `${srv.api}/metrics`, rulesFiles: [join(dir, 'rules.yml')] });
    // Wait for the first scrape before any bad verdict exists, so the whole lifecycle is observed.
    await waitFor(async () => (await prom.query('up{job="topology-audit"}')).result[0]?.value[1] === '1', { timeoutMs: 30_000, what: 'first scrape' });
  }, 90_000);
  afterAll(async () => {
    await prom?.stop();
    await srv?.stop();
  });

  it('fires on a new forbidden_edge, resolves when the window passes; an acknowledged false_complete resolves at once', async () => {
    const lines = shiftedNdjson().split('\n').filter((l) => /"run":"drift-(direct-route|premature)"/.test(l));
    const posted = Date.now();
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: lines.join('\n') + '\n', headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    const seen: Record<string, string[]> = { TopologyForbiddenEdge: [], TopologyFalseComplete: [] };
    const note = async () => {
      const alerts = await prom.alerts();
      for (const name of Object.keys(seen)) {
        const a = alerts.find((x: any) => x.labels.alertname === name);
        const state = a ? a.state : 'inactive';
        if (seen[name].at(-1) !== state) seen[name].push(state);
      }
    };
    // Until both fire.
    await waitFor(async () => (await note(), seen.TopologyForbiddenEdge.at(-1) === 'firing' && seen.TopologyFalseComplete.at(-1) === 'firing'), { timeoutMs: 30_000, intervalMs: 200, what: 'both alerts firing' });
    // Acknowledge the false-complete run with the CLI: its alert resolves well before the window ends.
    const ack = await runCli(['ack', 'drift-premature', '--server', srv.api, '--by', 'oncall']);
    expect(ack.code, ack.stderr).toBe(0);
    expect(ack.stdout).toContain('drift-premature (false_complete): acknowledged by oncall');
    const ackedAt = Date.now();
    await waitFor(async () => (await note(), seen.TopologyFalseComplete.at(-1) === 'inactive'), { timeoutMs: 15_000, intervalMs: 200, what: 'acked alert resolved' });
    expect(Date.now() - ackedAt).toBeLessThan(WINDOW_S * 1000);
    // The forbidden edge resolves on its own once the alert window passes.
    await waitFor(async () => (await note(), seen.TopologyForbiddenEdge.at(-1) === 'inactive'), { timeoutMs: WINDOW_S * 1000 + 30_000, intervalMs: 250, what: 'forbidden_edge alert resolved' });
    expect(Date.now() - posted).toBeGreaterThanOrEqual(WINDOW_S * 1000);
    expect(seen.TopologyForbiddenEdge).toEqual(['inactive', 'pending', 'firing', 'inactive']);
    expect(seen.TopologyFalseComplete.slice(-2)).toEqual(['firing', 'inactive']);
    // The run is still forbidden_edge (topology_runs keeps it until retention); only the alerting series dropped it.
    const runs = await prom.query('sum(topology_runs{verdict="forbidden_edge"})');
    expect(Number(runs.result[0].value[1])).toBe(1);
    const alerting = await prom.query('sum(topology_alerting_runs{verdict="forbidden_edge"})');
    expect(Number(alerting.result[0].value[1])).toBe(0);
    // Resolved alerts are gone from Prometheus' active list.
    expect((await prom.alerts()).filter((a: any) => a.labels.alertname === 'TopologyForbiddenEdge')).toEqual([]);
  }, 120_000);
});
