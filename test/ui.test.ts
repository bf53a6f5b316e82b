/**
 * The web view's routes on the real server (in process): the page shell and its assets, the JSON the pages
 * read, the live event stream, access control, and a shutdown that an open event stream does not hold up.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReceiptFile, type Receipt } from '../src/core/index.js';
import { DEFAULTS, startServer, type RunningServer } from '../src/server/serve.js';
import { createUiRoutes, type UiOptions } from '../src/ui/routes.js';
import { ROOT, tempDir } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { asReceipt, type LooseReceipt } from './helpers/receipt.js';

const registry = loadContractDir(join(ROOT, 'contracts'));
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
const expected: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8'));

function shifted(prefix: string, lead = 5_000): Receipt[] {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - lead - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r: LooseReceipt) => asReceipt({ ...r, run: `${prefix}-${r.run}`, at: move(r.at), ...(r.deadline ? { deadline: move(r.deadline) } : {}) }));
}

async function start(ui: UiOptions = {}): Promise<{ srv: RunningServer; base: string }> {
  const srv = await startServer(registry, {
    ...DEFAULTS,
    port: 0,
    otlpHttpPort: 0,
    otlpGrpcPort: 0,
    dataDir: tempDir('ta-ui-'),
    log: () => undefined,
    version: 'test',
    extraRoutes: (engine) => createUiRoutes(engine, ui),
  });
  return { srv, base: `http://127.0.0.1:${srv.ports.api}` };
}

async function post(base: string, receipts: Receipt[]): Promise<void> {
  const res = await fetch(`${base}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: receipts.map((r) => JSON.stringify(r)).join('\n') });
  expect(res.status).toBe(200);
}

/** Read server-sent events from a stream until `until` says stop or `ms` pass. */
async function readEvents(res: Response, until: (events: { event: string; data: any }[]) => boolean, ms = 3000): Promise<{ event: string; data: any }[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: { event: string; data: any }[] = [];
  let buf = '';
  const deadline = Date.now() + ms;
  while (!until(events)) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const chunk = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), left))]);
    if (chunk === null || chunk.done) break;
    buf += decoder.decode(chunk.value, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event) events.push({ event, data: data ? JSON.parse(data) : null });
    }
  }
  reader.releaseLock();
  return events;
}

