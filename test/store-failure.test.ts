/**
 * Commit failures are real, not injected: SQLite's own "database or disk is full" from a size cap
 * (max_page_count, works for any user, root included), and a genuinely full filesystem (a small tmpfs, which
 * needs mount privileges; in this sandbox tests run as root, and root ignores chmod, so a read-only directory
 * would not fail).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { DATABASE_FILE, ReceiptStore, StoreCommitError, type AppendResult, type StoredReceipt } from '../src/store/index.js';

const pin = { contract: 'research', version: '2', phase: 'build' };

function batch(prefix: string, size: number): StoredReceipt[] {
  return Array.from({ length: size }, (_, i) => ({
    receipt: {
      run: `run-${prefix}-${i % 5}`,
      event: `${prefix}-${i}`,
      type: 'edge',
      at: '2025-01-01T10:00:00Z',
      from: 'orchestrator',
      to: 'researcher',
      kind: 'delegate',
    } satisfies Receipt,
    source: 'test',
    receivedAt: 1_000 + i,
  }));
}

/** Appends batches until one is rejected; returns the acknowledged keys and the rejection. */
async function fillUntilRejected(store: ReceiptStore, size: number): Promise<{ acked: string[]; error: unknown; rejected: StoredReceipt[] }> {
  const acked: string[] = [];
  for (let round = 0; round < 10_000; round++) {
    const items = batch(`b${round}`, size);
    try {
      await store.append(items);
      acked.push(...items.map((it) => `${it.receipt.run} ${it.receipt.event}`));
    } catch (error) {
      return { acked, error, rejected: items };
    }
  }
  throw new Error('the store never filled up');
}

function storedKeys(store: ReceiptStore, runs: Iterable<string>): Set<string> {
  const keys = new Set<string>();
  for (const run of runs) for (const r of store.runReceipts(run)) keys.add(`${r.run} ${r.event}`);
  return keys;
}

const runsOf = (keys: string[]): Set<string> => new Set(keys.map((k) => k.split(' ')[0]));

describe('ReceiptStore when a commit fails', () => {
  const dirs: string[] = [];
  afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

  it('rejects appends when the database is full, turns unhealthy, keeps acked receipts, and recovers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-full-'));
    dirs.push(dir);
    const store = ReceiptStore.open(dir, { maxDbBytes: 96 * 1024, retryDelayMs: 10 });
    try {
      const { acked, error, rejected } = await fillUntilRejected(store, 50);
      expect(acked.length).toBeGreaterThan(0);
      expect(error).toBeInstanceOf(StoreCommitError);
      expect((error as StoreCommitError).code).toBe('SQLITE_FULL');
      expect(store.healthy()).toBe(false);
      expect(store.commitStats().failedCommits).toBeGreaterThan(0);

      // Every append of a failing group rejects; nothing of it is stored.
      store.setPin('pinned-while-full', pin, 'hash');
      const group = await Promise.allSettled([store.append(batch('late-a', 50)), store.append(batch('late-b', 50))]);
      expect(group.map((g) => g.status)).toEqual(['rejected', 'rejected']);
      expect(store.healthy()).toBe(false);
      const stored = storedKeys(store, [...runsOf(acked), ...runsOf(rejected.map((r) => `${r.receipt.run} x`))]);
      expect(acked.filter((k) => !stored.has(k))).toEqual([]);
      expect(rejected.some((r) => stored.has(`${r.receipt.run} ${r.receipt.event}`))).toBe(false);
      expect(store.counts().receipts).toBe(acked.length);
      const queued = store.append(batch('late-c', 50));
      await expect(store.sync()).rejects.toBeInstanceOf(StoreCommitError);
      await expect(queued).rejects.toBeInstanceOf(StoreCommitError);

      // Space returns: the next commit lands, the retried pin with it, and the store is healthy again.
      store.setMaxDbBytes(null);
      const retried: AppendResult = await store.append(rejected);
      expect(retried.accepted).toBe(rejected.length);
      expect(store.healthy()).toBe(true);
      expect(store.getPin('pinned-while-full')?.pin).toEqual(pin);
    } finally {
      store.close();
    }
    const reopened = ReceiptStore.open(dir);
    try {
      expect(reopened.getPin('pinned-while-full')?.pin).toEqual(pin);
    } finally {
      reopened.close();
    }
  });

  it('retries queued pins and verdict states on its own after a failed commit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-retry-'));
    dirs.push(dir);
    const store = ReceiptStore.open(dir, { maxDbBytes: 96 * 1024, retryDelayMs: 5 });
    const committedVerdict = (): unknown => {
      const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
      try {
        return (db.prepare("SELECT verdict FROM runs WHERE run = 'run-x'").get() as { verdict: string } | undefined)?.verdict;
      } finally {
        db.close();
      }
    };
    try {
      await fillUntilRejected(store, 50);
      store.setVerdictState('run-x', 'working', false, 5);
      await expect(store.append(batch('with-verdict', 50))).rejects.toBeInstanceOf(StoreCommitError);
      expect(committedVerdict()).toBeUndefined();
      store.setMaxDbBytes(null);
      await new Promise((r) => setTimeout(r, 100));
      expect(committedVerdict()).toBe('working');
      expect(store.healthy()).toBe(true);
    } finally {
      store.close();
    }
  });

  const mountPoint = join(tmpdir(), `store-tmpfs-${process.pid}`);
  const canMountTmpfs = ((): boolean => {
    try {
      mkdirSync(mountPoint, { recursive: true });
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', mountPoint], { stdio: 'ignore' });
      return true;
    } catch {
      rmSync(mountPoint, { recursive: true, force: true });
      return false;
    }
  })();
  afterAll(() => {
    if (!canMountTmpfs) return;
    execFileSync('umount', [mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  });

  // Needs mount privileges (root in this sandbox); the size-cap test above covers the same path for any user.
  it.runIf(canMountTmpfs)('rejects appends on a full filesystem and recovers when space returns', async () => {
    const store = ReceiptStore.open(join(mountPoint, 'data'), { retryDelayMs: 10 });
    try {
      const { acked, error, rejected } = await fillUntilRejected(store, 100);
      expect(acked.length).toBeGreaterThan(0);
      expect(error).toBeInstanceOf(StoreCommitError);
      expect(['SQLITE_FULL', 'SQLITE_IOERR_WRITE', 'SQLITE_IOERR']).toContain((error as StoreCommitError).code);
      expect(store.healthy()).toBe(false);
      expect(store.counts().receipts).toBe(acked.length);

      execFileSync('mount', ['-o', 'remount,size=8m', mountPoint]);
      const retried = await store.append(rejected);
      expect(retried.accepted).toBe(rejected.length);
      expect(store.healthy()).toBe(true);
      const stored = storedKeys(store, runsOf(acked));
      expect(acked.filter((k) => !stored.has(k))).toEqual([]);
    } finally {
      store.close();
    }
  });
});
