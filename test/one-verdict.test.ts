// One verdict function (issue 14): the handoff rules are part of `evaluate`, so `replay`, a live `serve` (API) and
// the library's `classify()` give the same verdicts on runs with handoff receipts, and a live server turns
// `lease_expired_open` at the lease expiry with no new receipt.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify, groupByRun, loadContractDir, type Receipt, type RunVerdict } from '../src/index.js';
import { main } from '../src/cli/main.js';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import { waitFor } from './helpers/prometheus.js';


const dir = join(ROOT, 'receipts', 'handoffs');
const files = readdirSync(dir).filter((f) => f.endsWith('.ndjson')).map((f) => join(dir, f));
const lines = (f: string) => readFileSync(f, 'utf8').split('\n').filter((l) => l.trim() !== '');
const allReceipts: Receipt[] = files.flatMap((f) => lines(f).map((l) => JSON.parse(l) as Receipt));

/** What must agree: verdict, settledness and the finding codes (messages may name `now`). */
const gist = (v: Pick<RunVerdict, 'verdict' | 'settled' | 'findings'>) => ({ verdict: v.verdict, settled: v.settled, codes: v.findings.map((f) => f.code) });

async function getJson(url: string) {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

describe('one verdict: replay, serve and the library agree on the handoff fixtures', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess();
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
  });

  it('every handoff fixture run has the same verdict and finding codes through all three', async () => {
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: allReceipts.map((r) => JSON.stringify(r)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    const runs = [...groupByRun(allReceipts).keys()].sort();
    expect(runs.length).toBeGreaterThanOrEqual(15);
    // The fixtures are long over: any `now` after them gives the same verdicts, so the three may use their own clocks.
    const now = new Date().toISOString();
    const out = { stdout: '', stderr: '' };
    const code = await main(['replay', ...files, '--contracts', join(ROOT, 'contracts'), '--now', now, '--json'], {
      stdout: (s: string) => void (out.stdout += s),
      stderr: (s: string) => void (out.stderr += s),
    });
    expect(code, out.stderr).toBeLessThanOrEqual(1); // 1: some run is unsafe (the fixtures are failure traces)
    const replayRuns = new Map(out.stdout.trim().split('\n').map((l) => JSON.parse(l) as RunVerdict).map((v) => [v.run, v]));
    const registry = loadContractDir(join(ROOT, 'contracts'));
    const withHandoffFindings = new Set<string>();
    for (const run of runs) {
      const library = classify(allReceipts.filter((r) => r.run === run), Date.parse(now), registry);
      const served = await waitFor(async () => {
        const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
        return r.status === 200 ? r.body : undefined;
      }, { what: `run ${run}` });
      const viaReplay = replayRuns.get(run);
      expect(viaReplay, run).toBeDefined();
      expect({ run, ...gist(served) }).toEqual({ run, ...gist(library) });
      expect({ run, ...gist(viaReplay!) }).toEqual({ run, ...gist(library) });
      if (library.findings.some((f) => ['lease_expired_open', 'duplicate_active', 'accepted_after_cancel', 'budget_copied', 'resurrection'].includes(f.code))) withHandoffFindings.add(run);
    }
    // Not vacuous: the library's classify() reports handoff findings now (it used to omit them).
    expect(withHandoffFindings.size).toBeGreaterThanOrEqual(4);
  }, 90_000);

  it('a live server turns lease_expired_open at the lease expiry, with no new receipt', async () => {
    // ho-orphaned-dispatch up to RUNNING, shifted so that its lease expires 6 s from now (the plan's own deadline
    // is 64 s after the lease, so nothing else moves the verdict in between).
    const source = lines(join(dir, 'ho-orphaned-dispatch.ndjson')).map((l) => JSON.parse(l) as Receipt & { leaseExpiresAt?: string }).filter((r) => r.event <= 'e07');
    const lease = Date.now() + 6_000;
    const shift = lease - Date.parse('2025-03-14T10:04:00Z');
    const moved = (t: string) => new Date(Date.parse(t) + shift).toISOString();
    const run = `lease-live-${process.pid}`;
    const receipts = source.map((r) => ({ ...r, run, at: moved(r.at), ...(r.leaseExpiresAt ? { leaseExpiresAt: moved(r.leaseExpiresAt) } : {}) }));
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: receipts.map((r) => JSON.stringify(r)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBe(200);
    expect((await res.json()).accepted).toBe(receipts.length);
    const before = (await getJson(`${srv.api}/api/v1/runs/${run}`)).body as RunVerdict;
    expect(Date.now()).toBeLessThan(lease);
    expect(before.verdict).toBe('waiting');
    expect(before.findings.map((f) => f.code)).not.toContain('lease_expired_open');
    const after = await waitFor(
      async () => {
        const v = (await getJson(`${srv.api}/api/v1/runs/${run}`)).body as RunVerdict;
        return v.findings.some((f) => f.code === 'lease_expired_open') ? v : undefined;
      },
      { timeoutMs: 40_000, intervalMs: 250, what: 'lease_expired_open on the live server' },
    );
    const seenAt = Date.now();
    expect(seenAt).toBeGreaterThanOrEqual(lease);
    // Well before the plan's own deadline (lease + 64 s): the lease expiry itself scheduled the re-evaluation.
    expect(seenAt).toBeLessThan(lease + 60_000);
    // The plan still waits on the specialist (waiting outranks incomplete), but the run is now settled by the lease finding.
    expect(after.verdict).toBe('waiting');
    expect(after.findings.find((f) => f.code === 'lease_expired_open')).toMatchObject({ verdict: 'incomplete', settled: true });
    expect(after.settled).toBe(true);
  }, 90_000);
});
