/**
 * Content at rest (docs/security.md): the data directory is private (0700, files 0600), and what is pruned is
 * gone from every file of it, the WAL included (secure_delete plus a truncating checkpoint), not just unlinked
 * from the b-tree.
 */
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';

/** Every file of the directory, byte for byte (the database, its -wal and -shm). */
function holds(dir: string, marker: string): string[] {
  const needle = Buffer.from(marker);
  return readdirSync(dir).filter((n) => readFileSync(join(dir, n)).includes(needle));
}

const mode = (p: string) => statSync(p).mode & 0o777;

describe('receipt store at rest', () => {
  it('keeps its directory 0700 and its files (db, -wal, -shm) 0600, also when the directory existed with looser modes', async () => {
    for (const existing of [false, true]) {
      const parent = tempDir('ta-modes-');
      const dir = join(parent, 'data');
      if (existing) {
        mkdirSync(dir, { mode: 0o755 });
        chmodSync(dir, 0o755);
      }
      const store = ReceiptStore.open(dir);
      await store.append([{ receipt: { run: 'mode-run', event: 'e', type: 'edge', at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' }, source: 's', receivedAt: 1 }]);
      const files = readdirSync(dir);
      expect(files).toEqual(expect.arrayContaining(['receipts.db', 'receipts.db-wal', 'receipts.db-shm']));
      expect(mode(dir)).toBe(0o700);
      for (const f of files) expect([f, mode(join(dir, f))]).toEqual([f, 0o600]);
      store.close();
      const again = ReceiptStore.open(dir);
      for (const f of readdirSync(dir)) expect([f, mode(join(dir, f))]).toEqual([f, 0o600]);
      again.close();
    }
  });

  it('leaves no byte of a pruned run or a spent span log entry in the database or its WAL, after pruning and after close', async () => {
    const dir = tempDir('ta-scrub-');
    const store = ReceiptStore.open(dir);
    const RUN = 'scrub-marker-run-4e2f9a';
    const TRACE = 'scrubtrace0c1d2e3f4a5b6c7d8e9f0a';
    const KEEP = 'kept-marker-run-77c1';
    const receipt = (run: string, event: string) => ({ run, event, type: 'edge' as const, at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' as const });
    await store.append(
      Array.from({ length: 50 }, (_, i) => ({ receipt: receipt(RUN, `e${i}`), source: 's', receivedAt: 1 })),
      [{ traceId: TRACE, loggedAt: 1, body: '[]' }],
    );
    await store.append([{ receipt: receipt(KEEP, 'e'), source: 's', receivedAt: 1 }]);
    store.setVerdictState(RUN, 'healthy', true, 1);
    await store.sync();
    expect(holds(dir, RUN).length).toBeGreaterThan(0); // it really was written
    expect(holds(dir, TRACE).length).toBeGreaterThan(0);

    expect(store.prune(1000, 10_000)).toBe(1);
    expect(await store.pruneSpanLog(10_000, () => false)).toBe(1);
    expect(holds(dir, RUN)).toEqual([]);
    expect(holds(dir, TRACE)).toEqual([]);
    expect(holds(dir, KEEP)).not.toEqual([]); // what is live stays
    expect(store.runReceipts(KEEP)).toHaveLength(1);

    store.close();
    expect(holds(dir, RUN)).toEqual([]);
    expect(holds(dir, TRACE)).toEqual([]);
    const again = ReceiptStore.open(dir);
    expect(again.runReceipts(RUN)).toEqual([]);
    expect(again.runReceipts(KEEP)).toHaveLength(1);
    again.close();
  });
});
