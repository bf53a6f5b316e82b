/**
 * Delivery order must not change a verdict (issue 37). Exporters and Collectors reorder requests; a non-agent span
 * (tool, chain, LLM) that arrives before the agent spans around it must still be walked through when they come.
 *
 * Property: a random trace (depth up to 6, agent and non-agent spans mixed, fan-out), cut into requests in a random
 * order at random places, with restarts between requests (a new pipeline and engine over the same SQLite store,
 * the span log replayed as `serve` does), gives the same stored receipts and the same verdict as the whole trace
 * in one request. Plus the skeleton's bounds: a flood of traces that never complete keeps it capped, counts the
 * eviction, and the evicted child ends as a gap, never a guessed edge.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditEngine } from '../src/audit/engine.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import type { Receipt } from '../src/core/types.js';
import { SpanPipeline } from '../src/ingest/pipeline.js';
import { createAuditMetrics } from '../src/metrics/index.js';
import type { SpanRecord } from '../src/otlp/types.js';
import { Ingestor } from '../src/audit/ingestor.js';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';
import type { LooseReceipt } from './helpers/receipt.js';

const AGENTS = ['alpha', 'beta', 'gamma', 'delta', 'omega'];

/** A contract that allows every delegation and return among AGENTS and expects alpha -> beta (a test contract). */
function contractsDir(): string {
  const dir = tempDir('ta-order-contracts-');
  mkdirSync(dir, { recursive: true });
  const allow: string[] = [];
  for (const a of AGENTS) for (const b of AGENTS) if (a !== b) allow.push(`  - ${a} -> ${b} : delegate`, `  - ${b} -> ${a} : return`);
  writeFileSync(
    join(dir, 'any-order.yaml'),
    ['contract: any-order', 'version: "1"', 'retired: false', 'owner: alpha', `agents: [${AGENTS.join(', ')}]`, 'allow:', ...allow, 'phases:', '  work:', '    outcome: optional', '    expect:', '      - alpha -> beta : delegate', '      - beta -> alpha : return', ''].join('\n'),
  );
  return dir;
}
const registry = loadContractDir(contractsDir());
const NOW = Date.parse('2026-03-01T12:00:00Z');
const WAIT_MS = 10_000;

/** One node of a generated trace: an agent invocation (its agent) or a non-agent span (tool, chat, plain). */
interface GenNode {
  agent: string | null;
  kind: 'tool' | 'chat' | 'plain';
  children: GenNode[];
}

/** A node at `depth` (the root is 1): up to 3 children near the root, 2 below, none at depth 6. */
function nodeAt(depth: number): fc.Arbitrary<GenNode> {
  const children: fc.Arbitrary<GenNode[]> = depth >= 6 ? fc.constant([]) : fc.array(nodeAt(depth + 1), { maxLength: depth <= 2 ? 3 : 2 });
  return fc.record({
    agent: fc.option(fc.constantFrom(...AGENTS), { freq: 2 }),
    kind: fc.constantFrom('tool' as const, 'chat' as const, 'plain' as const),
    children,
  });
}
const nodeArb = nodeAt(1);

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/** The span records of a generated trace: each child inside its parent's time, ends before its parent ends. */
function spansOf(root: GenNode, traceNo: number): SpanRecord[] {
  const traceId = hex(0xabc00000 + traceNo, 32);
  const out: SpanRecord[] = [];
  let next = 1;
  const walk = (n: GenNode, parent: string | null, start: number, end: number) => {
    const spanId = hex(next++, 16);
    const attrs: Record<string, string> = {};
    let name: string;
    if (n.agent !== null) {
      name = `invoke_agent ${n.agent}`;
      attrs['gen_ai.operation.name'] = 'invoke_agent';
      attrs['gen_ai.agent.name'] = n.agent;
    } else if (n.kind === 'tool') {
      name = 'execute_tool lookup';
      attrs['gen_ai.operation.name'] = 'execute_tool';
      attrs['gen_ai.tool.name'] = 'lookup';
    } else if (n.kind === 'chat') {
      name = 'chat model';
      attrs['gen_ai.operation.name'] = 'chat';
    } else name = 'step';
    // Sub-millisecond parts, as the decoders give them: receipts derived after a restart must keep them.
    out.push({ traceId, spanId, parentSpanId: parent, name, kind: 1, startMs: start + 0.000321, endMs: end + 0.000654, startNs: 321, endNs: 654, statusCode: 0, attrs, events: [], links: [] });
    const k = n.children.length;
    n.children.forEach((c, i) => {
      const w = (end - start) / (k + 1);
      walk(c, spanId, start + 1 + i * w, start + (i + 1) * w);
    });
  };
  walk(root, null, NOW - 3_600_000, NOW - 60_000);
  return out;
}

