/**
 * Issue 50 item 2: a restart answers in seconds. The span log is replayed in batches (one commit per batch, not one
 * per entry) while the listeners serve, and readiness says when the replay is done.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { AuditEngine } from '../src/audit/engine.js';
import { Ingestor, REPLAY_BATCH } from '../src/audit/ingestor.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import { SpanPipeline, type LoggedSpan } from '../src/ingest/pipeline.js';
import { encodeLoggedSpans } from '../src/ingest/span-log.js';
import { createAuditMetrics } from '../src/metrics/index.js';
import { ReceiptStore } from '../src/store/index.js';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');
const ENTRIES = 10_000;

/** A data directory whose span log holds `n` entries: each an agent span of its own trace, waiting for its caller. */
async function spanLogOf(dir: string, n: number): Promise<void> {
  const store = ReceiptStore.open(dir);
  const now = Date.now();
  const log = Array.from({ length: n }, (_, i) => {
    const t = hex(0xabc000 + i, 32);
    const span: LoggedSpan = { t, s: hex(0x1000 + i, 16), p: hex(0x9000 + i, 16), src: 'anonymous', op: 'agent', st: now - 1000, en: now - 500, sc: 0, run: `replayed-${i}`, agent: 'researcher' };
    return { traceId: t, loggedAt: now, body: encodeLoggedSpans([span]) };
  });
  await store.append([], log);
  store.close();
}

const open: ReceiptStore[] = [];
const servers: ServerProcess[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) s.close();
  for (const s of servers.splice(0)) await s.stop();
});

describe('the span log replayed after a restart', () => {
  it(`replays ${ENTRIES.toLocaleString('en')} entries in batches: a commit per batch, every pending span waiting again`, async () => {
    const dir = tempDir('ta-replay-');
    await spanLogOf(dir, ENTRIES);
    const store = ReceiptStore.open(dir);
    open.push(store);
    expect(store.spanLog()).toHaveLength(ENTRIES);
    const engine = new AuditEngine(registry, store, { retentionMs: 60_000 });
    engine.restore(Date.now());
    const pipeline = new SpanPipeline({ waitMs: 60_000, maxSpans: 100_000 });
    const ingestor = new Ingestor(engine, pipeline, createAuditMetrics(), { maxPendingReceipts: 1e6, maxInflightRequests: 100 });
    const before = store.commitStats().commits;
    const progress: number[] = [];
    const replaying = ingestor.replaySpanLog();
    // between batches the event loop runs: the progress is seen moving (what /readyz reports)
    for (let i = 0; i < 10_000 && ingestor.replayProgress; i++) {
      const p = ingestor.replayProgress;
      if (p && progress[progress.length - 1] !== p.done) progress.push(p.done);
      await new Promise((r) => setImmediate(r));
    }
    expect(await replaying).toBe(ENTRIES);
    expect(ingestor.replayProgress).toBeNull();
    const commits = store.commitStats().commits - before;
    // one commit per batch of REPLAY_BATCH entries (and the deletion of the replayed entries), not one per entry
    expect(commits).toBeGreaterThan(0);
    expect(commits).toBeLessThanOrEqual(Math.ceil(ENTRIES / REPLAY_BATCH) + 2);
    expect(progress.length).toBeGreaterThan(1);
    expect(pipeline.callers.stats().pending).toBe(ENTRIES);
    // re-logged (each pending trace once), the replayed entries deleted
    expect(store.spanLog()).toHaveLength(ENTRIES);
  }, 120_000);

  it('serves while it replays: /healthz before the replay is done, /readyz 503 until then, 200 after', async () => {
    const dir = tempDir('ta-replay-srv-');
    await spanLogOf(dir, ENTRIES);
    const srv = await startServerProcess({ dataDir: dir, args: ['--parent-wait', '60s'] });
    servers.push(srv);
    expect((await getJson(`${srv.api}/healthz`)).status).toBe(200);
    await until('the span log replayed', async () => /"event":"span_log_replayed","entries":10000/.test(srv.stderr()) || null, 60_000);
    // the log says the listeners were up before the replay was done (in one stream, in the order it happened)
    const err = srv.stderr();
    expect(err.indexOf('"event":"listening"')).toBeGreaterThan(-1);
    expect(err.indexOf('"event":"listening"')).toBeLessThan(err.indexOf('"event":"span_log_replayed"'));
    const ready = await until('ready after the replay', async () => {
      const r = await getJson(`${srv.api}/readyz`);
      return r.status === 200 ? r : null;
    }, 60_000);
    expect(ready.body.ready).toBe(true);
  }, 120_000);
});
