/**
 * The minute summary's `rejected` receipts are split by reason (the closed set of
 * topology_ingest_refused_total), read from the log line of a real server after rejected input.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

let srv: ServerProcess;
beforeAll(async () => {
  srv = await startServerProcess({ args: ['--log-interval', '1s'] });
});
afterAll(async () => {
  await srv?.stop();
});

describe('ingest summary log line', () => {
  it('splits rejected receipts by reason: total and byReason', async () => {
    const [start, edge] = readFileSync(join(ROOT, 'receipts/drift.ndjson'), 'utf8').trim().split('\n');
    const body = [start, edge, 'not json at all', '{"run":"x"}', edge.replace('"run":"drift-complete"', '"run":"bad run id with spaces"')].join('\n') + '\n';
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status).toBeLessThan(500);
    // The receipts of one request may straddle two summaries: add up the lines until all five are counted.
    const summaries = await until('summaries counting the five receipts', async () => {
      const lines = srv
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .filter((l) => l.event === 'ingest_summary');
      const counted = lines.reduce((n, l) => n + l.accepted + l.rejected.total, 0);
      return counted >= 5 ? lines : undefined;
    });
    const sum = (f: (l: any) => number) => summaries.reduce((n, l) => n + f(l), 0);
    expect(sum((l) => l.accepted)).toBe(2);
    expect(sum((l) => l.rejected.total)).toBe(3);
    expect(sum((l) => l.rejected.byReason.receipt_invalid ?? 0)).toBe(3);
    for (const l of summaries) expect(Object.keys(l.rejected.byReason).every((k) => ['receipt_invalid', 'run_id_invalid', 'event_id_invalid', 'agent_id_invalid', 'source_not_bound', 'run_scope', 'handoff_party'].includes(k))).toBe(true);
  });
});
