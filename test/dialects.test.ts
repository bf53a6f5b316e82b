/**
 * Framework dialects end to end: spans recorded through the real OpenTelemetry SDK in the shapes each
 * instrumentation emits (test/fixtures/dialects/), serialized by the real OTLP serializer, decoded by the
 * auditor's decoder and fed to the span pipeline in export order, one span per batch (parents after
 * children) and all at once. The receipts are checked edge by edge; content never reaches them.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { join } from 'node:path';
import { validateReceipt, type Receipt } from '../src/core/index.js';
import { replayReceipts } from '../src/cli/replay.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { CallerResolver, type AgentSpan, type HandoffSpan } from '../src/ingest/callers.js';
import type { SpanRecord } from '../src/otlp/types.js';
import { ROOT } from './helpers/server.js';
import { CONTENT_MARKER, T0, type Recorder } from './fixtures/dialects/record.js';
import { genaiDisplayName, genaiOrphan, genaiProposedHandoff, genaiProviderId, genaiRun } from './fixtures/dialects/genai.js';
import { openllmetryRun } from './fixtures/dialects/openllmetry.js';
import { openinferenceRun } from './fixtures/dialects/openinference.js';
import { mafRun } from './fixtures/dialects/maf.js';
import { adkRun } from './fixtures/dialects/adk.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import type { LooseReceipt } from './helpers/receipt.js';

const WAIT = 10_000;
const NOW = 1_000_000;

interface Fed {
  receipts: Receipt[];
  gaps: Receipt[];
  pipeline: SpanPipeline;
}

/** Feed records in export order, `perBatch` spans at a time (Infinity: one batch), then let every wait run out. */
function feed(records: SpanRecord[], perBatch: number): Fed {
  // These fixtures name their runs by session: `--run-key explicit,conversation,trace`. The default key
  // (a run per unit of work, never per conversation) is tested in test/frameworks.test.ts.
  const pipeline = new SpanPipeline({ waitMs: WAIT, maxSpans: 100_000, runKey: ['explicit', 'conversation', 'trace'] });
  const receipts: Receipt[] = [];
  let now = NOW;
  for (let i = 0; i < records.length; i += perBatch === Infinity ? records.length : perBatch) {
    const batch = records.slice(i, perBatch === Infinity ? undefined : i + perBatch);
    const out = pipeline.process(batch, now);
    expect(out.rejected).toEqual([]);
    receipts.push(...out.receipts);
    now += 10;
  }
  const gaps = pipeline.expire(now + WAIT * 3);
  return { receipts, gaps, pipeline };
}

/** The same receipts whatever the batching; every receipt valid and content-free. */
function receiptsOf(rec: Recorder): { receipts: Receipt[]; gaps: Receipt[] } {
  const records = rec.records();
  const wire = Buffer.from(rec.wire());
  expect(wire.includes(Buffer.from(CONTENT_MARKER))).toBe(true); // the content really was exported
  expect(JSON.stringify(records)).not.toContain(CONTENT_MARKER); // and never decoded
  const one = feed(records, 1);
  const all = feed(records, Infinity);
  const canon = (f: Fed) => [...f.receipts, ...f.gaps].map((r) => JSON.stringify(r)).sort();
  expect(canon(all)).toEqual(canon(one));
  for (const r of [...one.receipts, ...one.gaps]) {
    const v = validateReceipt(r);
    expect(v.ok, JSON.stringify(v)).toBe(true);
    expect(JSON.stringify(r)).not.toContain(CONTENT_MARKER);
  }
  expect(one.pipeline.callers.stats().pending).toBe(0);
  return { receipts: one.receipts, gaps: one.gaps };
}

const t = (ms: number) => new Date(T0 + ms).toISOString();
/** Edges as "from -> to : kind @ms" lines, sorted, for readable expectations. */
const edges = (rs: Receipt[]) =>
  rs
    .filter((r) => r.type === 'edge')
    .map((r) => `${r.from} -> ${r.to} : ${r.kind} @${Date.parse(r.at) - T0}${r.status === 'error' ? ' error' : ''}`)
    .sort();
const gapsOf = (rs: Receipt[]) => rs.filter((r) => r.type === 'gap').map((r) => ({ reason: r.reason, from: r.from, to: r.to }));

const registry = loadContractDir(join(ROOT, 'contracts'));
/** The verdict of derived receipts pinned to the drift contract (as `serve --contract research-publish` pins traces). */
function verdictOf(rs: Receipt[], run: string): string {
  const start: Receipt = { run, event: 'pin', type: 'run.start', at: t(-1), contract: 'research-publish', version: '3', phase: 'research' };
  const { verdicts } = replayReceipts([start, ...rs.filter((r) => r.run === run)], registry, { now: T0 + 60_000 });
  return verdicts[0].verdict;
}

