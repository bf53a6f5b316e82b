/**
 * The operator's handoff board: the pure board agrees with the lifecycle findings and the ledger on every handoff
 * fixture (receipts/handoffs/*.ndjson and the document fixtures of test/fixtures/handoff turned into runs), over
 * random lifecycles (fast-check), and through the real server's API and the CLI.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { parseReceiptFile, validateReceipt } from '../src/core/receipt.js';
import type { Finding, Receipt, RunVerdict } from '../src/core/types.js';
import { HANDOFF_STATES } from '../src/core/types.js';
import { handoffBoard, type HandoffBoard } from '../src/handoff/board.js';
import { renderBoard } from '../src/handoff/board-text.js';
import { auditHandoffs } from '../src/core/rules/handoff/lifecycle.js';
import { parseReceiptLines } from '../src/handoff/ndjson.js';
import { expectAgreement, fixtureRun, handoffCodes } from './helpers/handoff-board.js';
import { ROOT, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import type { LooseReceipt } from './helpers/receipt.js';

const receiptDir = join(ROOT, 'receipts', 'handoffs');
const receiptRuns: [string, Receipt[]][] = readdirSync(receiptDir)
  .filter((f) => f.endsWith('.ndjson'))
  .sort()
  .map((f) => {
    const rs = parseReceiptFile(readFileSync(join(receiptDir, f), 'utf8'), f);
    return [rs[0].run, rs];
  });
const docDir = join(ROOT, 'test', 'fixtures', 'handoff');
const docRuns: [string, Receipt[]][] = readdirSync(docDir)
  .sort()
  .map((d) => {
    const rs = fixtureRun(join(docDir, d));
    return [rs[0].run, rs];
  });
const allRuns = [...receiptRuns, ...docRuns];
const lastAt = (rs: Receipt[]) => Math.max(...rs.map((r) => Date.parse(r.at)));
const byRun = new Map(allRuns);
const branch = (b: HandoffBoard, id: string) => b.branches.find((x) => x.branch === id)!;

describe('the board agrees with the lifecycle findings and the ledger on every fixture', () => {
  it('covers all the fixtures, and every synthesised receipt is valid', () => {
    expect(receiptRuns.length).toBeGreaterThanOrEqual(15);
    expect(docRuns.length).toBe(readdirSync(docDir).length);
    for (const [, rs] of docRuns) for (const r of rs) expect(validateReceipt(r)).toEqual({ ok: true, receipt: r });
  });

  for (const [run, rs] of allRuns) {
    it(run, () => {
      for (const now of [lastAt(rs), lastAt(rs) + 3_600_000]) {
        const board = handoffBoard(run, rs, now);
        expectAgreement(board, rs, auditHandoffs(rs, now));
        expect(board.run).toBe(run);
        // Independent of delivery order and duplicate delivery.
        expect(handoffBoard(run, [...rs].reverse().concat(rs.slice(0, 3)), now)).toEqual(board);
      }
    });
  }

  it('answers the operator’s questions on the known cases', () => {
    const at = (run: string) => handoffBoard(run, byRun.get(run)!, lastAt(byRun.get(run)!));
    const dup = at('ho-duplicate-active');
    expect(dup.owner).toBe('fieldops-main');
    expect(dup.finalOwner).toBe('fieldops-main');
    expect(dup.conflicts).toEqual([{ duplicateKey: 'EQ-104:manual:edition-set-7', branches: ['handoff-manual-07#1', 'handoff-manual-07#2'], open: false }]);
    expect(dup.branches.map((b) => [b.branch, b.to, b.admitted, b.duplicate])).toEqual([
      ['handoff-manual-07#1', 'manual-specialist', true, false],
      ['handoff-manual-07#2', 'manual-specialist-b', true, true],
    ]);
    const cancel = at('ho-cancel-late-return');
    const c = branch(cancel, 'handoff-manual-07#1');
    expect([c.state, c.live, c.cancelled, c.cancelPropagated, c.late, c.admitted]).toEqual(['CANCELLED', false, true, true, true, false]);
    expect(c.stateAt).toBe('2025-03-14T10:02:00.000Z');
    expect(cancel.budget.rejected).toEqual({ actions: 2, contextUnits: 35, effects: 0 });
    expect(cancel.terminal).toMatchObject({ met: true, result: 'cancelled' });
    const orphan = at('ho-orphaned-dispatch');
    const o = orphan.branches[0];
    expect([o.live, o.state, o.leaseExpired]).toEqual([true, 'RUNNING', true]);
    expect(o.findings).toContain('lease_expired_open');
    expect(orphan.terminal.met).toBe(false);
    expect(orphan.terminal.remaining).toContain('branch handoff-manual-07#1 is RUNNING');
    const stale = at('ho-stale-accepted');
    expect(stale.branches.some((b) => b.stale && b.findings.includes('accepted_stale'))).toBe(true);
    const over = at('ho-budget-overcommitted');
    expect(over.findings.map((f) => f.code)).toContain('budget_overcommitted');
    expect(['actions', 'contextUnits', 'effects'].some((k) => over.budget.peakCommitted[k as 'actions'] > over.budget.root![k as 'actions'])).toBe(true);
    const happy = at('fx-happy');
    expect(happy.branches[0]).toMatchObject({ capabilities: ['search_manual'], admitted: true, stateVersion: '7', stateVersionSource: 'observed', stale: false });
    expect(happy.terminal.met).toBe(true);
    const staleDoc = at('fx-stale-state-version');
    expect(staleDoc.branches[0]).toMatchObject({ state: 'REJECTED', admitted: false, stateVersion: '7', stale: true });
    expect(staleDoc.currentStateVersion).toBe('8');
  });

  it('shows effect ids and statuses from receipts, and effect units from the ledger otherwise', () => {
    const base = byRun.get('ho-duplicate-active')!.filter((r) => r.type !== 'run.end' && r.type !== 'outcome').map((r) => ({ ...r, run: 'fx-effects' }));
    const rs: Receipt[] = [
      ...base,
      { run: 'fx-effects', event: 'x1', type: 'handoff', at: '2025-03-14T10:03:50Z', handoff: 'reserve-part', attempt: 1, state: 'ADMITTED', from: 'fieldops-main', to: 'parts-agent', leaseExpiresAt: '2025-03-14T10:09:00Z', finalOwner: 'fieldops-main', onTimeout: 'cancel', budgetOp: 'reserve', units: { actions: 1, contextUnits: 5, effects: 1 }, capabilities: ['reserve_part'] },
      { run: 'fx-effects', event: 'x2', type: 'handoff', at: '2025-03-14T10:04:10Z', handoff: 'reserve-part', attempt: 1, state: 'RUNNING', from: 'fieldops-main', to: 'parts-agent', effects: [{ id: 'reservation-88', status: 'attempted' }] },
      { run: 'fx-effects', event: 'x3', type: 'handoff', at: '2025-03-14T10:04:20Z', handoff: 'reserve-part', attempt: 1, state: 'RUNNING', from: 'fieldops-main', to: 'parts-agent', effects: [{ id: 'reservation-88', status: 'unknown' }, { id: 'notify-3', status: 'failed' }] },
      { run: 'fx-effects', event: 'x4', type: 'handoff', at: '2025-03-14T10:03:55Z', handoff: 'reserve-part-b', attempt: 1, state: 'ADMITTED', from: 'fieldops-main', to: 'parts-agent-b', leaseExpiresAt: '2025-03-14T10:09:00Z', finalOwner: 'fieldops-main', onTimeout: 'cancel', budgetOp: 'reserve', units: { actions: 1, contextUnits: 5, effects: 1 } },
    ];
    for (const r of rs) expect(validateReceipt(r).ok).toBe(true);
    const now = Date.parse('2025-03-14T10:05:00Z');
    const board = handoffBoard('fx-effects', rs, now);
    expectAgreement(board, rs, auditHandoffs(rs, now));
    expect(board.effects).toEqual([
      { branch: 'reserve-part#1', effect: 'notify-3', status: 'failed', evidence: 'receipt', mayHaveOccurred: false },
      { branch: 'reserve-part#1', effect: 'reservation-88', status: 'unknown', evidence: 'receipt', mayHaveOccurred: true },
      { branch: 'reserve-part-b#1', effect: null, status: 'unknown', evidence: 'ledger', units: 1, mayHaveOccurred: true },
    ]);
    expect(branch(board, 'reserve-part#1').capabilities).toEqual(['reserve_part']);
    expect(branch(board, 'reserve-part-b#1').capabilities).toBeNull();
    expect(board.budget.reserved.effects).toBe(2);
    expect(board.budget.root!.effects).toBe(1);
    expect(board.findings.map((f) => f.code)).toContain('budget_overcommitted');
    const text = renderBoard(board);
    expect(text).toContain('reservation-88  unknown  may have occurred: reconcile');
    expect(text).toContain('(1 effect unit, from the ledger)');
  });

  it('the current state version is the latest parent record\'s, never the "highest" text (state versions are opaque)', () => {
    // Parent records name "1.0", then "1" (which a contract-version ordering would call equal) and "10", then "9"
    // (which it would call older): the latest record decides, and a branch is stale when its version differs as text.
    const admit = (event: string, at: string, handoff: string, stateVersion: string): Receipt => {
      const r = validateReceipt({ run: 'fx-versions', event, type: 'handoff', at, handoff, attempt: 1, state: 'ADMITTED', from: 'p', to: 'w', leaseExpiresAt: '2026-03-01T11:00:00Z', stateVersion });
      if (!r.ok) throw new Error(r.error);
      return r.receipt;
    };
    for (const [earlier, later] of [['1.0', '1'], ['10', '9'], ['7', '7.0']]) {
      const b = handoffBoard('fx-versions', [admit('e1', '2026-03-01T10:00:00Z', 'h1', earlier), admit('e2', '2026-03-01T10:00:00.0000001Z', 'h2', later)], Date.parse('2026-03-01T10:30:00Z'));
      expect(b.currentStateVersion, `${earlier} then ${later}`).toBe(later);
      expect(b.branches.map((x) => [x.stateVersion, x.stale])).toEqual([[earlier, true], [later, false]]);
    }
  });

  it('refuses capability names and effect entries that are not ids (content-free receipts)', () => {
    const r = { run: 'r', event: 'e', type: 'handoff', at: '2025-03-14T10:00:00Z', handoff: 'h', state: 'ADMITTED' };
    expect(validateReceipt({ ...r, capabilities: ['search manual for EQ-104'] }).ok).toBe(false);
    expect(validateReceipt({ ...r, capabilities: ['/etc/passwd'] }).ok).toBe(false);
    expect(validateReceipt({ ...r, effects: [{ id: 'reservation-88', status: 'committed', args: { part: 'P-1' } }] }).ok).toBe(false);
    expect(validateReceipt({ ...r, effects: [{ id: 'reservation-88', status: 'done' }] }).ok).toBe(false);
    expect(validateReceipt({ ...r, capabilities: Array.from({ length: 33 }, (_, i) => `c${i}`) }).ok).toBe(false);
    expect(validateReceipt({ ...r, capabilities: ['search_manual'], effects: [{ id: 'reservation-88', status: 'committed' }] }).ok).toBe(true);
    // `handoff audit` reads the same fields with its own schema.
    expect((parseReceiptLines(JSON.stringify({ ...r, capabilities: ['search_manual'], effects: [{ id: 'x', status: 'compensated' }] }))[0] as LooseReceipt).capabilities).toEqual(['search_manual']);
    expect(() => parseReceiptLines(JSON.stringify({ ...r, capabilities: ['two words'] }))).toThrow(/capabilities/);
  });
});

describe('board and findings never disagree over random lifecycles', () => {
  const T0 = Date.parse('2026-01-15T10:00:00Z');
  const units = fc.record({ actions: fc.integer({ min: 0, max: 6 }), contextUnits: fc.integer({ min: 0, max: 60 }), effects: fc.integer({ min: 0, max: 2 }) });
  const step = fc.record({
    state: fc.constantFrom(...HANDOFF_STATES),
    t: fc.integer({ min: 0, max: 600_000 }),
    version: fc.option(fc.constantFrom('7', '8', '7.0'), { nil: undefined }),
    lease: fc.option(fc.integer({ min: 0, max: 700_000 }), { nil: undefined }),
    op: fc.option(fc.constantFrom('reserve', 'consume', 'release', 'reject') as fc.Arbitrary<'reserve'>, { nil: undefined }),
    units,
    effect: fc.option(fc.constantFrom('attempted', 'committed', 'failed', 'unknown') as fc.Arbitrary<'committed'>, { nil: undefined }),
  });
  const attempt = fc.record({
    handoff: fc.constantFrom('h1', 'h2', 'h3'),
    attempt: fc.integer({ min: 1, max: 2 }),
    key: fc.option(fc.constantFrom('k1', 'k2'), { nil: undefined }),
    target: fc.constantFrom('spec-a', 'spec-b', 'main'),
    finalOwner: fc.boolean(),
    onTimeout: fc.boolean(),
    capabilities: fc.option(fc.subarray(['search_manual', 'lookup_manual_index']), { nil: undefined }),
    steps: fc.array(step, { minLength: 1, maxLength: 6 }),
  });
  const runArb = fc.record({
    attempts: fc.array(attempt, { maxLength: 4 }),
    root: fc.option(units, { nil: undefined }),
    end: fc.option(fc.record({ result: fc.constantFrom('completed', 'failed', 'cancelled') as fc.Arbitrary<'completed'>, t: fc.integer({ min: 0, max: 700_000 }), from: fc.constantFrom('main', 'spec-a') }), { nil: undefined }),
    outcome: fc.option(fc.record({ t: fc.integer({ min: 0, max: 700_000 }), from: fc.constantFrom('main', 'spec-a') }), { nil: undefined }),
    now: fc.integer({ min: 0, max: 900_000 }),
  });
  const iso = (t: number) => new Date(T0 + t).toISOString();

  function receiptsOf(g: typeof runArb extends fc.Arbitrary<infer T> ? T : never): Receipt[] {
    const out: Receipt[] = [];
    let n = 0;
    const ev = () => `e${String(++n).padStart(3, '0')}`;
    out.push({ run: 'p', event: ev(), type: 'run.start', at: iso(0), contract: 'fieldops-manual', from: 'main' });
    if (g.root) out.push({ run: 'p', event: ev(), type: 'handoff', at: iso(1), budgetOp: 'root', units: g.root, from: 'main' });
    for (const a of g.attempts) {
      a.steps.forEach((s, i) => {
        const r: Receipt = { run: 'p', event: ev(), type: 'handoff', at: iso(s.t), handoff: a.handoff, attempt: a.attempt, state: s.state, from: 'main', to: a.target };
        if (a.key) r.duplicateKey = a.key;
        if (s.version) r.stateVersion = s.version;
        if (s.lease !== undefined) r.leaseExpiresAt = iso(s.lease);
        if (s.op) Object.assign(r, { budgetOp: s.op, units: s.units });
        if (s.effect) r.effects = [{ id: `fx-${a.handoff}`, status: s.effect }];
        if (i === 0 && a.finalOwner) r.finalOwner = 'main';
        if (i === 0 && a.onTimeout) r.onTimeout = 'cancel';
        if (i === 0 && a.capabilities) r.capabilities = a.capabilities;
        out.push(r);
      });
    }
    if (g.outcome) out.push({ run: 'p', event: ev(), type: 'outcome', at: iso(g.outcome.t), verified: true, from: g.outcome.from });
    if (g.end) out.push({ run: 'p', event: ev(), type: 'run.end', at: iso(g.end.t), result: g.end.result, from: g.end.from });
    return out;
  }

  it('each board field equals what the findings and the ledger say', () => {
    // How often the generated runs reach each case, so the property cannot pass on trivial boards only.
    const seen = { conflict: 0, openConflict: 0, live: 0, leaseExpired: 0, cancelledLive: 0, cancelledEnded: 0, admitted: 0, stale: 0, effects: 0, met: 0, overcommitted: 0, resurrection: 0 };
    fc.assert(
      fc.property(runArb, (g) => {
        const rs = receiptsOf(g);
        for (const r of rs) expect(validateReceipt(r).ok).toBe(true);
        const now = T0 + g.now;
        const board = handoffBoard('p', rs, now);
        expectAgreement(board, rs, auditHandoffs(rs, now));
        const bs = board.branches;
        if (board.conflicts.length) seen.conflict++;
        if (board.conflicts.some((c) => c.open)) seen.openConflict++;
        if (bs.some((b) => b.live)) seen.live++;
        if (bs.some((b) => b.leaseExpired)) seen.leaseExpired++;
        if (bs.some((b) => b.cancelPropagated === false)) seen.cancelledLive++;
        if (bs.some((b) => b.cancelPropagated === true)) seen.cancelledEnded++;
        if (bs.some((b) => b.admitted)) seen.admitted++;
        if (bs.some((b) => b.stale)) seen.stale++;
        if (board.effects.length) seen.effects++;
        if (board.terminal.met) seen.met++;
        if (board.findings.some((f) => f.code === 'budget_overcommitted')) seen.overcommitted++;
        if (board.findings.some((f) => f.code === 'resurrection')) seen.resurrection++;
      }),
      { numRuns: 400 },
    );
    for (const [k, n] of Object.entries(seen)) expect(n, k).toBeGreaterThan(0);
  });
});

describe('the board through the server API and the CLI', () => {
  let srv: ServerProcess;
  const io = () => {
    const out = { stdout: '', stderr: '' };
    return { out, cap: { stdout: (s: string) => void (out.stdout += s), stderr: (s: string) => void (out.stderr += s) } };
  };

  beforeAll(async () => {
    srv = await startServerProcess();
    const body = allRuns.flatMap(([, rs]) => rs).map((r) => JSON.stringify(r)).join('\n');
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    const answer = await res.json();
    expect(res.status).toBe(200);
    expect(answer.rejected).toEqual([]);
  }, 60_000);

  afterAll(async () => {
    if (srv) expect(await srv.stop()).toBe(0);
  });

  it('GET /api/v1/runs/{run}/handoffs on every fixture run agrees with the run verdict’s findings and the ledger', async () => {
    for (const [run, rs] of allRuns) {
      const res = await fetch(`${srv.api}/api/v1/runs/${encodeURIComponent(run)}/handoffs`);
      expect(res.status, run).toBe(200);
      const board = (await res.json()) as HandoffBoard;
      const verdict = (await (await fetch(`${srv.api}/api/v1/runs/${encodeURIComponent(run)}`)).json()) as RunVerdict;
      // The fixtures lie in the past, so the verdict (evaluated at ingest) and the board (at request) see the same time.
      expectAgreement(board, rs, handoffCodes(verdict.findings as Finding[]));
      expect(board).toEqual(handoffBoard(run, rs, Date.parse(board.now)));
      // The pinned shape of interfaces.md.
      expect(Object.keys(board)).toEqual(expect.arrayContaining(['run', 'owner', 'finalOwner', 'branches', 'conflicts', 'budget', 'effects', 'terminal']));
      for (const b of board.branches) {
        expect(Object.keys(b)).toEqual(expect.arrayContaining(['handoff', 'attempt', 'from', 'to', 'state', 'live', 'stateVersion', 'leaseExpiresAt', 'duplicateKey', 'capabilities', 'cancelled', 'admitted']));
      }
      expect(Object.keys(board.terminal)).toEqual(expect.arrayContaining(['predicate', 'met']));
    }
    const unknown = await fetch(`${srv.api}/api/v1/runs/no-such-run/handoffs`);
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toBe('unknown run no-such-run');
    // The web view's copy of the route serves the same board.
    const ui = (await (await fetch(`${srv.api}/ui/api/runs/ho-duplicate-active/handoffs`)).json()) as HandoffBoard;
    expect(ui.conflicts).toHaveLength(1);
    expect(ui).toEqual(handoffBoard('ho-duplicate-active', byRun.get('ho-duplicate-active')!, Date.parse(ui.now)));
  }, 60_000);

  it('handoff board RUN --server URL prints a readable table, --json the API body; exit 2 unknown run (as ack and diff), 2 unreachable', async () => {
    let { out, cap } = io();
    expect(await main(['handoff', 'board', 'ho-duplicate-active', '--server', srv.api], cap)).toBe(0);
    expect(out.stdout).toMatch(/^run ho-duplicate-active {2}owner fieldops-main {2}final owner fieldops-main/);
    expect(out.stdout).toMatch(/handoff-manual-07#2 +fieldops-main -> manual-specialist-b +ACCEPTED +10:03:40 +7 obs/);
    expect(out.stdout).toContain('EQ-104:manual:edition-set-7: handoff-manual-07#1, handoff-manual-07#2 (closed)');
    expect(out.stdout).toContain('budget (actions/context units/effects): root 24/470/1; reserved 4/80/0');
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', 'ho-orphaned-dispatch', '--server', srv.api, '--json'], cap)).toBe(0);
    const board = JSON.parse(out.stdout) as HandoffBoard;
    expect(board).toEqual(handoffBoard('ho-orphaned-dispatch', byRun.get('ho-orphaned-dispatch')!, Date.parse(board.now)));
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', 'ho-orphaned-dispatch', '--server', srv.api], cap)).toBe(0);
    expect(out.stdout).toMatch(/\*handoff-manual-07#1 .* RUNNING .*EXPIRED/);
    expect(out.stdout).toContain('remaining: branch handoff-manual-07#1 is RUNNING');
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', 'no-such-run', '--server', srv.api], cap)).toBe(2);
    expect(out.stderr).toContain('no run no-such-run');
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', 'x', '--server', 'http://127.0.0.1:1'], cap)).toBe(2);
    expect(out.stderr).toContain('unreachable');
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', 'x', '--server', `${srv.api}/healthz?`], cap)).toBe(2);
    ({ out, cap } = io());
    expect(await main(['handoff', 'board', '--server', srv.api], cap)).toBe(2);
  }, 60_000);

  it('the board routes need the API token when one is configured; the CLI passes --token', async () => {
    const dir = tempDir('ta-board-tokens-');
    writeFileSync(join(dir, 'api'), 'board-api-token-0123456789abcdef\n');
    const guarded = await startServerProcess({ args: ['--api-tokens', join(dir, 'api')] });
    try {
      expect((await fetch(`${guarded.api}/api/v1/runs/ho-happy/handoffs`)).status).toBe(401);
      expect((await fetch(`${guarded.api}/ui/api/runs/ho-happy/handoffs`)).status).toBe(401);
      const ok = await fetch(`${guarded.api}/api/v1/runs/ho-happy/handoffs`, { headers: { authorization: 'Bearer board-api-token-0123456789abcdef' } });
      expect(ok.status).toBe(404); // authenticated; the run is simply unknown here
      let { out, cap } = io();
      expect(await main(['handoff', 'board', 'ho-happy', '--server', guarded.api], cap)).toBe(2);
      expect(out.stderr).toContain('refused the token (401)');
      ({ out, cap } = io());
      expect(await main(['handoff', 'board', 'ho-happy', '--server', guarded.api, '--token', 'board-api-token-0123456789abcdef'], cap)).toBe(2);
      expect(out.stderr).toContain('no run ho-happy');
    } finally {
      expect(await guarded.stop()).toBe(0);
    }
  }, 60_000);
});
