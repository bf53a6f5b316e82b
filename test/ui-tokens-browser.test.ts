/**
 * The web view behind tokens (serve --api-tokens, --viewer-tokens) in Chromium: a link from an alert lands on a page
 * that asks for a token; a wrong one is refused in words; a viewer token opens the page asked for, its data and its
 * live event stream, and is kept for the browser session (an HttpOnly cookie scripts cannot read) across reloads; a
 * viewer token never opens the API; signing out asks again. No "live connection dropped" banner while signed out.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { readFileSync } from 'node:fs';
import { parseReceiptFile } from '../src/core/index.js';

const API_TOKEN = 'api-token-0123456789abcdef';
const VIEWER_TOKEN = 'viewer-token-0123456789abcdef';
const INGEST_TOKEN = 'ingest-token-0123456789abcdef';
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');

function shifted(runSuffix = ''): string {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 5000 - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r) => JSON.stringify({ ...r, run: r.run + runSuffix, at: move(r.at), ...('deadline' in r && r.deadline ? { deadline: move(r.deadline) } : {}) })).join('\n') + '\n';
}

describe('web view behind tokens', () => {
  let srv: ServerProcess;
  let browser: Browser;
  let page: Page;
  const post = (body: string) => fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${INGEST_TOKEN}` } });
  beforeAll(async () => {
    const dir = tempDir('ta-tokens-');
    writeFileSync(join(dir, 'api'), `${API_TOKEN}\n`);
    writeFileSync(join(dir, 'viewer'), `${VIEWER_TOKEN}\n`);
    writeFileSync(join(dir, 'ingest'), `${INGEST_TOKEN}\n`);
    srv = await startServerProcess({ args: ['--api-tokens', join(dir, 'api'), '--viewer-tokens', join(dir, 'viewer'), '--ingest-tokens', join(dir, 'ingest')] });
    expect((await post(shifted())).status).toBe(200);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it("an alert's run link asks for a token, refuses a wrong one, and opens the run with a viewer token", async () => {
    await page.goto(`${srv.api}/runs/drift-direct-route`);
    await page.waitForSelector('form.signin');
    expect(await page.textContent('form.signin h1')).toBe('This auditor asks for a token');
    expect(await page.textContent('#live')).toBe('Token needed');
    expect(await page.$eval('#stale-banner', (el) => (el as HTMLElement).hidden)).toBe(true);
    await page.fill('#token', 'not-a-token-of-this-auditor');
    await page.click('form.signin button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.form-error')?.textContent !== '');
    expect(await page.textContent('.form-error')).toContain('that token is not accepted');
    await page.fill('#token', VIEWER_TOKEN);
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('h1.mono');
    expect(await page.textContent('h1.mono')).toBe('drift-direct-route');
    expect(page.url()).toBe(`${srv.api}/runs/drift-direct-route`);
    await page.waitForFunction(() => document.getElementById('live')?.getAttribute('data-state') === 'live');
    expect(await page.evaluate(() => document.cookie)).not.toContain(VIEWER_TOKEN); // HttpOnly
    await page.waitForSelector('svg.topology-graph g.edge');
  }, 60_000);

  it('keeps the token for the session: reloads, the run list with live updates, the shadow and contract pages', async () => {
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('tbody tr[data-run]');
    expect(await page.$$eval('tbody tr[data-run]', (trs) => trs.length)).toBe(9);
    await page.waitForFunction(() => document.getElementById('live')?.getAttribute('data-state') === 'live');
    // A new run arrives over the event stream (authenticated by the session cookie).
    expect((await post(shifted('-new'))).status).toBe(200);
    await page.waitForSelector('tbody tr[data-run="drift-direct-route-new"]', { timeout: 30_000 });
    await page.goto(`${srv.api}/shadow`);
    await page.waitForSelector('main h1');
    expect(await page.$('form.signin')).toBeNull();
    await page.goto(`${srv.api}/contracts`);
    await page.waitForSelector('main a[href^="/contracts/"]');
  }, 60_000);

  it('a viewer token never opens the API; an API token opens both; the session endpoint checks before keeping', async () => {
    expect((await fetch(`${srv.api}/api/v1/runs`, { headers: { authorization: `Bearer ${VIEWER_TOKEN}` } })).status).toBe(401);
    expect((await fetch(`${srv.api}/api/v1/runs`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).status).toBe(200);
    expect((await fetch(`${srv.api}/ui/api/runs`)).status).toBe(401);
    expect((await fetch(`${srv.api}/ui/api/runs`, { headers: { cookie: `topology_audit_token=${VIEWER_TOKEN}` } })).status).toBe(200);
    const bad = await fetch(`${srv.api}/ui/session`, { method: 'POST', headers: { authorization: 'Bearer wrong-token-0123456789' } });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('set-cookie')).toBeNull();
    const ok = await fetch(`${srv.api}/ui/session`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('set-cookie')).toBe(`topology_audit_token=${API_TOKEN}; Path=/ui; HttpOnly; SameSite=Strict`);
    expect(await (await fetch(`${srv.api}/ui/session`)).json()).toEqual({ required: true, signedIn: false });
  });

  it('signing out forgets the token and asks again', async () => {
    await page.goto(`${srv.api}/`);
    await page.waitForSelector('tbody tr[data-run]');
    await page.click('button.signout');
    await page.waitForSelector('form.signin');
    await page.reload();
    await page.waitForSelector('form.signin');
    expect((await page.evaluate(() => fetch('/ui/api/runs').then((r) => r.status)))).toBe(401);
  }, 60_000);

  it('serve refuses --viewer-tokens without --api-tokens (exit 2)', async () => {
    const dir = tempDir('ta-viewer-');
    writeFileSync(join(dir, 'viewer'), `${VIEWER_TOKEN}\n`);
    const r = await runCli(['serve', '--viewer-tokens', join(dir, 'viewer'), '--port', '0', '--data', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--viewer-tokens needs --api-tokens');
  });
});
