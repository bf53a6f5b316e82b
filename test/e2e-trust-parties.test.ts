/**
 * Issue 30, items 1 and 2, against a `topology-audit serve` child process with agent-bound ingest tokens:
 * - handoff parties: a non-owner's root budget and a non-source's CANCELLED are refused (counted, never stored), so
 *   `budget_copied` and `lease_expired_open` stand; each party rule is exercised with the token that breaks it;
 * - event ids across sources: a receipt from one source never masks another's under the same (run, event): the
 *   forbidden route is reported whichever of the two arrives first; also on a PostgreSQL store (`--store`), with the
 *   two sources posting to two instances of one cluster.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, ROOT, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { startPgCluster, type PgCluster } from './helpers/pg-cluster.js';
import { until } from './helpers/wait.js';

const OWNER = 'owner-token-0123456789abcdef';
const SPECIALIST = 'specialist-token-0123456789abcdef';
const REVIEWER = 'reviewer-token-0123456789abcdef';
const ORCH = 'orch-token-0123456789abcdef';
const RESEARCHER = 'researcher-token-0123456789abcdef';

function tokenFile(): string {
  const file = join(tempDir('ta-parties-tokens-'), 'ingest');
  writeFileSync(file, `${OWNER} fieldops-main\n${SPECIALIST} manual-specialist\n${REVIEWER} manual-reviewer-a\n${ORCH} orchestrator\n${RESEARCHER} researcher\n`);
  return file;
}

const line = (o: object) => JSON.stringify(o) + '\n';
type Answer = { accepted: number; rejected: { line: number; error: string }[] };
type RunView = { verdict: string; findings: { code: string }[]; receipts: { event: string }[] };

async function postTo(srv: ServerProcess, token: string, body: string): Promise<Answer> {
  const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' } });
  expect(r.status).toBe(200);
  return (await r.json()) as Answer;
}

/**
 * The masked-receipt attack: the researcher's valid edge under the (run, event) of the orchestrator's forbidden route,
 * in the order given; `orch` and `res` are the instances each source posts to. Each is accepted, a redelivery of
 * either is a duplicate, and the run is `forbidden_edge` with both receipts and no conflict (as seen by `view`).
 */
