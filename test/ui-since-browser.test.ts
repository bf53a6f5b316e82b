/**
 * "Since when" in the web view (Chromium, behind tokens): the run list shows absolute start times with dates (UTC,
 * local time on hover), when each run entered its verdict, its alerting / acknowledged state, and filters on that
 * state (kept in the URL); the run page says when the run entered its verdict and dates its timeline. At 480 px the
 * list, the run page and a shadow page with disagreeing runs hold without horizontal page overflow.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { parseReceiptFile } from '../src/core/index.js';
import { ROOT, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

const API_TOKEN = 'api-token-0123456789abcdef';
const DAY = 86_400_000;
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');

describe('the web view answers "since when"', () => {
  let srv: ServerProcess;
  let browser: Browser;
  let shift: number;
  const auth = { authorization: `Bearer ${API_TOKEN}` };
  async function signedIn(width: number): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('form.signin');
    await page.fill('#token', API_TOKEN);
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('tbody tr[data-run]');
    return { context, page };
  }
  const pageOverflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

  beforeAll(async () => {
    const dir = tempDir('ta-since-');
    // A write-scope token named oncall: acknowledging needs write rights, and acts as the token's name (issue 47).
    writeFileSync(join(dir, 'api'), `${API_TOKEN} write oncall\n`);
    const contracts = join(dir, 'contracts');
    mkdirSync(contracts);
    for (const f of ['research-publish.yaml', 'research-publish-v2.yaml']) copyFileSync(join(ROOT, 'contracts', f), join(contracts, f));
    // A candidate that allows the forbidden route: the shadow page has a disagreeing run to lay out.
    const v3 = readFileSync(join(ROOT, 'contracts', 'research-publish.yaml'), 'utf8');
    writeFileSync(join(contracts, 'v4.yaml'), v3.replace(/^version: .*$/m, 'version: "4"\ncandidate: true').replace('allow:\n', 'allow:\n  - researcher -> publisher : delegate\n'));
    srv = await startServerProcess({ contracts, args: ['--api-tokens', join(dir, 'api'), '--shadow', 'research-publish@4'] });
    // The runs took place three days ago: a relative time alone ("3d2h ago") would not say which day.
    const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
    shift = Date.now() - 3 * DAY - latest;
    const move = (t: string) => new Date(Date.parse(t) + shift).toISOString();
    const body = drift.map((r) => JSON.stringify({ ...r, at: move(r.at), ...('deadline' in r && r.deadline ? { deadline: move(r.deadline) } : {}) })).join('\n') + '\n';
    expect((await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } })).status).toBe(200);
    expect((await fetch(`${srv.api}/api/v1/runs/drift-late/ack?by=oncall`, { method: 'POST', headers: auth })).status).toBe(200);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it('the list API carries verdictSince and the alert state, and filters on it', async () => {
    const cookie = { cookie: `topology_audit_token=${API_TOKEN}` };
    const all = await (await fetch(`${srv.api}/ui/api/runs`, { headers: cookie })).json();
    const late = all.runs.find((r: { run: string }) => r.run === 'drift-late');
    expect(late).toMatchObject({ acked: true, alerting: false, silenced: null });
    expect(Date.parse(late.verdictSince)).toBeGreaterThan(Date.parse(late.startedAt));
    expect(all.runs.find((r: { run: string }) => r.run === 'drift-direct-route')).toMatchObject({ acked: false, alerting: true });
    const acked = await (await fetch(`${srv.api}/ui/api/runs?acked=true`, { headers: cookie })).json();
    expect(acked.runs.map((r: { run: string }) => r.run)).toEqual(['drift-late']);
    const alerting = await (await fetch(`${srv.api}/ui/api/runs?alerting=true`, { headers: cookie })).json();
    expect(alerting.runs.map((r: { run: string }) => r.run).sort()).toEqual(all.runs.filter((r: { alerting: boolean }) => r.alerting).map((r: { run: string }) => r.run).sort());
    expect(alerting.runs.length).toBeGreaterThan(0);
    expect((await fetch(`${srv.api}/ui/api/runs?acked=yes`, { headers: cookie })).status).toBe(400);
  });

  it('the run list shows dates (UTC, local on hover), the verdict entered, the state, and filters by state in the URL', async () => {
    const { context, page } = await signedIn(1280);
    const started = drift.filter((r) => r.run === 'drift-direct-route').map((r) => Date.parse(r.at) + shift);
    const day = new Date(Math.min(...started)).toISOString().slice(0, 10);
    const cell = await page.$eval('tr[data-run="drift-direct-route"] td[data-label="Started"] time', (t) => ({ text: t.textContent, title: t.getAttribute('title'), datetime: t.getAttribute('datetime') }));
    expect(cell.text).toContain(`${day} `);
    expect(cell.text).toContain(' UTC');
    expect(cell.title).toContain('(your time)');
    expect(await page.textContent('tr[data-run="drift-direct-route"] td[data-label="Verdict"] .since')).toMatch(/^since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    expect(await page.textContent('tr[data-run="drift-late"] td[data-label="State"]')).toBe('acknowledged');
    expect(await page.textContent('tr[data-run="drift-direct-route"] td[data-label="State"]')).toBe('alerting');
    await page.selectOption('#filter-state', 'acked');
    await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-run]').length === 1);
    expect(await page.$eval('tbody tr[data-run]', (tr) => tr.getAttribute('data-run'))).toBe('drift-late');
    expect(new URL(page.url()).searchParams.get('state')).toBe('acked');
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-run]').length === 1);
    await page.selectOption('#filter-state', 'alerting');
    await page.waitForFunction(() => ![...document.querySelectorAll('tbody tr[data-run]')].some((tr) => tr.getAttribute('data-run') === 'drift-late'));
    expect(await page.$$eval('td[data-label="State"]', (tds) => tds.every((td) => td.textContent === 'alerting'))).toBe(true);
    await context.close();
  }, 60_000);

  it('the run page says when the run entered its verdict and dates its timeline', async () => {
    const { context, page } = await signedIn(1280);
    await page.goto(`${srv.api}/runs/drift-direct-route`);
    await page.waitForSelector('#verdict-since');
    expect(await page.textContent('#verdict-since')).toMatch(/^In forbidden_edge since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    expect(await page.getAttribute('.alert-state', 'data-alerting')).toBe('true');
    const first = drift.filter((r) => r.run === 'drift-direct-route').map((r) => Date.parse(r.at) + shift).sort((a, b) => a - b)[0];
    expect(await page.textContent('#timeline li:first-child .t .d')).toBe(new Date(first).toISOString().slice(0, 10));
    await context.close();
  }, 60_000);

  it('at 480 px the list, the run page and a shadow page with a disagreeing run do not overflow', async () => {
    const { context, page } = await signedIn(480);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.goto(`${srv.api}/runs/drift-direct-route`);
    await page.waitForSelector('svg.topology-graph g.edge');
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.goto(`${srv.api}/shadow`);
    await page.waitForSelector('table.shadow-runs tr[data-run="drift-direct-route"]');
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await context.close();
  }, 60_000);
});