/** A generated trace's depth (the root is 1) and the most non-agent spans an agent span walks up through to an agent. */
function shapeOf(spans: SpanRecord[]): { depth: number; longestWalk: number } {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const parentOf = (s: SpanRecord) => (s.parentSpanId === null ? undefined : byId.get(s.parentSpanId));
  const isAgent = (s: SpanRecord) => s.attrs['gen_ai.operation.name'] === 'invoke_agent';
  let depth = 0;
  let longestWalk = 0;
  for (const s of spans) {
    let d = 1;
    for (let p = parentOf(s); p; p = parentOf(p)) d++;
    depth = Math.max(depth, d);
    if (!isAgent(s)) continue;
    let k = 0;
    let p = parentOf(s);
    while (p && !isAgent(p)) {
      k++;
      p = parentOf(p);
    }
    if (p) longestWalk = Math.max(longestWalk, k);
  }
  return { depth, longestWalk };
}

/** One auditor over a data directory: store, engine, pipeline and ingest as `serve` wires them. */
class Auditor {
  readonly store: ReceiptStore;
  readonly engine: AuditEngine;
  readonly pipeline: SpanPipeline;
  readonly ingestor: Ingestor;
  constructor(readonly dir: string, maxSpans = 200_000) {
    this.store = ReceiptStore.open(dir);
    this.engine = new AuditEngine(registry, this.store, { retentionMs: 86_400_000, defaultContract: 'any-order' });
    this.engine.restore(NOW);
    this.pipeline = new SpanPipeline({ waitMs: WAIT_MS, maxSpans });
    this.ingestor = new Ingestor(this.engine, this.pipeline, createAuditMetrics(), { maxPendingReceipts: 1_000_000, maxInflightRequests: 100 }, () => NOW);
  }
  async send(spans: SpanRecord[]): Promise<void> {
    const r = await this.ingestor.consumeSpans({ spans, spanCount: spans.length }, 'http', { source: 'anonymous' });
    expect(r.rejectedSpans).toBe(0);
  }
  async close(): Promise<void> {
    await this.store.sync();
    this.store.close();
  }
  /** A restart: the next auditor over the same directory replays the span log first (as serve does). */
  static async restart(prev: Auditor): Promise<Auditor> {
    await prev.close();
    const next = new Auditor(prev.dir);
    await next.ingestor.replaySpanLog();
    return next;
  }
}

const open: Auditor[] = [];
afterEach(async () => {
  for (const a of open.splice(0)) if (a.store.healthy()) await a.close().catch(() => undefined);
});

const canonical = (rs: Receipt[]) => rs.map((r) => JSON.stringify(r, Object.keys(r).sort())).sort();

async function wholeTrace(spans: SpanRecord[]): Promise<{ receipts: string[]; verdict: string | undefined }> {
  const a = new Auditor(tempDir('ta-order-'));
  await a.send(spans);
  const run = spans[0].traceId;
  const out = { receipts: canonical(a.store.runReceipts(run)), verdict: a.engine.verdictOf(run)?.verdict };
  await a.close();
  return out;
}

/** A delivery: a permutation of the spans, cut into requests, and after which requests the auditor restarts. */
const deliveryArb = (n: number) =>
  fc.record({
    order: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
    cuts: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
    /**
     * After which requests the auditor restarts (a few per delivery: each is a store reopen and a replay), taken
     * modulo the number of gaps between requests, so every delivery of two or more requests that draws one restarts.
     */
    restarts: fc.uniqueArray(fc.nat(Math.max(0, n - 1)), { maxLength: 3 }),
  });

