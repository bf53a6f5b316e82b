/**
 * The pending-span index (src/ingest/pending-index.ts): per-trace pending counts after add / remove / evict /
 * expire, eviction oldest-idle-first, and a property test against a naive model that is the resolver's original
 * code (prefix scans over every pending key, a scan of all traces for the oldest idle one).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PendingIndex } from '../src/ingest/pending-index.js';

interface Sp {
  traceId: string;
  spanId: string;
  tag?: number;
}

const mk = (maxSpans: number, maxTraceSpans?: number) => new PendingIndex<string, Sp, Sp, { n: number }>({ maxSpans, maxTraceSpans }, () => ({ n: 0 }));
const sp = (traceId: string, spanId: string, tag?: number): Sp => ({ traceId, spanId, tag });

describe('PendingIndex', () => {
  it('dropTraces forgets the traces picked, waiting spans included, handing nothing back (a cluster hand-over)', () => {
    const ix = mk(100);
    ix.index('t1', 'a', null, 'A', 0);
    ix.index('t1', 'b', 'a', null, 0);
    ix.index('t2', 'c', null, null, 0);
    ix.addAgent(sp('t1', 'b'));
    ix.addHandoff(sp('t1', 'a'));
    ix.addAgent(sp('t2', 'c'));
    ix.addAgent(sp('t3', 'd')); // waiting, its trace not indexed
    const gone = ix.dropTraces((t) => t !== 't2');
    expect(gone.agents.map((a) => a.spanId).sort()).toEqual(['b', 'd']);
    expect(gone.handoffs.map((h) => h.spanId)).toEqual(['a']);
    expect(ix.pendingTraceIds()).toEqual(new Set(['t2']));
    expect(ix.trace('t1')).toBeUndefined();
    expect([...ix.pendingAgents()].map((a) => a.spanId)).toEqual(['c']);
    expect(ix.takeEvicted()).toEqual({ agents: [], handoffs: [] });
    expect(ix.stats().indexed).toBe(1);
  });

  it('counts pending work per trace through add, replace, remove', () => {
    const ix = mk(100);
    ix.index('t1', 'a', null, 'A', 0);
    ix.index('t1', 'b', 'a', null, 0);
    ix.index('t2', 'c', null, null, 0);
    expect(ix.hasPending('t1')).toBe(false);
    ix.addAgent(sp('t1', 'b'));
    ix.addAgent(sp('t1', 'b', 2)); // replaced, not counted twice
    ix.addHandoff(sp('t1', 'a'));
    ix.addHandoff(sp('t2', 'c'));
    expect(ix.pendingCount('t1')).toBe(2);
    expect(ix.pendingCount('t2')).toBe(1);
    expect([...ix.pendingAgents()].map((a) => a.tag)).toEqual([2]);
    expect(ix.pendingTraceIds()).toEqual(new Set(['t1', 't2']));
    expect(ix.removeAgent(sp('t1', 'b'))).toBe(true);
    expect(ix.removeAgent(sp('t1', 'b'))).toBe(false);
    expect(ix.pendingCount('t1')).toBe(1);
    expect(ix.removeHandoff(sp('t1', 'a'))).toBe(true);
    expect(ix.hasPending('t1')).toBe(false);
    expect(ix.hasPending('t2')).toBe(true);
    expect(ix.pendingTraceIds()).toEqual(new Set(['t2']));
    expect(ix.stats()).toMatchObject({ pending: 1, indexed: 3, traces: 2, expired: 0, evicted: 0 });
    expect(ix.trace('t1')!.nodes.get('a')!.info).toBe('A');
    ix.index('t1', 'a', null, null, 5); // a refresh keeps what is known of the span
    expect(ix.trace('t1')!.nodes.get('a')).toEqual({ parent: null, info: 'A', seenAt: 5 });
  });

  it('evicts the oldest idle trace first, never one with pending work, and counts evicted spans', () => {
    const ix = mk(4);
    ix.index('old', 's1', null, null, 0);
    ix.index('old', 's2', 's1', null, 0);
    ix.addAgent(sp('old', 's2'));
    ix.index('mid', 's1', null, null, 1);
    ix.index('new', 's1', null, null, 2);
    ix.index('new', 's2', 's1', null, 2); // 5 > 4: 'old' is pending, 'mid' is the oldest idle one
    expect(ix.trace('mid')).toBeUndefined();
    expect(ix.trace('old')).toBeDefined();
    expect(ix.stats()).toMatchObject({ indexed: 4, evicted: 1, traces: 2 });
    ix.removeAgent(sp('old', 's2')); // 'old' is idle again and still the oldest
    ix.index('newer', 's1', null, null, 3);
    expect(ix.trace('old')).toBeUndefined();
    expect(ix.trace('new')).toBeDefined();
    expect(ix.stats()).toMatchObject({ indexed: 3, evicted: 3, traces: 2 });
    expect(ix.hasPending('old')).toBe(false);
  });

  it('idle traces go first; when every other trace waits, the oldest waiting one goes and its waiting spans are handed back', () => {
    const ix = mk(3);
    ix.index('idle', 's', null, null, 0);
    for (const t of ['a', 'b']) {
      ix.index(t, 's', null, null, 0);
      ix.addAgent(sp(t, 's'));
    }
    ix.index('c', 's', null, null, 0); // 4 > 3: 'idle' goes (idle first), not the waiting 'a', 'b', nor 'c' being indexed
    ix.addAgent(sp('c', 's'));
    expect(ix.trace('idle')).toBeUndefined();
    expect(ix.stats()).toMatchObject({ indexed: 3, evicted: 1, pending: 3, evictedWaiting: 0 });
    expect(ix.takeEvicted()).toEqual({ agents: [], handoffs: [] });
    ix.index('b', 't', null, null, 1); // 4 > 3 and every trace waits: the oldest waiting one ('a') goes, never 'b'
    expect(ix.trace('a')).toBeUndefined();
    expect(ix.trace('b')!.nodes.size).toBe(2);
    expect(ix.stats()).toMatchObject({ indexed: 3, evicted: 2, traces: 2, pending: 2, evictedWaiting: 1 });
    expect(ix.takeEvicted()).toEqual({ agents: [sp('a', 's')], handoffs: [] });
    expect(ix.takeEvicted()).toEqual({ agents: [], handoffs: [] });
    expect(ix.hasPending('a')).toBe(false);
    ix.index('d', 's', null, null, 2); // the trace being indexed stays even when it is the only idle one
    expect(ix.trace('d')).toBeDefined();
    expect(ix.trace('b')).toBeUndefined();
  });

  it('holds a trace to maxTraceSpans: its oldest span goes, a waiting one handed back', () => {
    const ix = mk(100, 3);
    ix.index('t', 'a', null, null, 0);
    ix.addAgent(sp('t', 'a'));
    ix.index('t', 'b', 'a', null, 0);
    ix.addHandoff(sp('t', 'b'));
    ix.index('t', 'c', 'b', null, 0);
    ix.index('t', 'c', 'b', null, 1); // a refresh adds nothing
    expect(ix.stats()).toMatchObject({ indexed: 3, evictedPerTrace: 0 });
    ix.index('t', 'd', 'c', null, 1);
    expect([...ix.trace('t')!.nodes.keys()]).toEqual(['b', 'c', 'd']);
    ix.index('t', 'e', 'd', null, 1);
    expect([...ix.trace('t')!.nodes.keys()]).toEqual(['c', 'd', 'e']);
    expect(ix.stats()).toMatchObject({ indexed: 3, evicted: 0, evictedPerTrace: 2, evictedWaiting: 2, pending: 0 });
    expect(ix.takeEvicted()).toEqual({ agents: [sp('t', 'a')], handoffs: [sp('t', 'b')] });
  });

  it('expires by time and sweeps idle traces; counts follow', () => {
    const ix = mk(100);
    ix.index('t1', 'a', null, null, 0);
    ix.index('t1', 'h', 'a', null, 0);
    ix.addAgent(sp('t1', 'a'));
    ix.addHandoff(sp('t1', 'h'));
    ix.index('t2', 'x', null, null, 50);
    ix.addAgent(sp('t2', 'x'));
    expect(ix.expireHandoffs(99, 100)).toEqual([]);
    expect(ix.expireHandoffs(100, 100)).toEqual([sp('t1', 'h')]);
    expect(ix.pendingCount('t1')).toBe(1);
    expect(ix.expireAgents(120, 100)).toEqual([sp('t1', 'a')]);
    expect(ix.hasPending('t1')).toBe(false);
    expect(ix.hasPending('t2')).toBe(true);
    expect(ix.stats()).toMatchObject({ expired: 2, pending: 1 });
    ix.sweep(250, 200); // t1 quiet for 250 >= 200 and idle: forgotten; t2 quiet for 200 but still waiting
    expect(ix.trace('t1')).toBeUndefined();
    expect(ix.trace('t2')).toBeDefined();
    expect(ix.stats()).toMatchObject({ indexed: 1, traces: 1 });
    expect(ix.expireAgents(150, 100)).toEqual([sp('t2', 'x')]);
    ix.sweep(250, 200);
    expect(ix.stats()).toMatchObject({ indexed: 0, traces: 0, pending: 0, expired: 3 });
  });

  it('keeps the count of a span that waits after its trace was evicted, and hands it back when the trace returns', () => {
    const ix = mk(1);
    ix.index('t1', 'a', null, null, 0);
    ix.index('t2', 'b', null, null, 0); // evicts t1
    expect(ix.trace('t1')).toBeUndefined();
    ix.addAgent(sp('t1', 'a'));
    expect(ix.hasPending('t1')).toBe(true);
    expect(ix.pendingTraceIds()).toEqual(new Set(['t1']));
    ix.index('t1', 'c', null, null, 1); // evicts t2 (idle), not t1 (waiting)
    expect(ix.trace('t2')).toBeUndefined();
    expect(ix.pendingCount('t1')).toBe(1);
    ix.removeAgent(sp('t1', 'a'));
    expect(ix.hasPending('t1')).toBe(false);
  });
});

/** The resolver's original bookkeeping, verbatim in spirit: string keys, prefix scans, a scan for eviction. */
class Model {
  traces = new Map<string, { nodes: Map<string, { info: string | null; seenAt: number }>; lastSeen: number }>();
  agents = new Map<string, Sp>();
  handoffs = new Map<string, Sp>();
  indexed = 0;
  expired = 0;
  evicted = 0;
  evictedPerTrace = 0;
  evictedWaiting = 0;
  handedBack: { agents: Sp[]; handoffs: Sp[] } = { agents: [], handoffs: [] };
  constructor(
    readonly maxSpans: number,
    readonly maxTraceSpans: number,
  ) {}
  index(traceId: string, spanId: string, info: string | null, now: number) {
    let t = this.traces.get(traceId);
    if (!t) this.traces.set(traceId, (t = { nodes: new Map(), lastSeen: now }));
    const prev = t.nodes.get(spanId);
    if (!prev) this.indexed++;
    t.nodes.set(spanId, { info: info ?? prev?.info ?? null, seenAt: now });
    t.lastSeen = now;
    if (!prev && t.nodes.size > this.maxTraceSpans) {
      const oldest = [...t.nodes.keys()][0];
      t.nodes.delete(oldest);
      this.indexed--;
      this.evictedPerTrace++;
      this.handBack(`${traceId}/${oldest}`);
    }
    if (this.indexed > this.maxSpans) {
      for (const [id, tr] of this.traces) {
        if (this.hasPending(id) || id === traceId) continue;
        this.traces.delete(id);
        this.indexed -= tr.nodes.size;
        this.evicted += tr.nodes.size;
        if (this.indexed <= this.maxSpans) break;
      }
    }
    if (this.indexed > this.maxSpans) {
      for (const [id, tr] of this.traces) {
        if (this.indexed <= this.maxSpans) break;
        if (id === traceId) continue;
        for (const k of [...this.agents.keys(), ...this.handoffs.keys()]) if (k.startsWith(id + '/')) this.handBack(k);
        this.traces.delete(id);
        this.indexed -= tr.nodes.size;
        this.evicted += tr.nodes.size;
      }
    }
  }
  handBack(key: string) {
    const a = this.agents.get(key);
    if (a) {
      this.agents.delete(key);
      this.handedBack.agents.push(a);
      this.evictedWaiting++;
    }
    const h = this.handoffs.get(key);
    if (h) {
      this.handoffs.delete(key);
      this.handedBack.handoffs.push(h);
      this.evictedWaiting++;
    }
  }
  hasPending(traceId: string) {
    const p = traceId + '/';
    for (const k of this.agents.keys()) if (k.startsWith(p)) return true;
    for (const k of this.handoffs.keys()) if (k.startsWith(p)) return true;
    return false;
  }
  count(traceId: string) {
    const p = traceId + '/';
    return [...this.agents.keys(), ...this.handoffs.keys()].filter((k) => k.startsWith(p)).length;
  }
  expireHandoffs(now: number, waitMs: number) {
    const out: Sp[] = [];
    for (const [k, h] of this.handoffs) {
      const t = this.traces.get(h.traceId);
      if (t && now - t.lastSeen < waitMs) continue;
      this.handoffs.delete(k);
      this.expired++;
      out.push(h);
    }
    return out;
  }
  expireAgents(now: number, waitMs: number) {
    const out: Sp[] = [];
    for (const [k, a] of this.agents) {
      const n = this.traces.get(a.traceId)?.nodes.get(a.spanId);
      if (n && now - n.seenAt < waitMs) continue;
      this.agents.delete(k);
      this.expired++;
      out.push(a);
    }
    return out;
  }
  sweep(now: number, idleMs: number) {
    for (const [id, t] of this.traces) {
      if (now - t.lastSeen >= idleMs && !this.hasPending(id)) {
        this.traces.delete(id);
        this.indexed -= t.nodes.size;
      }
    }
  }
}

