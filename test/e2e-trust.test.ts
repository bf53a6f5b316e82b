/**
 * Trust at the ingest boundary, end to end against `topology-audit serve` child processes with the real
 * OpenTelemetry SDK and OTLP/HTTP protobuf exporter (docs/security.md):
 * - content at rest: span names, event names, invented `topology.*` keys, prose agent names, graph nodes,
 *   conversation ids and service.name never reach any file of the data directory (db, -wal, -shm), while a span
 *   waits for its parent, after the span log is pruned, and after SIGTERM;
 * - ids: a prose or 100 KB run id through every dialect yields no receipt and no run, and moves the reason counter;
 * - source binding: a child span planted for another agent before its parent arrives, and the same across a
 *   SIGKILL and restart (span-log replay), derive no edge;
 * - run scope: run.start / run.end / outcome need the owner's token, a gap an agent of the contract.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, trace, SpanKind, SpanStatusCode, type Attributes, type Span } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { exporterFor, receiptAttributes } from './helpers/otel.js';
import { until } from './helpers/wait.js';

const ORCH = 'orch-token-0123456789abcdef';
const RESEARCHER = 'researcher-token-0123456789abcdef';
const VERIFIER = 'verifier-token-0123456789abcdef';
const OUTSIDER = 'outsider-token-0123456789abcdef';

function tokenFile(): string {
  const dir = tempDir('ta-trust-tokens-');
  const file = join(dir, 'ingest');
  writeFileSync(file, `${ORCH} orchestrator\n${RESEARCHER} researcher\n${VERIFIER} verifier\n${OUTSIDER} fieldops-main\n`);
  return file;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


async function metrics(srv: ServerProcess): Promise<string> {
  return (await fetch(`${srv.api}/metrics`)).text();
}

function counter(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(series.length + 1)) : 0;
}
const refused = (text: string, reason: string) => counter(text, `topology_ingest_refused_total{reason="${reason}"}`);
const pending = (text: string) => counter(text, 'topology_pending_parent_spans');

/** The files of the data directory holding `marker` (byte-level, every file). */
function filesHolding(dir: string, marker: string): string[] {
  const needle = Buffer.from(marker);
  return readdirSync(dir).filter((n) => readFileSync(join(dir, n)).includes(needle));
}

function tracer(serviceName = 'trust-test') {
  return new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': serviceName }) }).getTracer('trust');
}

async function send(exporter: SpanExporter, spans: Span[]): Promise<void> {
  const code = await new Promise<number>((res) => exporter.export(spans as unknown as ReadableSpan[], (r) => res(r.code)));
  expect(code).toBe(0);
}

const child = (t: ReturnType<typeof tracer>, parent: Span, name: string, attributes: Attributes, kind = SpanKind.INTERNAL) =>
  t.startSpan(name, { attributes, kind }, trace.setSpan(context.active(), parent));

async function runReceipts(srv: ServerProcess, run: string): Promise<{ status: number; receipts: any[] }> {
  const r = await getJson(`${srv.api}/api/v1/runs/${encodeURIComponent(run)}`);
  return { status: r.status, receipts: r.body?.receipts ?? [] };
}
const edgesOf = (receipts: any[]) => receipts.filter((r) => r.type === 'edge').map((r) => `${r.from} -> ${r.to} : ${r.kind}`).sort();

// The conversation id is a run key only when named (docs/dialects.md "Run identity"): named here, so that a
// prose conversation id is refused by the id rule like any other run id.
const CONVERSATION_KEY = ['--run-key', 'explicit,conversation,trace'];

