/**
 * Shadow evaluation end to end: the real server (child process) with `--shadow shop@2`, a candidate that forbids
 * an edge seen in 3 of 20 live runs. The API, the metrics and the web view (Chromium) show 3 disagreements; no
 * pinned verdict changes; the candidate is never a pin.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import type { Receipt } from '../src/core/index.js';
import { receipt } from './helpers/receipts.js';
import { getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

const V1 = `contract: shop
version: "1"
owner: orchestrator
agents: [orchestrator, researcher, verifier, auditor]
allow:
  - orchestrator -> researcher : delegate
  - researcher -> verifier : handoff
  - verifier -> orchestrator : return
  - researcher -> auditor : handoff
phases:
  main:
    expect:
      - orchestrator -> researcher : delegate
      - researcher -> verifier : handoff
      - { edge: "verifier -> orchestrator : return", within: 10m }
`;
// The candidate drops the auditor hand-off and tightens the return's deadline.
const V2 = V1.replace('version: "1"', 'version: "2"\ncandidate: true').replace('  - researcher -> auditor : handoff\n', '').replace('within: 10m', 'within: 5m');

function runOf(run: string, base: number, audited: boolean): Receipt[] {
  const t = (s: number) => new Date(base + s * 1000).toISOString();
  const rs: Record<string, unknown>[] = [
    { event: 's', type: 'run.start', at: t(0), contract: 'shop', version: '1', from: 'orchestrator' },
    { event: 'e1', type: 'edge', at: t(1), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
    ...(audited ? [{ event: 'e1b', type: 'edge', at: t(2), from: 'researcher', to: 'auditor', kind: 'handoff' }] : []),
    { event: 'e2', type: 'edge', at: t(3), from: 'researcher', to: 'verifier', kind: 'handoff' },
    { event: 'e3', type: 'edge', at: t(4), from: 'verifier', to: 'orchestrator', kind: 'return' },
    { event: 'o', type: 'outcome', at: t(5), from: 'orchestrator', verified: true },
    { event: 'end', type: 'run.end', at: t(6), from: 'orchestrator', result: 'completed' },
  ];
  return rs.map((r) => receipt({ run, ...r }));
}

const AUDITED = new Set(['shop-03', 'shop-09', 'shop-15']);

async function post(srv: ServerProcess, receipts: Receipt[]) {
  const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: receipts.map((r) => JSON.stringify(r)).join('\n') });
  const body = await res.json();
  expect(res.status).toBe(200);
  expect(body.rejected).toEqual([]);
}

async function poll<T>(fn: () => Promise<T>, ok: (x: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const x = await fn();
    if (ok(x) || Date.now() > end) return x;
    await new Promise((r) => setTimeout(r, 100));
  }
}

function metric(text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const m = /^[^{]+\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const got = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v) && Object.keys(got).length === Object.keys(labels).length) return Number(m[2]);
  }
  return null;
}

describe('shadow evaluation on a live server', () => {
  let srv: ServerProcess;
  let contracts: string;
  let browser: Browser | undefined;

  beforeAll(async () => {
    contracts = join(tempDir('ta-shadow-'), 'contracts');
    mkdirSync(contracts);
    writeFileSync(join(contracts, 'shop-1.yaml'), V1);
    writeFileSync(join(contracts, 'shop-2.yaml'), V2);
    srv = await startServerProcess({ contracts, args: ['--shadow', 'shop@2'] });
    const base = Date.now() - 60_000;
    // Runs arrive receipt batch by receipt batch (two posts each), as live runs do.
    for (let i = 0; i < 20; i++) {
      const run = `shop-${String(i).padStart(2, '0')}`;
      const rs = runOf(run, base + i * 100, AUDITED.has(run));
      await post(srv, rs.slice(0, 3));
      await post(srv, rs.slice(3));
    }
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (srv) expect(await srv.stop()).toBe(0);
  });

  it('the run API carries the shadow verdict; pinned verdicts are unchanged', async () => {
    const list = await poll(
      () => getJson(`${srv.api}/api/v1/runs?limit=100`),
      (r) => r.body.runs.length === 20 && r.body.runs.every((x: any) => x.verdict === 'healthy'),
    );
    expect(list.body.runs.map((r: any) => r.verdict)).toEqual(new Array(20).fill('healthy'));
    const audited = (await getJson(`${srv.api}/api/v1/runs/shop-03`)).body;
    expect(audited.pin).toEqual({ contract: 'shop', version: '1', phase: 'main' });
    expect(audited.verdict).toBe('healthy');
    expect(audited.shadow).toHaveLength(1);
    expect(audited.shadow[0]).toMatchObject({ contract: 'shop', version: '2', verdict: 'forbidden_edge', disagrees: true });
    expect(audited.shadow[0].findings[0]).toMatchObject({ code: 'forbidden_edge', edge: 'researcher -> auditor : handoff' });
    const plain = (await getJson(`${srv.api}/api/v1/runs/shop-04`)).body;
    expect(plain.shadow).toEqual([{ contract: 'shop', version: '2', verdict: 'healthy', findings: [], disagrees: false }]);

    const summary = (await getJson(`${srv.api}/api/v1/shadow`)).body.candidates;
    expect(summary).toHaveLength(1);
    expect(summary[0]).toMatchObject({ contract: 'shop', version: '2', runs: 20, disagreements: 3, verdicts: { healthy: 17, forbidden_edge: 3 } });
    expect(summary[0].edges).toEqual([{ edge: 'researcher -> auditor : handoff', runs: 3 }]);
    expect(summary[0].changes).toEqual([{ pinned: 'healthy', shadow: 'forbidden_edge', runs: 3 }]);
    expect(summary[0].disagreeing.map((d: any) => d.run)).toEqual([...AUDITED].sort());
  });

  it('metrics count shadow verdicts and 3 disagreements; the pinned verdict counters see no forbidden_edge', async () => {
    const text = await (await fetch(`${srv.api}/metrics`)).text();
    expect(metric(text, 'topology_shadow_disagreements_total', { contract: 'shop', version: '2' })).toBe(3);
    expect(metric(text, 'topology_shadow_verdicts_total', { contract: 'shop', version: '2', verdict: 'forbidden_edge' })).toBe(3);
    // Every run entered healthy under the candidate at some point except the three audited ones.
    expect(metric(text, 'topology_shadow_verdicts_total', { contract: 'shop', version: '2', verdict: 'healthy' })).toBe(17);
    expect(metric(text, 'topology_verdicts_total', { contract: 'shop', verdict: 'forbidden_edge' }) ?? 0).toBe(0);
    expect(metric(text, 'topology_verdicts_total', { contract: 'shop', verdict: 'healthy' })).toBe(20);
  });

  it('a run.start naming the candidate version is not pinned to it', async () => {
    const t = new Date().toISOString();
    await post(srv, [receipt({ run: 'pin-candidate', event: 's', type: 'run.start', at: t, contract: 'shop', version: '2', from: 'orchestrator' })]);
    const r = await poll(() => getJson(`${srv.api}/api/v1/runs/pin-candidate`), (x) => x.status === 200);
    expect(r.body.verdict).toBe('uncertain');
    expect(r.body.findings[0].message).toContain('is a candidate');
    expect(r.body.shadow).toEqual([]);
  });

  it('the web view shows the 3 disagreeing runs and the summary per candidate (Chromium)', async () => {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${srv.api}/`);
    await page.click('nav a[href="/shadow"]');
    await page.waitForSelector('section.shadow-candidate[data-candidate="shop@2"]');
    expect(new URL(page.url()).pathname).toBe('/shadow');
    const card = page.locator('section.shadow-candidate[data-candidate="shop@2"]');
    expect(await card.getAttribute('data-disagreements')).toBe('3');
    expect(await card.locator('.disagreements').textContent()).toBe('3');
    expect(await card.locator('table.shadow-runs tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run')))).toEqual([...AUDITED].sort());
    for (const run of AUDITED) {
      const row = card.locator(`table.shadow-runs tr[data-run="${run}"]`);
      expect(await row.locator('td.pinned').textContent()).toBe('healthy');
      expect(await row.locator('td.shadow').textContent()).toBe('forbidden_edge');
    }
    expect(await card.locator('ul.shadow-edges li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-edge')))).toEqual(['researcher -> auditor : handoff']);
    expect(await card.locator('table.shadow-counts tr[data-verdict="healthy"] td.count').textContent()).toBe('17');
    expect(await card.locator('table.shadow-counts tr[data-verdict="forbidden_edge"] td.count').textContent()).toBe('3');
    // The run link opens the run, whose pinned verdict is still healthy.
    await card.locator('a[href="/runs/shop-09"]').click();
    await page.waitForSelector('svg.topology-graph');
    expect(new URL(page.url()).pathname).toBe('/runs/shop-09');
    expect(await page.getAttribute('[data-verdict]', 'data-verdict')).toBe('healthy');
    const li = page.locator('section.run-shadow li[data-candidate="shop@2"]');
    expect(await li.getAttribute('data-disagrees')).toBe('true');
    expect(await li.textContent()).toContain('forbidden_edge');
    expect(await li.textContent()).toContain('researcher -> auditor : handoff');
    // The contract page marks the candidate, and calls the published version the newest.
    await page.goto(`${srv.api}/contracts/shop`);
    await page.waitForSelector('section.version[data-version="2"]');
    expect(await page.locator('section.version[data-version="2"] .badge.candidate').count()).toBe(1);
    expect(await page.locator('section.version[data-version="2"] .states').textContent()).not.toContain('newest');
    expect(await page.locator('section.version[data-version="1"] .states').textContent()).toContain('newest');
    expect(errors).toEqual([]);
  }, 60_000);

  it('propose --server drafts from the stored runs: the auditor edge is allowed (3 of 20), not expected', async () => {
    const r = await runCli(['propose', '--server', srv.api, '--since', '1h', '--contract-id', 'shop', '--version', '3', '--min-share', '0.1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('- { edge: "researcher -> auditor : handoff", max: 1 }   # seen in 3 of 20 runs, at most 1 per run');
    expect(r.stdout).toMatch(/- \{ edge: "verifier -> orchestrator : return".*# seen in 20 of 20 runs/);
    expect(r.stdout).not.toMatch(/^\s+- \{ edge: "researcher -> auditor : handoff", (after|within)/m);
    expect(r.stdout).toContain('outcome: required   # verified outcome in 20 of 20 runs');
    const dir = tempDir('ta-shadow-draft-');
    writeFileSync(join(dir, 'draft.yaml'), r.stdout);
    expect((await runCli(['validate', join(dir, 'draft.yaml')])).code).toBe(0);
    // Not an auditor API: a clear usage error.
    const bad = await runCli(['propose', '--server', `${srv.api}/nothing-here`]);
    expect(bad.code).toBe(2);
  }, 60_000);

  it('replay --shadow gives the same pinned verdicts and the same 3 disagreements offline', async () => {
    const dir = tempDir('ta-shadow-replay-');
    const base = Date.parse('2026-03-01T09:00:00Z');
    const all: Receipt[] = [];
    for (let i = 0; i < 20; i++) {
      const run = `shop-${String(i).padStart(2, '0')}`;
      all.push(...runOf(run, base + i * 100, AUDITED.has(run)));
    }
    writeFileSync(join(dir, 'runs.ndjson'), all.map((x) => JSON.stringify(x)).join('\n') + '\n');
    const plain = await runCli(['replay', join(dir, 'runs.ndjson'), '--contracts', contracts, '--json']);
    const shadowed = await runCli(['replay', join(dir, 'runs.ndjson'), '--contracts', contracts, '--json', '--shadow', 'shop@2']);
    expect(plain.code).toBe(0);
    expect(shadowed.code).toBe(0);
    const a = plain.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const b = shadowed.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(b.map(({ shadow: _s, ...rest }) => rest)).toEqual(a);
    expect(b.filter((l) => l.shadow[0].disagrees).map((l) => l.run)).toEqual([...AUDITED].sort());
    const text = await runCli(['replay', join(dir, 'runs.ndjson'), '--contracts', contracts, '--shadow', 'shop@2']);
    expect(text.stdout).toContain('shadow shop@2: 20 run(s) (healthy 17, forbidden_edge 3); 3 disagree with the pinned verdict');
    expect(text.stdout).toMatch(/shop-03\s+healthy\s+forbidden_edge\s+researcher -> auditor : handoff/);
  }, 60_000);

  it('after a restart the shadow verdicts are rebuilt from the store; without --shadow the answers carry none', async () => {
    expect(await srv.stop()).toBe(0);
    srv = await startServerProcess({ contracts, dataDir: srv.dataDir, args: ['--shadow', 'shop@2'] });
    const summary = (await getJson(`${srv.api}/api/v1/shadow`)).body.candidates;
    expect(summary[0]).toMatchObject({ contract: 'shop', version: '2', runs: 20, disagreements: 3 });
    expect((await getJson(`${srv.api}/api/v1/runs/shop-15`)).body.shadow[0].verdict).toBe('forbidden_edge');
    expect(await srv.stop()).toBe(0);
    srv = await startServerProcess({ contracts, dataDir: srv.dataDir });
    const run = (await getJson(`${srv.api}/api/v1/runs/shop-15`)).body;
    expect(run.verdict).toBe('healthy');
    expect(run.shadow).toBeUndefined();
    expect((await getJson(`${srv.api}/api/v1/shadow`)).body).toEqual({ candidates: [] });
  }, 60_000);

  it('serve refuses an unknown shadow version with exit 2', async () => {
    const r = await runCli(['serve', '--contracts', contracts, '--data', tempDir('ta-shadow-data-'), '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--shadow', 'shop@9']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--shadow shop@9: no such contract version (versions of shop: 1, 2)');
  });
});
