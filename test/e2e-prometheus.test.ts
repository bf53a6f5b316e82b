import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReceiptFile } from '../src/core/index.js';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
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
