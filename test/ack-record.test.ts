/**
 * Acknowledgements leave a record: `ack RUN --by NAME --reason TEXT` is stored (who, when, why), shown by
 * GET /api/v1/runs/{run} and the run page's data, listed with `acked` / `alerting` / `stalled` (and filtered on them),
 * logged, kept out of metrics, and still there after a restart on the same data directory.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { shiftedDrift } from './helpers/drift.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const REASON = 'known flaky search tool, ticket OPS-12';

describe('acks: who, when, why; durable', () => {
  const dataDir = tempDir('ta-ack-');
  let srv: ServerProcess | undefined;
  afterAll(async () => {
    await srv?.stop();
  });

  it('stores the ack, shows it on the run and in the list, logs it, keeps it out of metrics and over a restart', async () => {
    srv = await startServerProcess({ dataDir });
    const body = shiftedDrift().map((r) => JSON.stringify(r)).join('\n') + '\n';
    const posted = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect(posted.status).toBe(200);
    await until('drift-shadow judged', async () => (await getJson(`${srv!.api}/api/v1/runs/drift-shadow`)).body?.verdict === 'unknown_agent');

    // Before: not acked, alerting.
    const before = (await getJson(`${srv.api}/api/v1/runs?alerting=true`)).body.runs.map((r: any) => r.run);
    expect(before).toContain('drift-shadow');
    expect((await getJson(`${srv.api}/api/v1/runs/drift-shadow`)).body.ack).toBeNull();

    // Refused reasons: too long, control characters.
    expect((await fetch(`${srv.api}/api/v1/runs/drift-shadow/ack?reason=${'x'.repeat(281)}`, { method: 'POST' })).status).toBe(400);
    expect((await fetch(`${srv.api}/api/v1/runs/drift-shadow/ack?reason=${encodeURIComponent('a\nb')}`, { method: 'POST' })).status).toBe(400);
    const tooLong = await runCli(['ack', 'drift-shadow', '--server', srv.api, '--reason', 'y'.repeat(300)]);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toBe('topology-audit ack: --reason: at most 280 characters\n');

    const r = await runCli(['ack', 'drift-shadow', '--server', srv.api, '--by', 'oncall', '--reason', REASON]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^drift-shadow \(unknown_agent\): acknowledged by oncall at \d{4}-/);

    const check = async (s: ServerProcess) => {
      const run = (await getJson(`${s.api}/api/v1/runs/drift-shadow`)).body;
      expect(run.ack).toMatchObject({ verdict: 'unknown_agent', by: 'oncall', reason: REASON, current: true });
      expect(Date.parse(run.ack.at)).toBeGreaterThan(0);
      const page = (await getJson(`${s.api}/ui/api/runs/drift-shadow`)).body;
      expect(page.ack).toMatchObject({ by: 'oncall', reason: REASON, current: true });
      const acked = (await getJson(`${s.api}/api/v1/runs?acked=true`)).body.runs;
      expect(acked.map((x: any) => x.run)).toEqual(['drift-shadow']);
      expect(acked[0]).toMatchObject({ acked: true, alerting: false, stalled: false });
      const alerting = (await getJson(`${s.api}/api/v1/runs?alerting=true`)).body.runs.map((x: any) => x.run);
      expect(alerting).not.toContain('drift-shadow');
      expect(alerting).toContain('drift-direct-route');
      const notAcked = (await getJson(`${s.api}/api/v1/runs?acked=false`)).body.runs;
      expect(notAcked).toHaveLength(8);
      // Every other run carries the same fields (a healthy run neither alerts nor stalls).
      expect(notAcked.find((x: any) => x.run === 'drift-complete')).toMatchObject({ acked: false, alerting: false, stalled: false });
      const metrics = await (await fetch(`${s.api}/metrics`)).text();
      expect(metrics).not.toContain('OPS-12');
      expect(metrics).not.toContain('oncall');
    };
    await check(srv);
    const logged = srv.stderr().split('\n').filter((l) => l.includes('"event":"ack"')).map((l) => JSON.parse(l));
    expect(logged).toEqual([expect.objectContaining({ event: 'ack', run: 'drift-shadow', verdict: 'unknown_agent', by: 'oncall', reason: REASON, already: false })]);

    // Order: oldest first by the first receipt (server time, then run id: keyset paging), the reverse of the default.
    const newest = (await getJson(`${srv.api}/api/v1/runs`)).body.runs;
    const oldest = (await getJson(`${srv.api}/api/v1/runs?order=oldest`)).body.runs;
    expect(oldest.map((x: any) => x.run)).toEqual(newest.map((x: any) => x.run).reverse());
    expect(oldest[0].run).not.toBe(newest[0].run);
    expect((await fetch(`${srv.api}/api/v1/runs?order=sideways`)).status).toBe(400);
    expect((await fetch(`${srv.api}/api/v1/runs?acked=maybe`)).status).toBe(400);

    // Restart on the same data directory: the ack is still there and still silences the run.
    expect(await srv.stop()).toBe(0);
    srv = await startServerProcess({ dataDir });
    await check(srv);
    await until('alerting gauge without the acked run', async () => {
      const m = await (await fetch(`${srv!.api}/metrics`)).text();
      return /^topology_alerting_runs\{contract="research-publish",verdict="forbidden_edge"\} 1/m.test(m) && !/^topology_alerting_runs\{contract="research-publish",verdict="unknown_agent"\} [1-9]/m.test(m);
    });
  });

  it("docs/alerting.md says what this test shows: acknowledgements survive a restart (they are not held in memory)", () => {
    const doc = readFileSync(join(ROOT, 'docs', 'alerting.md'), 'utf8');
    expect(doc).not.toMatch(/acknowledgements are held in memory/i);
    expect(doc).toContain('survive an auditor restart');
  });
});
