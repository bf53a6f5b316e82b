/**
 * The WAL's fsync off the event loop (src/store/sqlite/wal-sync.ts): the connection commits with SQLite's
 * synchronous=NORMAL (no fsync inside COMMIT, which ran on the event loop), and an append is answered only after an
 * fdatasync of the WAL that began after its commit. Commits made while a sync is under way share the next one.
 * `synchronous: 'NORMAL'` makes no sync at all. (Crash durability is test/store-durability.test.ts's.)
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DATABASE_FILE, ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';

const receipt = (run: string, event: string) => ({ receipt: { run, event, type: 'edge' as const, at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' as const }, source: 's', receivedAt: 1 });
const pragmaOf = (store: ReceiptStore) => (store as unknown as { shared: { db: Database.Database } }).shared.db.pragma('synchronous', { simple: true });

describe('WAL sync off the event loop', () => {
  it('commits without an fsync in COMMIT and answers an append only after an fdatasync begun after it', async () => {
    const dir = tempDir('ta-walsync-');
    const store = ReceiptStore.open(dir);
    expect(pragmaOf(store)).toBe(1); // NORMAL: COMMIT writes the WAL and returns
    const before = store.commitStats().walSyncs;
    const first = store.append([receipt('ws-run-1', 'e1')]);
    let answered = false;
    void first.then(() => (answered = true));
    // The group commits at the end of this turn; its answer waits for the thread pool's fdatasync.
    await new Promise<void>((r) => setImmediate(r));
    expect(store.commitStats().commits).toBeGreaterThan(0);
    // Committed, so a read on the connection sees it already, acknowledged or not.
    expect(store.runReceipts('ws-run-1').map((r) => r.event)).toEqual(['e1']);
    await first;
    expect(answered).toBe(true);
    expect(store.commitStats().walSyncs).toBeGreaterThan(before);
    // Many groups while syncs are under way: every append answered, with no more syncs than groups.
    const results = [];
    for (let i = 0; i < 20; i++) {
      results.push(store.append([receipt(`ws-run-${i + 2}`, 'e1')]));
      await new Promise<void>((r) => setImmediate(r));
    }
    const c0 = store.commitStats();
    await Promise.all(results);
    const c1 = store.commitStats();
    expect(c1.walSyncs - before).toBeLessThanOrEqual(c1.commits);
    expect(c1.walSyncs).toBeGreaterThanOrEqual(c0.walSyncs);
    // sync() resolves once everything committed so far is synced.
    store.setVerdictState('ws-run-1', 'healthy', true, 2);
    await store.sync();
    store.close();
    // Everything acknowledged is in the file after close (the WAL scrubbed into it).
    const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
    expect(db.prepare('SELECT count(*) AS n FROM receipts').get()).toEqual({ n: 21 });
    db.close();
  });

  it("makes no sync with synchronous: 'NORMAL'", async () => {
    const store = ReceiptStore.open(tempDir('ta-walsync-normal-'), { synchronous: 'NORMAL' });
    await store.append([receipt('wn-run', 'e1')]);
    await store.sync();
    expect(store.commitStats()).toMatchObject({ walSyncs: 0 });
    expect(store.commitStats().commits).toBeGreaterThan(0);
    store.close();
  });

  it('answers appends still waiting when the store closes, from one last sync', async () => {
    const store = ReceiptStore.open(tempDir('ta-walsync-close-'));
    const pending = store.append([receipt('wc-run', 'e1')]);
    store.close(); // commits the queued group, then syncs on this thread
    await expect(pending).resolves.toMatchObject({ accepted: 1 });
  });
});
