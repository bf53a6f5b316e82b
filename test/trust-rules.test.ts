/** The trust rules as pure functions, and the span log's record of a waiting span (src/ingest/trust.ts, pipeline.ts). */
import { describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { SpanPipeline, parseLoggedSpan } from '../src/ingest/pipeline.js';
import { derivedBinding, evidenceOf, idReason, runScope, sourceAgentsOf } from '../src/ingest/trust.js';
import type { SpanRecord } from '../src/otlp/types.js';
import type { LooseReceipt } from './helpers/receipt.js';

const T = '0af7651916cd43dd8448eb211c80319c';
const span = (spanId: string, parent: string | null, attrs: SpanRecord['attrs'], name = 'x'): SpanRecord => ({
  traceId: T,
  spanId,
  parentSpanId: parent,
  name,
  kind: 1,
  startMs: 1_000,
  endMs: 2_000,
  statusCode: 1,
  attrs,
  events: [{ name: 'EVENT-NAME-MARKER', timeMs: 1_500, attrs: { 'gen_ai.agent.name': 'researcher' } }],
  links: [],
});
const agent = (name: string, run = 'run-1') => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name, 'topology.run.id': run });

const sources = sourceAgentsOf([
  { source: 'tok-orch', agents: new Set(['orchestrator']) },
  { source: 'tok-res', agents: new Set(['researcher']) },
  { source: 'tok-all', agents: null },
]);