describe('OpenTelemetry GenAI invoke_agent', () => {
  it('client and internal invoke_agent spans: a delegate at start, a return at end unless failed; the run is gen_ai.conversation.id', () => {
    const { receipts, gaps } = receiptsOf(genaiRun());
    expect(edges(receipts)).toEqual([
      'orchestrator -> researcher : delegate @300',
      'orchestrator -> verifier : delegate @600',
      'researcher -> orchestrator : return @510',
    ]);
    expect(new Set(receipts.map((r) => r.run))).toEqual(new Set(['conv-genai-1']));
    expect(gaps).toEqual([]);
  });

  it('gen_ai.agent.id wins over the name, and the remote side of the same invocation adds no edge', () => {
    const { receipts, gaps } = receiptsOf(genaiProviderId());
    expect(edges(receipts)).toEqual([
      'asst_5j66UpCpwteGg4YSxUnt7lPY -> orchestrator : return @200',
      'orchestrator -> asst_5j66UpCpwteGg4YSxUnt7lPY : delegate @100',
    ]);
    expect(gaps).toEqual([]);
  });

  it('an agent known only by a display name is a gap, and nobody below it is attributed to the agent above it', () => {
    const { receipts, gaps } = receiptsOf(genaiDisplayName());
    expect(edges(receipts)).toEqual([]);
    expect(gapsOf(receipts)).toEqual([
      { reason: 'agent_id_invalid', from: undefined, to: undefined },
      { reason: 'caller_unidentified', from: undefined, to: 'web-search' },
    ]);
    expect(gaps).toEqual([]);
    expect(verdictOf(receipts, 'conv-genai-3')).toBe('uncertain');
  });

  it('a caller that never arrives is a caller_unresolved gap once the wait runs out, never a guess', () => {
    const { receipts, gaps } = receiptsOf(genaiOrphan());
    expect(receipts).toEqual([]);
    expect(gapsOf(gaps)).toEqual([{ reason: 'caller_unresolved', from: undefined, to: 'researcher' }]);
    expect(gaps[0].run).toBe('conv-genai-4');
    expect(verdictOf(gaps, 'conv-genai-4')).toBe('uncertain');
  });
});

describe('proposed GenAI handoff attributes (gen_ai.agent.handoff.source.name / target.name)', () => {
  it('a handoff edge; the target running as a sibling adds nothing', () => {
    const { receipts, gaps } = receiptsOf(genaiProposedHandoff(false));
    expect(edges(receipts)).toEqual(['researcher -> verifier : handoff @50']);
    expect(gaps).toEqual([]);
  });

  it('a target running inside the source is the handoff, not also a delegation', () => {
    const { receipts, gaps } = receiptsOf(genaiProposedHandoff(true, 'conv-genai-6'));
    expect(edges(receipts)).toEqual(['researcher -> verifier : handoff @50']);
    expect(gaps).toEqual([]);
  });
});

describe('OpenAI Agents SDK via OpenLLMetry (gen_ai.handoff.from_agent / to_agent)', () => {
  it('a named target is read from the span; a target unknown at span start is the next agent span', () => {
    const { receipts, gaps } = receiptsOf(openllmetryRun());
    expect(edges(receipts)).toEqual(['orchestrator -> researcher : handoff @95', 'researcher -> verifier : handoff @195']);
    expect(gaps).toEqual([]);
    const run = receipts[0].run;
    expect(run).toMatch(/^[0-9a-f]{32}$/); // no conversation id: the trace is the run
    expect(verdictOf(receipts, run)).toBe('forbidden_edge'); // the contract says orchestrator -> researcher is a delegate
  });

  it('when no agent runs after a handoff whose target was unknown, the run gets a gap, not an edge', () => {
    const { receipts, gaps } = receiptsOf(openllmetryRun(false));
    expect(edges(receipts)).toEqual(['orchestrator -> researcher : handoff @95']);
    // The workflow root never ended (so never arrived): nothing above the agent spans is known, so their
    // callers are unresolved (an agent span's caller is its nearest ancestor agent, in every dialect).
    expect(gapsOf(gaps)).toEqual([
      { reason: 'handoff_target_unresolved', from: 'researcher', to: undefined },
      { reason: 'caller_unresolved', from: undefined, to: 'orchestrator' },
      { reason: 'caller_unresolved', from: undefined, to: 'researcher' },
    ]);
  });
});

