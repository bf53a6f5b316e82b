/**
 * The live runs' memory (issue 50): periodic tasks handle runs in every state, settled runs leave memory and come
 * back on their next receipt, the cap counts only runs that can still change, refusal is per run.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine, type EngineOptions } from '../src/audit/engine.js';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0 + ms).toISOString();

const open: ReceiptStore[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

function engineOver(dir: string, opts: Partial<EngineOptions> = {}): AuditEngine {
  const store = ReceiptStore.open(dir);
  open.push(store);
  const engine = new AuditEngine(registry, store, { retentionMs: 5_000, ...opts });
  engine.restore(t0);
  return engine;
}

const start = (run: string, ms = 0): Receipt => ({ run, event: 'start', at: at(ms), type: 'run.start', contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }) as Receipt;
const delegate = (run: string, ms = 1): Receipt => ({ run, event: 'd', at: at(ms), type: 'edge', from: 'orchestrator', to: 'researcher', kind: 'delegate' }) as Receipt;

describe('periodic tasks on runs in every state', () => {
  it('prune handles a run created by an ingest and not evaluated yet', async () => {
    let pruned: number | Error | null = null;
    let listed = -1;
    const engine: AuditEngine = engineOver(tempDir('ta-mem-'), {
      hooks: {
        // Called after the fold created the run and before it is evaluated: the state a timer can find it in.
        receipts: () => {
          if (pruned !== null) return;
          try {
            pruned = engine.prune(t0 + 60_000);
            listed = engine.list({ limit: 10 }).length;
          } catch (e) {
            pruned = e as Error;
          }
        },
      },
    });
    await engine.ingest([start('fresh'), delegate('fresh')], 'src', t0 + 10);
    expect(pruned).toBe(0);
    expect(listed).toBe(0);
    expect(engine.verdictOf('fresh')?.verdict).toBeDefined();
  });
});