describe('content at rest and the id rule (no tokens)', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--contract', 'research-publish', '--parent-wait', '3s', ...CONVERSATION_KEY] });
  });
  afterAll(async () => {
    await srv.stop();
  });

  it('stores no span name, event name, unknown topology key, prose attribute or service.name, while waiting, after pruning and after SIGTERM', async () => {
    const M = {
      spanName: 'MARK-SPANNAME-8d1f',
      eventName: 'MARK-EVENTNAME-2b7c',
      topoKey: 'MARK-TOPOKEY-51aa',
      topoVal: 'MARK-TOPOVAL-c0de',
      service: 'MARK-SERVICE-77e3',
      agentProse: 'MARK-AGENTPROSE-0f9e',
      graphProse: 'MARK-GRAPHPROSE-4c21',
      conversation: 'MARK-CONVERSATION-9a0b',
    };
    const t = tracer(M.service);
    const exporter = exporterFor('http-protobuf', srv);
    const run = { 'topology.run.id': 'content-run' };
    // The caller's span stays open (never exported): everything below waits for it in the span log.
    const parent = t.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...run } });
    const agent = child(t, parent, `invoke_agent researcher ${M.spanName}`, {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'researcher',
      [`topology.${M.topoKey}`]: M.topoVal,
      'topology.note': M.topoVal,
      ...run,
    });
    agent.addEvent(M.eventName, { 'topology.note': M.topoVal, [`topology.${M.topoKey}`]: 1 });
    const prose = child(t, parent, `invoke_agent ${M.spanName}`, { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': `Dr ${M.agentProse} the helpful`, ...run });
    const graph = child(t, parent, M.spanName, { 'graph.node.id': `node ${M.graphProse}`, 'openinference.span.kind': 'AGENT', ...run });
    // A conversation id used as the run: prose is refused as a run id (and stored nowhere).
    const convo = child(t, parent, M.spanName, { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'verifier', 'gen_ai.conversation.id': `talk about ${M.conversation}` });
    for (const s of [agent, prose, graph, convo]) s.end();
    const before = await metrics(srv);
    await send(exporter, [agent, prose, graph, convo]);
    const waiting = await until('the span to wait for its caller', async () => pending(await metrics(srv)) >= 1);
    expect(waiting).toBe(true);
    const m1 = await metrics(srv);
    expect(refused(m1, 'run_id_invalid') - refused(before, 'run_id_invalid')).toBe(1); // the conversation-id span
    expect(refused(m1, 'agent_id_invalid') - refused(before, 'agent_id_invalid')).toBe(2); // prose agent name, prose graph node
    for (const marker of Object.values(M)) expect([marker, filesHolding(srv.dataDir, marker)]).toEqual([marker, []]);
    for (const marker of Object.values(M)) expect(m1).not.toContain(marker);
    const runs = JSON.stringify((await getJson(`${srv.api}/api/v1/runs`)).body);
    for (const marker of Object.values(M)) expect(runs).not.toContain(marker);

    // The wait runs out (a gap), the span log entry is pruned and scrubbed; then a clean shutdown.
    await until('the wait to end', async () => pending(await metrics(srv)) === 0);
    const gaps = await until('the gap receipt', async () => {
      const r = await runReceipts(srv, 'content-run');
      return r.receipts.some((x) => x.type === 'gap' && x.reason === 'caller_unresolved') ? r.receipts : undefined;
    });
    expect(edgesOf(gaps)).toEqual([]);
    await sleep(4_000); // span log entries older than --parent-wait are pruned within a prune interval
    for (const marker of Object.values(M)) expect([marker, filesHolding(srv.dataDir, marker)]).toEqual([marker, []]);
    expect(await srv.stop('SIGTERM')).toBe(0);
    for (const marker of Object.values(M)) expect([marker, filesHolding(srv.dataDir, marker)]).toEqual([marker, []]);
    expect(readdirSync(srv.dataDir).sort()).toEqual(expect.arrayContaining(['receipts.db']));
    srv = await startServerProcess({ dataDir: srv.dataDir, args: ['--contract', 'research-publish', '--parent-wait', '3s', ...CONVERSATION_KEY] });
  });

  it('refuses prose and 100 KB run ids in every dialect: no receipt, no run, the reason counter moves', async () => {
    const PROSE = 'patient Jane Doe has HIV';
    const HUGE = 'r'.repeat(100_000);
    for (const bad of [PROSE, HUGE]) {
      const t = tracer();
      const exporter = exporterFor('http-protobuf', srv);
      const run = { 'topology.run.id': bad };
      const spans: Span[] = [];
      const open = (name: string, attributes: Attributes, parent?: Span, links?: Span[]) => {
        const s = t.startSpan(name, { attributes: { ...attributes, ...run }, links: links?.map((l) => ({ context: l.spanContext() })) }, parent ? trace.setSpan(context.active(), parent) : undefined);
        spans.push(s);
        return s;
      };
      // explicit receipts
      open('topology run.start', { ...receiptAttributes({ run: 'x', event: 'x', type: 'run.start', at: new Date().toISOString(), contract: 'research-publish', from: 'orchestrator' }), ...run });
      // GenAI invoke_agent, parent and child
      const orch = open('invoke_agent orchestrator', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator' });
      open('invoke_agent researcher', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.id': 'researcher' }, orch);
      // OpenLLMetry handoff
      const flat = open('orchestrator.agent', { 'gen_ai.agent.name': 'orchestrator' });
      open('orchestrator → researcher.handoff', { 'gen_ai.handoff.from_agent': 'orchestrator', 'gen_ai.handoff.to_agent': 'researcher' }, flat);
      // OpenInference graph nodes
      const node = open('orchestrator', { 'graph.node.id': 'orchestrator', 'openinference.span.kind': 'AGENT' });
      open('researcher', { 'graph.node.id': 'researcher', 'graph.node.parent_id': 'orchestrator', 'openinference.span.kind': 'AGENT' }, node);
      // Microsoft Agent Framework: executor -> message.send -> linked executor
      const e1 = open('executor.process orchestrator', { 'executor.id': 'orchestrator', 'executor.type': 'Agent' });
      const msg = open('message.send', {}, e1);
      open('executor.process researcher', { 'executor.id': 'researcher', 'executor.type': 'Agent' }, undefined, [msg]);
      // Google ADK transfer_to_agent
      const adk = open('invoke_agent orchestrator', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator' });
      open('execute_tool transfer_to_agent', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'transfer_to_agent' }, adk);
      open('invoke_agent researcher', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher' }, adk);
      for (const s of [...spans].reverse()) s.end();

      const runsBefore = (await getJson(`${srv.api}/api/v1/runs`)).body.runs.map((r: { run: string }) => r.run).sort();
      const before = await metrics(srv);
      // Children first, as exporters send them.
      await send(exporter, [...spans].reverse());
      const after = await until('the refusals to be counted', async () => {
        const m = await metrics(srv);
        return refused(m, 'run_id_invalid') - refused(before, 'run_id_invalid') >= spans.length ? m : undefined;
      });
      expect(refused(after, 'run_id_invalid') - refused(before, 'run_id_invalid')).toBe(spans.length);
      expect(counter(after, 'topology_otlp_spans_total{transport="http",result="rejected"}') - counter(before, 'topology_otlp_spans_total{transport="http",result="rejected"}')).toBe(spans.length);
      expect(pending(after)).toBeLessThanOrEqual(pending(before)); // nothing new waits in memory or in the span log (an earlier test's span may still wait out its parent wait)
      await sleep(500);
      const runsAfter = (await getJson(`${srv.api}/api/v1/runs`)).body.runs.map((r: { run: string }) => r.run).sort();
      expect(runsAfter).toEqual(runsBefore);
      expect((await runReceipts(srv, bad.slice(0, 1000))).status).toBe(404);
      const m = await metrics(srv);
      expect(m).not.toContain('Jane');
      expect(m).not.toContain('r'.repeat(201));
      await fetch(`${srv.api}/metrics`, { headers: { accept: 'application/openmetrics-text' } }).then(async (r) => expect(await r.text()).not.toContain('Jane'));
    }
    expect(filesHolding(srv.dataDir, 'Jane Doe')).toEqual([]);
    expect(filesHolding(srv.dataDir, 'r'.repeat(201))).toEqual([]);
  });

  it('takes run ids with "/" in the API path URL-encoded (%2F)', async () => {
    const run = 'tenant-7/run-42';
    const body = JSON.stringify({ run, event: 's', type: 'run.start', at: new Date().toISOString(), contract: 'research-publish' }) + '\n';
    const r = await (await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } })).json();
    expect(r).toMatchObject({ accepted: 1, rejected: [] });
    const got = await getJson(`${srv.api}/api/v1/runs/tenant-7%2Frun-42`);
    expect(got.status).toBe(200);
    expect(got.body.run).toBe(run);
    expect((await getJson(`${srv.api}/api/v1/runs/tenant-7%2Frun-42/verdict`)).body.run).toBe(run);
    expect((await getJson(`${srv.api}/ui/api/runs/tenant-7%2Frun-42`)).status).toBe(200);
  });
});

