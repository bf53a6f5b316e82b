// Issue 48: the engine learns whether a store answers a run's receipts synchronously from the store's declared
// capability (`synchronousReads`), never by probing for a `runReceipts` method. The embedded SQLite store declares
// synchronous reads (RunStates read back in place); a store that declares asynchronous reads (as the cluster's view of
// the shared PostgreSQL store does) is read ahead through `readReceipts`, even when it happens to have a
// `runReceipts` method: here the same real SQLite store, declared asynchronous.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine, type EngineStore } from '../src/audit/engine.js';
import { ReceiptStore } from '../src/store/index.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function open(): ReceiptStore {
  const dir = mkdtempSync(join(tmpdir(), 'sync-reads-'));
  dirs.push(dir);
  return ReceiptStore.open(dir);
}
const receipts = (run: string): Receipt[] => [
  { run, event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' },
  { run, event: 'e1', type: 'edge', at: iso(T0 + 1), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
  { run, event: 'e2', type: 'edge', at: iso(T0 + 2), from: 'researcher', to: 'orchestrator', kind: 'return' },
];

describe('the kind of a store\'s reads is declared, not probed', () => {
  it('the embedded store declares synchronous reads: a live run\'s receipts are read back in place', async () => {
    const store = open();
    expect(store.synchronousReads).toBe(true);
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    try {
      await engine.ingest(receipts('r'), 'test', T0 + 10);
      expect(engine.get('r')?.receipts.map((r) => r.event)).toEqual(['s', 'e1', 'e2']);
    } finally {
      store.close();
    }
  });

  it('a store declaring asynchronous reads is read through readReceipts, though it has a runReceipts method', async () => {
    const real = open();
    const declaredAsync = Object.create(real, { synchronousReads: { value: false } }) as ReceiptStore;
    expect(typeof declaredAsync.runReceipts).toBe('function');
    const engine = new AuditEngine(registry, declaredAsync as unknown as EngineStore, { retentionMs: 3_600_000 });
    try {
      await engine.ingest(receipts('r'), 'test', T0 + 10);
      // synchronous get() is refused for such a store (it gave no receipts: issue 48); view() reads them asynchronously
      expect(() => engine.get('r')).toThrow(/view\(\) or fetch\(\)/);
      expect((await engine.view('r'))?.receipts.map((r) => r.event)).toEqual(['s', 'e1', 'e2']);
    } finally {
      real.close();
    }
  });
});
