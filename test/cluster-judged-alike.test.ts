/**
 * Issue 48: a run held elsewhere in a cluster is judged with the same receipts and parties as on one instance. The
 * same handoff receipts, from agent-bound ingest tokens (so the handoff party rule decides which are stored, from the
 * parties the run's earlier handoff receipts named), go request by request to a single SQLite instance and to the
 * instance of a two-instance cluster that does NOT own the run. Each request is answered alike; then the run read
 * from the API of each cluster instance (owner and non-owner) has the single instance's verdict, findings and receipts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../src/store/pg/partition.js';
import { getJson, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { until } from './helpers/wait.js';

const OWNER = 'owner-token-0123456789abcdef';
const SPECIALIST = 'specialist-token-0123456789abcdef';
const REVIEWER = 'reviewer-token-0123456789abcdef';
const PARTITIONS = 8;

type Answer = { accepted: number; rejected: { line: number; error: string }[] };
type RunView = { verdict: string; findings: { code: string }[]; receipts: { event: string }[] };

const line = (o: object) => JSON.stringify(o) + '\n';

async function post(srv: ServerProcess, token: string, receipts: object[]): Promise<Answer> {
  const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: receipts.map(line).join(''), headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' } });
  expect(r.status).toBe(200);
  return (await r.json()) as Answer;
}

const runOf = async (srv: ServerProcess, run: string) => (await getJson<RunView>(`${srv.api}/api/v1/runs/${run}`)).body;
/** What the test compares: the verdict, the findings and the receipts (no server times). */
const judged = (v: RunView) => ({ verdict: v.verdict, findings: v.findings, receipts: v.receipts });

describe('a run held elsewhere in a cluster is judged with the same receipts and parties as on one instance (issue 48)', () => {
  let db: PgCluster;
  let single: ServerProcess;
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(async () => {
    const tokens = join(tempDir('ta-alike-tokens-'), 'ingest');
    writeFileSync(tokens, `${OWNER} fieldops-main\n${SPECIALIST} manual-specialist\n${REVIEWER} manual-reviewer-a\n`);
    db = await startPgCluster();
    const args = (name: string) => ['--store', db.url, '--instance', name, '--lease-ttl', '4000ms', '--partitions', String(PARTITIONS), '--ingest-tokens', tokens];
    [single, a, b] = await Promise.all([startServerProcess({ args: ['--ingest-tokens', tokens] }), startServerProcess({ args: args('alike-a') }), startServerProcess({ args: args('alike-b') })]);
    await until('two instances share the partitions', async () => {
      const st = await Promise.all([a, b].map(async (s) => (await getJson(`${s.api}/api/v1/cluster`)).body));
      return st.every((s) => s.liveInstances === 2 && s.owned > 0) && st.reduce((n, s) => n + s.owned, 0) === PARTITIONS;
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all([single?.stop(), a?.stop(), b?.stop()]);
    await db?.stop();
  });

  it('each request is answered alike, and owner and non-owner show the single instance verdict, findings and receipts', async () => {
    const run = 'alike-parties';
    const part = partitionOf(run, PARTITIONS);
    const ownsIt = async (s: ServerProcess) => ((await getJson(`${s.api}/api/v1/cluster`)).body.ownedPartitions as number[]).includes(part);
    const owner = (await ownsIt(a)) ? a : b;
    const other = owner === a ? b : a;
    expect(await ownsIt(other)).toBe(false);
    const h = { run, type: 'handoff', handoff: 'h-1', attempt: 1, to: 'manual-specialist', from: 'fieldops-main' };
    const steps: [string, object[]][] = [
      [OWNER, [
        { run, event: 's', type: 'run.start', at: '2025-03-14T10:00:00Z', contract: 'fieldops-manual', version: '1', phase: 'specialist', from: 'fieldops-main' },
        { ...h, event: 'p', at: '2025-03-14T10:00:01Z', state: 'PROPOSED', leaseExpiresAt: '2030-01-01T00:00:00Z', finalOwner: 'fieldops-main', onTimeout: 'return' },
        { ...h, event: 'a', at: '2025-03-14T10:00:02Z', state: 'ADMITTED' },
        { ...h, event: 'd', at: '2025-03-14T10:00:03Z', state: 'DISPATCHED' },
      ]],
      // Refused by the parties the run's earlier receipts named (stored by the other instance's run, read here):
      // another agent returns for the attempt, another agent re-opens the handoff as its source.
      [REVIEWER, [{ ...h, event: 'x1', at: '2025-03-14T10:00:04Z', state: 'RETURNED', to: 'manual-reviewer-a' }]],
      [REVIEWER, [{ ...h, event: 'x2', at: '2025-03-14T10:00:04Z', state: 'PROPOSED', from: 'manual-reviewer-a', to: 'manual-reviewer-a' }]],
      // The target's own records are accepted.
      [SPECIALIST, [{ ...h, event: 'r1', at: '2025-03-14T10:00:05Z', state: 'RUNNING' }]],
      // Another content under a stored event id: a conflict (the run shows both versions after its folded receipts).
      [OWNER, [{ ...h, event: 'a', at: '2025-03-14T10:00:02.500Z', state: 'ADMITTED' }]],
      [SPECIALIST, [{ ...h, event: 'r2', at: '2025-03-14T10:00:06Z', state: 'RETURNED' }]],
    ];
    for (const [token, receipts] of steps) {
      const one = await post(single, token, receipts);
      const cluster = await post(other, token, receipts);
      expect(cluster).toEqual(one);
    }
    const expected = judged(await runOf(single, run));
    expect(expected.receipts.map((r) => r.event)).toEqual(['s', 'p', 'd', 'r1', 'r2', 'a', 'a']);
    expect(expected.findings.map((f) => f.code)).toContain('conflict');
    // The owner folds what the other instance stored through its tail (every 100 ms): each instance is read until it
    // shows the single instance's run, or 15 s passed (then the difference is the failure).
    for (const [label, srv] of [['owner', owner], ['non-owner', other]] as const) {
      let last: ReturnType<typeof judged> | null = null;
      await until(`the ${label} shows the single instance's run`, async () => {
        last = judged(await runOf(srv, run));
        return isDeepStrictEqual(last, expected);
      }, 15_000).catch(() => undefined);
      expect(last, label).toEqual(expected);
    }
  }, 300_000);
});
