import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { context, trace } from '@opentelemetry/api';
import { getJson, startServerProcess } from './helpers/server.js';
import { exporterFor, providerFor } from './helpers/otel.js';
import { until } from './helpers/wait.js';

const MARKER = 'PENDING-SECRET-5b1e';

function dataBytes(dir: string): Buffer {
  return Buffer.concat(readdirSync(dir).map((n) => readFileSync(join(dir, n))));
}

describe('an agent span waiting for its caller survives kill -9', () => {
  it('the child arrives, is acknowledged, the server is killed; after restart the parent arrives and the edges are derived', async () => {
    const args = ['--contract', 'research-publish', '--parent-wait', '60s'];
    const first = await startServerProcess({ args });
    // One tracer for both spans: the parent (the orchestrator's invocation) is still open when the child is exported.
    const exporter1 = exporterFor('http-protobuf', first);
    const provider1 = providerFor(exporter1);
    const tracer = provider1.getTracer('pending');
    const run = { 'topology.run.id': 'pending-run' };
    const parent = tracer.startSpan('invoke_agent orchestrator', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'orchestrator', ...run } });
    const child = tracer.startSpan(
      'invoke_agent researcher',
      { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', 'gen_ai.input.messages': MARKER, ...run } },
      trace.setSpan(context.active(), parent),
    );
    child.end();
    await provider1.forceFlush();
    // Acknowledged, and waiting for its parent. The gauge is set by the server's periodic tick: wait for the
    // condition (a busy machine only delays the tick), never a fixed number of polls.
    const m = await until('the child to wait for its parent (pending-parent gauge 1)', async () => {
      const text = await (await fetch(`${first.api}/metrics`)).text();
      return /^topology_pending_parent_spans 1$/m.test(text) ? text : null;
    });
    expect(m).toMatch(/^topology_pending_parent_spans 1$/m);
    first.child.kill('SIGKILL');
    await first.stop();
    await provider1.shutdown().catch(() => undefined);
    expect(dataBytes(first.dataDir).includes(Buffer.from(MARKER))).toBe(false);

    const second = await startServerProcess({ dataDir: first.dataDir, args });
    try {
      await until('the span log replayed (while serving)', async () => /"event":"span_log_replayed","entries":1,"pending":1/.test(second.stderr()) || null);
      // The parent ends now and is exported to the restarted server by a real exporter.
      const exporter2 = exporterFor('http-protobuf', second);
      parent.end();
      const parentReadable = parent as unknown as import('@opentelemetry/sdk-trace-base').ReadableSpan;
      const code = await new Promise<number>((res) => exporter2.export([parentReadable], (r) => res(r.code)));
      expect(code).toBe(0);
      await exporter2.shutdown();
      const edgesOf = (b: any): string[] => (b?.receipts ?? []).filter((r: { type: string }) => r.type === 'edge').map((r: any) => `${r.from} -> ${r.to} : ${r.kind}`);
      const body = await until('the delegate edge derived after the restart', async () => {
        const b = (await getJson(`${second.api}/api/v1/runs/pending-run`)).body;
        return edgesOf(b).includes('orchestrator -> researcher : delegate') ? b : null;
      });
      const edges = edgesOf(body).sort();
      expect(edges).toEqual(['orchestrator -> researcher : delegate', 'researcher -> orchestrator : return']);
      expect(body.receipts.some((r: { type: string }) => r.type === 'gap')).toBe(false);
      expect(body.pin).toMatchObject({ contract: 'research-publish' });
      expect(JSON.stringify(body)).not.toContain(MARKER);
    } finally {
      await second.stop();
    }
  });
});
