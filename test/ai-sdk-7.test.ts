/**
 * The real Vercel AI SDK 7 (`ai@7`) with `@ai-sdk/otel` in its legacy mode (`LegacyOpenTelemetry`: the `ai.*`
 * spans), driven by a scripted model (`MockLanguageModelV4` from `ai/test`, no network): a supervisor
 * ToolLoopAgent whose tools are worker ToolLoopAgents (agents used as tools), exporting over real OTLP/HTTP
 * protobuf to a real `topology-audit serve` child, audited against contracts/supervisor-workers.yaml.
 *
 * ai@7 and @ai-sdk/otel require Node >= 22 while this project runs on Node 20, so the app
 * (test/fixtures/frameworks/ai-sdk-7/, its own package.json and lock) runs in a Node 22 child process, Node 22
 * from the npm registry (the `node` package), as test/mastra.test.ts does. Both are installed once into
 * node_modules/.cache/topology-ai-sdk-7/<hash of the lock and the Node version>/; later runs reuse them.
 */
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';
import { allBytes, delegateAndReturn } from './helpers/framework-runs.js';
import { NODE_VERSION, prepareNode22App, run } from './helpers/node22-app.js';

const FIXTURE = join(ROOT, 'test', 'fixtures', 'frameworks', 'ai-sdk-7');
const MARKER = 'TA-AI7-PROMPT-5d2c8e0b';

interface AppReport {
  scenario: string;
  text: string;
  spans: number;
  traceIds: string[];
  names: string[];
  callSpans: { name: string; operationId: string; functionId?: string }[];
  markerExported: boolean;
  exportFailures: number;
}

interface RunBody {
  verdict: string;
  receipts: { type: string; from?: string; to?: string; kind?: string; reason?: string }[];
  findings: { verdict: string; edge?: string }[];
}

async function runWithVerdict(server: ServerProcess, run: string, verdict: string): Promise<RunBody> {
  return until(`run ${run} to be ${verdict}`, async () => {
    const { status, body } = await getJson<RunBody>(`${server.api}/api/v1/runs/${encodeURIComponent(run)}`);
    return status === 200 && body.verdict === verdict ? body : null;
  });
}

const edges = (b: RunBody) => b.receipts.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : `${r.type} ${r.reason ?? ''}`.trim()));

describe('AI SDK 7 (real ai@7 + @ai-sdk/otel legacy mode in a Node 22 child, its own OTLP export)', () => {
  let app: { node: string; appDir: string };
  let server: ServerProcess;
  const reports: AppReport[] = [];

  beforeAll(async () => {
    const contracts = tempDir('ta-ai7-contracts-');
    copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(contracts, 'supervisor-workers.yaml'));
    [app, server] = await Promise.all([
      prepareNode22App(FIXTURE, 'topology-ai-sdk-7'),
      startServerProcess({ contracts, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] }),
    ]);
  }, 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  async function runApp(scenario: 'conforming' | 'forbidden'): Promise<AppReport> {
    const env: NodeJS.ProcessEnv = { ...process.env, TA_OTLP_ENDPOINT: server.otlpHttp, TA_MARKER: MARKER };
    delete env.NODE_OPTIONS; // vitest's loader hooks are for this Node, not the child's
    const r = await run(app.node, ['app.mjs', scenario], { cwd: app.appDir, env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as AppReport;
    reports.push(report);
    expect(report.text).toBe('ok'); // the scripted supervisor finished its script
    expect(report.exportFailures).toBe(0);
    expect(report.traceIds).toHaveLength(1); // one supervisor call, one trace: the run
    return report;
  }

  it('runs ai@7 and @ai-sdk/otel on Node 22 from the registry (this suite itself is on Node 20)', async () => {
    const r = await run(app.node, ['--version'], { timeoutMs: 30_000 });
    expect(r.stdout.trim()).toBe(`v${NODE_VERSION}`);
    const ai = JSON.parse(readFileSync(join(app.appDir, 'node_modules', 'ai', 'package.json'), 'utf8'));
    expect(ai.version).toMatch(/^7\./);
    const otel = JSON.parse(readFileSync(join(app.appDir, 'node_modules', '@ai-sdk', 'otel', 'package.json'), 'utf8'));
    expect(otel.version).toMatch(/^1\./);
  });

  it('a supervisor calling its worker agents (agents as tools) is healthy: delegate and return per worker', async () => {
    const report = await runApp('conforming');
    // The legacy mode's own span shapes: one ai.generateText call span per agent, named by its functionId
    expect(report.callSpans).toEqual([
      { name: 'ai.generateText', operationId: 'ai.generateText', functionId: 'researcher' },
      { name: 'ai.generateText', operationId: 'ai.generateText', functionId: 'writer' },
      { name: 'ai.generateText', operationId: 'ai.generateText', functionId: 'supervisor' },
    ]);
    expect(report.names.filter((n) => n === 'ai.toolCall')).toHaveLength(2);
    const body = await runWithVerdict(server, report.traceIds[0], 'healthy');
    expect(edges(body)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
  }, 120_000);

  it('a supervisor that calls an agent the contract does not allow it to call is forbidden_edge', async () => {
    const report = await runApp('forbidden');
    expect(report.callSpans.map((s) => s.functionId)).toEqual(['researcher', 'publisher', 'supervisor']);
    const body = await runWithVerdict(server, report.traceIds[0], 'forbidden_edge');
    expect(edges(body)).toEqual([
      'supervisor -> researcher : delegate',
      'researcher -> supervisor : return',
      'supervisor -> publisher : delegate',
      'publisher -> supervisor : return',
    ]);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge)).toContain('supervisor -> publisher : delegate');
  }, 120_000);

  it('the prompts were exported in ai.* spans, yet no byte of the data directory holds them', async () => {
    expect(reports).toHaveLength(2);
    for (const r of reports) expect(r.markerExported, `${r.scenario}: prompt marker in an exported attribute`).toBe(true);
    const files = readdirSync(server.dataDir);
    expect(files).toContain('receipts.db');
    const bytes = allBytes(server.dataDir);
    expect(bytes.length).toBeGreaterThan(0);
    expect(bytes.includes(Buffer.from(MARKER)), 'prompt text in the data dir').toBe(false);
    expect(bytes.includes(Buffer.from('research this')), 'tool-call input in the data dir').toBe(false);
  });
});
