/** The span log entry body (src/ingest/span-log.ts): format 2 written, formats 1 and 2 read, every field validated. */
import { describe, expect, it } from 'vitest';
import { SpanPipeline, type LoggedSpan } from '../src/ingest/pipeline.js';
import { decodeLoggedSpans, encodeLoggedSpans } from '../src/ingest/span-log.js';
import type { SpanRecord } from '../src/otlp/types.js';

const T = '0af7651916cd43dd8448eb211c80319c';
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const key = (xs: readonly LoggedSpan[]) => xs.map((x) => JSON.stringify(x, Object.keys(x).sort())).sort();

/** One of every op, plain spans under several parents and two sources, a root (null parent). */
const MIXED: LoggedSpan[] = [
  { t: T, s: 'b7ad6b7169203331', p: '00f067aa0ba902b7', src: 'tok-res', op: 'agent', st: 1000, en: 2000, sc: 1, k: 1, run: 'run-1', agent: 'researcher', stn: 5, enn: 7, aliases: ['res'], links: [{ t: 'ffffffffffffffffffffffffffffffff', s: '1111111111111111' }] },
  { t: T, s: '2222222222222222', p: 'b7ad6b7169203331', src: 'tok-res', op: 'handoff', st: 1100, sc: 0, run: null, from: 'researcher', to: 'writer' },
  { t: T, s: '3333333333333333', p: null, src: 'tok-orch', op: 'relay' },
  { t: T, s: '4444444444444444', p: '3333333333333333', src: 'tok-orch', op: 'langgraph', st: 1, en: 2, sc: 0, node: 'writer', xfer: null, ns: 'writer:1' },
  { t: T, s: '5555555555555555', p: null, src: 'tok-orch', op: 'lgroot', st: 1, sc: 0, run: 'run-9' },
  ...Array.from({ length: 30 }, (_, i): LoggedSpan => ({ t: T, s: hex16(0xa000 + i), p: i % 3 === 0 ? null : hex16(0xb000 + (i % 4)), src: i % 2 ? 'tok-res' : 'anonymous', op: 'span' })),
];

describe('span log entry body', () => {
  it('format 2 reads back as the same logged spans (every op, parents, sources)', () => {
    const body = encodeLoggedSpans(MIXED);
    expect(JSON.parse(body).v).toBe(2);
    expect(body).not.toContain(T); // the trace id is the entry's, not repeated per span
    const back = decodeLoggedSpans(T, body);
    expect(back).not.toBeNull();
    expect(key(back!)).toEqual(key(MIXED));
    // Re-encoding what was read gives the same body (replay logs a pending trace's spans again).
    expect(decodeLoggedSpans(T, encodeLoggedSpans(back!))!.length).toBe(MIXED.length);
  });

  it('format 1 (an array of logged spans, written by earlier builds) is still read', () => {
    expect(decodeLoggedSpans(T, JSON.stringify(MIXED))).toEqual(MIXED);
    expect(decodeLoggedSpans(T, JSON.stringify([{ ...MIXED[0], run: 'patient Jane Doe' }]))).toBeNull();
  });

  it('plain skeleton spans cost ~12 bytes each instead of ~117', () => {
    const spans = Array.from({ length: 512 }, (_, i): LoggedSpan => ({ t: T, s: hex16(0x5a5a_0000_0000 + i * 7919), p: hex16(0x77 + Math.floor(i / 10)), src: 'anonymous', op: 'span' }));
    const v1 = JSON.stringify(spans).length;
    const v2 = encodeLoggedSpans(spans).length;
    expect(v1 / 512).toBeGreaterThan(110);
    expect(v2 / 512).toBeLessThan(16);
    expect(key(decodeLoggedSpans(T, encodeLoggedSpans(spans))!)).toEqual(key(spans));
  });

  it('a span id that is not lowercase hex is written as its record, and the entry refused on replay as in format 1', () => {
    const spans: LoggedSpan[] = [MIXED[6], { ...MIXED[6], s: 'zzzzzzzzzzzzzzzz' }];
    const body = JSON.parse(encodeLoggedSpans(spans));
    expect(body.x).toContainEqual({ s: 'zzzzzzzzzzzzzzzz', p: MIXED[6].p, src: MIXED[6].src, op: 'span' });
    expect(decodeLoggedSpans(T, JSON.stringify(body))).toBeNull();
    expect(decodeLoggedSpans(T, JSON.stringify(spans))).toBeNull();
  });

  it('refuses a tampered body: every field is validated', () => {
    const good = JSON.parse(encodeLoggedSpans(MIXED));
    const ids = Buffer.from('a1a2a3a4a5a6a7a8b1b2b3b4b5b6b7b8', 'hex').toString('base64');
    expect(decodeLoggedSpans(T, JSON.stringify({ v: 2, src: ['s'], g: [[null, 0, ids]] }))).toHaveLength(2);
    for (const bad of [
      { ...good, v: 3 },
      { ...good, src: ['a b'] },
      { ...good, src: 'tok-res' },
      { ...good, g: [['nothex', 0, ids]] },
      { ...good, g: [[null, 5, ids]] },
      { ...good, g: [[null, 0.5, ids]] },
      { ...good, g: [[null, 0, '']] },
      { ...good, g: [[null, 0, ids.slice(0, -4)]] }, // not a whole number of 8-byte ids
      { ...good, g: [[null, 0, `${ids}$`]] },
      { ...good, g: [[null, 0]] },
      { ...good, x: [{ ...good.x[0], agent: 'Dr Who' }] },
      { ...good, x: [{ ...good.x[0], t: T }] },
      { ...good, x: [['array']] },
      { ...good, x: {} },
      { src: ['s'], g: [] },
      'a string',
      null,
    ]) expect(decodeLoggedSpans(T, JSON.stringify(bad)), JSON.stringify(bad)).toBeNull();
    expect(decodeLoggedSpans('not-a-trace', JSON.stringify(good))).toBeNull();
    expect(() => decodeLoggedSpans(T, '{not json')).toThrow();
  });

  it('a pipeline replaying a format-2 entry resolves the caller the original spans would have', () => {
    const span = (spanId: string, parent: string | null, attrs: SpanRecord['attrs']): SpanRecord => ({
      traceId: T, spanId, parentSpanId: parent, name: 'x', kind: 1, startMs: 1_000, endMs: 2_000, statusCode: 1, attrs, events: [], links: [],
    });
    const agent = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name, 'topology.run.id': 'run-1' });
    // The child agent sits under two plain spans; its caller arrives only after the "restart".
    const p1 = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    const out1 = p1.process([span('cccccccccccccccc', 'bbbbbbbbbbbbbbbb', agent('researcher')), span('bbbbbbbbbbbbbbbb', 'aaaaaaaaaaaaaaaa', {}), span('dddddddddddddddd', 'bbbbbbbbbbbbbbbb', {})], 0, 'tok');
    expect(out1.pendingLog).toHaveLength(1);
    const body = encodeLoggedSpans(out1.pendingLog[0].spans);
    const p2 = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 });
    expect(p2.replay(decodeLoggedSpans(T, body)!, 1).receipts).toEqual([]);
    const out2 = p2.process([span('aaaaaaaaaaaaaaaa', null, agent('orchestrator'))], 2, 'tok');
    expect(out2.receipts.map((r) => `${(r as { from: string }).from}->${(r as { to: string }).to}`)).toEqual(['orchestrator->researcher', 'researcher->orchestrator']);
  });
});
