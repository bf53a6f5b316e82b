/**
 * Expiry in proportion to what expired (issue 44): the `caller_expiry` task's passes (pending agent spans and
 * handoffs, the skeleton's idle traces, the unmapped and coverage lists, LangGraph's waiting traces) go by due-time
 * heaps (src/ingest/quiet-order.ts) instead of walking everything held.
 *
 * - Properties: for random interleavings of touches, deletions, holds and clock steps (forward and back), a pass
 *   returns exactly what a full walk with the old predicate returns, in the same order.
 * - Work: a pass over a large held set with few expiries looks at a few entries (Map entries iterated during the
 *   pass, counted by wrapping Map's iterators, plus the structures' own counters), not at every entry held. The
 *   full walks of the previous build iterate every held entry and fail these.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { CallerResolver, type AgentSpan } from '../src/ingest/callers.js';
import { CoverageTracker } from '../src/ingest/coverage.js';
import { LangGraphAssembler } from '../src/ingest/dialects/langgraph.js';
import { PendingIndex } from '../src/ingest/pending-index.js';
import { QuietOrder } from '../src/ingest/quiet-order.js';
import { UnmappedTracker } from '../src/ingest/unmapped.js';
import type { SpanRecord } from '../src/otlp/types.js';

// ---- properties ----

type QOp =
  | { k: 'set' | 'touch' | 'delete' | 'hold'; key: number }
  | { k: 'tick'; dt: number }
  | { k: 'pass'; quiet: number };

const K = 12;
const qop: fc.Arbitrary<QOp> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ k: fc.constantFrom('set' as const, 'touch' as const), key: fc.nat(K - 1) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constantFrom('delete' as const, 'hold' as const), key: fc.nat(K - 1) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('tick' as const), dt: fc.integer({ min: -6, max: 12 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('pass' as const), quiet: fc.integer({ min: 0, max: 25 }) }) },
);

describe('QuietOrder against a full walk', () => {
  it('returns exactly the quiet, unheld entries a walk of the map finds, in map order, under clock steps back and forth', () => {
    let found = 0;
    fc.assert(
      fc.property(fc.array(qop, { minLength: 40, maxLength: 200 }), (ops) => {
        const map = new Map<number, { lastSeen: number }>();
        const qo = new QuietOrder(map);
        const held = new Set<number>();
        let now = 1000;
        for (const o of ops) {
          if (o.k === 'set') {
            if (map.has(o.key)) continue;
            const v = { lastSeen: now };
            map.set(o.key, v);
            qo.added(o.key, v);
          } else if (o.k === 'touch') {
            const v = map.get(o.key);
            if (!v) continue;
            v.lastSeen = now;
            qo.noteTime(now);
          } else if (o.k === 'delete') map.delete(o.key);
          else if (o.k === 'hold') {
            if (held.has(o.key)) held.delete(o.key);
            else held.add(o.key);
          } else if (o.k === 'tick') now += o.dt;
          else if (o.k === 'pass') {
            const want = [...map].filter(([k, v]) => now - v.lastSeen >= o.quiet && !held.has(k)).map(([k]) => k);
            const got = qo.quiet(now, o.quiet, (k) => held.has(k));
            expect(got).toEqual(want);
            for (const k of got) map.delete(k);
            found += got.length;
          }
        }
      }),
      { numRuns: 400 },
    );
    expect(found).toBeGreaterThan(200);
  });
});

interface Sp {
  traceId: string;
  spanId: string;
  at: number;
}

type POp =
  | { k: 'index'; t: number; s: number }
  | { k: 'addAgent' | 'addHandoff' | 'removeAgent' | 'removeHandoff'; t: number; s: number }
  | { k: 'expire'; wait: number }
  | { k: 'tick'; dt: number };

const T = 6;
const S = 4;
const pop: fc.Arbitrary<POp> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('index' as const), t: fc.nat(T - 1), s: fc.nat(S - 1) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constantFrom('addAgent' as const, 'addHandoff' as const), t: fc.nat(T - 1), s: fc.nat(S - 1) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constantFrom('removeAgent' as const, 'removeHandoff' as const), t: fc.nat(T - 1), s: fc.nat(S - 1) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('expire' as const), wait: fc.integer({ min: 1, max: 20 }) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('tick' as const), dt: fc.integer({ min: -5, max: 10 }) }) },
);

describe('PendingIndex expiry against the full walk of its own state', () => {
  it('expires the handoffs, agent spans and idle traces the old walks would, in arrival order, under clock steps back and forth', () => {
    let expired = 0;
    let forgotten = 0;
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 16 }), fc.array(pop, { minLength: 40, maxLength: 200 }), (maxSpans, ops) => {
        const ix = new PendingIndex<string, Sp, Sp, null>({ maxSpans, maxTraceSpans: 3 }, () => null);
        let now = 1000;
        for (const o of ops) {
          const trace = (i: number) => `t${i}`;
          if (o.k === 'index') ix.index(trace(o.t), `s${o.s}`, null, null, now);
          else if (o.k === 'addAgent' || o.k === 'addHandoff') ix[o.k]({ traceId: trace(o.t), spanId: `s${o.s}`, at: now });
          else if (o.k === 'removeAgent' || o.k === 'removeHandoff') ix[o.k]({ traceId: trace(o.t), spanId: `s${o.s}` });
          else if (o.k === 'tick') now += o.dt;
          else if (o.k === 'expire') {
            ix.takeEvicted();
            // The old walks, over the index's own state (what the previous expireHandoffs / expireAgents / sweep did).
            const wantH = [...ix.pendingHandoffs()].filter((h) => {
              const t = ix.trace(h.traceId);
              return !(t && now - t.lastSeen < o.wait);
            });
            expect(ix.expireHandoffs(now, o.wait)).toEqual(wantH);
            const wantA = [...ix.pendingAgents()].filter((a) => {
              const n = ix.trace(a.traceId)?.nodes.get(a.spanId);
              return !(n && now - n.seenAt < o.wait);
            });
            expect(ix.expireAgents(now, o.wait)).toEqual(wantA);
            const ids = Array.from({ length: T }, (_, i) => trace(i));
            const gone = ids.filter((id) => {
              const t = ix.trace(id);
              return t !== undefined && now - t.lastSeen >= 2 * o.wait && !ix.hasPending(id);
            });
            const kept = ids.filter((id) => ix.trace(id) !== undefined && !gone.includes(id));
            ix.sweep(now, 2 * o.wait);
            for (const id of gone) expect(ix.trace(id)).toBeUndefined();
            for (const id of kept) expect(ix.trace(id)).toBeDefined();
            expired += wantH.length + wantA.length;
            forgotten += gone.length;
          }
        }
      }),
      { numRuns: 400 },
    );
    expect(expired).toBeGreaterThan(200);
    expect(forgotten).toBeGreaterThan(200);
  });
});

// ---- work ----

/** Map entries iterated (every Map iterator's steps) while `fn` runs. */
function mapSteps<R>(fn: () => R): { result: R; steps: number } {
  let steps = 0;
  const proto = Map.prototype as unknown as Record<string | symbol, (this: Map<unknown, unknown>) => Iterator<unknown>>;
  const names: (string | symbol)[] = ['entries', 'values', 'keys', Symbol.iterator];
  const saved = names.map((n) => proto[n]!);
  names.forEach((n, i) => {
    const orig = saved[i]!;
    proto[n] = function (this: Map<unknown, unknown>) {
      const it = orig.call(this);
      const wrapped = {
        next: () => {
          const r = it.next();
          if (!r.done) steps++;
          return r;
        },
        [Symbol.iterator]() {
          return wrapped;
        },
      };
      return wrapped as unknown as Iterator<unknown>;
    };
  });
  try {
    return { result: fn(), steps };
  } finally {
    names.forEach((n, i) => (proto[n] = saved[i]!));
  }
}