describe('web view routes', () => {
  let srv: RunningServer;
  let base: string;
  beforeAll(async () => {
    ({ srv, base } = await start());
    await post(base, shifted('r'));
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('serves the page shell on its paths with a strict policy and no external reference', async () => {
    for (const path of ['/', '/runs/r-drift-wait', '/contracts', '/contracts/research-publish']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("connect-src 'self'");
      const html = await res.text();
      expect(html).toContain('<script type="module" src="/ui/client/app.js"></script>');
      expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    }
    expect((await fetch(`${base}/`, { method: 'POST' })).status).toBe(405);
    // Paths the view does not own still reach the API.
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/api/v1/runs`)).status).toBe(200);
    expect((await fetch(`${base}/nothing-here`)).status).toBe(404);
  });

  it('serves its stylesheet, icon and every browser module the page imports, and nothing else from disk', async () => {
    expect((await fetch(`${base}/ui/app.css`)).headers.get('content-type')).toContain('text/css');
    expect((await fetch(`${base}/ui/icon.svg`)).headers.get('content-type')).toBe('image/svg+xml');
    const seen = new Set<string>();
    const queue = ['app.js'];
    while (queue.length) {
      const name = queue.shift()!;
      if (seen.has(name)) continue;
      seen.add(name);
      const res = await fetch(`${base}/ui/client/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/javascript');
      const js = await res.text();
      expect(js).not.toMatch(/from ['"](?!\.\/)/); // only relative imports of sibling modules
      for (const m of js.matchAll(/from '\.\/([a-z-]+\.js)'/g)) queue.push(m[1]);
    }
    expect([...seen].sort()).toEqual(['app.js', 'contracts.js', 'dom.js', 'handoffs.js', 'list.js', 'run.js', 'shadow.js']);
    for (const bad of ['/ui/client/../routes.js', '/ui/client/%2e%2e%2froutes.js', '/ui/client/App.js', '/ui/client/nope.js', '/ui/other']) {
      expect((await fetch(`${base}${bad}`)).status, bad).toBe(404);
    }
  });

  it('lists runs newest first with counts per verdict, filtered by verdict and contract', async () => {
    const all = await (await fetch(`${base}/ui/api/runs?contract=research-publish`)).json();
    expect(all.total).toBe(9);
    const counts: Record<string, number> = {};
    for (const v of Object.values(expected)) counts[v] = (counts[v] ?? 0) + 1;
    for (const v of all.verdicts) expect(all.counts[v], v).toBe(counts[v] ?? 0);
    // Newest first by the server time of the first receipt (as a cluster lists), then by run id: one request here,
    // so one server time and the run ids in descending order.
    const ids = all.runs.map((r: { run: string }) => r.run);
    expect([...ids].sort().reverse()).toEqual(ids);
    expect(all.next).toBeNull();
    for (const r of all.runs) expect(r.verdict, r.run).toBe(expected[r.run.replace(/^r-/, '')]);
    const forbidden = await (await fetch(`${base}/ui/api/runs?verdict=forbidden_edge`)).json();
    expect(forbidden.runs.map((r: { run: string }) => r.run)).toEqual(['r-drift-direct-route']);
    expect(forbidden.total).toBe(9); // counts stay for the whole contract filter
    const none = await (await fetch(`${base}/ui/api/runs?contract=other`)).json();
    expect(none.runs).toEqual([]);
    expect(none.contracts).toEqual(registry.ids());
    expect(none.contracts).toContain('research-publish');
  });

  it('answers a run page with the same verdict as the API, its overlay and the drawn graph', async () => {
    const view = await (await fetch(`${base}/ui/api/runs/r-drift-direct-route`)).json();
    const api = await (await fetch(`${base}/api/v1/runs/r-drift-direct-route`)).json();
    expect(view.run.verdict).toBe(api.verdict);
    expect(view.run.naive).toBe('green');
    expect(view.run.findings).toEqual(api.findings);
    expect(view.run.receipts.map((r: Receipt) => r.event)).toEqual(['start', 'e1', 'e2']); // by time
    const e = view.graph.edges.find((x: { id: string }) => x.id === 'researcher -> publisher : delegate');
    expect(e).toMatchObject({ look: 'forbidden', states: ['observed', 'forbidden'], count: 1, findings: ['forbidden_edge'], events: ['e2'] });
    expect(e.label[0]).toBe('forbidden ×1');
    expect(view.graph.svg).toContain('data-edge="researcher -&gt; publisher : delegate"');
    expect(view.graph.legend.map((l: { look: string }) => l.look)).toEqual(expect.arrayContaining(['forbidden', 'absent', 'observed']));
    expect(view.meaning).toBe('Contain the route before retrying work');

    const wait = await (await fetch(`${base}/ui/api/runs/r-drift-wait`)).json();
    const ret = wait.graph.edges.find((x: { id: string }) => x.id === 'verifier -> orchestrator : return');
    expect(ret.look).toBe('waiting');
    expect(Date.parse(ret.deadline)).toBe(Date.parse(wait.nextChangeAt));
    expect(wait.graph.svg).toMatch(/<tspan class="countdown" data-deadline="\d+">\d+m\d*s? left<\/tspan>/);

    const missing = await fetch(`${base}/ui/api/runs/nope`);
    expect(missing.status).toBe(404);
  });

  it('says why there is no graph for a run without a resolvable pin', async () => {
    await post(base, [{ run: 'no-pin', event: 's', type: 'run.start', at: new Date().toISOString(), contract: 'no-such-contract' }]);
    const view = await (await fetch(`${base}/ui/api/runs/no-pin`)).json();
    expect(view.run.verdict).toBe('uncertain');
    expect(view.graph).toBeNull();
    expect(view.graphMissing).toMatch(/no resolvable pinned contract/);
    expect(view.run.findings.map((f: { code: string }) => f.code)).toEqual(['no_pin']);
  });

  it('answers contracts and one contract\'s versions with their changes', async () => {
    const list = await (await fetch(`${base}/ui/api/contracts`)).json();
    expect(list.contracts.map((c: { contract: string }) => c.contract)).toEqual(registry.ids());
    expect(list.contracts.find((c: { contract: string }) => c.contract === 'research-publish')).toEqual({ contract: 'research-publish', versions: [expect.objectContaining({ version: '2', retired: true }), expect.objectContaining({ version: '3', retired: false })] });
    const c = await (await fetch(`${base}/ui/api/contracts/research-publish`)).json();
    expect(c.versions.map((v: { version: string }) => v.version)).toEqual(['2', '3']);
    expect(c.versions[0].changes).toBeNull();
    expect(c.versions[1].changes.agents.added).toEqual(['verifier', 'web-search', 'doc-search']);
    expect(c.versions[1].phases.map((p: { name: string }) => p.name)).toEqual(['research', 'publish']);
    for (const p of c.versions[1].phases) expect(p.graph.svg).toMatch(/^<svg /);
    // ids stay unique when several graphs share the page
    const ids = c.versions.flatMap((v: any) => v.phases.flatMap((p: any) => [...p.graph.svg.matchAll(/ id="([^"]+)"/g)].map((m: string[]) => m[1])));
    expect(new Set(ids).size).toBe(ids.length);
    expect((await fetch(`${base}/ui/api/contracts/nope`)).status).toBe(404);
  });

  it('streams run updates as server-sent events, one per changed run per batch', async () => {
    const res = await fetch(`${base}/ui/events`);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const hello = await readEvents(res, (ev) => ev.length >= 1);
    expect(hello[0].event).toBe('hello');
    const at = new Date().toISOString();
    await post(base, [
      { run: 'sse-1', event: 'start', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'sse-1', event: 'e1', type: 'edge', at, from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run: 'sse-1', event: 'e2', type: 'edge', at, from: 'researcher', to: 'publisher', kind: 'delegate' },
      { run: 'sse-2', event: 'start', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research' },
    ]);
    const t0 = Date.now();
    const got = await readEvents(res, (ev) => ev.filter((e) => e.event === 'run').length >= 2, 2000);
    expect(Date.now() - t0).toBeLessThan(2000);
    const runs = got.filter((e) => e.event === 'run');
    expect(runs.map((e) => e.data.run).sort()).toEqual(['sse-1', 'sse-2']);
    expect(runs.find((e) => e.data.run === 'sse-1')!.data).toMatchObject({ verdict: 'forbidden_edge', naive: 'green', findings: 2, pin: { contract: 'research-publish', version: '3', phase: 'research' } });
    await res.body!.cancel();
  });
});

describe('web view access and shutdown', () => {
  it('asks the given authenticator before answering data, never for the shell', async () => {
    const { srv, base } = await start({ authenticate: (req) => req.headers.authorization === 'Bearer let-me-in' });
    try {
      expect((await fetch(`${base}/`)).status).toBe(200);
      expect((await fetch(`${base}/ui/api/runs`)).status).toBe(401);
      expect((await fetch(`${base}/ui/events`)).status).toBe(401);
      expect((await fetch(`${base}/ui/api/runs`, { headers: { authorization: 'Bearer let-me-in' } })).status).toBe(200);
    } finally {
      await srv.close();
    }
  });

  it('ends open event streams when the server shuts down, so the shutdown completes', async () => {
    const { srv, base } = await start();
    const res = await fetch(`${base}/ui/events`);
    await readEvents(res, (ev) => ev.length >= 1);
    const t0 = Date.now();
    const closed = srv.close().then(() => Date.now() - t0);
    const took = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
    expect(took).toBeGreaterThanOrEqual(0);
    expect(took).toBeLessThan(3000);
    const reader = res.body!.getReader();
    const rest = await Promise.race([(async () => { for (;;) { const c = await reader.read(); if (c.done) return 'ended'; } })(), new Promise((r) => setTimeout(() => r('open'), 2000))]);
    expect(rest).toBe('ended');
  });
});
