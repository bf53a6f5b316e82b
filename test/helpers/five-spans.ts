/**
 * The five-span GenAI trace of issue 37 (`invoke_agent supervisor` -> `execute_tool agent-researcher` ->
 * `invoke_agent researcher`, the same for `coder`), a test contract it fits, and how to send its spans one per request.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { context, trace } from '@opentelemetry/api';
import { getJson, tempDir, type ServerProcess } from './server.js';
import type { exporterFor } from './otel.js';
import { until } from './wait.js';

/** A test contract: the supervisor delegates to the researcher and the coder, each returns. */
export function contractsDir(): string {
  const dir = tempDir('ta-e2e-order-contracts-');
  writeFileSync(
    join(dir, 'supervisor-coder.yaml'),
    [
      'contract: supervisor-coder',
      'version: "1"',
      'retired: false',
      'owner: supervisor',
      'agents: [supervisor, researcher, coder]',
      'allow:',
      '  - supervisor -> researcher : delegate',
      '  - researcher -> supervisor : return',
      '  - supervisor -> coder : delegate',
      '  - coder -> supervisor : return',
      'phases:',
      '  work:',
      '    outcome: optional',
      '    expect:',
      '      - supervisor -> researcher : delegate',
      '      - researcher -> supervisor : return',
      '      - supervisor -> coder : delegate',
      '      - coder -> supervisor : return',
      '',
    ].join('\n'),
  );
  return dir;
}

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
const tracer = provider.getTracer('delivery-order');
export const shutdownTracer = () => provider.shutdown();

/** One trace of five spans, in the order they end (leaves first); its trace id is the run. */
export function fiveSpans(): { run: string; spans: ReadableSpan[] } {
  memory.reset();
  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000);
  const agent = (name: string) => ({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name });
  const tool = (name: string) => ({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name });
  const sup = tracer.startSpan('invoke_agent supervisor', { startTime: at(0), attributes: agent('supervisor') });
  const inSup = trace.setSpan(context.active(), sup);
  for (const [i, worker] of ['researcher', 'coder'].entries()) {
    const toolSpan = tracer.startSpan(`execute_tool agent-${worker}`, { startTime: at(1 + i * 10), attributes: tool(`agent-${worker}`) }, inSup);
    const w = tracer.startSpan(`invoke_agent ${worker}`, { startTime: at(2 + i * 10), attributes: agent(worker) }, trace.setSpan(context.active(), toolSpan));
    w.end(at(8 + i * 10));
    toolSpan.end(at(9 + i * 10));
  }
  sup.end(at(30));
  const spans = [...memory.getFinishedSpans()];
  expect(spans.map((s) => s.name)).toEqual(['invoke_agent researcher', 'execute_tool agent-researcher', 'invoke_agent coder', 'execute_tool agent-coder', 'invoke_agent supervisor']);
  return { run: sup.spanContext().traceId, spans };
}

export function permutations(n: number): number[][] {
  if (n === 0) return [[]];
  const out: number[][] = [];
  for (const p of permutations(n - 1)) for (let i = 0; i <= p.length; i++) out.push([...p.slice(0, i), n - 1, ...p.slice(i)]);
  return out;
}

export async function sendAlone(exporter: ReturnType<typeof exporterFor>, span: ReadableSpan): Promise<void> {
  const code = await new Promise<number>((res) => exporter.export([span], (r) => res(r.code)));
  expect(code).toBe(ExportResultCode.SUCCESS);
}

export async function runOf(srv: ServerProcess, run: string): Promise<{ verdict: string; receipts: { type: string; reason?: string; from?: string; to?: string; kind?: string }[] }> {
  return until(`run ${run}`, async () => {
    const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
    return r.status === 200 && (r.body.receipts.length >= 4 || r.body.receipts.some((x: { type: string }) => x.type === 'gap')) ? r.body : undefined;
  });
}

export const EDGES = ['coder -> supervisor : return', 'researcher -> supervisor : return', 'supervisor -> coder : delegate', 'supervisor -> researcher : delegate'];
export const edgesOf = (rs: { type: string; from?: string; to?: string; kind?: string }[]) =>
  rs
    .filter((r) => r.type === 'edge')
    .map((r) => `${r.from} -> ${r.to} : ${r.kind}`)
    .sort();

