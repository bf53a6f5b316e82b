/**
 * The real Mastra npm package (@mastra/core 1.x), driven by a scripted model (no network), exporting its own
 * spans through Mastra's observability (`@mastra/otel-exporter`) over real OTLP/HTTP protobuf to a real
 * `topology-audit serve` child, audited against contracts/supervisor-workers.yaml.
 *
 * Every @mastra/core 1.x release requires Node >= 22.13 while this project runs on Node 20, so the Mastra app
 * (test/fixtures/frameworks/mastra/, its own package.json and lock) runs in a Node 22 child process. Node 22
 * itself comes from the npm registry (the `node` package). Both are installed once into
 * node_modules/.cache/topology-mastra/<hash of the lock and the Node version>/; later runs reuse them.
 */
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';
import { allBytes, delegateAndReturn } from './helpers/framework-runs.js';
import { NODE_VERSION, prepareNode22App, run } from './helpers/node22-app.js';

const FIXTURE = join(ROOT, 'test', 'fixtures', 'frameworks', 'mastra');
const MARKER = 'TA-MASTRA-PROMPT-7f3e9c1a';

interface AppReport {
  scenario: string;
  text: string;
  spans: number;
  traceIds: string[];
  names: string[];
  agentSpans: { name: string; kind: number; 'gen_ai.agent.id'?: string; 'gen_ai.agent.name'?: string }[];
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

describe('Mastra 1.x (real @mastra/core in a Node 22 child, its own OTLP export)', () => {
  let mastra: { node: string; appDir: string };
  let server: ServerProcess;
  const reports: AppReport[] = [];

  beforeAll(async () => {
    const contracts = tempDir('ta-mastra-contracts-');
    copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(contracts, 'supervisor-workers.yaml'));
    [mastra, server] = await Promise.all([
      prepareNode22App(FIXTURE, 'topology-mastra'),
      startServerProcess({ contracts, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] }),
    ]);
  }, 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  async function runApp(scenario: 'conforming' | 'forbidden'): Promise<AppReport> {
    const env: NodeJS.ProcessEnv = { ...process.env, TA_OTLP_ENDPOINT: server.otlpHttp, TA_MARKER: MARKER };
    delete env.NODE_OPTIONS; // vitest's loader hooks are for this Node, not the child's
    const r = await run(mastra.node, ['app.mjs', scenario], { cwd: mastra.appDir, env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as AppReport;
    reports.push(report);
    expect(report.text).toBe('ok'); // the scripted supervisor finished its script
    expect(report.exportFailures).toBe(0);
    expect(report.traceIds).toHaveLength(1); // one generate call, one trace: the run
    return report;
  }

  it('runs on Node 22 from the registry (this suite itself is on Node 20)', async () => {
    const r = await run(mastra.node, ['--version'], { timeoutMs: 30_000 });
    expect(r.stdout.trim()).toBe(`v${NODE_VERSION}`);
    const core = JSON.parse(readFileSync(join(mastra.appDir, 'node_modules', '@mastra', 'core', 'package.json'), 'utf8'));
    expect(core.version).toMatch(/^1\./);
  });

  it('a supervisor calling its worker agents (agents as tools) is healthy: delegate and return per worker', async () => {
    const report = await runApp('conforming');
    // Mastra's own span shapes: GenAI invoke_agent spans (INTERNAL) with gen_ai.agent.id and gen_ai.agent.name
    expect(report.agentSpans).toEqual([
      { name: 'invoke_agent researcher', kind: 0, 'gen_ai.agent.id': 'researcher', 'gen_ai.agent.name': 'researcher' },
      { name: 'invoke_agent writer', kind: 0, 'gen_ai.agent.id': 'writer', 'gen_ai.agent.name': 'writer' },
      { name: 'invoke_agent supervisor', kind: 0, 'gen_ai.agent.id': 'supervisor', 'gen_ai.agent.name': 'supervisor' },
    ]);
    expect(report.names).toContain('execute_tool agent-researcher');
    const body = await runWithVerdict(server, report.traceIds[0], 'healthy');
    expect(edges(body)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
  }, 120_000);

  it('a supervisor that calls an agent the contract does not allow it to call is forbidden_edge', async () => {
    const report = await runApp('forbidden');
    expect(report.agentSpans.map((s) => s['gen_ai.agent.id'])).toEqual(['researcher', 'publisher', 'supervisor']);
    const body = await runWithVerdict(server, report.traceIds[0], 'forbidden_edge');
    expect(edges(body)).toContain('supervisor -> publisher : delegate');
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge)).toContain('supervisor -> publisher : delegate');
  }, 120_000);

  it('the prompts were exported in Mastra spans, yet no byte of the data directory holds them', async () => {
    expect(reports).toHaveLength(2);
    for (const r of reports) expect(r.markerExported, `${r.scenario}: prompt marker in an exported attribute`).toBe(true);
    const files = readdirSync(server.dataDir);
    expect(files).toContain('receipts.db');
    const bytes = allBytes(server.dataDir);
    expect(bytes.length).toBeGreaterThan(0);
    expect(bytes.includes(Buffer.from(MARKER)), 'prompt text in the data dir').toBe(false);
    expect(bytes.includes(Buffer.from('research this')), 'tool-call prompt in the data dir').toBe(false);
  });
});
