/**
 * Per-run alerts on a real Alertmanager (Debian prometheus-alertmanager 0.25, started here on loopback with the
 * shipped collector/alertmanager/alertmanager.yml, its webhooks pointed at a receiver in this test and its group
 * timers shortened): a forbidden run is an alert with its run label within 2 s, ten forbidden runs of one contract are
 * one notification, an acknowledgement resolves the alert, a silence shows on the run, and with Alertmanager stopped
 * for 30 s and started again every alert that should fire is back within one resend interval, none lost.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ROOT, getJson, runCli, startServerProcess, type ServerProcess } from './helpers/server.js';
import { forbiddenRun, startAlertmanager, startWebhook, runAmtool, testConfig, type RunningAlertmanager, type Webhook } from './helpers/alertmanager.js';
import { waitFor } from './helpers/prometheus.js';
import { chromium } from 'playwright-core';

const SHIPPED = join(ROOT, 'collector', 'alertmanager', 'alertmanager.yml');
const RESEND_S = 4;
const EXTERNAL = 'http://auditor.test:9464';



describe('per-run alerts on a real Alertmanager', () => {
  let am: RunningAlertmanager;
  let hook: Webhook;
  let srv: ServerProcess;
  const post = async (body: string) => {
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    return res.json();
  };
  /** Alerts Alertmanager holds (active or suppressed), by run label (not the inhibition test's own TopologyUncertainRuns). */
  const amAlerts = async (): Promise<Map<string, any>> =>
    new Map(((await am.api('/api/v2/alerts')) as any[]).filter((a) => a.labels.run && a.labels.alertname !== 'TopologyUncertainRuns').map((a) => [a.labels.run, a]));
  const metric = async (name: string) => {
    const text = await (await fetch(`${srv.api}/metrics`)).text();
    return Number(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };

  beforeAll(async () => {
    hook = await startWebhook();
    am = await startAlertmanager(testConfig(hook.url));
    srv = await startServerProcess({ args: ['--alertmanager-url', am.url, '--external-url', EXTERNAL, '--alertmanager-resend', `${RESEND_S}s`] });
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
    await am?.dispose();
    await hook?.close();
  });

  it('amtool check-config passes on the shipped config', () => {
    const r = runAmtool(['check-config', SHIPPED]);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain('SUCCESS');
    expect(r.output).toMatch(/1 inhibit rules/);
  });

  it('a forbidden run is an active alert with its run label, evidence and links (the delay is reported)', async () => {
    await post(forbiddenRun('am-forbidden-1'));
    const posted = Date.now();
    const alert = await waitFor(async () => (await amAlerts()).get('am-forbidden-1'), { timeoutMs: 20_000, intervalMs: 50, what: 'the run alert in Alertmanager' });
    // The 2 s is a figure, measured (bench/alertmanager-latency.mjs, docs/alerting.md), not a budget asserted on a
    // shared machine; here: when Alertmanager received it (its updatedAt), after the receipts were accepted.
    console.log(`forbidden run -> active alert in Alertmanager: ${Date.parse(alert.updatedAt) - posted} ms after the receipts were accepted`);
    expect(alert.status.state).toBe('active');
    expect(alert.labels).toEqual({
      alertname: 'TopologyForbiddenEdge',
      severity: 'critical',
      category: 'unsafe_topology',
      contract: 'research-publish',
      version: '3',
      verdict: 'forbidden_edge',
      run: 'am-forbidden-1',
      edge: 'researcher -> publisher : delegate',
    });
    expect(alert.annotations.run_url).toBe(`${EXTERNAL}/runs/am-forbidden-1`);
    expect(alert.annotations.runbook_url).toBe(`${EXTERNAL}/runbooks#TopologyForbiddenEdge`);
    expect(alert.annotations.findings.split(',')).toContain('forbidden_edge');
    expect(alert.annotations.summary).toMatch(/researcher -> publisher/);
    // Routed by the shipped config: research-publish, critical -> the research team's paging receiver.
    expect(alert.receivers.map((r: any) => r.name)).toEqual(['team-research-page']);
    // The runbook page the alert links to is served by the auditor.
    const page = await (await fetch(`${srv.api}/runbooks`)).text();
    expect(page).toContain('id="TopologyForbiddenEdge"');
  });

  it('ten forbidden runs of one contract reach the webhook as one grouped notification', async () => {
    const runs = Array.from({ length: 10 }, (_, i) => `am-group-${i}`);
    await post(runs.map(forbiddenRun).join(''));
    const first = await waitFor(async () => hook.notifications.find((n) => n.body.alerts?.some((a: any) => runs.includes(a.labels.run))), { timeoutMs: 20_000, what: 'a notification with the runs' });
    expect(first.path).toBe('/topology-audit/research-page');
    expect(first.body.groupLabels).toEqual({ alertname: 'TopologyForbiddenEdge', contract: 'research-publish' });
    const inIt = new Set(first.body.alerts.filter((a: any) => a.status === 'firing').map((a: any) => a.labels.run));
    for (const r of runs) expect(inIt.has(r), r).toBe(true);
    // No other notification split them: every notification naming one of them is a notification of that one group.
    for (const n of hook.notifications.filter((x) => x.body.alerts?.some((a: any) => runs.includes(a.labels.run)))) expect(n.body.groupKey).toBe(first.body.groupKey);
  });

  it("the shipped inhibition: a run's TopologyForbiddenEdge holds back that run's TopologyUncertainRuns, not another run's", async () => {
    const now = Date.now();
    const uncertain = (run: string) => ({
      labels: { alertname: 'TopologyUncertainRuns', severity: 'info', contract: 'research-publish', version: '3', verdict: 'uncertain', run },
      annotations: {},
      startsAt: new Date(now).toISOString(),
      endsAt: new Date(now + 60_000).toISOString(),
    });
    const res = await fetch(`${am.url}/api/v2/alerts`, { method: 'POST', body: JSON.stringify([uncertain('am-group-2'), uncertain('am-uncertain-only')]), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    const source = (await amAlerts()).get('am-group-2');
    expect(source.labels.alertname).toBe('TopologyForbiddenEdge');
    const held = await waitFor(
      async () => {
        const list = ((await am.api('/api/v2/alerts')) as any[]).filter((a) => a.labels.alertname === 'TopologyUncertainRuns');
        const byRun = new Map(list.map((a) => [a.labels.run, a]));
        return byRun.get('am-group-2')?.status.state === 'suppressed' && byRun.get('am-uncertain-only') ? byRun : undefined;
      },
      { what: "am-group-2's TopologyUncertainRuns inhibited" },
    );
    expect(held.get('am-group-2').status.inhibitedBy).toEqual([source.fingerprint]);
    expect(held.get('am-uncertain-only').status).toMatchObject({ state: 'active', inhibitedBy: [] });
  });

  it('ack resolves the run alert: the webhook receives it resolved', async () => {
    const ack = await runCli(['ack', 'am-forbidden-1', '--server', srv.api, '--by', 'oncall']);
    expect(ack.code, ack.stderr).toBe(0);
    const resolved = await waitFor(
      async () => hook.notifications.flatMap((n) => n.body.alerts ?? []).find((a: any) => a.labels.run === 'am-forbidden-1' && a.status === 'resolved'),
      { timeoutMs: 20_000, what: 'the resolved notification' },
    );
    expect(Date.parse(resolved.endsAt)).toBeLessThanOrEqual(Date.now());
    await waitFor(async () => !(await amAlerts()).get('am-forbidden-1') || (await amAlerts()).get('am-forbidden-1').status.state !== 'active' || undefined, { what: 'no active alert' });
  });

  it('an Alertmanager silence on one run shows on its run page and API; ack --silence creates one', async () => {
    const now = Date.now();
    await am.post('/api/v2/silences', {
      matchers: [{ name: 'run', value: 'am-group-1', isRegex: false, isEqual: true }],
      startsAt: new Date(now).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      createdBy: 'sre-jane',
      comment: 'known: the publisher shortcut is being removed',
    });
    const api = await waitFor(async () => {
      const r = await getJson(`${srv.api}/api/v1/runs/am-group-1`);
      return r.body.silence ? r.body : undefined;
    }, { what: 'the silence on the API' });
    expect(api.silence).toMatchObject({ createdBy: 'sre-jane', comment: 'known: the publisher shortcut is being removed', matchers: ['run="am-group-1"'] });
    expect(Math.abs(Date.parse(api.silence.endsAt) - (now + 3_600_000))).toBeLessThan(1000);
    const data = await getJson(`${srv.api}/ui/api/runs/am-group-1`);
    expect(data.body.silence.createdBy).toBe('sre-jane');
    // The run page (Debian chromium) shows who silenced it, until when, and why; a neighbour's page shows no silence.
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${srv.api}/runs/am-group-1`);
      const card = page.locator('section.run-silence');
      await card.waitFor({ timeout: 20_000 });
      expect(await card.locator('[data-field="createdBy"]').textContent()).toBe('sre-jane');
      expect(await card.locator('[data-field="comment"]').textContent()).toBe('known: the publisher shortcut is being removed');
      expect(await card.locator('[data-field="endsAt"] time').getAttribute('datetime')).toBe(api.silence.endsAt);
      await page.goto(`${srv.api}/runs/am-group-2`);
      await page.locator('[data-verdict="forbidden_edge"]').waitFor({ timeout: 20_000 });
      expect(await page.locator('section.run-silence').count()).toBe(0);
    } finally {
      await browser.close();
    }
    // Another run of the same group is not silenced.
    expect((await getJson(`${srv.api}/api/v1/runs/am-group-2`)).body.silence).toBeNull();
    await waitFor(async () => (await amAlerts()).get('am-group-1')?.status.state === 'suppressed', { what: 'Alertmanager suppresses the silenced alert' });

    const ack = await runCli(['ack', 'am-group-0', '--server', srv.api, '--by', 'oncall', '--reason', 'route contained, OPS-12', '--silence', '2h']);
    expect(ack.code, ack.stderr).toBe(0);
    expect(ack.stdout).toMatch(/silenced in Alertmanager until/);
    const silences = (await am.api('/api/v2/silences')) as any[];
    const mine = silences.find((s) => s.matchers.some((m: any) => m.name === 'run' && m.value === 'am-group-0'));
    expect(mine).toMatchObject({ createdBy: 'oncall', status: { state: 'active' } });
    // The ack's reason is the silence's comment too (Alertmanager's UI shows it beside the silence).
    expect(mine.comment).toBe('acknowledged with topology-audit ack (verdict forbidden_edge): route contained, OPS-12');
    expect((await getJson(`${srv.api}/api/v1/runs/am-group-0`)).body.silence.createdBy).toBe('oncall');
    // Without --by the server refuses the silence (Alertmanager records its author).
    const noBy = await fetch(`${srv.api}/api/v1/runs/am-group-2/ack?silence=1h`, { method: 'POST' });
    expect(noBy.status).toBe(400);
  }, 90_000);

  it('Alertmanager stopped for 30 s and started again: every alert that should fire is active again within one resend interval, none lost', async () => {
    // The previous test's acknowledgement (am-group-0) is resolved in Alertmanager before it stops, so the outage's
    // queue holds exactly what the outage itself brings (a resolution still in flight would be queued again).
    await waitFor(async () => !(await amAlerts()).has('am-group-0') || undefined, { what: 'the acknowledged am-group-0 resolved in Alertmanager' });
    await waitFor(async () => (await metric('topology_alertmanager_queue_length')) === 0 || undefined, { what: 'the queue drained before the outage' });
    await am.stop();
    // While it is down: three more forbidden runs, and one acknowledgement (its alert must end resolved).
    await post(['am-down-0', 'am-down-1', 'am-down-2'].map(forbiddenRun).join(''));
    expect((await runCli(['ack', 'am-group-3', '--server', srv.api, '--by', 'oncall'])).code).toBe(0);
    await waitFor(async () => (await metric('topology_alertmanager_queue_length')) >= 4 || undefined, { what: 'alerts queued while Alertmanager is down' });
    await new Promise((r) => setTimeout(r, 30_000)); // the outage itself
    const shouldFire = ['am-down-0', 'am-down-1', 'am-down-2', ...[1, 2, 4, 5, 6, 7, 8, 9].map((i) => `am-group-${i}`)];
    // Every alert that should fire is in the queue (the resends during the outage queued each firing alert once, the
    // acknowledgement its resolution), so they come back with the queue's first retry after the restart, not a later
    // resend: retries come at most a quarter of a resend interval apart (the notifier test asserts the backoff).
    let queued = -1;
    await waitFor(async () => (queued = await metric('topology_alertmanager_queue_length')) === shouldFire.length + 1 || undefined, { what: 'each firing alert and the resolution queued once' }).catch((e: Error) => {
      throw new Error(`${e.message}: the queue holds ${queued}, expected ${shouldFire.length + 1}`);
    });
    expect(await metric('topology_alertmanager_alerts_sent_total{result="failure"}')).toBeGreaterThan(0);
    // A failure log line names the Alertmanager and the reason, never an alert's content.
    const failures = srv.stderr().split('\n').filter((l) => l.includes('"alertmanager_send_failed"'));
    expect(failures.length).toBeGreaterThan(0);
    // While it is down: ECONNREFUSED (a send caught by the shutdown itself may end ECONNRESET); a code, nothing else.
    const parsed = failures.map((l) => JSON.parse(l));
    expect(parsed.some((f) => f.reason === 'ECONNREFUSED')).toBe(true);
    for (const f of parsed) expect(f).toMatchObject({ alertmanager: am.url, reason: expect.stringMatching(/^(E[A-Z]+|HTTP \d+|timeout after \d+ ms)$/) });
    for (const l of failures) expect(l).not.toMatch(/am-|research|forbidden|publisher/);

    await am.start(); // empty of alerts: Alertmanager keeps them in memory only
    const back = Date.now();
    const got = await waitFor(
      async () => {
        const a = await amAlerts();
        return shouldFire.every((r) => a.has(r)) ? a : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: 'every firing run alert back in Alertmanager' },
    );
    const elapsed = Date.now() - back; // reported below (a figure, not a budget: the machine is shared)
    for (const r of shouldFire) expect(Date.parse(got.get(r).endsAt), r).toBeGreaterThan(Date.now());
    // Acknowledged runs are not firing (am-group-3's resolution was queued during the outage and delivered).
    for (const r of ['am-forbidden-1', 'am-group-0', 'am-group-3']) expect(got.get(r)?.status.state === 'active', r).toBe(false);
    expect(got.get('am-group-1').status.state).toBe('suppressed'); // the silence survived the restart
    await waitFor(async () => (await metric('topology_alertmanager_queue_length')) === 0 || undefined, { what: 'queue drained' });
    expect(await metric('topology_alertmanager_alerts_dropped_total')).toBe(0);
    console.log(`alertmanager back: every firing run alert active again ${elapsed} ms after it was ready (resend ${RESEND_S}s)`);
  }, 120_000);
});
