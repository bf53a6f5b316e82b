/**
 * The live runs' memory (issue 50): periodic tasks handle runs in every state, settled runs leave memory and come
 * back on their next receipt, the cap counts only runs that can still change, refusal is per run.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine, EventBus, type AuditEvents, type EngineOptions } from '../src/audit/engine.js';
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

/** A whole healthy run of research-publish@3 (settled: plan finished, verified outcome), `ms` after t0. */
const healthy = (run: string, ms = 0): Receipt[] => [
  start(run, ms),
  { run, event: 'e1', at: at(ms + 1), type: 'edge', from: 'orchestrator', to: 'researcher', kind: 'delegate' } as Receipt,
  { run, event: 'e2', at: at(ms + 2), type: 'edge', from: 'researcher', to: 'verifier', kind: 'handoff' } as Receipt,
  { run, event: 'e3', at: at(ms + 3), type: 'edge', from: 'verifier', to: 'orchestrator', kind: 'return' } as Receipt,
  { run, event: 'out', at: at(ms + 4), type: 'outcome', verified: true, from: 'orchestrator' } as Receipt,
];
const start = (run: string, ms = 0): Receipt => ({ run, event: 'start', at: at(ms), type: 'run.start', contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }) as Receipt;
const delegate = (run: string, ms = 1): Receipt => ({ run, event: 'd', at: at(ms), type: 'edge', from: 'orchestrator', to: 'researcher', kind: 'delegate' }) as Receipt;

describe('periodic tasks on runs in every state', () => {
  it('prune handles a run created by an ingest and not evaluated yet', async () => {
    let pruned: number | Error | null = null;
    let listed = -1;
    const engine: AuditEngine = engineOver(tempDir('ta-mem-'));
    // Published after the fold created the run and before it is evaluated: the state a timer can find it in.
    engine.events.subscribe('receiptsStored', () => {
      if (pruned !== null) return;
      try {
        pruned = engine.prune(t0 + 60_000);
        listed = engine.list({ limit: 10 }).length;
      } catch (e) {
        pruned = e as Error;
      }
    });
    await engine.ingest([start('fresh'), delegate('fresh')], 'src', t0 + 10);
    expect(pruned).toBe(0);
    expect(listed).toBe(0);
    expect(engine.verdictOf('fresh')?.verdict).toBeDefined();
  });
});