async function maskedAttack(first: 'orchestrator' | 'researcher', orch: ServerProcess, res: ServerProcess, view: (run: string) => Promise<RunView>, run: string): Promise<void> {
  const at = new Date().toISOString();
  const start = line({ run, event: 's', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' });
  const forbidden = line({ run, event: 'x1', type: 'edge', at, from: 'orchestrator', to: 'verifier', kind: 'delegate' });
  const honest = line({ run, event: 'x1', type: 'edge', at, from: 'researcher', to: 'verifier', kind: 'handoff' });
  expect((await postTo(orch, ORCH, start)).accepted).toBe(1);
  const sends = first === 'orchestrator' ? [() => postTo(orch, ORCH, forbidden), () => postTo(res, RESEARCHER, honest)] : [() => postTo(res, RESEARCHER, honest), () => postTo(orch, ORCH, forbidden)];
  for (const send of sends) expect((await send()).accepted).toBe(1);
  // a redelivery of either is a duplicate, not a conflict
  expect((await postTo(res, RESEARCHER, honest)).accepted).toBe(0);
  expect((await postTo(orch, ORCH, forbidden)).accepted).toBe(0);
  const v = await view(run);
  expect(v.verdict).toBe('forbidden_edge');
  expect(v.findings.map((f) => f.code)).not.toContain('conflict');
  expect(v.receipts.filter((r) => r.event.startsWith('x1'))).toHaveLength(2);
}

describe('handoff parties and source-scoped event ids (--ingest-tokens)', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess({ args: ['--ingest-tokens', tokenFile()] });
  });
  afterAll(async () => {
    await srv.stop();
  });
  const post = async (token: string, body: string): Promise<Answer> => {
    const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' } });
    expect(r.status).toBe(200);
    return (await r.json()) as Answer;
  };
  const verdict = async (run: string) => (await getJson(`${srv.api}/api/v1/runs/${run}`)).body as { verdict: string; findings: { code: string }[]; receipts: { event: string }[] };
  const refusedPartyCount = async () => Number(/^topology_ingest_refused_total\{reason="handoff_party"\} (\d+)/m.exec(await (await fetch(`${srv.api}/metrics`)).text())?.[1] ?? 0);

  /** A handoff fixture as its parties send it: RUNNING and RETURNED by the target's token, the rest by the owner's. */
  async function sendAsParties(fixture: string, run: string): Promise<void> {
    const receipts = readFileSync(join(ROOT, 'receipts', 'handoffs', `${fixture}.ndjson`), 'utf8').trim().split('\n').map((l) => ({ ...JSON.parse(l), run }));
    const byTarget = receipts.filter((r) => (r.type === 'handoff' && (r.state === 'RUNNING' || r.state === 'RETURNED')) || (r.type === 'edge' && r.from === 'manual-specialist'));
    const byOwner = receipts.filter((r) => !byTarget.includes(r));
    const a = await post(OWNER, byOwner.map(line).join(''));
    const b = await post(SPECIALIST, byTarget.map(line).join(''));
    expect([...a.rejected, ...b.rejected]).toEqual([]);
  }

  it('a non-owner cannot record a (back-dated) root budget: budget_copied stands', async () => {
    await sendAsParties('ho-budget-copied', 'forge-root');
    expect(await verdict('forge-root')).toMatchObject({ verdict: 'ambiguous_route' });
    const before = await refusedPartyCount();
    const forged = { run: 'forge-root', event: 'forged-root', type: 'handoff', at: '2025-03-14T09:00:00Z', budgetOp: 'root', units: { actions: 100000, contextUnits: 1000000, effects: 10 }, from: 'manual-reviewer-a' };
    const a = await post(REVIEWER, line(forged));
    expect(a.accepted).toBe(0);
    expect(a.rejected[0].error).toMatch(/root budget is the run owner's.*"fieldops-main"/);
    expect(await refusedPartyCount()).toBe(before + 1);
    const v = await verdict('forge-root');
    expect(v.verdict).toBe('ambiguous_route');
    expect(v.findings.map((f) => f.code)).toContain('budget_copied');
    expect(v.receipts.map((r) => r.event)).not.toContain('forged-root');
  });

  it("a non-source cannot cancel the owner's expired handoff: lease_expired_open stands", async () => {
    const run = 'forge-cancel';
    const h = { run, type: 'handoff', handoff: 'h-1', attempt: 1, to: 'manual-specialist', from: 'fieldops-main' };
    await post(
      OWNER,
      [
        { run, event: 'e1', type: 'run.start', at: '2025-03-14T10:00:00Z', contract: 'fieldops-manual', version: '1', phase: 'specialist', from: 'fieldops-main' },
        { ...h, event: 'e2', at: '2025-03-14T10:00:01Z', state: 'PROPOSED', leaseExpiresAt: '2025-03-14T10:02:00Z', finalOwner: 'fieldops-main', onTimeout: 'return-ownership' },
        { ...h, event: 'e3', at: '2025-03-14T10:00:02Z', state: 'ADMITTED' },
        { ...h, event: 'e4', at: '2025-03-14T10:00:03Z', state: 'DISPATCHED' },
      ]
        .map(line)
        .join(''),
    );
    const codes = async () => (await verdict(run)).findings.map((f) => f.code);
    expect(await codes()).toContain('lease_expired_open');
    // as its own source (the only `from` its token may name), and in the owner's name
    const a = await post(REVIEWER, line({ ...h, event: 'c1', at: '2025-03-14T10:01:00Z', state: 'CANCELLED', from: 'manual-reviewer-a' }));
    expect(a.rejected[0].error).toMatch(/handoff h-1 was opened by source agent "fieldops-main"/);
    const b = await post(REVIEWER, line({ ...h, event: 'c2', at: '2025-03-14T10:01:00Z', state: 'CANCELLED' }));
    expect(b.rejected[0].error).toMatch(/may not speak for agent "fieldops-main"/);
    expect(a.accepted + b.accepted).toBe(0);
    expect(await codes()).toContain('lease_expired_open');
    // the owner's own cancellation is accepted and closes the lease
    expect((await post(OWNER, line({ ...h, event: 'c3', at: '2025-03-14T10:01:00Z', state: 'CANCELLED' }))).accepted).toBe(1);
    expect(await codes()).not.toContain('lease_expired_open');
  });

  it('each transition and budget operation from the party it is not: refused', async () => {
    const run = 'parties';
    const h = { run, type: 'handoff', handoff: 'h-2', attempt: 1, to: 'manual-specialist', from: 'fieldops-main' };
    await post(OWNER, line({ run, event: 's', type: 'run.start', at: '2025-03-14T10:00:00Z', contract: 'fieldops-manual', version: '1', phase: 'specialist', from: 'fieldops-main' }) + line({ ...h, event: 'p', at: '2025-03-14T10:00:01Z', state: 'ADMITTED', leaseExpiresAt: '2030-01-01T00:00:00Z', finalOwner: 'fieldops-main', onTimeout: 'return' }));
    const cases: [string, string, object, RegExp][] = [
      ['owner records the target\'s RUNNING', OWNER, { state: 'RUNNING' }, /may not speak for agent "manual-specialist"/],
      ['owner records the target\'s RETURNED', OWNER, { state: 'RETURNED' }, /may not speak for agent "manual-specialist"/],
      ['target records the source\'s ACCEPTED', SPECIALIST, { state: 'ACCEPTED' }, /may not speak for agent "fieldops-main"/],
      ['target records the source\'s CANCELLED', SPECIALIST, { state: 'CANCELLED' }, /may not speak for agent "fieldops-main"/],
      ['target reserves budget with its RETURNED', SPECIALIST, { state: 'RETURNED', budgetOp: 'reserve', units: { actions: 1 } }, /reserve of budget is the handoff source's/],
      ['target releases budget with its RUNNING', SPECIALIST, { state: 'RUNNING', budgetOp: 'release', units: { actions: 1 } }, /release of budget is the handoff source's/],
      ['another agent returns for the attempt', REVIEWER, { state: 'RETURNED', to: 'manual-reviewer-a' }, /attempt 1 targets "manual-specialist"/],
      ['another agent re-opens the handoff as its source', REVIEWER, { state: 'PROPOSED', from: 'manual-reviewer-a' }, /opened by source agent "fieldops-main"/],
      ['the target records a root budget', SPECIALIST, { handoff: undefined, attempt: undefined, state: undefined, to: undefined, from: 'manual-specialist', budgetOp: 'root', units: { actions: 1 } }, /root budget is the run owner's/],
    ];
    for (const [what, token, patch, why] of cases) {
      const a = await post(token, line({ ...h, event: `x-${what.replace(/[^a-z]/g, '-')}`, at: '2025-03-14T10:00:05Z', ...patch }));
      expect(a.accepted, what).toBe(0);
      expect(a.rejected[0]?.error, what).toMatch(why);
    }
    // and the parties' own records are accepted: RUNNING, RETURNED + consume by the target, ACCEPTED + release by the source
    expect((await post(SPECIALIST, line({ ...h, event: 'r1', at: '2025-03-14T10:00:06Z', state: 'RUNNING' }) + line({ ...h, event: 'r2', at: '2025-03-14T10:00:07Z', state: 'RETURNED', budgetOp: 'consume', units: { actions: 1 } }))).accepted).toBe(2);
    expect((await post(OWNER, line({ ...h, event: 'r3', at: '2025-03-14T10:00:08Z', state: 'ACCEPTED', budgetOp: 'release', units: { actions: 1 } }))).accepted).toBe(1);
    const received = (await verdict(run)).receipts.map((r) => r.event);
    expect(received.filter((e) => e.startsWith('x-'))).toEqual([]);
  });

  for (const first of ['orchestrator', 'researcher'] as const) {
    it(`an edge from another source under the forbidden route's event id masks nothing (${first}'s first)`, async () => {
      await maskedAttack(first, srv, srv, verdict, `masked-${first}`);
    });
  }
});

describe('source-scoped event ids on a PostgreSQL store: two instances, one source at each (--store, --ingest-tokens)', () => {
  let db: PgCluster;
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(async () => {
    db = await startPgCluster();
    const tokens = tokenFile();
    const args = (name: string) => ['--store', db.url, '--instance', name, '--lease-ttl', '4000ms', '--partitions', '8', '--ingest-tokens', tokens];
    [a, b] = await Promise.all([startServerProcess({ args: args('trust-a') }), startServerProcess({ args: args('trust-b') })]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.stop();
  });
  /** The run as its owner sees it once both x1 receipts are folded (whichever instance holds the run). */
  const settledView = (run: string) =>
    until(`${run} with both x1 receipts at its owner`, async () => {
      for (const srv of [a, b]) {
        const r = await getJson(`${srv.api}/api/v1/runs/${run}`);
        const v = r.body as RunView | undefined;
        if (v?.receipts?.filter((x) => x.event.startsWith('x1')).length === 2) return v;
      }
      return null;
    }, 30_000);

  for (const first of ['orchestrator', 'researcher'] as const) {
    it(`the forbidden route is reported whichever source's receipt arrives first (${first}'s first)`, async () => {
      await maskedAttack(first, a, b, settledView, `pg-masked-${first}`);
    }, 60_000);
  }
});
