/**
 * Issue 47, item 3, third attack: one run with 100,000 handoff receipts made each next receipt, and /healthz, slow.
 * The old build audited a run's handoffs again from all its handoff receipts on every evaluation (sorted, traced,
 * walked): the cost of the next receipt grew with the receipts already held. Now the run's handoff state is folded
 * receipt by receipt (src/core/rules/handoff/fold.ts). Through a real server (HTTP, SQLite store, the engine's
 * evaluations) this posts 100,000 handoff receipts to one run and measures the work the handoff audit does (the
 * `handoffWork` hook counts receipts walked and attempts traced), not wall time: per receipt it stays flat from the
 * first batch to the last, each single receipt posted after the 100,000 costs a handful of steps, and /healthz,
 * probed meanwhile, answers every time.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, startServer, type RunningServer } from '../src/server/serve.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { HANDOFF_FINDING_VERDICTS, handoffWork } from '../src/core/index.js';
import { ROOT, getJson, healthz, tempDir } from './helpers/server.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const RUN = 'handoff-100k';
const HANDOFFS = 10_000;
const PER_HANDOFF = 10;
const BATCH = 1_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** The 10 receipts of handoff i, in time order: proposed, admitted with a lease, dispatched, running, 4 renewals, returned, accepted. */
function handoffReceipts(i: number): object[] {
  const t = T0 + i * 100;
  const h = `h${i}`;
  const base = { run: RUN, type: 'handoff', handoff: h, attempt: 1, from: 'orchestrator', to: `worker-${i % 7}` };
  const lease = (k: number) => iso(t + 60_000 + k * 1000);
  return [
    { ...base, event: `${h}-p`, at: iso(t), state: 'PROPOSED', duplicateKey: `key-${i}`, finalOwner: 'orchestrator', onTimeout: 'cancel' },
    { ...base, event: `${h}-a`, at: iso(t + 1), state: 'ADMITTED', leaseExpiresAt: lease(0) },
    { ...base, event: `${h}-d`, at: iso(t + 2), state: 'DISPATCHED' },
    { ...base, event: `${h}-r`, at: iso(t + 3), state: 'RUNNING' },
    ...[1, 2, 3, 4].map((k) => ({ ...base, event: `${h}-hb${k}`, at: iso(t + 3 + k), state: 'RUNNING', leaseExpiresAt: lease(k) })),
    { ...base, event: `${h}-ret`, at: iso(t + 8), state: 'RETURNED', stateVersion: 7 },
    { ...base, event: `${h}-acc`, at: iso(t + 9), state: 'ACCEPTED', stateVersion: 7 },
  ];
}


describe('one run with 100,000 handoff receipts', () => {
  let srv: RunningServer;
  let api: string;
  beforeAll(async () => {
    srv = await startServer(loadContractDir(join(ROOT, 'contracts')), {
      ...DEFAULTS, port: 0, otlpHttpPort: 0, otlpGrpcPort: 0, dataDir: tempDir('ta-handoff-100k-'), log: () => undefined, version: 'test',
    });
    api = `http://127.0.0.1:${srv.ports.api}`;
  });
  afterAll(async () => {
    await srv?.close();
  });

  /** Posts NDJSON lines; the handoff audit's steps meanwhile, with /healthz probed until the post is answered. */
  async function post(lines: object[]): Promise<{ steps: number; probes: number }> {
    const before = handoffWork.steps;
    let done = false;
    const answer = fetch(`${api}/v1/receipts`, { method: 'POST', body: lines.map((l) => JSON.stringify(l)).join('\n') + '\n', headers: { 'content-type': 'application/x-ndjson' } })
      .then(async (r) => ({ status: r.status, body: (await r.json()) as { accepted: number } }))
      .finally(() => (done = true));
    let probes = 0;
    while (!done) {
      expect(await healthz(srv.ports.api)).toBe(200);
      probes++;
    }
    const r = await answer;
    expect(r.status).toBe(200);
    expect(r.body.accepted).toBe(lines.length);
    return { steps: handoffWork.steps - before, probes };
  }

  it('keeps the per-receipt cost of the handoff audit flat and /healthz answering', async () => {
    const start = { run: RUN, event: 's', type: 'run.start', at: iso(T0 - 1), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' };
    await post([start]);
    const all: object[] = [];
    for (let i = 0; i < HANDOFFS; i++) all.push(...handoffReceipts(i));
    expect(all).toHaveLength(100_000);
    // the last 20 receipts are posted one at a time once the other 99,980 are held
    const bulk = all.slice(0, -20);
    const perReceipt: number[] = [];
    let probes = 0;
    for (let k = 0; k < bulk.length; k += BATCH) {
      const lines = bulk.slice(k, k + BATCH);
      const r = await post(lines);
      perReceipt.push(r.steps / lines.length);
      probes += r.probes;
      // flat: a batch costs about its own receipts, never the ones already held (the old build: k + BATCH each)
      expect(r.steps, `batch at ${k}: ${r.steps} steps for ${lines.length} receipts`).toBeLessThanOrEqual(4 * lines.length);
    }
    const singles: number[] = [];
    for (const line of all.slice(-20)) {
      const r = await post([line]);
      singles.push(r.steps);
      probes += r.probes;
    }
    console.log(`steps per receipt by batch: first ${perReceipt[0]}, last ${perReceipt.at(-1)}, max ${Math.max(...perReceipt)}; single receipts after 99,980: ${singles.join(' ')}; /healthz answered ${probes} times`);
    // each next receipt after 99,980 held: a handful of steps (the old build: ~100,000 each)
    expect(Math.max(...singles)).toBeLessThanOrEqual(8);
    expect(probes).toBeGreaterThanOrEqual(100);
    // the verdict is the full audit's: every handoff returned and was accepted in time, nothing to find
    const v = await getJson(`${api}/api/v1/runs/${RUN}`);
    expect(v.status).toBe(200);
    const codes = (v.body.findings as { code: string }[]).map((f) => f.code);
    expect(codes.filter((c) => c in HANDOFF_FINDING_VERDICTS)).toEqual([]);
    expect(v.body.receipts).toHaveLength(100_001);
    // and a receipt among them that leaves a hole in the evidence is found at once (a handful of steps): a second
    // attempt of handoff h5000, timed in the middle of the run, accepted with no admission and no return
    const late = { run: RUN, type: 'handoff', handoff: 'h5000', attempt: 2, event: 'h5000-2-acc', at: iso(T0 + 5000 * 100 + 50), state: 'ACCEPTED', from: 'orchestrator', to: 'worker-2' };
    const r = await post([late]);
    expect(r.steps).toBeLessThanOrEqual(8);
    const after = await getJson(`${api}/api/v1/runs/${RUN}`);
    const gaps = (after.body.findings as { code: string; events: string[] }[]).filter((f) => f.code === 'lifecycle_gap');
    // ACCEPTED with no ADMITTED record, and with no RETURNED record: two gaps, both on that receipt
    expect(gaps.map((f) => f.events)).toEqual([['h5000-2-acc'], ['h5000-2-acc']]);
  }, 600_000);
});