describe('delivery order does not change receipts or verdict', () => {
  it('random traces split into requests in random orders, with restarts between them, give what one request gives', async () => {
    let traceNo = 0;
    let nonTrivial = 0;
    let restarted = 0;
    let deep = 0;
    let longWalks = 0;
    const verdicts = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        nodeArb.chain((root) => {
          const spans = spansOf(root, ++traceNo);
          return fc.tuple(fc.constant(spans), deliveryArb(spans.length));
        }),
        async ([spans, d]) => {
          const whole = await wholeTrace(spans);
          // Requests: the permuted spans, a new request after each position whose cut is set.
          const requests: SpanRecord[][] = [[]];
          d.order.forEach((i, pos) => {
            requests[requests.length - 1].push(spans[i]);
            if (d.cuts[pos] && pos < d.order.length - 1) requests.push([]);
          });
          const restartAfter = new Set(requests.length > 1 ? d.restarts.map((i) => i % (requests.length - 1)) : []);
          let a = new Auditor(tempDir('ta-order-'));
          open.push(a);
          for (let i = 0; i < requests.length; i++) {
            await a.send(requests[i]);
            if (restartAfter.has(i)) {
              a = await Auditor.restart(a);
              open.push(a);
            }
          }
          const run = spans[0].traceId;
          const got = canonical(a.store.runReceipts(run));
          if (restartAfter.size > 0) restarted++;
          if (whole.receipts.some((r) => r.includes('"edge"'))) nonTrivial++;
          const shape = shapeOf(spans);
          if (shape.depth === 6) deep++;
          if (shape.longestWalk >= 2) longWalks++;
          if (whole.verdict !== undefined) verdicts.add(whole.verdict);
          expect(got).toEqual(whole.receipts);
          expect(got.some((r) => r.includes('caller_unresolved'))).toBe(false);
          expect(a.engine.verdictOf(run)?.verdict).toBe(whole.verdict);
          await a.close();
        },
      ),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 60) },
    );
    // The generator makes traces whose receipts need the walk (not only lone spans).
    expect(nonTrivial).toBeGreaterThan(20);
    // Restarts happen, depth 6 is reached, agents walk up through two or more non-agent spans, and the verdicts
    // compared differ. With the CI seed and 60 runs: 34 deliveries restart (50 restarts), 33 traces of depth 6,
    // 16 with a walk through 2-4 non-agent spans, 4 verdicts. The bounds hold for any seed (FC_SEED=random: over
    // 300 seeds the fewest were 19 restarting deliveries, 19 of depth 6, 6 long walks).
    expect(restarted).toBeGreaterThan(15);
    expect(deep).toBeGreaterThan(15);
    expect(longWalks).toBeGreaterThan(3);
    expect(verdicts.size).toBeGreaterThanOrEqual(2);
  }, 300_000);
});

