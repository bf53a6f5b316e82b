/**
 * WAL checkpoints off the event loop (issue 44, src/store/checkpointer.ts): with `checkpointEveryMs` a worker thread
 * copies the WAL into the database (SQLite's auto-checkpoint is off on the main connection), and the scrub after a
 * sliced prune still leaves no byte of a pruned run or span-log entry in any file, after pruning and after close.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { DATABASE_FILE, ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';

const holds = (dir: string, marker: string) => readdirSync(dir).filter((n) => readFileSync(join(dir, n)).includes(Buffer.from(marker)));
const receipt = (run: string, event: string) => ({ run, event, type: 'edge' as const, at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' as const });
/** A slicer that pauses at every step (the periodic scheduler's, at its most eager). */
const eager = { due: () => true, pause: () => sleep(1) };

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000 && !ok(); i++) await sleep(10);
  if (!ok()) throw new Error(`never: ${what}`);
}

describe('receipt store with the checkpoint worker', () => {
  it('copies committed pages into the database file from the worker, with no checkpoint on the main connection', async () => {
    const dir = tempDir('ta-ckpt-');
    const store = ReceiptStore.open(dir, { checkpointEveryMs: 20 });
    const RUN = 'ckpt-marker-run-51c0de';
    await store.append([{ receipt: receipt(RUN, 'e1'), source: 's', receivedAt: 1 }]);
    await store.sync();
    // One small commit never reaches SQLite's auto-checkpoint (1,000 pages): only the worker copies it there.
    await until('the run in the database file', () => readFileSync(join(dir, DATABASE_FILE)).includes(Buffer.from(RUN)));
    expect(store.runReceipts(RUN)).toHaveLength(1);
    store.close();
    const again = ReceiptStore.open(dir);
    expect(again.runReceipts(RUN)).toHaveLength(1);
    again.close();
  });

  it('leaves no byte of a pruned run or a spent span log entry after sliced prunes and after close', async () => {
    const dir = tempDir('ta-ckpt-scrub-');
    const store = ReceiptStore.open(dir, { checkpointEveryMs: 5 });
    const RUN = 'ckpt-scrub-run-9a7f33';
    const TRACE = 'c0ffee0c1d2e3f4a5b6c7d8e9f0a1b2c';
    const KEEP = 'ckpt-kept-run-2d1e';
    await store.append(
      Array.from({ length: 300 }, (_, i) => ({ receipt: receipt(RUN, `e${i}`), source: 's', receivedAt: 1 })),
      [{ traceId: TRACE, loggedAt: 1, body: '[]' }],
    );
    await store.append([{ receipt: receipt(KEEP, 'e'), source: 's', receivedAt: 1 }]);
    store.setVerdictState(RUN, 'healthy', true, 1);
    await store.sync();
    expect(holds(dir, RUN).length).toBeGreaterThan(0);
    const retired: string[] = [];
    expect(await store.pruneSliced(1000, 10_000, eager, (rows) => retired.push(...rows.map((r) => r.run)))).toBe(1);
    expect(retired).toEqual([RUN]);
    expect(await store.pruneSpanLog(10_000, () => false, eager)).toBe(1);
    expect(holds(dir, RUN)).toEqual([]);
    expect(holds(dir, TRACE)).toEqual([]);
    expect(store.runReceipts(KEEP)).toHaveLength(1);
    store.close();
    expect(holds(dir, RUN)).toEqual([]);
    expect(holds(dir, TRACE)).toEqual([]);
    expect(holds(dir, KEEP)).not.toEqual([]);
  });

  it("truncates the WAL in the worker while this thread's writes wait for it, losing none", async () => {
    const dir = tempDir('ta-ckpt-hold-');
    const store = ReceiptStore.open(dir, { checkpointEveryMs: 1_000 });
    const RUN = 'ckpt-hold-run-77e1';
    await store.append(Array.from({ length: 200 }, (_, i) => ({ receipt: receipt(RUN, `e${i}`), source: 's', receivedAt: 1 })));
    store.setVerdictState(RUN, 'healthy', true, 1);
    await store.sync();
    const retention = (store as unknown as { retention: { truncatesInWorker: number; checkpointer: { truncate(): Promise<boolean> } } }).retention;
    const shared = (store as unknown as { shared: { writeHold: Promise<void> | null } }).shared;
    // The prune's scrub holds this thread's writes while the worker truncates: appends made meanwhile are queued,
    // then committed and answered once the worker is done.
    const cp = retention.checkpointer;
    const truncate = cp.truncate.bind(cp);
    let during: Promise<{ accepted: number }>[] = [];
    let commitsDuring = -1;
    let held = false;
    cp.truncate = () => {
      held = shared.writeHold !== null;
      const done = truncate();
      during = Array.from({ length: 5 }, (_, i) => store.append([{ receipt: receipt(`ckpt-during-${i}`, 'e'), source: 's', receivedAt: 2 }]));
      commitsDuring = store.commitStats().commits;
      return done;
    };
    const pruning = store.pruneSliced(1000, 10_000, eager);
    expect(await pruning).toBe(1);
    expect(held).toBe(true);
    expect(retention.truncatesInWorker).toBe(1);
    expect(during).toHaveLength(5);
    const answers = await Promise.all(during);
    expect(answers.every((a) => a.accepted === 1)).toBe(true);
    expect(store.commitStats().commits).toBeGreaterThan(commitsDuring);
    // The WAL was cut to zero bytes by the worker, then written again by the held appends only: the pruned run is gone.
    expect(holds(dir, RUN)).toEqual([]);
    store.close();
    const again = ReceiptStore.open(dir);
    for (let i = 0; i < 5; i++) expect(again.runReceipts(`ckpt-during-${i}`)).toHaveLength(1);
    again.close();
  });
});