afterEach(() => {
  // mapSteps restores Map's iterators itself; this checks it did (a later test would count nothing otherwise).
  expect(Map.prototype[Symbol.iterator]).toBe(Map.prototype.entries);
});

const HELD = 20_000;
const FEW = 5;
const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');
const traceId = (i: number) => hex(i + 1, 32);

function rec(trace: number, span: number, attrs: SpanRecord['attrs'] = {}): SpanRecord {
  return { traceId: traceId(trace), spanId: hex(trace * 16 + span + 1, 16), parentSpanId: null, name: 'x', kind: 1, startMs: 0, endMs: 0, statusCode: 0, attrs, events: [], links: [], library: { name: 'lib', version: '1' } };
}

describe('an expiry pass over a large held set with few expiries looks at the few', () => {
  it('caller expiry: 20,000 agent spans waiting, 5 of them due', () => {
    const wait = 30_000;
    const r = new CallerResolver({ waitMs: wait, maxSpans: 100_000 });
    const agent = (i: number): AgentSpan => ({ run: 'r', traceId: traceId(i), spanId: hex(i + 1, 16), parentSpanId: hex(999_999_999, 16), agent: 'worker', startMs: 0, endMs: 1, statusCode: 0 });
    // The few arrive first, the rest a second later: their parents never arrive, so every one waits.
    for (let i = 0; i < FEW; i++) r.addBatch([agent(i)], [], 0);
    for (let i = FEW; i < HELD; i++) r.addBatch([agent(i)], [], 1_000);
    expect(r.stats().pending).toBe(HELD);
    const { result, steps } = mapSteps(() => r.expire(wait));
    expect(result.map((g) => (g.type === 'gap' ? g.reason : g.type))).toEqual(Array(FEW).fill('caller_unresolved'));
    expect(result.map((g) => g.event)).toEqual(Array.from({ length: FEW }, (_, i) => `${hex(i + 1, 16)}:gap`));
    expect(r.stats().pending).toBe(HELD - FEW);
    expect(steps).toBeLessThan(50 * FEW);
    // The index's own count of slots popped by the pass (absent on a build that walks).
    const ix = (r as unknown as { idx: { expiryVisits?: number } }).idx;
    const before = ix.expiryVisits ?? Infinity;
    r.expire(wait + 10);
    expect((ix.expiryVisits ?? Infinity) - before).toBe(0); // nothing came due
  });

  it('the skeleton sweep: 20,000 idle traces, 5 quiet long enough', () => {
    const ix = new PendingIndex<string, Sp, Sp, null>({ maxSpans: 100_000 }, () => null);
    for (let i = 0; i < FEW; i++) ix.index(`t${i}`, 's', null, null, 0);
    for (let i = FEW; i < HELD; i++) ix.index(`t${i}`, 's', null, null, 1_000);
    const { steps } = mapSteps(() => ix.sweep(500, 500));
    expect(ix.traceCount()).toBe(HELD - FEW);
    expect(steps).toBeLessThan(50 * FEW);
  });

  it('the unmapped and coverage lists: 20,000 traces followed, 5 quiet', () => {
    const u = new UnmappedTracker({ quietMs: 5_000, maxTraces: 100_000 });
    const c = new CoverageTracker({ quietMs: 5_000, maxTraces: 100_000 });
    const marked = { 'gen_ai.operation.name': 'chat' };
    for (let i = 0; i < HELD; i++) {
      const s = rec(i, 0, marked);
      const at = i < FEW ? 0 : 1_000;
      u.span(s, at, false, false);
      c.span(rec(i, 0), at, false);
    }
    const pendingAsked: string[] = [];
    const { result, steps } = mapSteps(() => u.sweep(5_000, (id) => (pendingAsked.push(id), false)));
    expect(result.map((x) => x.traceId)).toEqual(Array.from({ length: FEW }, (_, i) => traceId(i)));
    expect(pendingAsked).toHaveLength(FEW);
    expect(steps).toBeLessThan(50 * FEW);
    expect(u.snapshot().following).toBe(HELD - FEW);
    const cov = mapSteps(() => c.sweep(5_000));
    expect(c.snapshot().traces.withoutSignal).toBe(FEW);
    expect(cov.steps).toBeLessThan(50 * FEW);
  });

  it('quiet traces held back as pending are asked again at each sweep (only they), then reported once they no longer wait', () => {
    const u = new UnmappedTracker({ quietMs: 5_000, maxTraces: 100_000 });
    for (let i = 0; i < HELD; i++) u.span(rec(i, 0, { 'gen_ai.operation.name': 'chat' }), i < FEW ? 0 : 1_000, false, false);
    let pending = true;
    for (const now of [5_000, 5_500]) {
      const asked: string[] = [];
      const { result, steps } = mapSteps(() => u.sweep(now, (id) => (asked.push(id), pending)));
      expect(result).toEqual([]);
      expect(asked).toEqual(Array.from({ length: FEW }, (_, i) => traceId(i)));
      expect(steps).toBeLessThan(50 * FEW);
    }
    pending = false;
    const { result, steps } = mapSteps(() => u.sweep(5_900, () => pending));
    expect(result.map((r) => r.traceId)).toEqual(Array.from({ length: FEW }, (_, i) => traceId(i)));
    expect(steps).toBeLessThan(50 * FEW);
    expect(u.snapshot().following).toBe(HELD - FEW);
  });

  it("LangGraph's waiting traces: 20,000 waiting for their root, 5 past the wait", () => {
    const lg = new LangGraphAssembler({ waitMs: 5_000, maxTraces: 100_000 });
    const node = { parent: 'ffffffffffffffff', node: 'agent_a', transferTo: null, startMs: 0, endMs: 1, status: 0, source: 'auditor' };
    for (let i = 0; i < HELD; i++) lg.keep(traceId(i), hex(i + 1, 16), node, i < FEW ? 0 : 1_000);
    const { result, steps } = mapSteps(() => lg.expire(5_000));
    expect(result.map((g) => (g.type === 'gap' ? g.reason : g.type))).toEqual(Array(FEW).fill('langgraph_root_unseen'));
    expect(result.map((g) => g.event)).toEqual(Array.from({ length: FEW }, (_, i) => `${hex(i + 1, 16)}:langgraph.gap`));
    expect(lg.waiting).toBe(HELD - FEW);
    expect(steps).toBeLessThan(50 * FEW);
  });
});
