/**
 * The engine's one event bus (src/audit/events.ts): typed events, subscribe returns the unsubscribe, subscribers in
 * the order subscribed and events in the order published, a throwing subscriber counted and unable to break the
 * engine; and the metrics subscribed to it (src/metrics/events.ts) on a real engine over a real SQLite store.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine, EventBus, type AuditEvents } from '../src/audit/engine.js';
import { createAuditMetrics } from '../src/metrics/index.js';
import { subscribeMetrics } from '../src/metrics/events.js';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

interface Events {
  a: { n: number };
  b: { s: string };
}

describe('EventBus', () => {
  it('calls subscribers in the order subscribed, with events in the order published', () => {
    const bus = new EventBus<Events>();
    const seen: string[] = [];
    bus.subscribe('a', (e) => seen.push(`first a${e.n}`));
    bus.subscribe('b', (e) => seen.push(`b ${e.s}`));
    bus.subscribe('a', (e) => seen.push(`second a${e.n}`));
    bus.publish('a', { n: 1 });
    bus.publish('b', { s: 'x' });
    bus.publish('a', { n: 2 });
    expect(seen).toEqual(['first a1', 'second a1', 'b x', 'first a2', 'second a2']);
  });

  it('unsubscribes: no event after, idempotent, one subscription at a time of the same function', () => {
    const bus = new EventBus<Events>();
    const seen: number[] = [];
    const fn = (e: { n: number }) => seen.push(e.n);
    const off1 = bus.subscribe('a', fn);
    const off2 = bus.subscribe('a', fn);
    bus.publish('a', { n: 1 });
    off1();
    off1();
    bus.publish('a', { n: 2 });
    expect(bus.has('a')).toBe(true);
    off2();
    bus.publish('a', { n: 3 });
    expect(seen).toEqual([1, 1, 2]);
    expect(bus.has('a')).toBe(false);
  });

  it('a subscriber that unsubscribes (itself or another) while an event is published leaves that publish whole', () => {
    const bus = new EventBus<Events>();
    const seen: string[] = [];
    let offSecond = () => {};
    const offFirst = bus.subscribe('a', (e) => {
      seen.push(`first ${e.n}`);
      offFirst();
      offSecond();
    });
    offSecond = bus.subscribe('a', (e) => seen.push(`second ${e.n}`));
    bus.subscribe('a', (e) => seen.push(`third ${e.n}`));
    bus.publish('a', { n: 1 });
    bus.publish('a', { n: 2 });
    expect(seen).toEqual(['first 1', 'second 1', 'third 1', 'third 2']);
  });

  it('counts a throwing subscriber, tells onError, and still calls the others', () => {
    const errors: [string, string][] = [];
    const bus = new EventBus<Events>({
      onError: (name, e) => {
        errors.push([String(name), (e as Error).message]);
        throw new Error('the report fails too');
      },
    });
    const seen: number[] = [];
    bus.subscribe('a', () => {
      throw new Error('broken subscriber');
    });
    bus.subscribe('a', (e) => seen.push(e.n));
    expect(() => bus.publish('a', { n: 1 })).not.toThrow();
    bus.publish('a', { n: 2 });
    bus.publish('b', { s: 'nobody listens' });
    expect(seen).toEqual([1, 2]);
    expect(bus.failures('a')).toBe(2);
    expect(bus.failures('b')).toBe(0);
    expect(bus.failures()).toBe(2);
    expect(errors).toEqual([
      ['a', 'broken subscriber'],
      ['a', 'broken subscriber'],
    ]);
  });
});

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(t0 + s * 1000).toISOString();
const started = (run: string): Receipt[] => [
  { run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt,
  { run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' } as Receipt,
];
const forbidden = (run: string): Receipt => ({ run, event: 'bad', type: 'edge', at: at(2), version: '3', from: 'researcher', to: 'publisher', kind: 'delegate' }) as Receipt;

const open: ReceiptStore[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});
function engineWith(events: EventBus<AuditEvents>): AuditEngine {
  const store = ReceiptStore.open(tempDir('ta-events-'));
  open.push(store);
  const engine = new AuditEngine(registry, store, { retentionMs: 86_400_000, events });
  engine.restore(t0);
  return engine;
}

describe('the engine on its event bus', () => {
  it('publishes receipts, run changes and verdicts in the order they happen', async () => {
    const events = new EventBus<AuditEvents>();
    const seen: string[] = [];
    events.subscribe('receiptsStored', (e) => seen.push(`receipts ${e.type} ${e.result} ${e.n}`));
    events.subscribe('runChanged', (e) => seen.push(`changed ${e.live.state.run}`));
    events.subscribe('verdictEntered', (e) => seen.push(`entered ${e.run} ${e.verdict} from ${e.previous?.verdict ?? 'none'}`));
    events.subscribe('runEvaluated', (e) => seen.push(`evaluated ${e.run} ${e.verdict.verdict}`));
    const engine = engineWith(events);
    await engine.ingest(started('r1'), 'src', t0 + 2_000);
    await engine.ingest([forbidden('r1')], 'src', t0 + 3_000);
    expect(seen).toEqual([
      'receipts run.start accepted 1',
      'receipts edge accepted 1',
      'changed r1',
      'entered r1 working from none',
      'evaluated r1 working',
      'receipts edge accepted 1',
      'changed r1',
      'entered r1 forbidden_edge from working',
      'evaluated r1 forbidden_edge',
    ]);
  });

  it('a throwing subscriber of every event is counted and breaks neither the ingest, the verdict, the gauges nor the metrics', async () => {
    const events = new EventBus<AuditEvents>();
    const names = ['runEvaluated', 'verdictEntered', 'receiptsStored', 'runChanged', 'runAcked', 'runForgotten'] as const;
    // Subscribed before the engine subscribes its gauges, and before the metrics: first in every list.
    for (const name of names) {
      events.subscribe(name, () => {
        throw new Error(`subscriber of ${name} fails`);
      });
    }
    const metrics = createAuditMetrics({ version: 'test' });
    subscribeMetrics(events, metrics);
    const engine = engineWith(events);
    const out = await engine.ingest([...started('r2'), forbidden('r2')], 'src', t0 + 3_000);
    expect(out.accepted).toBe(3);
    expect(engine.verdictOf('r2')?.verdict).toBe('forbidden_edge');
    expect(engine.gauge()).toEqual([{ contract: 'research-publish', version: '3', verdict: 'forbidden_edge', count: 1 }]);
    expect(engine.ack('r2', t0 + 4_000)?.acked).toBe(true);
    const text = metrics.registry.render();
    expect(text).toMatch(/topology_verdicts_total\{contract="research-publish",verdict="forbidden_edge"\} 1/);
    expect(text).toMatch(/topology_receipts_total\{type="edge",result="accepted"\} 2/);
    expect(events.failures('receiptsStored')).toBe(2);
    expect(events.failures('verdictEntered')).toBe(1);
    expect(events.failures('runAcked')).toBe(1);
    expect(events.failures()).toBeGreaterThanOrEqual(6);
  });

  it('the metrics stop counting once unsubscribed', async () => {
    const events = new EventBus<AuditEvents>();
    const metrics = createAuditMetrics({ version: 'test' });
    const off = subscribeMetrics(events, metrics);
    const engine = engineWith(events);
    await engine.ingest(started('r3'), 'src', t0 + 2_000);
    off();
    await engine.ingest([forbidden('r3')], 'src', t0 + 3_000);
    const text = metrics.registry.render();
    expect(text).toMatch(/topology_verdicts_total\{contract="research-publish",verdict="working"\} 1/);
    expect(text).not.toMatch(/topology_verdicts_total\{contract="research-publish",verdict="forbidden_edge"\} [1-9]/);
    expect(engine.verdictOf('r3')?.verdict).toBe('forbidden_edge');
  });
});
