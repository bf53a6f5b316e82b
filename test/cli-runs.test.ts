/** `topology-audit runs`: the run list a page at a time, following the API's cursor (issue 50 item 4). */
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startServerProcess, type ServerProcess } from './helpers/server.js';

const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

describe('topology-audit runs', () => {
  it('lists every run over pages (--all), and prints the cursor of the next page without it', async () => {
    const srv = await startServerProcess({});
    servers.push(srv);
    const N = 250;
    const body = Array.from({ length: N }, (_, i) => JSON.stringify({ run: `listed-${i}`, event: 'e1', type: 'edge', at: new Date().toISOString(), from: 'orchestrator', to: 'researcher', kind: 'delegate' })).join('\n') + '\n';
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    const all = await runCli(['runs', '--server', srv.api, '--limit', '100', '--all', '--json']);
    expect(all.code, all.stderr).toBe(0);
    const pages = all.stdout.trim().split('\n').map((l) => JSON.parse(l) as { runs: { run: string }[]; next: string | null });
    expect(pages.map((p) => p.runs.length)).toEqual([100, 100, 50]);
    expect(pages[2].next).toBeNull();
    const runs = pages.flatMap((p) => p.runs.map((r) => r.run));
    expect(new Set(runs).size).toBe(N);
    // one page: the runs as lines, the next page's cursor on stderr, and that cursor gives the page after
    const one = await runCli(['runs', '--server', srv.api, '--limit', '100']);
    expect(one.code).toBe(0);
    expect(one.stdout.trim().split('\n')).toHaveLength(100);
    const cursor = /--after (\S+)/.exec(one.stderr)?.[1];
    expect(cursor).toBeDefined();
    const second = await runCli(['runs', '--server', srv.api, '--limit', '100', '--after', cursor!, '--json']);
    expect((JSON.parse(second.stdout) as { runs: { run: string }[] }).runs.map((r) => r.run)).toEqual(pages[1].runs.map((r) => r.run));
    const bad = await runCli(['runs', '--server', srv.api, '--after', 'nonsense']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/cursor/);
  }, 60_000);
});
