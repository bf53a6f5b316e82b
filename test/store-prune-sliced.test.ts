// Issue 44: the SQLite retention prune in batches. `prune` deletes at most one batch (the oldest settled runs past
// the retention, one transaction); `pruneSliced` deletes the rest batch by batch, pausing when its slicer says so.
import { describe, expect, it } from 'vitest';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';

const edge = (run: string) => ({ receipt: { run, event: 'e', type: 'edge' as const, at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' as const }, source: 's', receivedAt: 1 });

describe('retention prune in batches (issue 44)', () => {
  it('prunes one batch per prune() and the rest in slices, oldest first, leaving live and recent runs', async () => {
    const store = ReceiptStore.open(tempDir('ta-prune-sliced-'));
    try {
      const runs = Array.from({ length: 450 }, (_, i) => `old-${String(i).padStart(3, '0')}`);
      await store.append([...runs.map(edge), edge('live'), edge('recent')]);
      runs.forEach((r, i) => store.setVerdictState(r, 'healthy', true, 1_000 + i));
      store.setVerdictState('recent', 'healthy', true, 9_000);
      await store.sync();
      expect(store.counts().runs).toBe(452);

      // One batch, the oldest first.
      expect(store.prune(5_000, 10_000)).toBe(200);
      expect(store.counts().runs).toBe(252);
      expect(store.runReceipts('old-199')).toEqual([]);
      expect(store.runReceipts('old-200')).toHaveLength(1);

      let pauses = 0;
      const slicer = { due: () => true, pause: async () => void pauses++ };
      expect(await store.pruneSliced(5_000, 10_000, slicer)).toBe(250);
      expect(pauses).toBeGreaterThanOrEqual(2); // between batches, and before the WAL scrub
      expect(store.counts()).toEqual({ receipts: 2, runs: 2 });
      expect(store.runReceipts('live')).toHaveLength(1);
      expect(store.runReceipts('recent')).toHaveLength(1);
      expect(await store.pruneSliced(5_000, 10_000, slicer)).toBe(0);
    } finally {
      store.close();
    }
  });
});