describe('the skeleton is bounded', () => {
  const agentSpan = (traceId: string, spanId: string, parent: string | null, agent: string, startMs: number): SpanRecord => ({
    traceId,
    spanId,
    parentSpanId: parent,
    name: `invoke_agent ${agent}`,
    kind: 1,
    startMs,
    endMs: startMs + 1000,
    statusCode: 0,
    attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': agent },
    events: [],
    links: [],
  });
  const plainSpan = (traceId: string, spanId: string, parent: string | null, startMs: number): SpanRecord => ({
    traceId,
    spanId,
    parentSpanId: parent,
    name: 'execute_tool lookup',
    kind: 1,
    startMs,
    endMs: startMs + 500,
    statusCode: 0,
    attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' },
    events: [],
    links: [],
  });

  it('a flood of traces that never complete keeps it capped, counts the eviction, and each evicted child ends as a gap, never a guessed edge', async () => {
    const MAX = 400;
    const a = new Auditor(tempDir('ta-order-flood-'), MAX);
    open.push(a);
    const t0 = NOW - 60_000;
    // Victim 1: beta waits for its parent, the tool span `x1` (under alpha), which comes only after the flood.
    const v1 = hex(0xfeed1, 32);
    await a.send([agentSpan(v1, hex(3, 16), hex(2, 16), 'beta', t0 + 10)]);
    // Victim 2: the tool span arrives first (idle skeleton), then the flood evicts it, then alpha and beta come.
    const v2 = hex(0xfeed2, 32);
    await a.send([plainSpan(v2, hex(2, 16), hex(1, 16), t0 + 5)]);
    expect(a.pipeline.callers.stats().pending).toBe(1);
    // The flood: 300 traces, each a waiting child agent (its parent never comes) under three tool spans.
    for (let i = 0; i < 300; i++) {
      const t = hex(0x100000 + i, 32);
      await a.send([plainSpan(t, hex(2, 16), hex(1, 16), t0), plainSpan(t, hex(3, 16), hex(2, 16), t0), plainSpan(t, hex(4, 16), hex(3, 16), t0), agentSpan(t, hex(5, 16), hex(4, 16), 'gamma', t0 + 1)]);
      expect(a.pipeline.callers.stats().indexed).toBeLessThanOrEqual(MAX);
    }
    const s = a.pipeline.callers.stats();
    expect(s.indexed).toBeLessThanOrEqual(MAX);
    expect(s.evicted).toBeGreaterThanOrEqual(300 * 4 + 2 - MAX);
    expect(s.pending).toBeLessThanOrEqual(MAX / 4);
    // Victim 1's wait ended with its trace's eviction: a gap, stored.
    const gaps1 = a.store.runReceipts(v1).filter((r) => r.type === 'gap');
    expect(gaps1.map((r) => [r.reason, r.to])).toEqual([['caller_unresolved', 'beta']]);
    // Now the pieces the victims waited for arrive: no edge is guessed from what is left.
    await a.send([agentSpan(v1, hex(1, 16), null, 'alpha', t0), plainSpan(v1, hex(2, 16), hex(1, 16), t0 + 5)]);
    await a.send([agentSpan(v2, hex(1, 16), null, 'alpha', t0), agentSpan(v2, hex(3, 16), hex(2, 16), 'beta', t0 + 10)]);
    // Victim 2's beta walks to the evicted tool span and waits; when the wait ends it is a gap.
    await a.ingestor.internal(a.pipeline.expire(NOW + WAIT_MS + 1));
    for (const run of [v1, v2]) {
      const rs = a.store.runReceipts(run);
      expect(rs.filter((r) => r.type === 'edge')).toEqual([]);
      expect(rs.filter((r) => r.type === 'gap').map((r) => [r.reason, r.to])).toEqual([['caller_unresolved', 'beta']]);
    }
    // The flood's own waiting children end as gaps too, evicted or expired, never as edges.
    const flooded = hex(0x100000 + 299, 32);
    expect(a.store.runReceipts(flooded).map((r: LooseReceipt) => [r.type, r.reason])).toEqual([['gap', 'caller_unresolved']]);
  });

  it('one trace is held to maxTraceSpans: its oldest spans go, and a child below them ends as a gap', async () => {
    const p = new SpanPipeline({ waitMs: WAIT_MS, maxSpans: 10_000, maxTraceSpans: 50 });
    const t = hex(0xbeef, 32);
    const t0 = NOW - 60_000;
    // The tool span under alpha arrives first, then 60 other spans of the trace push it out.
    const first = p.process([plainSpan(t, hex(2, 16), hex(1, 16), t0)], NOW);
    expect(first.receipts).toEqual([]);
    const many: SpanRecord[] = [];
    for (let i = 0; i < 60; i++) many.push(plainSpan(t, hex(0x1000 + i, 16), hex(1, 16), t0));
    p.process(many, NOW);
    expect(p.callers.stats()).toMatchObject({ indexed: 50, evictedPerTrace: 11 });
    const late = p.process([agentSpan(t, hex(1, 16), null, 'alpha', t0), agentSpan(t, hex(3, 16), hex(2, 16), 'beta', t0 + 10)], NOW);
    expect(late.receipts.filter((r) => r.type === 'edge')).toEqual([]);
    expect(p.expire(NOW + WAIT_MS + 1).map((r: LooseReceipt) => [r.type, r.reason, r.to])).toEqual([['gap', 'caller_unresolved', 'beta']]);
  });
});
