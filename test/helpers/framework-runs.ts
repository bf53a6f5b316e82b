/**
 * What the real-framework tests read back from a real server: the next new run, a run's edges and forbidden edges,
 * and every byte of a data directory (for the content-at-rest checks).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { getJson, type ServerProcess } from './server.js';
import { until } from './wait.js';

/** Every byte of every file below `dir` (the store, its WAL and any other file), for a search for content. */
export function allBytes(dir: string): Buffer {
  const parts: Buffer[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    parts.push(statSync(p).isDirectory() ? allBytes(p) : readFileSync(p));
  }
  return Buffer.concat(parts);
}

/** The first run the server lists that is not in `seen` and whose verdict `accept`s (added to `seen`). */
export async function newRun(server: ServerProcess, seen: Set<string>, accept: (verdict: string) => boolean): Promise<{ run: string; verdict: string }> {
  return until('a new run', async () => {
    const { body } = await getJson<{ runs: { run: string; verdict: string }[] }>(`${server.api}/api/v1/runs?limit=1000`);
    const fresh = body.runs.find((r) => !seen.has(r.run) && accept(r.verdict));
    if (fresh) seen.add(fresh.run);
    return fresh;
  });
}

/** A run's receipts as edge lines (`a -> b : kind`, or `gap REASON`) and the edges its forbidden_edge findings name. */
export async function runView(server: ServerProcess, run: string): Promise<{ edges: string[]; forbidden: string[] }> {
  const { body } = await getJson<{ receipts: { type: string; from?: string; to?: string; kind?: string; reason?: string }[]; findings: { verdict: string; edge: string }[] }>(
    `${server.api}/api/v1/runs/${encodeURIComponent(run)}`,
  );
  return {
    edges: body.receipts.map((r) => (r.type === 'edge' ? `${r.from} -> ${r.to} : ${r.kind}` : `${r.type} ${r.reason ?? ''}`.trim())),
    forbidden: body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge),
  };
}

/** The edges of a caller delegating to each agent in turn and getting control back: `from -> a : delegate`, `a -> from : return`, ... */
export function delegateAndReturn(from: string, agents: readonly string[]): string[] {
  return agents.flatMap((a) => [`${from} -> ${a} : delegate`, `${a} -> ${from} : return`]);
}
