/**
 * VoltAgent through the real package (`@voltagent/core`, scripted model, loopback only): a supervisor Agent with
 * sub-agents called through VoltAgent's `delegate_task` tool, its spans exported by VoltAgent's own observability
 * (the application's OTLP/HTTP protobuf span processor in `spanProcessors`) to a real `topology-audit serve` child.
 * A healthy run is `healthy` with exactly supervisor -> researcher / writer delegate + return; a supervisor that
 * delegates to `publisher` (a sub-agent the contract does not allow it to call) is `forbidden_edge` naming that
 * edge; no other edge is read; no content reaches the store.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';
import { allBytes, newRun, runView, delegateAndReturn } from './helpers/framework-runs.js';
import { CONTENT_MARKER, voltAgentApp } from './fixtures/frameworks/voltagent.js';

describe('VoltAgent (@voltagent/core): sub-agents through delegate_task, exported by its own observability', () => {
  let server: ServerProcess;
  let app: Awaited<ReturnType<typeof voltAgentApp>>;
  const seen = new Set<string>();
  beforeAll(async () => {
    const dir = tempDir('ta-voltagent-contracts-');
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(dir, 'supervisor-workers.yaml'));
    server = await startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] });
    const exporter = new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` });
    app = await voltAgentApp(new BatchSpanProcessor(exporter, { scheduledDelayMillis: 20, maxExportBatchSize: 16 }));
  }, 60_000);
  afterAll(async () => {
    await app?.shutdown();
    await server?.stop();
  });

  it('healthy: supervisor -> researcher / writer delegate + return, exactly', async () => {
    await app.runSupervisor(['researcher', 'writer']);
    const ok = await newRun(server, seen, (v) => v === 'healthy');
    expect((await runView(server, ok.run)).edges).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
  }, 60_000);

  it('drifted: a delegation to publisher is forbidden_edge naming supervisor -> publisher; content-free', async () => {
    await app.runSupervisor(['researcher', 'publisher']);
    const bad = await newRun(server, seen, (v) => v === 'forbidden_edge');
    const view = await runView(server, bad.run);
    expect(view.edges).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return', 'supervisor -> publisher : delegate', 'publisher -> supervisor : return']);
    expect(view.forbidden).toContain('supervisor -> publisher : delegate');
    expect(allBytes(server.dataDir).includes(Buffer.from(CONTENT_MARKER))).toBe(false);
  }, 60_000);

  it('a lone agent (no sub-agent called) is listed as unmapped voltagent/single_agent, never silent, and no healthy traces are listed', async () => {
    await app.runSupervisor([]);
    const lone = await until('the lone agent listed as unmapped', async () => {
      const { body } = await getJson<{ traces: { traceId: string; dialect: string; reason: string }[] }>(`${server.api}/api/v1/ingest/unmapped`);
      return body.traces.length > 0 ? body.traces : undefined;
    });
    expect(lone.map((t) => `${t.dialect}/${t.reason}`)).toEqual(['voltagent/single_agent']);
    const { body } = await getJson<{ runs: { run: string }[] }>(`${server.api}/api/v1/runs?limit=1000`);
    expect(body.runs.map((r) => r.run)).not.toContain(lone[0].traceId);
  }, 60_000);
});
