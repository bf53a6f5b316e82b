/**
 * Content at rest on the PostgreSQL store, at the byte level: spans carrying prompts, model output, tool arguments,
 * a secret, a file path, an event name, an invented attribute key and a service name go through the real OTLP
 * exporters (HTTP/protobuf and gRPC) into `serve --store postgres://...`; nothing of them reaches any file of the
 * PostgreSQL data dir (tables, WAL, free space, the shutdown checkpoint): while a span waits for its caller in the
 * span log, after the settled run and the span log entry are pruned, and after the server's SIGTERM and
 * PostgreSQL's own clean shutdown. The run ids are found in the same files (the scan reads the stored rows).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { context, trace, type Attributes, type Span } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { exporterFor } from './helpers/otel.js';
import { treeBytes } from './helpers/drift.js';
import { until } from './helpers/wait.js';

const M = {
  prompt: 'MARK-PG-PROMPT-3e1a',
  output: 'MARK-PG-OUTPUT-9b02',
  toolArgs: 'MARK-PG-TOOLARGS-51c7',
  secret: 'sk-MARK-PG-SECRET-d4e8',
  path: '/home/alice/MARK-PG-PATH-77f0/notes.txt',
  spanName: 'MARK-PG-SPANNAME-a6b3',
  eventName: 'MARK-PG-EVENT-2c9d',
  key: 'MARK-PG-KEY-e015',
  service: 'MARK-PG-SERVICE-8f4a',
};

const content = (): Attributes => ({
  'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: `${M.prompt} ${M.secret}` }] }]),
  'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: M.output }] }]),
  'gen_ai.tool.call.arguments': JSON.stringify({ path: M.path, q: M.toolArgs }),
  [`custom.${M.key}`]: M.secret,
});

async function send(exporter: SpanExporter, spans: Span[]): Promise<void> {
  const code = await new Promise<number>((res) => exporter.export(spans as unknown as ReadableSpan[], (r) => res(r.code)));
  expect(code).toBe(0);
}

/** The markers found anywhere in the files under `dir` (byte level). */
function markersIn(dir: string): string[] {
  const bytes = treeBytes(dir);
  return Object.values(M).filter((m) => bytes.includes(Buffer.from(m)));
}

describe('content at rest on the PostgreSQL store', () => {
  let db: PgCluster;
  let srv: ServerProcess;
  beforeAll(async () => {
    db = await startPgCluster();
    srv = await startServerProcess({ args: ['--store', db.url, '--instance', 'content-0', '--contract', 'research-publish', '--retention', '2s', '--parent-wait', '2s'] });
  });
  afterAll(async () => {
    await srv?.stop();
    await db?.stop();
  });

  it('holds no prompt, output, tool argument, secret, path, span or event name, key or service name: while waiting, after pruning, after SIGTERM and PostgreSQL shutdown', async () => {
    const tracer = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': M.service }) }).getTracer('pg-content');
    const agent = (name: string, run: string, parent?: Span): Span =>
      tracer.startSpan(
        `invoke_agent ${name} ${M.spanName}`,
        { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name, 'topology.run.id': run, ...content() } },
        parent ? trace.setSpan(context.active(), parent) : undefined,
      );
    // settled-run: researcher -> publisher is forbidden by research-publish@3 (settled, so pruned past --retention).
    const researcher = agent('researcher', 'pg-settled-run');
    const publisher = agent('publisher', 'pg-settled-run', researcher);
    publisher.addEvent(M.eventName, { 'gen_ai.tool.call.arguments': M.toolArgs });
    // live-run: orchestrator -> publisher and its return are allowed (working: stays).
    const orchestrator = agent('orchestrator', 'pg-live-run');
    const helper = agent('publisher', 'pg-live-run', orchestrator);
    // waiting-run: a child whose caller is never exported waits in the span log, then becomes a gap.
    const unseen = agent('orchestrator', 'pg-waiting-run');
    const orphan = agent('verifier', 'pg-waiting-run', unseen);
    orphan.addEvent(M.eventName);
    for (const s of [publisher, researcher, helper, orchestrator, orphan]) s.end();

    const http = exporterFor('http-protobuf', srv);
    const grpc = exporterFor('grpc', srv);
    await send(http, [publisher, researcher]);
    await send(grpc, [helper, orchestrator]);
    await send(http, [orphan]);
    await Promise.all([http.shutdown(), grpc.shutdown()]);

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // One entry per request: the skeleton of each trace is kept for the parent wait (a child may still come), the
      // waiting orphan's trace until its wait ends.
      const pendingNow = await client.query('SELECT count(*)::int AS n FROM span_log');
      expect(pendingNow.rows[0].n).toBe(3);
      await until('the forbidden edge', async () => (await getJson(`${srv.api}/api/v1/runs/pg-settled-run`)).body?.verdict === 'forbidden_edge', 15_000);
      await until('the live run', async () => (await getJson(`${srv.api}/api/v1/runs/pg-live-run`)).body?.verdict === 'working', 15_000);
      // While the span waits: nothing in tables, WAL or free space.
      await client.query('CHECKPOINT');
      expect(markersIn(db.dir)).toEqual([]);
      const stored = treeBytes(db.dir);
      for (const id of ['pg-settled-run', 'pg-live-run']) expect(stored.includes(Buffer.from(id)), `${id} is in the files scanned`).toBe(true);

      // Pruning: the wait ends in a gap and its span log entry goes; the settled run is pruned; the live run stays.
      await until('the gap', async () => ((await getJson(`${srv.api}/api/v1/runs/pg-waiting-run`)).body?.receipts ?? []).some((r: { type: string }) => r.type === 'gap'), 20_000);
      await until('the span log pruned', async () => (await client.query('SELECT count(*)::int AS n FROM span_log')).rows[0].n === 0, 20_000);
      await until('the settled run pruned', async () => (await getJson(`${srv.api}/api/v1/runs/pg-settled-run`)).status === 404, 20_000);
      expect((await client.query("SELECT count(*)::int AS n FROM receipts WHERE run = 'pg-settled-run'")).rows[0].n).toBe(0);
      expect((await getJson(`${srv.api}/api/v1/runs/pg-live-run`)).status).toBe(200);
      await client.query('CHECKPOINT');
      expect(markersIn(db.dir)).toEqual([]);
    } finally {
      await client.end();
    }

    // A clean stop of the server, then of PostgreSQL (its shutdown checkpoint): still nothing.
    expect(await srv.stop('SIGTERM')).toBe(0);
    await db.shutdown();
    expect(markersIn(db.dir)).toEqual([]);
    expect(treeBytes(db.dir).includes(Buffer.from('pg-live-run'))).toBe(true);
    // The store opens again on the same files and still holds the live run.
    await db.restart();
    srv = await startServerProcess({ args: ['--store', db.url, '--instance', 'content-0', '--contract', 'research-publish'] });
    const again = await until('the live run after restart', async () => {
      const r = await getJson(`${srv.api}/api/v1/runs/pg-live-run`);
      return r.status === 200 ? r.body : null;
    }, 20_000);
    expect(again.verdict).toBe('working');
    expect(JSON.stringify(again)).not.toMatch(/MARK-PG/);
  });
});