describe('memory holds what can still change', () => {
  it('a settled run leaves memory at once, is listed and read from the store, and loads again on its next receipt', async () => {
    const engine = engineOver(tempDir('ta-mem-'), { maxLiveRuns: 3 });
    const now = t0 + 1000;
    for (let i = 0; i < 10; i++) await engine.ingest(healthy(`done${i}`), 'src', now);
    // ten settled runs under a cap of three: none is refused, none is held
    expect(engine.liveRuns).toBe(0);
    expect(engine.changeableRuns).toBe(0);
    expect(engine.verdictOf('done3')?.verdict).toBe('healthy');
    expect(engine.get('done3')?.receipts).toHaveLength(5);
    // every read path finds it: the gate's (fetchVerdict, `/verdict?wait=0`) and the run page's (fetch)
    expect((await engine.fetchVerdict('done3', now))?.verdict).toBe('healthy');
    expect((await engine.fetch('done3', now))?.verdict.verdict).toBe('healthy');
    expect(await engine.fetchVerdict('never-seen', now)).toBeNull();
    expect(engine.gauge().find((g) => g.verdict === 'healthy')?.count).toBe(10);
    // a late receipt loads it again (with every stored receipt): no transition, and it leaves again
    const entered: string[] = [];
    const events = new EventBus<AuditEvents>();
    events.subscribe('verdictEntered', ({ run, verdict }) => entered.push(`${run}:${verdict}`));
    const again = engineOver(tempDir('ta-mem-'), { events });
    await again.ingest(healthy('late'), 'src', now);
    expect(entered).toEqual(['late:healthy']);
    const out = await again.ingest([{ run: 'late', event: 'end', at: at(9), type: 'run.end', result: 'completed', from: 'orchestrator' } as Receipt], 'src', now + 1);
    expect(out.accepted).toBe(1);
    expect(entered).toEqual(['late:healthy']);
    expect(again.liveRuns).toBe(0);
    expect(again.get('late')?.receipts).toHaveLength(6);
    expect(again.gauge().find((g) => g.verdict === 'healthy')?.count).toBe(1);
  });

  it('a restart reads only the runs that can still change: settled runs are counted, not read, and load again on their next receipt', async () => {
    const dir = tempDir('ta-mem-restart-');
    const first = engineOver(dir);
    const now = t0 + 1000;
    for (let i = 0; i < 300; i++) await first.ingest(healthy(`ok${i}`), 'src', now);
    for (let i = 0; i < 4; i++) await first.ingest([start(`open${i}`), delegate(`open${i}`)], 'src', now);
    await first.ingest([start('bad'), { run: 'bad', event: 'x', at: at(1), type: 'edge', from: 'researcher', to: 'publisher', kind: 'delegate' } as Receipt], 'src', now);
    expect(first.verdictOf('bad')?.verdict).toBe('forbidden_edge');
    open.splice(0).forEach((s) => s.close());

    const store = ReceiptStore.open(dir);
    open.push(store);
    const read: string[] = [];
    const iterate = store.iterateLiveRuns.bind(store);
    store.iterateLiveRuns = function* (pageSize?: number, changeable?: boolean) {
      for (const lr of iterate(pageSize, changeable)) (read.push(lr.run), yield lr);
    };
    const engine = new AuditEngine(registry, store, { retentionMs: 5_000 });
    const restored = engine.restore(now + 10);
    // the four working runs and the alerting one: read and live; the 300 healthy ones: counted from the store
    expect(read.sort()).toEqual(['bad', 'open0', 'open1', 'open2', 'open3']);
    expect(restored.runs).toBe(5);
    const count = (verdict: string) => engine.gauge().find((g) => g.verdict === verdict && g.contract === 'research-publish')?.count;
    expect(count('healthy')).toBe(300);
    expect(count('working')).toBe(4);
    expect(count('forbidden_edge')).toBe(1);
    expect(engine.verdictOf('ok7')?.verdict).toBe('healthy');
    // a late receipt of a settled run loads it with its stored pin and receipts: still healthy, counted once
    await engine.ingest([{ run: 'ok7', event: 'end', at: at(9), type: 'run.end', result: 'completed', from: 'orchestrator' } as Receipt], 'src', now + 20);
    expect(engine.get('ok7')?.receipts).toHaveLength(6);
    expect(engine.verdictOf('ok7')?.verdict).toBe('healthy');
    expect(count('healthy')).toBe(300);
  });

  it('the cap counts only runs that can still change: settled runs make room, idle runs are evicted, refusal is per run', async () => {
    const engine = engineOver(tempDir('ta-mem-'), { maxLiveRuns: 2, idleEvictMs: 60_000 });
    const now = t0 + 1000;
    // two running runs fill the cap
    await engine.ingest([start('a'), delegate('a')], 'src', now);
    await engine.ingest([start('b'), delegate('b')], 'src', now);
    expect(engine.changeableRuns).toBe(2);
    // a batch naming a live run, a new one and a settled one: the new run is refused, the rest stored
    const out = await engine.ingest([{ run: 'a', event: 'e2', at: at(2), type: 'edge', from: 'researcher', to: 'verifier', kind: 'handoff' } as Receipt, start('c'), ...healthy('done')], 'src', now + 1);
    expect(out.refused?.limit).toBe('runs');
    expect([...out.refused!.runs.keys()].sort()).toEqual(['c', 'done']);
    expect(out.refused!.receipts).toBe(6);
    expect(out.accepted).toBe(1);
    expect(engine.verdictOf('c')).toBeNull();
    // a settles: its slot is free at once
    await engine.ingest(healthy('a').slice(3), 'src', now + 2);
    expect(engine.verdictOf('a')?.settled).toBe(true);
    expect(engine.changeableRuns).toBe(1);
    const c = await engine.ingest([start('c'), delegate('c')], 'src', now + 3);
    expect(c.refused).toBeUndefined();
    // b and c are running, the cap is full; once b is idle past --idle-evict-after it leaves for a new run
    expect((await engine.ingest([start('d')], 'src', now + 4)).refused?.runs.has('d')).toBe(true);
    await engine.ingest([{ run: 'c', event: 'e2', at: at(2), type: 'edge', from: 'researcher', to: 'verifier', kind: 'handoff' } as Receipt], 'src', now + 60_000);
    expect(engine.verdictOf('c')?.settled).toBe(false);
    const d = await engine.ingest([start('d')], 'src', now + 60_004);
    expect(d.refused).toBeUndefined();
    expect(engine.evictedRuns).toBe(1);
    expect(engine.liveRunIds().sort()).toEqual(['c', 'd']);
    // b is still answered from the store, and its next receipt loads it again
    expect(engine.get('b')?.receipts).toHaveLength(2);
    expect(engine.get('a')?.verdict.verdict).toBe('healthy');
  });
});