type Op =
  | { k: 'index'; t: number; s: number; agent: boolean }
  | { k: 'addAgent' | 'addHandoff' | 'removeAgent' | 'removeHandoff'; t: number; s: number }
  | { k: 'expireH' | 'expireA'; wait: number }
  | { k: 'sweep'; idle: number }
  | { k: 'tick'; dt: number };

const T = 8; // traces
const S = 5; // spans per trace
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('index' as const), t: fc.nat(T - 1), s: fc.nat(S - 1), agent: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constantFrom('addAgent' as const, 'addHandoff' as const), t: fc.nat(T - 1), s: fc.nat(S - 1) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constantFrom('removeAgent' as const, 'removeHandoff' as const), t: fc.nat(T - 1), s: fc.nat(S - 1) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constantFrom('expireH' as const, 'expireA' as const), wait: fc.integer({ min: 1, max: 20 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('sweep' as const), idle: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 10 }) }) },
);

describe('PendingIndex against the naive model', () => {
  it('same traces, spans, per-trace counts, expiries and counters after every operation', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 6 }), fc.array(opArb, { maxLength: 150 }), (maxSpans, maxTraceSpans, ops) => {
        const ix = mk(maxSpans, maxTraceSpans);
        const m = new Model(maxSpans, maxTraceSpans);
        let now = 0;
        for (const op of ops) {
          switch (op.k) {
            case 'index': {
              const info = op.agent ? `ag${op.s}` : null;
              ix.index(`t${op.t}`, `s${op.s}`, null, info, now);
              m.index(`t${op.t}`, `s${op.s}`, info, now);
              break;
            }
            case 'addAgent':
            case 'addHandoff': {
              const x = sp(`t${op.t}`, `s${op.s}`, now);
              ix[op.k](x);
              (op.k === 'addAgent' ? m.agents : m.handoffs).set(`${x.traceId}/${x.spanId}`, x);
              break;
            }
            case 'removeAgent':
            case 'removeHandoff': {
              const x = sp(`t${op.t}`, `s${op.s}`);
              const had = (op.k === 'removeAgent' ? m.agents : m.handoffs).delete(`${x.traceId}/${x.spanId}`);
              expect(ix[op.k](x)).toBe(had);
              break;
            }
            case 'expireH':
              expect(ix.expireHandoffs(now, op.wait)).toEqual(m.expireHandoffs(now, op.wait));
              break;
            case 'expireA':
              expect(ix.expireAgents(now, op.wait)).toEqual(m.expireAgents(now, op.wait));
              break;
            case 'sweep':
              ix.sweep(now, op.idle);
              m.sweep(now, op.idle);
              break;
            case 'tick':
              now += op.dt;
              break;
          }
          expect(ix.stats()).toEqual({
            pending: m.agents.size + m.handoffs.size,
            indexed: m.indexed,
            traces: m.traces.size,
            expired: m.expired,
            evicted: m.evicted,
            evictedPerTrace: m.evictedPerTrace,
            evictedWaiting: m.evictedWaiting,
          });
          expect(ix.takeEvicted()).toEqual(m.handedBack);
          m.handedBack = { agents: [], handoffs: [] };
          for (let t = 0; t < T; t++) {
            const id = `t${t}`;
            expect(ix.pendingCount(id)).toBe(m.count(id));
            expect(ix.hasPending(id)).toBe(m.hasPending(id));
            const mt = m.traces.get(id);
            const it = ix.trace(id);
            expect(it === undefined).toBe(mt === undefined);
            if (mt && it) {
              expect(it.lastSeen).toBe(mt.lastSeen);
              expect([...it.nodes].map(([k, n]) => [k, n.info, n.seenAt])).toEqual([...mt.nodes].map(([k, n]) => [k, n.info, n.seenAt]));
            }
          }
          expect([...ix.pendingAgents()]).toEqual([...m.agents.values()]);
          expect([...ix.pendingHandoffs()]).toEqual([...m.handoffs.values()]);
          for (let t = 0; t < T; t++) {
            const byKey = (a: Sp, b: Sp) => a.spanId.localeCompare(b.spanId);
            expect([...ix.handoffsOf(`t${t}`)].sort(byKey)).toEqual([...m.handoffs.values()].filter((h) => h.traceId === `t${t}`).sort(byKey));
          }
          // Per-trace selections keep arrival order (what the resolver's incremental retries rely on).
          const some = [`t${ops.length % T}`, `t${(ops.length + 2) % T}`];
          expect(ix.pendingAgentsOf(some)).toEqual([...m.agents.values()].filter((a) => some.includes(a.traceId)));
          expect(ix.pendingHandoffsOf(some)).toEqual([...m.handoffs.values()].filter((h) => some.includes(h.traceId)));
          const firstAgent = [...m.agents.keys()][0];
          if (firstAgent !== undefined) expect(ix.pendingAgentsOf([], [firstAgent, 'nope/x'])).toEqual([m.agents.get(firstAgent)]);
          expect(ix.pendingTraceIds()).toEqual(new Set([...m.agents.values(), ...m.handoffs.values()].map((x) => x.traceId)));
        }
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 300) },
    );
  });
});
