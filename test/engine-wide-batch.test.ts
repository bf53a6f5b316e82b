// Issue 30.3: a batch of more than 2,048 receipts is committed in chunks (the event loop is yielded between them, so
// one 20,000-receipt transaction no longer holds it ~100 ms). A commit that fails part-way (a real SQLite size cap)
// fails the ingest (nothing acknowledged), and the chunks committed before it are folded: the live run holds exactly
// what the store holds, and a retry of the whole batch stores the rest (the committed part counted as duplicates).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine } from '../src/audit/engine.js';
import { ReceiptStore, StoreCommitError } from '../src/store/index.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();

function wide(run: string, agents: number): Receipt[] {
  const rs: Receipt[] = [{ run, event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }];
  for (let i = 0; i < agents; i++) rs.push({ run, event: `e${i}`, type: 'edge', at: iso(T0 + i + 1), from: 'orchestrator', to: `unknown-${i}`, kind: 'delegate' });
  return rs;
}

describe('a wide batch committed in chunks', () => {
  it('10,000 receipts: all stored and folded; every agent reported', async () => {
    const store = ReceiptStore.open(mkdtempSync(join(tmpdir(), 'wide-batch-')));
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    try {
      const out = await engine.ingest(wide('w', 10000), 'test', T0 + 60_000);
      expect(out).toEqual({ accepted: 10001, duplicates: 0, conflicts: 0 });
      const v = engine.get('w')!;
      expect(v.receipts).toHaveLength(10001);
      expect(v.verdict.findings.filter((f) => f.code === 'unknown_agent')).toHaveLength(10000);
      expect(store.commitStats().commits).toBeGreaterThanOrEqual(5);
    } finally {
      store.close();
    }
  });

  it('a commit failing part-way: the ingest fails, the live run holds what was stored, a retry stores the rest', async () => {
    const store = ReceiptStore.open(mkdtempSync(join(tmpdir(), 'wide-batch-full-')));
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    try {
      // room for a few chunks of this batch, not all of it
      store.setMaxDbBytes(1024 * 1024);
      const batch = wide('w', 20000);
      await expect(engine.ingest(batch, 'test', T0 + 60_000)).rejects.toBeInstanceOf(StoreCommitError);
      const stored = store.runReceipts('w').length;
      expect(stored).toBeGreaterThan(0);
      expect(stored).toBeLessThan(batch.length);
      const v = engine.get('w')!;
      // the live state folded exactly the stored part: one unknown agent per stored edge
      expect(v.verdict.findings.filter((f) => f.code === 'unknown_agent')).toHaveLength(stored - 1);
      store.setMaxDbBytes(null);
      const retry = await engine.ingest(batch, 'test', T0 + 61_000);
      expect(retry).toEqual({ accepted: batch.length - stored, duplicates: stored, conflicts: 0 });
      expect(store.runReceipts('w')).toHaveLength(batch.length);
      expect(engine.get('w')!.verdict.findings.filter((f) => f.code === 'unknown_agent')).toHaveLength(20000);
    } finally {
      store.close();
    }
  });
});