describe('the fair live cap (per source)', () => {
  it('a source flooding runs that never settle keeps its share; an honest source still starts runs', async () => {
    const engine = engineOver(tempDir('ta-mem-'), { maxLiveRuns: 10, idleEvictMs: 60_000, fairSources: true });
    const now = t0 + 1000;
    // the flood: receipts every second keep its runs busy (never idle), one new run after another
    let refusedFlood = 0;
    for (let i = 0; i < 20; i++) {
      const out = await engine.ingest([start(`junk${i}`, i)], 'token-1-aaaa', now + i * 1000);
      if (out.refused) refusedFlood++;
    }
    expect(engine.sourceRuns('token-1-aaaa')).toBe(5);
    expect(refusedFlood).toBe(15);
    // an honest source with nothing in flight: admitted
    const honest = await engine.ingest([start('honest'), delegate('honest')], 'token-2-bbbb', now + 20_000);
    expect(honest.refused).toBeUndefined();
    expect(engine.verdictOf('honest')).not.toBeNull();
  });

  it('a second flooding source cannot take the share kept for sources with no run in flight', async () => {
    const engine = engineOver(tempDir('ta-mem-'), { maxLiveRuns: 10, fairSources: true });
    const now = t0 + 1000;
    for (let i = 0; i < 10; i++) await engine.ingest([start(`x${i}`)], 'token-1-aaaa', now);
    for (let i = 0; i < 10; i++) await engine.ingest([start(`y${i}`)], 'token-2-bbbb', now);
    expect(engine.sourceRuns('token-1-aaaa')).toBe(5);
    expect(engine.sourceRuns('token-2-bbbb')).toBe(4);
    const third = await engine.ingest([start('z')], 'token-3-cccc', now);
    expect(third.refused).toBeUndefined();
  });
});

describe('run listing with cursor paging', () => {
  it('pages over 25,000 runs: every run once, in order, the last page without next', async () => {
    const engine = engineOver(tempDir('ta-mem-'));
    const N = 25_000;
    const batch: Receipt[] = [];
    for (let i = 0; i < N; i++) batch.push(start(`run${String(i).padStart(5, '0')}`, i));
    // received over 25 seconds of server time (newest first = highest index first)
    for (let k = 0; k < 25; k++) await engine.ingest(batch.slice(k * 1000, (k + 1) * 1000), 'src', t0 + 1000 + k * 1000);
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (; pages < 100; pages++) {
      const { runs, next } = await engine.listPage({ limit: 1000, after }, t0 + 30_000);
      for (const r of runs) seen.push(r.verdict.run);
      if (next === null) break;
      expect(runs).toHaveLength(1000);
      after = next;
    }
    expect(seen).toHaveLength(N);
    expect(new Set(seen).size).toBe(N);
    expect(seen[0] >= seen[N - 1]).toBe(true);
    expect(pages).toBe(24);
    await expect(engine.listPage({ limit: 10, after: 'not-a-cursor' }, t0)).rejects.toThrow(/cursor/);
  }, 120_000);
});
