/**
 * A cluster whose spans are not routed by trace id (`--span-routing any`), with the real LangGraph.js supervisor
 * (scripted models) traced by OpenInference: the SDK's exports alternate between two instances, one after another
 * (as its batch processor sends them), so a graph's node spans and its root reach different instances. The
 * owner of the trace's partition reads the graph whole: the edges and verdict one instance alone gives, no gap,
 * from either instance, and no prompt text in PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { ExportResult } from '@opentelemetry/core';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { treeBytes } from './helpers/drift.js';
import { until } from './helpers/wait.js';
import { CONTENT_MARKER, instrumentLangChain, runSupervisor } from './fixtures/frameworks/langgraph.js';

const PARTITIONS = 8;

/** Sends each export to the next server in turn, one export at a time (the next waits for the previous answer). */
class AlternatingExporter implements SpanExporter {
  readonly sent: number[];
  private k = 0;
  private chain: Promise<void> = Promise.resolve();
  constructor(private readonly exporters: OTLPTraceExporter[]) {
    this.sent = exporters.map(() => 0);
  }
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    const i = this.k++ % this.exporters.length;
    this.chain = this.chain.then(
      () =>
        new Promise<void>((resolve) =>
          this.exporters[i].export(spans, (r) => {
            this.sent[i]++;
            done(r);
            resolve();
          }),
        ),
    );
  }
  async shutdown(): Promise<void> {
    await this.chain;
    await Promise.all(this.exporters.map((e) => e.shutdown()));
  }
}

describe('LangGraph in a cluster with --span-routing any', () => {
  let db: PgCluster;
  let servers: ServerProcess[] = [];
  beforeAll(async () => {
    db = await startPgCluster();
    const args = (name: string) => ['--store', db.url, '--instance', name, '--lease-ttl', '4000ms', '--partitions', String(PARTITIONS), '--contract', 'supervisor-workers', '--parent-wait', '30s', '--span-routing', 'any'];
    servers = await Promise.all([startServerProcess({ args: args('lg-a') }), startServerProcess({ args: args('lg-b') })]);
    await until('an even split of the partitions', async () => {
      const states = await Promise.all(servers.map((s) => getJson(`${s.api}/api/v1/cluster`)));
      return states.every((x) => x.body.owned === PARTITIONS / 2);
    }, 30_000);
  }, 90_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await db?.stop();
  });

  it('a supervisor run whose exports alternate between the instances is healthy with the single-instance edges, no gap, on both', async () => {
    const exporter = new AlternatingExporter(servers.map((s) => new OTLPTraceExporter({ url: `${s.otlpHttp}/v1/traces` })));
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 10, maxExportBatchSize: 2 })] });
    instrumentLangChain(provider);
    await runSupervisor({ supervisorScript: [{ tool: 'transfer_to_researcher' }, { tool: 'transfer_to_writer' }, { text: `final ${CONTENT_MARKER}` }] });
    await provider.forceFlush();
    await provider.shutdown();
    // The graph's spans really were split: both instances took several exports.
    expect(Math.min(...exporter.sent)).toBeGreaterThanOrEqual(3);
    const run = await until('the healthy run', async () => {
      const { body } = await getJson<{ runs: { run: string; verdict: string }[] }>(`${servers[0].api}/api/v1/runs?limit=100`);
      return body.runs.find((r) => r.verdict === 'healthy')?.run ?? null;
    }, 20_000);
    expect(run).toMatch(/^[0-9a-f]{32}$/);
    for (const s of servers) {
      const { body } = await getJson<{ verdict: string; receipts: { type: string; from?: string; to?: string; kind?: string }[] }>(`${s.api}/api/v1/runs/${run}`);
      expect(body.verdict).toBe('healthy');
      expect(body.receipts.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : r.type))).toEqual([
        'supervisor -> researcher : delegate',
        'researcher -> supervisor : return',
        'supervisor -> writer : delegate',
        'writer -> supervisor : return',
      ]);
    }
    // Nothing waits for a root anywhere; no prompt text reached the shared store's files.
    await until('nothing pending', async () => {
      const texts = await Promise.all(servers.map(async (s) => (await fetch(`${s.api}/metrics`)).text()));
      return texts.every((t) => /^topology_pending_parent_spans 0$/m.test(t));
    }, 10_000);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('CHECKPOINT');
      // Forwarded records were stored and read (each LangGraph span went through the shared span log once).
      expect((await client.query("SELECT count(*)::int AS n FROM receipts WHERE run = $1", [run])).rows[0].n).toBe(4);
    } finally {
      await client.end();
    }
    const files = treeBytes(db.dir);
    expect(files.includes(Buffer.from(run))).toBe(true);
    expect(files.includes(Buffer.from(CONTENT_MARKER))).toBe(false);
  }, 90_000);
});
