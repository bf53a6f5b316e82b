/**
 * The demo, as users run it: `node examples/demo.mjs --drift <case>` against a live auditor started as a child
 * process, real OTLP from the receipt emitter. Each of the nine drift cases ends in its verdict (from the API),
 * and the demo exits with the `topology-audit gate` code: 0 healthy, 1 settled and not healthy, 75 still open.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, getJson, startServerProcess, type ServerProcess } from './helpers/server.js';

const DEMO = join(ROOT, 'examples', 'demo.mjs');

function demo(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [DEMO, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // No kill timer: the demo ends by itself (its waits are bounded by the verdict long-poll and the gate timeout).
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const CASES: [string, string, number][] = [
  ['healthy', 'healthy', 0],
  ['current', 'working', 75],
  ['wait', 'waiting', 75],
  ['late', 'incomplete', 1],
  ['old-version', 'stale_contract', 1],
  ['forbidden', 'forbidden_edge', 1],
  ['shadow', 'unknown_agent', 1],
  ['twice', 'ambiguous_route', 1],
  ['premature', 'false_complete', 1],
];

describe('examples/demo.mjs against a live auditor', () => {
  let srv: ServerProcess;
  let results: Map<string, { code: number | null; stdout: string; stderr: string }>;
  beforeAll(async () => {
    srv = await startServerProcess();
    const args = ['--endpoint', srv.otlpHttp, '--server', srv.api];
    // A run expected to settle gets a long gate timeout (the gate returns as soon as it settles, so a busy machine
    // only makes it slower, never wrong); a run expected to stay open is gated for a second (exit 75).
    const all = await Promise.all(CASES.map(([c, , code]) => demo(['--drift', c, ...args, '--gate-timeout', code === 75 ? '1s' : '5m'])));
    results = new Map(CASES.map(([c], i) => [c, all[i]]));
    // The hook's limit is a safety net for a hung child, not a budget: nine demos in parallel on a busy machine.
  });
  afterAll(async () => {
    expect(await srv.stop()).toBe(0);
  });

  it.each(CASES)('--drift %s ends %s; the gate exits %i', async (drift, verdict, gateCode) => {
    const r = results.get(drift)!;
    expect(r.stderr).toBe('');
    const run = /^run (\S+)$/m.exec(r.stdout)?.[1];
    expect(run, r.stdout).toMatch(new RegExp(`^demo-${drift}-`));
    expect(r.stdout).toMatch(new RegExp(`^verdict: ${verdict} \\(naive: green\\)`, 'm'));
    expect(r.stdout).toMatch(new RegExp(`^gate: exit ${gateCode} - ${run}: ${verdict}`, 'm'));
    expect(r.code).toBe(gateCode);
    // The verdict printed is the auditor's, for a run whose receipts all came over OTLP.
    const api = await getJson(`${srv.api}/api/v1/runs/${run}`);
    expect(api.status).toBe(200);
    expect(api.body.verdict).toBe(verdict);
    expect(api.body.pin).toEqual({ contract: 'research-publish', version: '3', phase: 'research' });
    const printedReceipts = r.stdout.split('\n').filter((l) => /^ {2}(run\.start|edge|wait|outcome|run\.end) /.test(l)).length;
    expect(api.body.receipts).toHaveLength(printedReceipts);
  });

  it('accepts `complete` for healthy, lists the cases, and refuses an unknown case', async () => {
    const complete = await demo(['--drift', 'complete', '--endpoint', srv.otlpHttp, '--server', srv.api]);
    expect(complete.stdout).toMatch(/^verdict: healthy/m);
    expect(complete.code).toBe(0);
    const list = await demo(['--list']);
    for (const [c] of CASES) expect(list.stdout).toContain(`  ${c} `);
    const bad = await demo(['--drift', 'sideways']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown drift case/);
  });
});
