/**
 * A real Prometheus (/usr/bin/prometheus) scrapes a tiny HTTP server and evaluates the shipped alert rules.
 * The unsafe-topology rules have `for: 0s`, so an alert fires at the first evaluation after the first scrape
 * (scrape and evaluation run every second here).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { contentTypeFor, createAuditMetrics } from '../src/metrics/audit-metrics.js';
import { startPrometheus, waitFor, type RunningPrometheus } from './helpers/prometheus.js';

const RULES = 'collector/prometheus/topology-audit.rules.yml';

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/metrics` };
}

function firing(alerts: any[], name: string): any[] {
  return alerts.filter((a) => a.labels.alertname === name && a.state === 'firing');
}

let prometheus: RunningPrometheus | undefined;
let server: Server | undefined;

afterEach(async () => {
  await prometheus?.stop();
  prometheus = undefined;
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

describe('Prometheus with the shipped rules', () => {
  it('fires TopologyForbiddenEdge from a static exposition', { timeout: 60_000 }, async () => {
    const body = [
      '# HELP topology_alerting_runs Runs that entered an alerting verdict within the alert window and are not acknowledged.',
      '# TYPE topology_alerting_runs gauge',
      'topology_alerting_runs{contract="c",verdict="forbidden_edge"} 1',
      '',
    ].join('\n');
    const s = await serve((req, res) => {
      res.writeHead(req.url === '/metrics' ? 200 : 404, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(req.url === '/metrics' ? body : '');
    });
    server = s.server;
    prometheus = await startPrometheus({ scrapeUrl: s.url, rulesFiles: [RULES], evalInterval: '1s' });

    const alerts = await waitFor(
      async () => {
        const all = await prometheus!.alerts();
        return firing(all, 'TopologyForbiddenEdge').length > 0 ? all : undefined;
      },
      { what: 'TopologyForbiddenEdge to fire' },
    );
    const [alert] = firing(alerts, 'TopologyForbiddenEdge');
    expect(alert.labels).toEqual({
      alertname: 'TopologyForbiddenEdge',
      contract: 'c',
      verdict: 'forbidden_edge',
      severity: 'critical',
      category: 'unsafe_topology',
    });
    expect(alert.annotations.description).toContain('Contract c: runs are in verdict forbidden_edge');
    expect(alert.annotations.runbook).toMatch(/^Contain the route before retrying work/);
    // Nothing else fires for this exposition.
    expect(alerts.filter((a) => a.state === 'firing').map((a) => a.labels.alertname)).toEqual(['TopologyForbiddenEdge']);
  });

  it(
    'scrapes the registry as OpenMetrics, keeps the run id exemplar, and resolves when runs turn healthy',
    { timeout: 60_000 },
    async () => {
      const metrics = createAuditMetrics({ version: '0.1.0-test' });
      metrics.setRunsGauge([
        { contract: 'research-publish', version: '3', verdict: 'forbidden_edge', runs: 1 },
        { contract: 'research-publish', version: '3', verdict: 'working', runs: 4 },
      ]);
      metrics.verdictEntered('research-publish', 'forbidden_edge', 'run-e2e-1');
      metrics.setAlertingGauges(['research-publish'], [{ contract: 'research-publish', verdict: 'forbidden_edge', count: 1 }], []);
      const served: string[] = [];
      const s = await serve((req, res) => {
        const { format, contentType } = contentTypeFor(req.headers.accept);
        served.push(format);
        res.writeHead(200, { 'content-type': contentType });
        res.end(metrics.render(format));
      });
      server = s.server;
      prometheus = await startPrometheus({
        scrapeUrl: s.url,
        rulesFiles: [RULES],
        evalInterval: '1s',
        extraArgs: ['--enable-feature=exemplar-storage'],
      });

      await waitFor(async () => firing(await prometheus!.alerts(), 'TopologyForbiddenEdge').length === 1, {
        what: 'TopologyForbiddenEdge to fire',
      });
      expect(served[0]).toBe('openmetrics');

      const targets = await prometheus.api('/api/v1/targets');
      expect(targets.activeTargets[0]).toMatchObject({ health: 'up', lastError: '' });
      const info = await prometheus.query('topology_build_info');
      expect(info.result[0].metric.version).toBe('0.1.0-test');
      const bucket = await prometheus.query('topology_store_commit_duration_seconds_bucket{le="1.0"}');
      expect(bucket.result).toHaveLength(1);

      const now = Date.now() / 1000;
      const exemplars = await prometheus.api(
        `/api/v1/query_exemplars?query=topology_verdicts_total&start=${now - 600}&end=${now + 60}`,
      );
      expect(exemplars[0].seriesLabels).toMatchObject({ contract: 'research-publish', verdict: 'forbidden_edge' });
      expect(exemplars[0].exemplars[0].labels).toEqual({ run_id: 'run-e2e-1' });
      // The run id is an exemplar only: no series carries it as a label.
      const series = await prometheus.api('/api/v1/series?match[]={job="topology-audit"}');
      expect(JSON.stringify(series)).not.toContain('run-e2e-1');

      // The run is contained and re-run: every run is healthy or working now; nothing may fire.
      metrics.setRunsGauge([
        { contract: 'research-publish', version: '3', verdict: 'healthy', runs: 1 },
        { contract: 'research-publish', version: '3', verdict: 'working', runs: 4 },
      ]);
      metrics.verdictEntered('research-publish', 'healthy', 'run-e2e-1');
      metrics.setAlertingGauges(['research-publish'], [], []);
      await waitFor(
        async () => {
          const all = await prometheus!.alerts();
          return all.every((a) => a.state !== 'firing') ? true : undefined;
        },
        { what: 'all alerts to resolve' },
      );
      const healthy = await prometheus.query('topology_runs{verdict="healthy"}');
      expect(healthy.result[0].value[1]).toBe('1');
    },
  );
});
