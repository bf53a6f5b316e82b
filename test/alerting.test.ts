/**
 * The per-run alerting output without Alertmanager: the alert as a pure function of a run's verdict (real verdicts
 * of the drift fixture), what is sent when (RunAlerts), the bounded queue with retries against a real HTTP endpoint
 * that refuses and then accepts, silence matching, and the configuration's validation.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { classify, groupByRun, parseReceiptFile, type Receipt, type RunVerdict } from '../src/core/index.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { STALLED_RULE, VERDICT_RULES, alertKey, runAlert, type Alert, type AlertingRun } from '../src/alerting/alert.js';
import { RunAlerts } from '../src/alerting/run-alerts.js';
import { Notifier, dropOldest } from '../src/alerting/notifier.js';
import { AlertmanagerClient } from '../src/alerting/client.js';
import { silenceMatches } from '../src/alerting/silences.js';
import { alertingConfig } from '../src/alerting/config.js';
import { ROOT } from './helpers/server.js';
import { until } from './helpers/wait.js';

const registry = loadContractDir(join(ROOT, 'contracts'));
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
const runs = groupByRun(drift);
const NOW = Math.max(...drift.map((r) => Date.parse(r.at))) + 60_000;
const verdictOf = (run: string): RunVerdict => classify(drift.filter((r: Receipt) => r.run === run), NOW, registry);
const links = { externalUrl: 'https://audit.example', runbookUrl: 'https://audit.example/runbooks' };
const alerting = (v: RunVerdict, over: Partial<AlertingRun> = {}): AlertingRun => ({ verdict: v, enteredAt: NOW - 5000, inWindow: true, stalledAt: null, lastAt: NOW - 6000, ...over });

describe('the alert of a run', () => {
  it('uses the alert names, severities and categories of the shipped Prometheus rules', () => {
    const rules = parse(readFileSync(join(ROOT, 'collector', 'prometheus', 'topology-audit.rules.yml'), 'utf8'));
    const byName = new Map<string, any>(rules.groups.flatMap((g: any) => g.rules).map((r: any) => [r.alert, r]));
    for (const [verdict, rule] of Object.entries(VERDICT_RULES)) {
      const shipped = byName.get(rule!.alertname);
      expect(shipped, rule!.alertname).toBeDefined();
      expect(shipped.expr).toContain(`verdict="${verdict}"`);
      expect(shipped.labels.severity).toBe(rule!.severity);
      expect(shipped.labels.category, rule!.alertname).toBe(rule!.category);
    }
    expect(byName.get(STALLED_RULE.alertname).labels.severity).toBe(STALLED_RULE.severity);
    expect(byName.get(STALLED_RULE.alertname).labels.category).toBe(STALLED_RULE.category);
    expect(byName.get(STALLED_RULE.alertname).expr).toContain('topology_stalled_runs');
  });

  it('a settled forbidden run within its window fires with its labels, evidence and links', () => {
    const v = verdictOf('drift-direct-route');
    expect(v.verdict).toBe('forbidden_edge');
    const a = runAlert(alerting(v), links, NOW, 240_000)!;
    expect(a.labels).toEqual({ alertname: 'TopologyForbiddenEdge', severity: 'critical', category: 'unsafe_topology', contract: 'research-publish', version: '3', verdict: 'forbidden_edge', run: 'drift-direct-route', edge: 'researcher -> publisher : delegate' });
    expect(a.annotations).toMatchObject({ run_url: 'https://audit.example/runs/drift-direct-route', runbook_url: 'https://audit.example/runbooks#TopologyForbiddenEdge' });
    expect(a.annotations.summary).toBe(v.findings.find((f) => f.verdict === 'forbidden_edge')!.message);
    expect(a.annotations.findings.split(',')).toContain('forbidden_edge');
    expect(a.endsAt).toBe(new Date(NOW + 240_000).toISOString());
    expect(a.startsAt).toBe(new Date(NOW - 5000).toISOString()); // no `since` on this finding: when the verdict was entered
    // Outside the window (or acknowledged) it does not fire.
    expect(runAlert(alerting(v, { inWindow: false }), links, NOW, 240_000)).toBeNull();
  });

  it("startsAt is the finding's instant when it has one; every alerting verdict of the fixture maps to its rule", () => {
    let withSince = 0;
    for (const run of runs.keys()) {
      const v = verdictOf(run);
      const a = runAlert(alerting(v), links, NOW, 1000);
      if (!v.settled || !VERDICT_RULES[v.verdict]) {
        expect(a, `${run} ${v.verdict}`).toBeNull();
        continue;
      }
      expect(a!.labels.alertname).toBe(VERDICT_RULES[v.verdict]!.alertname);
      const since = v.findings.find((f) => f.verdict === v.verdict)?.since;
      if (since) {
        withSince++;
        expect(a!.startsAt).toBe(new Date(Date.parse(since)).toISOString());
      }
    }
    expect(withSince).toBeGreaterThan(0);
  });

  it('an unsettled run fires only once stalled, as TopologyRunsStalled from the moment it stalled', () => {
    const v = verdictOf('drift-wait');
    expect(v.settled).toBe(false);
    expect(runAlert(alerting(v), links, NOW, 1000)).toBeNull();
    const a = runAlert(alerting(v, { stalledAt: NOW - 1000 }), links, NOW, 1000)!;
    expect(a.labels).toMatchObject({ alertname: 'TopologyRunsStalled', severity: 'warning', run: 'drift-wait', verdict: v.verdict });
    expect(a.startsAt).toBe(new Date(NOW - 1000).toISOString());
  });
});

describe('what is sent when (RunAlerts)', () => {
  it('sends new alerts at once, re-sends firing ones each interval, resolves ended ones once', () => {
    const sent: Alert[][] = [];
    const ra = new RunAlerts(links, 60_000, (a) => sent.push(a));
    const bad = alerting(verdictOf('drift-direct-route'));
    const other = alerting(verdictOf('drift-premature'));
    ra.update(NOW, [bad]);
    expect(sent.length).toBe(1);
    ra.update(NOW + 1000, [bad]); // nothing changed, no resend due
    expect(sent.length).toBe(1);
    ra.update(NOW + 2000, [bad, other]); // a new run: only its alert
    expect(sent[1].map((a) => a.labels.run)).toEqual(['drift-premature']);
    ra.update(NOW + 60_000, [bad, other]); // the resend: both, valid four intervals on
    expect(sent[2].map((a) => a.labels.run).sort()).toEqual(['drift-direct-route', 'drift-premature']);
    expect(sent[2][0].endsAt).toBe(new Date(NOW + 60_000 + 240_000).toISOString());
    ra.update(NOW + 61_000, [other]); // acknowledged, healed or out of the window: resolved now
    expect(sent[3]).toHaveLength(1);
    expect(sent[3][0]).toMatchObject({ labels: { run: 'drift-direct-route' }, endsAt: new Date(NOW + 61_000).toISOString() });
    ra.update(NOW + 62_000, [other]);
    expect(sent.length).toBe(4); // resolved once only
    // A run this instance no longer holds (its cluster partition moved on) is forgotten, not resolved: no flap.
    ra.update(NOW + 63_000, [], (run) => run !== 'drift-premature');
    expect(sent.length).toBe(4);
    ra.update(NOW + 64_000, [other]);
    expect(sent[4].map((a) => Date.parse(a.endsAt) > NOW + 64_000)).toEqual([true]); // held again: fires again
    // Stalled -> forbidden: the stall alert resolves, the verdict alert fires.
    const ra2 = new RunAlerts(links, 60_000, (a) => sent.push(a));
    const wait = verdictOf('drift-wait');
    ra2.update(NOW, [alerting(wait, { stalledAt: NOW - 1 })]);
    ra2.update(NOW + 1000, [alerting({ ...bad.verdict, run: 'drift-wait' })]);
    const last = sent.at(-1)!;
    expect(last.map((a) => [a.labels.alertname, Date.parse(a.endsAt) <= NOW + 1000])).toEqual([
      ['TopologyRunsStalled', true],
      ['TopologyForbiddenEdge', false],
    ]);
  });
});

describe('delivery (Notifier) against a real HTTP endpoint', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? (server.closeAllConnections(), server.close(() => r())) : r())));

  it('drops the oldest past its bound, retries while refused, delivers everything queued once accepted', async () => {
    let accept = false;
    const received: Alert[][] = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (!accept) return res.writeHead(503).end();
        received.push(JSON.parse(body));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const url = new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    const client = new AlertmanagerClient(url, { timeoutMs: 5000, tls: { insecureSkipVerify: false } });
    const counts = { success: 0, failure: 0, dropped: 0, queue: 0 };
    const failures: { reason: string; retryInMs: number | null }[] = [];
    const n = new Notifier([client], { queueCapacity: 5, maxBatch: 2, maxBackoffMs: 200, minBackoffMs: 20 }, {
      sent: (r, k) => (counts[r] += k),
      dropped: (k) => (counts.dropped += k),
      queueLength: (k) => (counts.queue = k),
      failed: (_am, reason, _n, retryInMs) => failures.push({ reason, retryInMs }),
    });
    const v = verdictOf('drift-direct-route');
    const alerts = Array.from({ length: 8 }, (_, i) => runAlert(alerting({ ...v, run: `r${i}` }), links, NOW, 1000)!);
    n.enqueue(alerts);
    expect(counts.dropped).toBe(3);
    expect(n.length).toBe(5);
    await until('a few refused attempts', async () => failures.length >= 6);
    expect(failures[0]).toEqual({ reason: 'HTTP 503', retryInMs: 20 });
    expect(failures.slice(0, 6).map((f) => f.retryInMs)).toEqual([20, 40, 80, 160, 200, 200]); // doubling, capped at maxBackoffMs
    // A re-send of a queued alert replaces it (one entry per alert), it does not queue twice.
    n.enqueue([{ ...alerts[7], endsAt: new Date(NOW + 5000).toISOString() }]);
    expect(n.length).toBe(5);
    accept = true;
    await until('the queue drained', async () => n.length === 0);
    const delivered = received.flat();
    expect(delivered.map((a) => a.labels.run)).toEqual(['r3', 'r4', 'r5', 'r6', 'r7']); // the oldest three were dropped
    expect(delivered.find((a) => a.labels.run === 'r7')!.endsAt).toBe(new Date(NOW + 5000).toISOString());
    expect(received.every((b) => b.length <= 2)).toBe(true);
    expect(counts.success).toBe(5);
    expect(counts.failure).toBeGreaterThanOrEqual(3 * 2);
    expect(counts.queue).toBe(0);
    expect(new Set(delivered.map(alertKey)).size).toBe(5);
    n.close();
  });
});

describe('silences and configuration', () => {
  const labels = { alertname: 'TopologyForbiddenEdge', contract: 'research-publish', run: 'run-1' };
  it('matches silences as Alertmanager does (=, !=, =~, !~; anchored; absent label is empty)', () => {
    const m = (name: string, value: string, isRegex = false, isEqual = true) => ({ name, value, isRegex, isEqual });
    expect(silenceMatches({ matchers: [m('run', 'run-1')] }, labels)).toBe(true);
    expect(silenceMatches({ matchers: [m('run', 'run-2')] }, labels)).toBe(false);
    expect(silenceMatches({ matchers: [m('run', 'run-')] }, labels)).toBe(false);
    expect(silenceMatches({ matchers: [m('run', 'run-', true)] }, labels)).toBe(false); // anchored
    expect(silenceMatches({ matchers: [m('run', 'run-.*', true), m('contract', 'research-publish')] }, labels)).toBe(true);
    expect(silenceMatches({ matchers: [m('contract', 'research-publish', false, false)] }, labels)).toBe(false);
    expect(silenceMatches({ matchers: [m('contract', 'other.*', true, false)] }, labels)).toBe(true);
    expect(silenceMatches({ matchers: [m('team', '')] }, labels)).toBe(true);
    expect(silenceMatches({ matchers: [] }, labels)).toBe(false);
  });

  it('validates the configuration with a clear error per setting', () => {
    const ok = alertingConfig({ alertmanagers: ['http://am-1:9093', 'http://am-2:9093/prefix'], externalUrl: 'https://audit.example/' });
    expect(ok).toMatchObject({ externalUrl: 'https://audit.example', runbookUrl: 'https://audit.example/runbooks', resendMs: 60_000, maxBackoffMs: 10_000, queueCapacity: 10_000 });
    expect(alertingConfig({ alertmanagers: ['http://am:9093'], externalUrl: 'http://a', resendMs: 4000 }).maxBackoffMs).toBe(1000);
    const bad = (input: object, msg: RegExp) => expect(() => alertingConfig({ alertmanagers: ['http://am:9093'], externalUrl: 'http://a', ...input })).toThrow(msg);
    bad({ alertmanagers: [] }, /at least one/);
    bad({ alertmanagers: ['ftp://am'] }, /http:\/\/ or https:\/\//);
    bad({ alertmanagers: ['http://u:p@am:9093'] }, /credentials/);
    bad({ alertmanagers: ['http://am:9093', 'http://am:9093/'] }, /twice/);
    bad({ externalUrl: 'not a url' }, /--external-url: not a URL/);
    bad({ resendMs: 10 }, /--alertmanager-resend/);
    bad({ bearerTokenFile: '/t', basicAuthUser: 'u', basicAuthPasswordFile: '/p' }, /exclude/);
    bad({ basicAuthUser: 'u' }, /go together/);
  });
});

describe('serve and ack refuse alerting settings that cannot work', () => {
  it('names the flag at fault and exits 2 (an unreadable secret file too)', async () => {
    const { runCli, tempDir } = await import('./helpers/server.js');
    const serve = (...args: string[]) => runCli(['serve', '--data', tempDir('ta-am-'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', ...args]);
    let r = await serve('--alertmanager-url', 'ftp://am:9093', '--external-url', 'http://a');
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('--alertmanager-url: expected an http:// or https:// URL')]);
    r = await serve('--alertmanager-resend', '30s');
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('the Alertmanager options need --alertmanager-url')]);
    r = await serve('--alertmanager-url', 'http://127.0.0.1:9');
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('needs --external-url')]);
    r = await serve('--alertmanager-url', 'http://127.0.0.1:9', '--external-url', 'http://a', '--alertmanager-resend', 'soon');
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('--alertmanager-resend: "soon" is not a duration')]);
    r = await serve('--alertmanager-url', 'http://127.0.0.1:9', '--external-url', 'http://a', '--alertmanager-bearer-token-file', '/nonexistent/token');
    expect([r.code, r.stderr]).toEqual([2, expect.stringContaining('--alertmanager-bearer-token-file: cannot read /nonexistent/token: ENOENT')]);
    const ack = await runCli(['ack', 'run-1', '--silence', '1h']);
    expect([ack.code, ack.stderr]).toEqual([2, expect.stringContaining('--silence needs --by NAME')]);
  });

  it('drops an overflow of the queue in one walk: the newest alerts stay, in order, each drop counted once (issue 44)', () => {
    const m = new Map(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, i] as const));
    expect(dropOldest(m, 199_900)).toBe(199_900);
    expect([...m.values()]).toEqual(Array.from({ length: 100 }, (_, i) => 199_900 + i));
    expect(dropOldest(m, 0)).toBe(0);
    expect(dropOldest(m, 1_000)).toBe(100);
    expect(m.size).toBe(0);
  });
});