describe('source binding of derived receipts and run scope (--ingest-tokens)', () => {
  const tokens = tokenFile();
  const args = ['--contract', 'research-publish', '--parent-wait', '60s', '--ingest-tokens', tokens];
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ args });
  });
  afterAll(async () => {
    await srv.stop();
  });
  const as = (token: string, s = srv) => exporterFor('http-protobuf', s, { authorization: `Bearer ${token}` });

  it('a child span planted for another agent before its parent arrives derives no edge; an honest one does', async () => {
    const t = tracer();
    const planted = { 'topology.run.id': 'plant-run' };
    const honest = { 'topology.run.id': 'honest-run' };
    const p1 = t.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...planted } });
    const c1 = child(t, p1, 'invoke_agent verifier', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'verifier', ...planted });
    const p2 = t.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...honest } });
    const c2 = child(t, p2, 'invoke_agent researcher', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', ...honest });
    c1.end();
    c2.end();
    const before = await metrics(srv);
    await send(as(RESEARCHER), [c1, c2]); // the researcher's token sends a span claiming the verifier
    await until('both to wait', async () => pending(await metrics(srv)) === 2);
    p1.end();
    p2.end();
    await send(as(ORCH), [p1, p2]); // the orchestrator's token completes both resolutions
    const honestEdges = await until('the honest edges', async () => {
      const e = edgesOf((await runReceipts(srv, 'honest-run')).receipts);
      return e.length === 2 ? e : undefined;
    });
    expect(honestEdges).toEqual(['orchestrator -> researcher : delegate', 'researcher -> orchestrator : return']);
    expect(edgesOf((await runReceipts(srv, 'plant-run')).receipts)).toEqual([]);
    const m = await metrics(srv);
    expect(refused(m, 'source_not_bound') - refused(before, 'source_not_bound')).toBe(2); // delegate and return
  });

  it('run.start, run.end and outcome need the owner\'s token; a gap needs an agent of the contract', async () => {
    const run = 'scope-run';
    const at = (s: number) => new Date(Date.now() - 60_000 + s * 1000).toISOString();
    const post = async (token: string, o: object) =>
      (await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: JSON.stringify(o) + '\n', headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${token}` } })).json();
    expect(await post(ORCH, { run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', from: 'orchestrator' })).toMatchObject({ accepted: 1, rejected: [] });
    const ownerOnly = /needs a source bound to contract research-publish's owner "orchestrator"/;
    for (const r of [
      { run, event: 'end-r', type: 'run.end', at: at(5), result: 'completed', from: 'researcher' },
      { run, event: 'out-r', type: 'outcome', at: at(5), verified: true, from: 'researcher' },
      { run, event: 's2-r', type: 'run.start', at: at(1), contract: 'research-publish', version: '3', from: 'researcher' },
    ]) {
      const res = await post(RESEARCHER, r);
      expect(res.accepted).toBe(0);
      expect(res.rejected[0].error).toMatch(ownerOnly);
    }
    // A token bound to an agent outside the contract may not report a gap; an agent of the contract may.
    const outsider = await post(OUTSIDER, { run, event: 'gap-o', type: 'gap', at: at(2), reason: 'lost', from: 'fieldops-main' });
    expect(outsider.accepted).toBe(0);
    expect(outsider.rejected[0].error).toMatch(/bound to no agent of contract research-publish/);
    expect(await post(RESEARCHER, { run, event: 'gap-r', type: 'gap', at: at(2), reason: 'lost', from: 'researcher' })).toMatchObject({ accepted: 1 });
    // The same rule on OTLP: a run.end span from the researcher's token is refused, counted by reason.
    const before = await metrics(srv);
    const t = tracer();
    const span = t.startSpan('topology run.end', { attributes: receiptAttributes({ run, event: 'x', type: 'run.end', at: at(6), result: 'completed', from: 'researcher' }) });
    span.setStatus({ code: SpanStatusCode.OK });
    span.end();
    await send(as(RESEARCHER), [span]);
    const m = await until('the run-scope refusal', async () => {
      const x = await metrics(srv);
      return refused(x, 'run_scope') > refused(before, 'run_scope') ? x : undefined;
    });
    expect(refused(m, 'run_scope') - refused(before, 'run_scope')).toBe(1);
    expect(await post(ORCH, { run, event: 'end', type: 'run.end', at: at(7), result: 'completed', from: 'orchestrator' })).toMatchObject({ accepted: 1 });
    const events = (await runReceipts(srv, run)).receipts.map((r) => r.event).sort();
    expect(events).toEqual(['end', 'gap-r', 's']);
  });
});

describe('source binding survives a restart (span-log replay)', () => {
  it('a planted child waiting in the span log derives no edge when its parent arrives after SIGKILL and restart', async () => {
    const args = ['--contract', 'research-publish', '--parent-wait', '60s', '--ingest-tokens', tokenFile()];
    const first = await startServerProcess({ args });
    const t = tracer();
    const planted = { 'topology.run.id': 'replant-run' };
    const honest = { 'topology.run.id': 'rehonest-run' };
    const p1 = t.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...planted } });
    const c1 = child(t, p1, 'invoke_agent verifier', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'verifier', ...planted });
    const p2 = t.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...honest } });
    const c2 = child(t, p2, 'invoke_agent researcher', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', ...honest });
    c1.end();
    c2.end();
    await send(exporterFor('http-protobuf', first, { authorization: `Bearer ${RESEARCHER}` }), [c1, c2]);
    await until('both to wait', async () => pending(await metrics(first)) === 2);
    first.child.kill('SIGKILL');
    await first.stop();

    const second = await startServerProcess({ dataDir: first.dataDir, args });
    try {
      await until('the span log replayed (while serving)', async () => /"event":"span_log_replayed","entries":\d+,"pending":2/.test(second.stderr()) || null);
      p1.end();
      p2.end();
      await send(exporterFor('http-protobuf', second, { authorization: `Bearer ${ORCH}` }), [p1, p2]);
      const honestEdges = await until('the honest edges', async () => {
        const e = edgesOf((await runReceipts(second, 'rehonest-run')).receipts);
        return e.length === 2 ? e : undefined;
      });
      expect(honestEdges).toEqual(['orchestrator -> researcher : delegate', 'researcher -> orchestrator : return']);
      expect(edgesOf((await runReceipts(second, 'replant-run')).receipts)).toEqual([]);
      expect(refused(await metrics(second), 'source_not_bound')).toBe(2);
    } finally {
      await second.stop();
    }
  });
});
