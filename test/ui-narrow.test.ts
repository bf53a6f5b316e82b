/**
 * The web view at 480 px in Chromium: runs as cards, no horizontal page overflow, the graph at a readable size inside
 * its own scrolling panel, and a visible "data may be stale since HH:MM" banner once the server (and its event
 * stream) is gone. Screenshots go to test-artifacts/.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { parseReceiptFile } from '../src/core/index.js';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import type { LooseReceipt } from './helpers/receipt.js';

const ARTIFACTS = join(ROOT, 'test-artifacts');
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');

function shiftedNdjson(): string {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 5000 - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r: LooseReceipt) => JSON.stringify({ ...r, at: move(r.at), ...(r.deadline ? { deadline: move(r.deadline) } : {}) })).join('\n') + '\n';
}

/** Horizontal overflow of the page itself (not of an inner scrolling panel). */
const pageOverflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

describe('web view at 480 px', () => {
  let srv: ServerProcess;
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    srv = await startServerProcess();
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: shiftedNdjson(), headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    const context = await browser.newContext({ viewport: { width: 480, height: 900 } });
    page = await context.newPage();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it('shows the runs as cards with no horizontal overflow', async () => {
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('tbody tr[data-run]');
    expect(await page.$$eval('tbody tr[data-run]', (trs) => trs.length)).toBe(9);
    expect(await page.$eval('tbody tr[data-run]', (tr) => getComputedStyle(tr).display)).toBe('block');
    // Each card names its fields (the table header is visually hidden).
    const label = await page.$eval('tr[data-run="drift-direct-route"] td[data-label="Verdict"]', (td) => getComputedStyle(td, '::before').content);
    expect(label).toBe('"Verdict"');
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    for (const el of await page.$$('tbody tr[data-run]')) {
      const box = (await el.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(480);
    }
    await page.screenshot({ path: join(ARTIFACTS, 'ui-narrow-list.png'), fullPage: true });
  }, 30_000);

  it('draws the run graph at a readable size inside a scrolling panel, the page itself not overflowing', async () => {
    await page.goto(`${srv.api}/runs/drift-direct-route`);
    await page.waitForSelector('svg.topology-graph g.edge');
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    const g = await page.$eval('#graph', (el) => ({ scroll: el.scrollWidth, client: el.clientWidth, svg: el.querySelector('svg')!.getBoundingClientRect().width, overflowX: getComputedStyle(el).overflowX }));
    expect(g.svg).toBeGreaterThanOrEqual(560); // not shrunk to an unreadable 440 px
    expect(g.scroll).toBeGreaterThan(g.client); // so the panel scrolls
    expect(g.overflowX).toBe('auto');
    await page.screenshot({ path: join(ARTIFACTS, 'ui-narrow-run.png'), fullPage: true });
  }, 30_000);

  /** Elements of the page whose box ends right of the viewport (outside any scrolling panel), for the failure message. */
  const offscreen = (page: Page) =>
    page.evaluate(() =>
      [...document.querySelectorAll('body *')]
        .filter((el) => {
          if (el.getBoundingClientRect().right <= innerWidth + 0.5) return false;
          for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) if (getComputedStyle(p).overflowX !== 'visible') return false;
          return true;
        })
        .slice(0, 8)
        .map((el) => `${el.tagName.toLowerCase()}.${el.getAttribute('class') ?? ''} ${Math.round(el.getBoundingClientRect().right)}`),
    );

  it('the contract page does not scroll sideways, and the version in force is fully visible', async () => {
    await page.goto(`${srv.api}/contracts/research-publish`);
    await page.waitForSelector('.card.version[data-version="3"]');
    // the version in force: the newest that is neither retired nor a candidate, badged "newest"
    expect(await page.$eval('.card.version[data-version="3"]', (el) => el.textContent)).toContain('newest');
    const width = await page.evaluate(() => ({ scroll: document.scrollingElement!.scrollWidth, inner: innerWidth }));
    expect(width.scroll, (await offscreen(page)).join('; ')).toBeLessThanOrEqual(width.inner);
    const box = (await page.$('.card.version[data-version="3"]'))!.boundingBox();
    const b = (await box)!;
    expect(b.x).toBeGreaterThanOrEqual(0);
    expect(b.x + b.width).toBeLessThanOrEqual(480);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-narrow-contract.png'), fullPage: true });
  }, 30_000);

  it('the run page does not scroll sideways, and the forbidden edge (row and finding) is on screen', async () => {
    await page.goto(`${srv.api}/runs/drift-direct-route`);
    await page.waitForSelector('svg.topology-graph g.edge');
    await page.click('details.edge-details > summary'); // the edge table, the graph as text
    const row = page.locator('tr[data-edge]', { hasText: 'forbidden' }).first();
    await row.waitFor({ state: 'visible' });
    const width = await page.evaluate(() => ({ scroll: document.scrollingElement!.scrollWidth, inner: innerWidth }));
    expect(width.scroll, (await offscreen(page)).join('; ')).toBeLessThanOrEqual(width.inner);
    const finding = page.locator('.finding', { hasText: 'forbidden' }).first();
    for (const el of [row, finding]) {
      const b = (await el.boundingBox())!;
      expect(b.width).toBeGreaterThan(0);
      expect(b.x).toBeGreaterThanOrEqual(0);
      expect(b.x + b.width).toBeLessThanOrEqual(480);
    }
    await page.screenshot({ path: join(ARTIFACTS, 'ui-narrow-run-edges.png'), fullPage: true });
  }, 30_000);

  it('shows "data may be stale since HH:MM" when the event stream drops', async () => {
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('tbody tr[data-run]');
    await page.waitForSelector('#live[data-state="live"]');
    expect(await page.isVisible('#stale-banner')).toBe(false);
    const clock = () =>
      page.evaluate(() => {
        const t = new Date();
        return `${String(t.getHours()).padStart(2, '0')}:${String(t.getMinutes()).padStart(2, '0')}`;
      });
    const before = await clock();
    expect(await srv.stop()).toBe(0);
    await page.waitForSelector('#stale-banner', { state: 'visible', timeout: 20_000 });
    const text = (await page.textContent('#stale-banner'))!;
    expect(text).toMatch(/^Data may be stale since \d{2}:\d{2}: the live connection to the auditor dropped/);
    const after = await clock();
    // The browser's local time of the drop: between the last look before the stop and now.
    expect([before, after]).toContain(/since (\d{2}:\d{2})/.exec(text)![1]);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-narrow-stale.png'), fullPage: true });
  }, 40_000);
});