describe('OpenAI Agents SDK via OpenInference (graph.node.id / graph.node.parent_id)', () => {
  it('graph.node.parent_id -> graph.node.id is a handoff; an agent run as a tool is a delegation to it', () => {
    const { receipts, gaps } = receiptsOf(openinferenceRun());
    expect(edges(receipts)).toEqual([
      'orchestrator -> researcher : handoff @110',
      'researcher -> verifier : handoff @210',
      'researcher -> web-search : delegate @121',
      'web-search -> researcher : return @140',
    ]);
    expect(gaps).toEqual([]);
  });
});

describe('Microsoft Agent Framework workflows (executor.process linked to message.send)', () => {
  it('each link of an executor span is a handoff from the sending executor; fan-out and fan-in; a failed delivery is a gap; drops are nothing', () => {
    const { receipts, gaps } = receiptsOf(mafRun());
    expect(edges(receipts)).toEqual([
      'doc-search -> researcher : handoff @70',
      'orchestrator -> doc-search : handoff @40',
      'orchestrator -> web-search : handoff @40',
      'web-search -> researcher : handoff @70',
    ]);
    expect(gapsOf(receipts)).toEqual([{ reason: 'edge_delivery_failed', from: 'doc-search', to: 'publisher' }]);
    expect(gaps).toEqual([]);
  });

  it('a link whose message.send never arrives is a sender_unresolved gap', () => {
    const records = mafRun().records().filter((r) => !(r.name === 'message.send' && r.startMs === T0 + 50));
    const { receipts, gaps } = feed(records, 1);
    expect(edges(receipts)).not.toContain('web-search -> researcher : handoff @70');
    expect(gapsOf(gaps)).toEqual([{ reason: 'sender_unresolved', from: undefined, to: 'researcher' }]);
  });
});

describe('Google ADK (invoke_agent by name, execute_tool transfer_to_agent)', () => {
  it('the transfer target is the next invoke_agent; the source is the agent around the tool call; no delegate/return for a transfer', () => {
    const { receipts, gaps } = receiptsOf(adkRun());
    expect(edges(receipts)).toEqual(['orchestrator -> researcher : handoff @20', 'researcher -> verifier : handoff @50']);
    expect(new Set(receipts.map((r) => r.run))).toEqual(new Set(['sess-adk-1'])); // the tool span names no session: the source agent's run
    expect(gaps).toEqual([]);
  });

  it('content capture on changes nothing: the tool arguments are never read', () => {
    const off = receiptsOf(adkRun({ session: 'sess-adk-2' }));
    const on = receiptsOf(adkRun({ session: 'sess-adk-2', capture: true }));
    expect(edges(on.receipts)).toEqual(edges(off.receipts));
  });

  it('a transfer to a workflow agent targets the workflow agent, not the first sub-agent to finish', () => {
    const { receipts, gaps } = receiptsOf(adkRun({ session: 'sess-adk-3', workflowTarget: true }));
    expect(edges(receipts)).toEqual([
      'orchestrator -> research-team : handoff @20',
      'research-team -> researcher : delegate @30',
      'researcher -> research-team : return @102',
      'researcher -> verifier : handoff @50',
    ]);
    expect(gaps).toEqual([]);
  });

  it('a transfer whose target never runs is a gap when the trace goes quiet; the run is uncertain', () => {
    const { receipts, gaps } = receiptsOf(adkRun({ session: 'sess-adk-4', lostTarget: true }));
    expect(edges(receipts)).toEqual([]);
    expect(gapsOf(gaps).sort((a, b) => (a.reason! < b.reason! ? -1 : 1))).toEqual([
      { reason: 'caller_unresolved', from: undefined, to: 'researcher' },
      { reason: 'handoff_source_unresolved', from: undefined, to: undefined },
      { reason: 'handoff_target_unresolved', from: 'researcher', to: undefined },
    ]);
    expect(verdictOf([...receipts, ...gaps], 'sess-adk-4')).toBe('uncertain');
  });
});

/**
 * An arrival order exporters can produce: every span after its children (spans are exported when they end,
 * and a parent ends after its children), processes and batches interleaved arbitrarily. `choices` picks, at
 * each step, one of the spans whose children have all arrived.
 */