describe('id rule on receipts', () => {
  const base: Receipt = { run: 'r', event: 'e', type: 'edge', at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' };
  it('names the failing field, never the value', () => {
    expect(idReason(base)).toBeNull();
    expect(idReason({ ...base, run: 'tenant-7/run-42' })).toBeNull();
    expect(idReason({ ...base, run: 'patient Jane Doe' })).toBe('run_id_invalid');
    expect(idReason({ ...base, run: 'r'.repeat(201) })).toBe('run_id_invalid');
    expect(idReason({ ...base, event: 'a b' })).toBe('event_id_invalid');
    expect(idReason({ ...base, to: 'tenant/x' })).toBe('agent_id_invalid');
    expect(idReason({ ...base, kind: 'chat' as never })).toBe('receipt_invalid');
  });
});

describe('derived binding', () => {
  const edge: Receipt = { run: 'r', event: 'e:delegate', type: 'edge', at: '2026-01-01T00:00:00Z', from: 'orchestrator', to: 'verifier', kind: 'delegate' };
  it('checks each end against the source of the span that named it', () => {
    expect(derivedBinding(edge, { from: ['tok-orch'], to: ['tok-res'] }, sources)).toMatch(/source tok-res may not speak for agent "verifier"/);
    expect(derivedBinding(edge, { from: ['tok-res'], to: ['tok-all'] }, sources)).toMatch(/source tok-res may not speak for agent "orchestrator"/);
    expect(derivedBinding(edge, { from: ['tok-orch'], to: ['tok-all'] }, sources)).toBeNull();
    expect(derivedBinding(edge, { from: ['tok-orch', 'tok-res'], to: [] }, sources)).toMatch(/tok-res/); // every voucher must hold
    expect(derivedBinding(edge, { from: ['gone-token'] }, sources)).toMatch(/gone-token/); // an unknown source vouches for nothing
    expect(derivedBinding(edge, undefined, sources)).toBeNull(); // explicit receipts: the sender's binding applies instead
  });
});

describe('run scope', () => {
  const c = { contract: 'research-publish', owner: 'orchestrator', agents: ['orchestrator', 'researcher'] };
  const r = (type: Receipt['type']): Receipt => ({ run: 'r', event: 'e', type, at: '2026-01-01T00:00:00Z' }) as Receipt;
  it('run.start, run.end and outcome need the owner; a gap an agent of the contract; others are not run-level', () => {
    for (const t of ['run.start', 'run.end', 'outcome'] as const) {
      expect(runScope(r(t), new Set(['researcher']), 'tok-res', () => c)).toMatch(/owner "orchestrator"/);
      expect(runScope(r(t), new Set(['orchestrator']), 'tok-orch', () => c)).toBeNull();
      expect(runScope(r(t), null, 'tok-all', () => c)).toBeNull();
      expect(runScope(r(t), new Set(['orchestrator']), 'tok-orch', () => null)).toMatch(/needs the run's contract to be known/);
    }
    expect(runScope(r('gap'), new Set(['researcher']), 'tok-res', () => c)).toBeNull();
    expect(runScope(r('gap'), new Set(['fieldops-main']), 'tok-x', () => c)).toMatch(/bound to no agent of contract research-publish/);
    let looked = false;
    expect(runScope(r('edge'), new Set(['researcher']), 'tok-res', () => ((looked = true), c))).toBeNull();
    expect(looked).toBe(false);
  });
});

describe('span log of a waiting span', () => {
  it('keeps only resolution fields, with the source; names, events and attribute text are not in it', () => {
    const p = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    const child = span('b7ad6b7169203331', '00f067aa0ba902b7', agent('researcher'), 'SPAN-NAME-MARKER');
    const plain = span('c7ad6b7169203331', '00f067aa0ba902b7', { 'gen_ai.tool.name': 'TOOL-MARKER' }, 'OTHER-NAME-MARKER');
    const out = p.process([child, plain], 0, 'tok-res');
    expect(out.receipts).toEqual([]);
    expect(out.pendingLog).toHaveLength(1);
    const body = JSON.stringify(out.pendingLog[0].spans);
    for (const m of ['SPAN-NAME-MARKER', 'EVENT-NAME-MARKER', 'OTHER-NAME-MARKER', 'TOOL-MARKER', 'invoke_agent']) expect(body).not.toContain(m);
    expect(out.pendingLog[0].spans).toEqual([
      // k: the span kind (an enum), which the same-invocation rule reads (src/ingest/identity.ts)
      { t: T, s: 'b7ad6b7169203331', p: '00f067aa0ba902b7', src: 'tok-res', op: 'agent', st: 1000, en: 2000, sc: 1, k: 1, run: 'run-1', agent: 'researcher' },
      { t: T, s: 'c7ad6b7169203331', p: '00f067aa0ba902b7', src: 'tok-res', op: 'span' },
    ]);
    for (const l of out.pendingLog[0].spans) expect(parseLoggedSpan(JSON.parse(JSON.stringify(l)))).toEqual(l);
  });

  it('refuses a tampered or foreign record on replay', () => {
    const ok = { t: T, s: 'b7ad6b7169203331', p: null, src: 'tok-res', op: 'agent', st: 1, en: 2, sc: 0, run: 'run-1', agent: 'researcher' };
    expect(parseLoggedSpan(ok)).not.toBeNull();
    for (const bad of [
      { ...ok, run: 'patient Jane Doe' },
      { ...ok, agent: 'Dr Who' },
      { ...ok, src: 'a b' },
      { ...ok, t: 'xyz' },
      { ...ok, st: Number.NaN },
      { ...ok, op: 'other' },
      { ...ok, aliases: ['a b'] },
      { traceId: T, spanId: 'b7ad6b7169203331', name: 'old format', attrs: {} },
    ]) expect(parseLoggedSpan(bad), JSON.stringify(bad)).toBeNull();
  });

  it('a replayed child resolves with the source it was sent by; the parent\'s request does not vouch for it', () => {
    const p1 = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    const logged = p1.process([span('b7ad6b7169203331', '00f067aa0ba902b7', agent('verifier'))], 0, 'tok-res').pendingLog[0].spans;
    const p2 = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    expect(p2.replay(logged.map((l) => parseLoggedSpan(JSON.parse(JSON.stringify(l)))!), 1).receipts).toEqual([]);
    const out = p2.process([span('00f067aa0ba902b7', null, agent('orchestrator'))], 2, 'tok-orch');
    expect(out.receipts.map((r: LooseReceipt) => `${r.from}->${r.to}:${r.kind}`)).toEqual(['orchestrator->verifier:delegate', 'verifier->orchestrator:return']);
    expect(out.receipts.map((r) => derivedBinding(r, evidenceOf(r), sources))).toEqual([
      'source tok-res may not speak for agent "verifier" (span naming the callee)',
      'source tok-res may not speak for agent "verifier" (span naming the caller)',
    ]);
  });

  it('a span naming a run id that fails the rule is refused whole and not indexed', () => {
    const p = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    const out = p.process([span('b7ad6b7169203331', '00f067aa0ba902b7', agent('researcher', 'patient Jane Doe'))], 0, 'tok-res');
    expect(out.receipts).toEqual([]);
    expect(out.pendingLog).toEqual([]);
    expect(out.rejected.map((r) => r.code)).toEqual(['run_id_invalid']);
    expect(JSON.stringify(out.rejected)).not.toContain('Jane');
    expect(p.callers.stats()).toMatchObject({ pending: 0, indexed: 0 });
  });
});
