/**
 * The web view in a real browser (Debian's Chromium through playwright-core) against the real server started as
 * a child process and fed the nine drift cases. Every request the page makes is checked to stay on loopback.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { parseReceiptFile, type Receipt } from '../src/core/index.js';
import { ROOT, getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(ROOT, 'test-artifacts');
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
const expected: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8'));

/** The drift fixture moved so its latest receipt is `lead` ms before now (so `wait` is still waiting), runs prefixed. */
function shifted(prefix: string, lead = 5_000): Receipt[] {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - lead - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r: LooseReceipt) => asReceipt({ ...r, run: `${prefix}-${r.run}`, at: move(r.at), ...(r.deadline ? { deadline: move(r.deadline) } : {}) }));
}

async function post(srv: ServerProcess, receipts: Receipt[]): Promise<void> {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: receipts.map((r) => JSON.stringify(r)).join('\n') });
  const body = await res.json();
  expect(res.status).toBe(200);
  expect(body.rejected).toEqual([]);
}

const isLoopback = (u: string) => {
  const url = new URL(u);
  if (url.protocol === 'data:' || url.protocol === 'about:') return true;
  return url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]';
};

describe('web view in Chromium', () => {
  let srv: ServerProcess;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const requested: string[] = [];
  const blocked: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    srv = await startServerProcess();
    await post(srv, shifted('ui'));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    // Anything not on loopback is refused and remembered; the view must need nothing but the server.
    await context.route(
      (url) => !isLoopback(url.href),
      (route) => {
        blocked.push(route.request().url());
        return route.abort();
      },
    );
    context.on('request', (r) => requested.push(r.url()));
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
  });

  afterAll(async () => {
    await browser?.close();
    if (srv) expect(await srv.stop()).toBe(0);
  });

  it('lists the runs newest first, filters to forbidden_edge and opens that run without a reload', async () => {
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('tbody tr[data-run]');
    const rows = await page.$$eval('tbody tr[data-run]', (trs) => trs.map((tr) => tr.getAttribute('data-run')));
    expect(rows).toHaveLength(9);
    // Newest first: the API's order (by the server time of the first receipt, then run id), as shown.
    const api = (await getJson(`${srv.api}/api/v1/runs?limit=100`)).body.runs as { run: string; startedAt: string }[];
    expect(rows).toEqual(api.map((r) => r.run));
    // one page: no next page to follow
    expect(await page.isDisabled('#page-next')).toBe(true);
    for (const r of rows) {
      const verdict = await page.textContent(`tr[data-run="${r}"] .badge[class*="v-"]`);
      expect(verdict, r!).toBe(expected[r!.replace(/^ui-/, '')]);
    }
    await page.screenshot({ path: join(ARTIFACTS, 'ui-list.png'), fullPage: true });

    await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));
    await page.selectOption('#filter-verdict', 'forbidden_edge');
    await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-run]').length === 1);
    expect(page.url()).toContain('verdict=forbidden_edge');
    expect(await page.$$eval('tbody tr[data-run]', (trs) => trs.map((tr) => tr.getAttribute('data-run')))).toEqual(['ui-drift-direct-route']);

    await page.click('a[href="/runs/ui-drift-direct-route"]');
    await page.waitForSelector('svg.topology-graph g.edge');
    expect(new URL(page.url()).pathname).toBe('/runs/ui-drift-direct-route');
    expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);

    // The forbidden edge: drawn, red, and labelled in words.
    const forbidden = page.locator('svg g.edge[data-edge="researcher -> publisher : delegate"]');
    expect(await forbidden.count()).toBe(1);
    expect((await forbidden.getAttribute('data-states'))!.split(' ')).toEqual(expect.arrayContaining(['observed', 'forbidden']));
    expect(await forbidden.textContent()).toContain('forbidden');
    expect(await forbidden.getAttribute('aria-label')).toContain('forbidden');
    expect(await forbidden.locator('path').getAttribute('stroke')).toBe('#c81e1e');
    // The expected edges never observed: marked absent, in words.
    for (const key of ['researcher -> verifier : handoff', 'verifier -> orchestrator : return']) {
      const e = page.locator(`svg g.edge[data-edge="${key}"]`);
      expect((await e.getAttribute('data-states'))!.split(' '), key).toContain('absent');
      expect(await e.textContent(), key).toContain('absent');
    }
    // The allowed edge that was observed.
    const ok = page.locator('svg g.edge[data-edge="orchestrator -> researcher : delegate"]');
    expect(await ok.textContent()).toContain('observed');

    // Verdict, naive verdict and every finding, as the API has them.
    const run = (await getJson(`${srv.api}/api/v1/runs/ui-drift-direct-route`)).body;
    expect(await page.textContent('[data-verdict] .badge')).toBe('forbidden_edge');
    expect(await page.textContent('[data-naive] .badge')).toBe('naive: green');
    const shown = await page.$$eval('#findings li.finding', (lis) => lis.map((li) => li.textContent ?? ''));
    expect(shown).toHaveLength(run.findings.length);
    for (const f of run.findings) expect(shown.some((t) => t.includes(f.message) && t.includes(f.code))).toBe(true);
    expect(await page.$$eval('#timeline li', (lis) => lis.map((li) => li.getAttribute('data-event')))).toEqual(['start', 'e1', 'e2']);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-run-forbidden.png'), fullPage: true });
  });

  it('draws waiting (with a live countdown), unknown agents and over-the-max counts, keyboard reachable', async () => {
    await page.goto(`${srv.api}/runs/ui-drift-wait`);
    const waiting = page.locator('svg g.edge[data-edge="verifier -> orchestrator : return"]');
    await waiting.waitFor();
    expect((await waiting.getAttribute('data-states'))!.split(' ')).toEqual(expect.arrayContaining(['absent', 'waiting']));
    expect(await waiting.textContent()).toMatch(/waiting.*on verifier.*\d+m\d*s? left/);
    const countdown = waiting.locator('.countdown');
    const before = await countdown.textContent();
    await page.waitForFunction((b) => document.querySelector('svg g.edge[data-edge="verifier -> orchestrator : return"] .countdown')?.textContent !== b, before, { timeout: 3000 });
    expect(await page.textContent('[data-verdict] .badge')).toBe('waiting');
    // Keyboard: Tab reaches the graph's edges, and a focused edge has an accessible name.
    let reached = false;
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.matches('svg g.edge') ?? false);
    }
    expect(reached).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toMatch(/ to .*:/);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-run-waiting.png'), fullPage: true });

    await page.goto(`${srv.api}/runs/ui-drift-shadow`);
    const unknown = page.locator('svg g.node.unknown[data-agent="shadow-agent"]');
    await unknown.waitFor();
    expect(await unknown.textContent()).toContain('unknown agent');
    expect(await page.textContent('svg g.edge[data-edge="researcher -> shadow-agent : handoff"]')).toContain('forbidden');
    await page.screenshot({ path: join(ARTIFACTS, 'ui-run-unknown-agent.png'), fullPage: true });

    await page.goto(`${srv.api}/runs/ui-drift-twice`);
    const twice = page.locator('svg g.edge[data-edge="orchestrator -> researcher : delegate"]');
    await twice.waitFor();
    expect((await twice.getAttribute('data-states'))!.split(' ')).toContain('over_max');
    expect(await twice.textContent()).toContain('×2 of max 1');
  });

  it('shows a receipt POSTed to the server on an open run page within two seconds, without a reload', async () => {
    await page.goto(`${srv.api}/runs/ui-drift-current`);
    const edge = page.locator('svg g.edge[data-edge="researcher -> verifier : handoff"]');
    await edge.waitFor();
    expect((await edge.getAttribute('data-states'))!.split(' ')).toContain('absent');
    await page.waitForFunction(() => document.getElementById('live')?.getAttribute('data-state') === 'live');
    await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));
    await post(srv, [{ run: 'ui-drift-current', event: 'live-e2', type: 'edge', at: new Date().toISOString(), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' }]);
    const t0 = Date.now();
    await page.waitForSelector('#timeline li[data-event="live-e2"]', { timeout: 2000 });
    await page.waitForFunction(
      () => document.querySelector('svg g.edge[data-edge="researcher -> verifier : handoff"]')?.getAttribute('data-states')?.split(' ').includes('observed') ?? false,
      undefined,
      { timeout: Math.max(1, 2000 - (Date.now() - t0)) },
    );
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);

    // The list too: a new run appears live.
    await page.click('a[href="/"][data-section="runs"]');
    await page.waitForSelector('tbody tr[data-run]');
    await post(srv, shifted('live').filter((r) => r.run === 'live-drift-direct-route'));
    await page.waitForSelector('tbody tr[data-run="live-drift-direct-route"]', { timeout: 2000 });
    expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
  });

  it('shows a contract with its versions side by side and what changed', async () => {
    await page.goto(`${srv.api}/contracts/research-publish`);
    await page.waitForSelector('section.version[data-version="3"] svg.topology-graph');
    expect(await page.$$eval('section.version', (s) => s.map((x) => x.getAttribute('data-version')))).toEqual(['2', '3']);
    const changes = await page.textContent('section.version[data-version="3"] .changes');
    expect(changes).toContain('agent verifier');
    expect(changes).toContain('allow researcher -> publisher : delegate'); // removed in 3
    expect(changes).toContain('phase publish');
    expect(await page.$$eval('section.version[data-version="3"] .phase', (p) => p.map((x) => x.getAttribute('data-phase')))).toEqual(['research', 'publish']);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-contract.png'), fullPage: true });
  });

  it('made no request other than to the server, and raised no page error', () => {
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((u) => !isLoopback(u))).toEqual([]);
    expect(blocked).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
