/**
 * The run page's Handoffs panel in a real browser (Debian's Chromium through playwright-core) against the real
 * server as a child process: a run with one live branch, one cancelled branch and a duplicate-key conflict
 * between them. Screenshots at 480 px and 1400 px go to test-artifacts/.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { Receipt } from '../src/core/types.js';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const ARTIFACTS = join(ROOT, 'test-artifacts');
const RUN = 'ho-board-browser';
const KEY = 'EQ-104:manual:edition-set-7';

async function post(srv: ServerProcess, receipts: Receipt[]): Promise<void> {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: receipts.map((r) => JSON.stringify(r)).join('\n') });
  const body = await res.json();
  expect(res.status).toBe(200);
  expect(body.rejected).toEqual([]);
}

describe('Handoffs panel in Chromium', () => {
  let srv: ServerProcess;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000).toISOString();
  const ho = (event: string, s: number, attempt: number, state: LooseReceipt['state'], extra: Partial<LooseReceipt> = {}): Receipt => asReceipt({
    run: RUN, event, type: 'handoff', at: at(s), handoff: 'handoff-manual-07', attempt, state, from: 'fieldops-main', to: attempt === 1 ? 'manual-specialist' : 'manual-specialist-b', ...extra,
  });
  const lease1 = at(60 + 600); // ten minutes from now
  const lease2 = at(60 + 660);
  const receipts: Receipt[] = [
    { run: RUN, event: 'e01', type: 'run.start', at: at(0), contract: 'fieldops-manual', version: '1', phase: 'specialist', from: 'fieldops-main' },
    { run: RUN, event: 'e02', type: 'handoff', at: at(1), budgetOp: 'root', units: { actions: 24, contextUnits: 470, effects: 1 }, from: 'fieldops-main' },
    ho('e03', 2, 1, 'PROPOSED', { duplicateKey: KEY, stateVersion: '7', leaseExpiresAt: lease1, finalOwner: 'fieldops-main', onTimeout: 'return-ownership' }),
    ho('e04', 3, 1, 'ADMITTED', { duplicateKey: KEY, stateVersion: '7', leaseExpiresAt: lease1, budgetOp: 'reserve', units: { actions: 2, contextUnits: 40, effects: 0 }, capabilities: ['search_manual'] }),
    ho('e05', 4, 1, 'DISPATCHED'),
    ho('e06', 5, 1, 'RUNNING'),
    ho('e07', 20, 2, 'PROPOSED', { duplicateKey: KEY, stateVersion: '7', leaseExpiresAt: lease2 }),
    ho('e08', 21, 2, 'ADMITTED', { duplicateKey: KEY, stateVersion: '7', leaseExpiresAt: lease2, budgetOp: 'reserve', units: { actions: 2, contextUnits: 40, effects: 0 }, capabilities: ['search_manual'] }),
    ho('e09', 22, 2, 'DISPATCHED'),
    ho('e10', 40, 2, 'CANCELLED', { stateVersion: '7', budgetOp: 'release', units: { actions: 2, contextUnits: 40, effects: 0 } }),
  ];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    srv = await startServerProcess();
    await post(srv, receipts);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.route((url) => !['127.0.0.1', 'localhost'].includes(url.hostname) && url.protocol !== 'data:', (route) => route.abort());
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (srv) expect(await srv.stop()).toBe(0);
  });

  it('shows the live branch with a ticking lease, the cancelled branch and the conflict', async () => {
    await page.goto(`${srv.api}/runs/${RUN}`);
    const panel = page.locator('#handoffs');
    await panel.waitFor({ timeout: 20_000 });
    await expect.poll(() => panel.locator('h2').textContent()).toBe('Handoffs');
    expect(await panel.locator('[data-fact="owner"]').textContent()).toBe('fieldops-main');

    const live = panel.locator('[data-branch="handoff-manual-07#1"]');
    expect(await live.getAttribute('data-live')).toBe('true');
    expect(await live.getAttribute('data-conflict')).toBe('true');
    expect(await live.locator('.ho-state').textContent()).toBe('RUNNING');
    expect(await live.locator('.ho-version').textContent()).toContain('7 granted · current 7');
    expect(await live.textContent()).toContain('search_manual');
    expect(await live.locator('.ho-cancel').textContent()).toBe('not cancelled');
    // The lease countdown ticks client-side.
    const lease = live.locator('.ho-lease [data-deadline]');
    const first = await lease.textContent();
    expect(first).toMatch(/^(9m\d+s|10m) left$/);
    await expect.poll(() => lease.textContent(), { timeout: 10_000, interval: 250 }).not.toBe(first);

    const cancelled = panel.locator('[data-branch="handoff-manual-07#2"]');
    expect(await cancelled.getAttribute('data-live')).toBe('false');
    expect(await cancelled.getAttribute('data-cancelled')).toBe('true');
    expect(await cancelled.getAttribute('data-conflict')).toBe('true');
    expect(await cancelled.locator('.ho-state').textContent()).toBe('CANCELLED');
    expect(await cancelled.locator('.ho-cancel').textContent()).toMatch(/^cancelled at \d\d:\d\d:\d\d(\.\d+)?, propagated \(branch ended CANCELLED\)$/);

    const conflict = panel.locator(`.ho-conflict[data-key="${KEY}"]`);
    expect(await conflict.textContent()).toContain('handoff-manual-07#1, handoff-manual-07#2');
    expect(await conflict.textContent()).toContain('open');
    expect(await panel.locator('.ho-budget tr[data-row="reserved"]').textContent()).toBe('reserved4800');
    expect(await panel.locator('.ho-budget tr[data-row="root"]').textContent()).toBe('root244701');
    expect(await panel.locator('[data-fact="terminal"]').getAttribute('data-met')).toBe('false');
    expect(await panel.locator('#handoff-terminal').textContent()).toContain('branch handoff-manual-07#1 is RUNNING');
    // The findings card agrees: the duplicate is a verdict finding too.
    await page.locator('#findings [data-code="duplicate_active"]').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'handoffs-1400.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it('updates live when the branch returns, and stays readable at 480 px', async () => {
    await post(srv, [ho('e11', 61, 1, 'RETURNED', { stateVersion: '7', budgetOp: 'consume', units: { actions: 2, contextUnits: 30, effects: 0 } })]);
    const row = page.locator('#handoffs [data-branch="handoff-manual-07#1"]');
    await expect.poll(() => row.locator('.ho-state').textContent(), { timeout: 15_000, interval: 200 }).toBe('RETURNED');
    expect(await row.locator('.ho-version').textContent()).toContain('7 observed');
    expect(await page.locator('#handoffs .ho-budget tr[data-row="consumed"]').textContent()).toBe('consumed2300');

    await page.setViewportSize({ width: 480, height: 1000 });
    const panel = page.locator('#handoffs');
    await panel.scrollIntoViewIfNeeded();
    // Nothing in the panel is wider than the panel itself, and the panel fits the viewport.
    const fit = await panel.evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth, right: el.getBoundingClientRect().right }));
    expect(fit.scroll).toBeLessThanOrEqual(fit.client);
    expect(fit.right).toBeLessThanOrEqual(480);
    const rowBox = await row.boundingBox();
    expect(rowBox!.width).toBeLessThanOrEqual(480);
    await panel.screenshot({ path: join(ARTIFACTS, 'handoffs-480.png') });
    await page.screenshot({ path: join(ARTIFACTS, 'handoffs-480-page.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
