/**
 * The framework tests' shared parts (test/frameworks*.test.ts): contracts, a real OTLP/HTTP provider per server,
 * the runs a server lists, their edges, and the unmapped-trace check.
 */
import { readdirSync, readFileSync, statSync, writeFileSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { expect } from 'vitest';
import { ROOT, getJson, tempDir, type ServerProcess } from './server.js';
import { until } from './wait.js';

export const SWARM_CONTRACT = `contract: helpdesk-swarm
version: "1"
owner: triage
agents: [triage, billing, refunds]
allow:
  - triage -> billing : handoff
phases:
  help:
    outcome: optional
    expect:
      - triage -> billing : handoff
        within: 10m
`;

/** Hierarchical teams: each team node enters its lead, the lead delegates to its workers; `publisher` is not allowed. */
export const TEAMS_CONTRACT = `contract: teams
version: "1"
owner: supervisor
agents: [supervisor, research_team, research_lead, researcher, writing_team, writing_lead, writer, publisher]
allow:
  - supervisor -> research_team : delegate
  - research_team -> supervisor : return
  - supervisor -> writing_team : delegate
  - writing_team -> supervisor : return
  - research_team -> research_lead : delegate
  - research_lead -> research_team : return
  - research_lead -> researcher : delegate
  - researcher -> research_lead : return
  - writing_team -> writing_lead : delegate
  - writing_lead -> writing_team : return
  - writing_lead -> writer : delegate
  - writer -> writing_lead : return
phases:
  work:
    outcome: optional
    expect:
      - research_lead -> researcher : delegate
      - writing_lead -> writer : delegate
        within: 30m
`;

export function contractsDir(): string {
  const dir = tempDir('ta-fw-contracts-');
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), join(dir, 'supervisor-workers.yaml'));
  writeFileSync(join(dir, 'helpdesk-swarm.yaml'), SWARM_CONTRACT);
  writeFileSync(join(dir, 'teams.yaml'), TEAMS_CONTRACT);
  return dir;
}

/** Every byte under `dir` (the database, its WAL and journal files). */
export function allBytes(dir: string): Buffer {
  const parts: Buffer[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) parts.push(allBytes(p));
    else parts.push(readFileSync(p));
  }
  return Buffer.concat(parts);
}

/** Everything exported, as the app's SDK saw it: proves that the content really was in the spans sent. */
export const sentAttributes: string[] = [];
export const sent: SpanExporter = {
  export(spans, done) {
    for (const s of spans) sentAttributes.push(JSON.stringify(s.attributes));
    done({ code: 0 });
  },
  async shutdown() {},
};
export const sentText = () => sentAttributes.join('\n');

export function otlpProvider(server: ServerProcess): BasicTracerProvider {
  const exporter = new OTLPTraceExporter({ url: `${server.otlpHttp}/v1/traces` });
  return new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 20, maxExportBatchSize: 16 }), new SimpleSpanProcessor(sent)] });
}


export interface RunRow {
  run: string;
  verdict: string;
}

/** The runs the server holds that are not in `seen`, once there are `n` of them with a settled-enough verdict. */
export async function newRuns(server: ServerProcess, seen: Set<string>, n: number, accept: (verdicts: string[]) => boolean): Promise<RunRow[]> {
  return until(`${n} new run(s)`, async () => {
    const { body } = await getJson<{ runs: RunRow[] }>(`${server.api}/api/v1/runs?limit=1000`);
    const fresh = body.runs.filter((r) => !seen.has(r.run));
    if (fresh.length < n || !accept(fresh.map((r) => r.verdict))) return null;
    for (const r of fresh) seen.add(r.run);
    return fresh;
  });
}

export async function edgesOf(server: ServerProcess, run: string): Promise<string[]> {
  const { body } = await getJson<{ receipts: { type: string; from?: string; to?: string; kind?: string; reason?: string }[] }>(`${server.api}/api/v1/runs/${encodeURIComponent(run)}`);
  return body.receipts.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : `${r.type} ${r.reason ?? ''}`.trim()));
}

/**
 * No false alarm: once the server has judged every trace it followed (none left, at least `traces` judged as having an
 * agent signal), no trace is listed at GET /api/v1/ingest/unmapped and topology_unmapped_traces_total counted none: every
 * one of these LangGraph traces gave receipts.
 */
export async function expectNothingUnmapped(server: ServerProcess, traces: number): Promise<void> {
  await until(`${traces} traces judged`, async () => {
    const { body: u } = await getJson<{ following: number }>(`${server.api}/api/v1/ingest/unmapped`);
    const { body: c } = await getJson<{ traces: { withSignal: number }; following: number }>(`${server.api}/api/v1/ingest/coverage`);
    return u.following === 0 && c.following === 0 && c.traces.withSignal >= traces ? true : null;
  });
  const { body } = await getJson<{ traces: unknown[]; totals: unknown[] }>(`${server.api}/api/v1/ingest/unmapped`);
  expect(body.traces).toEqual([]);
  expect(body.totals).toEqual([]);
  const metrics = await (await fetch(`${server.api}/metrics`)).text();
  expect(metrics).not.toMatch(/^topology_unmapped_traces_total\{[^}]*\} [1-9]/m);
}