function childrenFirst(records: SpanRecord[], choices: number[]): SpanRecord[] {
  const open = new Map<string, number>(); // span id -> children not yet arrived
  for (const r of records) if (r.parentSpanId) open.set(r.parentSpanId, (open.get(r.parentSpanId) ?? 0) + 1);
  const left = [...records];
  const out: SpanRecord[] = [];
  for (let i = 0; left.length > 0; i++) {
    const ready = left.filter((r) => !open.get(r.spanId));
    const pick = ready[choices[i % choices.length] % ready.length];
    out.push(pick);
    left.splice(left.indexOf(pick), 1);
    if (pick.parentSpanId) open.set(pick.parentSpanId, open.get(pick.parentSpanId)! - 1);
  }
  return out;
}

describe('arrival order', () => {
  it('any order in which spans follow their children, in any batching, gives the same receipts (property)', () => {
    const fixtures = [
      genaiRun('conv-prop-1'),
      genaiDisplayName('conv-prop-2'),
      genaiProposedHandoff(true, 'conv-prop-3'),
      genaiProposedHandoff(false, 'conv-prop-4'),
      openllmetryRun(),
      openinferenceRun(),
      mafRun(),
      adkRun({ session: 'sess-prop-1' }),
      adkRun({ session: 'sess-prop-2', workflowTarget: true }),
    ].map((r) => r.records());
    const canon = (f: Fed) => [...f.receipts, ...f.gaps].map((r) => JSON.stringify(r)).sort();
    for (const records of fixtures) {
      const baseline = canon(feed(records, Infinity));
      fc.assert(
        fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 4 }), (choices, perBatch) => {
          expect(canon(feed(childrenFirst(records, choices), perBatch))).toEqual(baseline);
        }),
        { numRuns: 40 },
      );
    }
  });
});

describe('the resolver, directly', () => {
  const span = (spanId: string, parentSpanId: string | null, startMs: number): SpanRecord => ({
    traceId: 'a'.repeat(32), spanId, parentSpanId, name: 's', kind: 1, startMs, endMs: startMs + 5, statusCode: 1, attrs: {}, events: [], links: [],
  });
  const agentSpan = (s: SpanRecord, agent: string): AgentSpan => ({ run: 'r', traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId, agent, startMs: s.startMs, endMs: s.endMs, statusCode: 1 });

  it('an invocation a pending handoff may claim waits for it, so a transfer is never also a delegation (out-of-order arrival)', () => {
    const r = new CallerResolver({ waitMs: WAIT, maxSpans: 1000 });
    const root = span('0000000000000001', null, 0);
    const source = span('0000000000000002', '0000000000000001', 10); // the researcher, whose span arrives late
    const tool = span('0000000000000003', '0000000000000002', 20);
    const target = span('0000000000000004', '0000000000000001', 30); // the verifier, a sibling whose caller is already known
    const h: HandoffSpan = { run: null, traceId: tool.traceId, spanId: tool.spanId, parentSpanId: tool.parentSpanId, startMs: 20, statusCode: 1, from: null, to: 'verifier' };
    expect(r.addBatch([agentSpan(root, 'orchestrator'), agentSpan(target, 'verifier')], [root, target], NOW, { handoffs: [h] })).toEqual([]);
    const out = r.addBatch([agentSpan(source, 'researcher')], [source], NOW + 1);
    expect(edges(out.map((x) => ({ ...x, at: new Date(Date.parse(x.at) + T0).toISOString() })))).toEqual([
      'orchestrator -> researcher : delegate @10',
      'researcher -> orchestrator : return @15',
      'researcher -> verifier : handoff @20',
    ]);
    expect(r.stats().pending).toBe(0);
  });

  it('when the handoff expires instead, the held invocation is released with its own caller', () => {
    const r = new CallerResolver({ waitMs: WAIT, maxSpans: 1000 });
    const root = span('0000000000000001', null, 0);
    const tool = span('0000000000000003', '00000000000000ff', 20); // its parent never arrives
    const target = span('0000000000000004', '0000000000000001', 30);
    const h: HandoffSpan = { run: null, traceId: tool.traceId, spanId: tool.spanId, parentSpanId: tool.parentSpanId, startMs: 20, statusCode: 1, from: null, to: 'verifier' };
    expect(r.addBatch([agentSpan(root, 'orchestrator'), agentSpan(target, 'verifier')], [root, target], NOW, { handoffs: [h] })).toEqual([]);
    const out = r.expire(NOW + WAIT);
    expect(out.map((x: LooseReceipt) => `${x.type} ${x.reason ?? `${x.from} -> ${x.to} : ${x.kind}`}`)).toEqual([
      'gap handoff_source_unresolved',
      'edge orchestrator -> verifier : delegate',
      'edge verifier -> orchestrator : return',
    ]);
  });
});
