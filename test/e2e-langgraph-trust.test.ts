/**
 * LangGraph spans at the trust boundary, end to end against `topology-audit serve` child processes with the
 * real OpenTelemetry SDK and OTLP/HTTP protobuf exporter, spans shaped as OpenInference's LangChain
 * instrumentation emits them (CHAIN graph root and nodes with `metadata.langgraph_node`, TOOL transfer spans):
 * - source binding: a node span sent under a token bound to another agent yields no edge naming the agent it
 *   claims, while the same graph sent by a token bound to its agents does;
 * - the wait for the graph root survives a SIGKILL and restart (the span log holds content-free LangGraph
 *   records; replay rebuilds the waiting trace with each span's source);
 * - a node or transfer name that is not an id (here carrying a content marker) never reaches any file of the
 *   data directory: not while the trace waits, not after the restart, not after SIGTERM.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { context, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { exporterFor } from './helpers/otel.js';
import { until } from './helpers/wait.js';

const GRAPH = 'graph-token-0123456789abcdef';
const VERIFIER = 'verifier-token-0123456789abcdef';
const MARK_NODE = 'MARK-LGNODE-5e21';
const MARK_XFER = 'MARK-LGXFER-a7c3';


function filesHolding(dir: string, marker: string): string[] {
  const needle = Buffer.from(marker);
  return readdirSync(dir).filter((f) => readFileSync(join(dir, f)).includes(needle));
}

async function send(exporter: SpanExporter, spans: Span[]): Promise<void> {
  const code = await new Promise<number>((res) => exporter.export(spans as unknown as ReadableSpan[], (r) => res(r.code)));
  expect(code).toBe(0); // acknowledged: the span log entry is committed
}

const refused = async (srv: ServerProcess, reason: string) => {
  const text = await (await fetch(`${srv.api}/metrics`)).text();
  const series = `topology_ingest_refused_total{reason="${reason}"}`;
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(series.length + 1)) : 0;
};

async function receiptsOf(srv: ServerProcess, run: string): Promise<any[]> {
  const r = await getJson(`${srv.api}/api/v1/runs/${encodeURIComponent(run)}`);
  return r.body?.receipts ?? [];
}
const edgesOf = (receipts: any[]) => receipts.filter((r) => r.type === 'edge').map((r) => `${r.from} -> ${r.to} : ${r.kind}`).sort();

/**
 * A supervisor graph: `orchestrator` transfers to `worker`, which hands back to `orchestrator`. The root stays
 * open (it ends last, as LangGraph's does); the rest is ended and returned in export order (children first).
 */
function graph(t: Tracer, run: string, worker: string, transferTo = worker) {
  const base = Date.now() - 60_000;
  // LangGraph's supersteps: each node of this sequence runs in its own (one step would mean parallel nodes).
  const attrs = (node: string | null, kind: string, step = 1): Attributes => ({
    'openinference.span.kind': kind,
    metadata: JSON.stringify(node === null ? { thread_id: 't-1' } : { langgraph_node: node, langgraph_step: step }),
    'topology.run.id': run,
  });
  const under = (parent: Span, name: string, a: Attributes, start: number) => t.startSpan(name, { attributes: a, startTime: base + start }, trace.setSpan(context.active(), parent));
  const root = t.startSpan('LangGraph', { attributes: attrs(null, 'CHAIN'), startTime: base });
  const n1 = under(root, 'orchestrator', attrs('orchestrator', 'CHAIN'), 1);
  const xfer = under(n1, `transfer_to_${transferTo}`, attrs('tools', 'TOOL'), 5);
  xfer.end(base + 6);
  n1.end(base + 10);
  const n2 = under(root, worker, attrs(worker, 'CHAIN', 2), 11);
  n2.end(base + 20);
  const n3 = under(root, 'orchestrator', attrs('orchestrator', 'CHAIN', 3), 21);
  n3.end(base + 30);
  return { root, end: () => root.end(base + 31), n1, xfer, n2, n3 };
}

describe('LangGraph spans: source binding, a restart while waiting for the root, content at rest', () => {
  it('a node span sent under a token bound to another agent yields no edge for the agent it names; across SIGKILL and restart; names that are not ids are stored nowhere', async () => {
    const dir = tempDir('ta-lg-trust-');
    const tokens = join(dir, 'ingest');
    writeFileSync(tokens, `${GRAPH} orchestrator,researcher\n${VERIFIER} verifier\n`);
    const args = ['--contract', 'research-publish', '--parent-wait', '60s', '--ingest-tokens', tokens];
    const first = await startServerProcess({ args });
    const t = new BasicTracerProvider().getTracer('@arizeai/openinference-instrumentation-langchain');
    const honest = graph(t, 'lg-honest', 'researcher');
    const planted = graph(t, 'lg-planted', 'researcher');
    const marked = graph(t, 'lg-marked', `Dr ${MARK_NODE} the helpful`, `${MARK_XFER} please`);
    const as = (token: string, s: ServerProcess) => exporterFor('http-protobuf', s, { authorization: `Bearer ${token}` });
    let second: ServerProcess | undefined;
    try {
      await send(as(GRAPH, first), [honest.xfer, honest.n1, honest.n2, honest.n3]);
      // The worker's node of this graph comes from a token bound to `verifier`, claiming `researcher`.
      await send(as(GRAPH, first), [planted.xfer, planted.n1, planted.n3]);
      await send(as(VERIFIER, first), [planted.n2]);
      await send(as(GRAPH, first), [marked.xfer, marked.n1, marked.n2, marked.n3]);
      // Waiting for their roots: the span log holds the three traces, and no marker.
      for (const m of [MARK_NODE, MARK_XFER]) expect([m, filesHolding(first.dataDir, m)]).toEqual([m, []]);
      first.child.kill('SIGKILL');
      await first.stop();
      for (const m of [MARK_NODE, MARK_XFER]) expect([m, filesHolding(first.dataDir, m)]).toEqual([m, []]);

      second = await startServerProcess({ dataDir: first.dataDir, args });
      await until('the span log replayed (while serving)', async () => /"event":"span_log_replayed","entries":[1-9]\d*,"pending":0,"langgraphWaiting":3/.test(second!.stderr()) || null);
      for (const g of [honest, planted, marked]) g.end();
      await send(as(GRAPH, second), [honest.root, planted.root, marked.root]);

      const honestEdges = await until('the honest edges', async () => {
        const e = edgesOf(await receiptsOf(second!, 'lg-honest'));
        return e.length === 2 ? e : undefined;
      });
      expect(honestEdges).toEqual(['orchestrator -> researcher : delegate', 'researcher -> orchestrator : return']);
      const markedReceipts = await until('the marked graph', async () => {
        const r = await receiptsOf(second!, 'lg-marked');
        return r.some((x) => x.type === 'gap') ? r : undefined;
      });
      expect(markedReceipts.filter((r) => r.type === 'gap').map((r) => r.reason)).toEqual(['agent_id_invalid']);
      expect(edgesOf(markedReceipts)).toEqual([]);
      // The planted graph's delegate and return name `researcher` on the verifier token's evidence: refused.
      expect(await refused(second, 'source_not_bound')).toBe(2);
      expect(edgesOf(await receiptsOf(second, 'lg-planted'))).toEqual([]);
      expect(await second.stop('SIGTERM')).toBe(0);
      second = undefined;
      for (const m of [MARK_NODE, MARK_XFER]) expect([m, filesHolding(first.dataDir, m)]).toEqual([m, []]);
    } finally {
      await second?.stop();
    }
  }, 120_000);
});
