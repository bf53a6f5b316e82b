/**
 * Caller resolution retries only the waiting spans of the traces a batch touched (and agents linked into them),
 * not every waiting span (src/ingest/callers.ts, resolvePending). Differential property: under random batches of
 * agent spans (parents, links across traces, aliases, failures), handoffs (named or inferred ends), relays and
 * plain spans, delivered in any order and interleaved with expiry, the receipts (and their order), the pending
 * traces and the counters are those of the same resolver made to retry every waiting span on every batch.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CallerResolver, type AgentSpan, type HandoffSpan, type SpanPlace } from '../src/ingest/callers.js';
import type { Receipt } from '../src/core/types.js';

/** The reference: the resolution pass before incremental retries, verbatim (every waiting span, in arrival order). */
function fullPass(r: CallerResolver): CallerResolver {
  type Idx = { pendingHandoffs(): Iterable<HandoffSpan>; pendingAgents(): Iterable<AgentSpan>; removeHandoff(h: HandoffSpan): boolean; removeAgent(a: AgentSpan): boolean };
  const x = r as unknown as { idx: Idx; tryHandoff(h: HandoffSpan): Receipt[] | null; tryAgent(a: AgentSpan): Receipt[] | null; resolvePending(): Receipt[] };
  x.resolvePending = () => {
    const out: Receipt[] = [];
    for (const h of x.idx.pendingHandoffs()) {
      const rr = x.tryHandoff(h);
      if (rr === null) continue;
      x.idx.removeHandoff(h);
      out.push(...rr);
    }
    for (const a of x.idx.pendingAgents()) {
      const rr = x.tryAgent(a);
      if (rr === null) continue;
      x.idx.removeAgent(a);
      out.push(...rr);
    }
    return out;
  };
  return r;
}

const T = 4; // traces
const S = 10; // span ids per trace
const tid = (t: number) => `${t}`.padStart(32, 'a');
const sid = (t: number, s: number) => `${t}${s}`.padStart(16, 'b');
const AGENTS = ['lead', 'worker', 'critic', ''];

const parent = fc.option(fc.nat(S - 1), { nil: null });
const agentOp = fc.record({
  k: fc.constant('agent' as const),
  t: fc.nat(T - 1),
  s: fc.nat(S - 1),
  p: parent,
  agent: fc.constantFrom(...AGENTS),
  alias: fc.option(fc.constantFrom('worker', 'helper'), { nil: undefined }),
  start: fc.nat(20),
  dur: fc.nat(5),
  status: fc.constantFrom(0, 1, 2),
  edges: fc.constantFrom('call', 'call', 'none') as fc.Arbitrary<'call' | 'none'>,
  links: fc.option(fc.array(fc.record({ t: fc.nat(T - 1), s: fc.nat(S - 1) }), { minLength: 1, maxLength: 2 }), { nil: undefined, freq: 4 }),
});
const handoffOp = fc.record({
  k: fc.constant('handoff' as const),
  t: fc.nat(T - 1),
  s: fc.nat(S - 1),
  p: parent,
  start: fc.nat(20),
  status: fc.constantFrom(0, 2),
  from: fc.option(fc.constantFrom('lead', 'worker'), { nil: null }),
  to: fc.option(fc.constantFrom('worker', 'critic'), { nil: null }),
});
const spanOp = fc.record({ k: fc.constantFrom('span' as const, 'relay' as const), t: fc.nat(T - 1), s: fc.nat(S - 1), p: parent });
const batch = fc.array(fc.oneof({ arbitrary: agentOp, weight: 3 }, { arbitrary: handoffOp, weight: 1 }, { arbitrary: spanOp, weight: 3 }), { minLength: 1, maxLength: 6 });
const step = fc.oneof({ arbitrary: fc.record({ k: fc.constant('batch' as const), ops: batch }), weight: 5 }, { arbitrary: fc.record({ k: fc.constant('expire' as const), advance: fc.nat(40) }), weight: 1 });

function toBatch(ops: ReadonlyArray<Record<string, unknown>>) {
  const agents: AgentSpan[] = [];
  const handoffs: HandoffSpan[] = [];
  const relays: SpanPlace[] = [];
  const places: SpanPlace[] = [];
  for (const o of ops as ReadonlyArray<Record<string, any>>) {
    const place = { traceId: tid(o.t), spanId: sid(o.t, o.s), parentSpanId: o.p === null ? null : sid(o.t, o.p) };
    places.push(place);
    if (o.k === 'agent') {
      const a: AgentSpan = { run: `run-${o.t}`, ...place, agent: o.agent, startMs: o.start, endMs: o.start + o.dur, statusCode: o.status, edges: o.edges, source: 'src' };
      if (o.alias) a.aliases = [o.alias];
      if (o.links) a.links = o.links.map((l: { t: number; s: number }) => ({ traceId: tid(l.t), spanId: sid(l.t, l.s) }));
      agents.push(a);
    } else if (o.k === 'handoff') {
      handoffs.push({ run: null, ...place, startMs: o.start, statusCode: o.status, from: o.from, to: o.to, source: 'src' });
    } else if (o.k === 'relay') relays.push(place);
  }
  return { agents, handoffs, relays, places };
}

describe('caller resolution retries only touched traces', () => {
  it('gives the receipts, order, pending traces and counters of retrying every waiting span', () => {
    let receipts = 0;
    let heldAcrossBatches = 0;
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 25 }), fc.integer({ min: 5, max: 40 }), (steps, maxSpans) => {
        const opts = { waitMs: 30, maxSpans };
        const inc = new CallerResolver(opts);
        const ref = fullPass(new CallerResolver(opts));
        let now = 0;
        for (const st of steps) {
          let a;
          let b;
          if (st.k === 'batch') {
            now += 1;
            const x = toBatch(st.ops);
            const y = structuredClone(x);
            const pendingBefore = ref.stats().pending;
            a = inc.addBatch(x.agents, x.places, now, { handoffs: x.handoffs, relays: x.relays });
            b = ref.addBatch(y.agents, y.places, now, { handoffs: y.handoffs, relays: y.relays });
            if (pendingBefore > 0 && b.length > 0) heldAcrossBatches++;
          } else {
            now += st.advance;
            a = inc.expire(now);
            b = ref.expire(now);
          }
          expect(a).toEqual(b);
          receipts += a.length;
          expect(inc.stats()).toEqual(ref.stats());
          expect([...inc.pendingTraceIds()].sort()).toEqual([...ref.pendingTraceIds()].sort());
        }
      }),
      { numRuns: 1500 },
    );
    // Resolutions happened, including of spans that waited across batches.
    expect(receipts).toBeGreaterThan(1000);
    expect(heldAcrossBatches).toBeGreaterThan(100);
  });
});
