/**
 * The topology_runs gauge (AuditEngine.gauge) and the alerting and stalled gauges (AuditEngine.alerting) are counted
 * as runs change and as time passes, not by a walk over every live run. After any sequence of ingests (runs entering
 * and leaving verdicts and pins), time passing, deadlines moving verdicts, acknowledgements, pruning, cluster drops
 * and a restart, they must equal a count made from scratch.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { Receipt } from '../src/core/types.js';
import { AuditEngine } from '../src/audit/engine.js';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';
import { alertingByWalk } from './helpers/alerting-walk.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0 + ms).toISOString();
const RETENTION_MS = 5_000;

const open: ReceiptStore[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

function engineOver(dir: string): AuditEngine {
  const store = ReceiptStore.open(dir);
  open.push(store);
  const engine = new AuditEngine(registry, store, { retentionMs: RETENTION_MS, alertWindowMs: WINDOW_MS });
  engine.restore(t0);
  return engine;
}

/**
 * The gauge rows made from scratch: every run's verdict, by (contract, version, verdict), paged through the run list
 * (settled runs leave live memory and are counted until pruned).
 */
async function recount(engine: AuditEngine, now = t0, dropped: ReadonlySet<string> = new Set()): Promise<string[]> {
  const m = new Map<string, number>();
  let after: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const { runs, next } = await engine.listPage({ limit: 7, after }, now);
    for (const { verdict: v } of runs) {
      if (dropped.has(v.run)) continue; // dropped (a cluster's partition moved): counted by its new owner
      const k = `${v.pin?.contract ?? ''}|${v.pin?.version ?? ''}|${v.verdict}`;
      m.set(k, (m.get(k) ?? 0) + 1);
    }
    if (next === null) break;
    after = next;
  }
  return [...m].map(([k, n]) => `${k}=${n}`).sort();
}
const gaugeRows = (engine: AuditEngine) => engine.gauge().map((g) => `${g.contract}|${g.version}|${g.verdict}=${g.count}`).sort();
type AlertRows = ReturnType<AuditEngine['alerting']>;
const alertRows = (a: AlertRows) => ({
  alerting: a.alerting.map((r) => `${r.contract}|${r.verdict}=${r.count}`).sort(),
  stalled: a.stalled.map((r) => `${r.contract}=${r.count}`).sort(),
});

/** The rows as counted from the runs alertingRuns lists (what the per-run alerts are made from, src/alerting). */
function rowsOfRuns(engine: AuditEngine): ReturnType<typeof alertRows> {
  const a = new Map<string, number>();
  const st = new Map<string, number>();
  for (const r of engine.alertingRuns()) {
    const contract = r.verdict.pin?.contract ?? '';
    expect(r.inWindow || r.stalledAt !== null, `${r.verdict.run} listed outside every row`).toBe(true);
    if (r.inWindow) a.set(`${contract}|${r.verdict.verdict}`, (a.get(`${contract}|${r.verdict.verdict}`) ?? 0) + 1);
    if (r.stalledAt !== null) st.set(contract, (st.get(contract) ?? 0) + 1);
  }
  return { alerting: [...a].map(([k, n]) => `${k}=${n}`).sort(), stalled: [...st].map(([k, n]) => `${k}=${n}`).sort() };
}

/** One receipt of each kind that moves a run of the drift contract between verdicts (with `version`: the pin). */
const KINDS = ['start3', 'start2', 'delegate', 'handoff', 'return', 'forbidden', 'unknown', 'wait', 'outcome', 'end', 'gap'] as const;
/** The edges among KINDS: allowed ones of the plan, one the contract forbids, one to an agent it does not know. */
const EDGES: Partial<Record<(typeof KINDS)[number], [string, string, string]>> = {
  delegate: ['orchestrator', 'researcher', 'delegate'],
  handoff: ['researcher', 'verifier', 'handoff'],
  return: ['verifier', 'orchestrator', 'return'],
  forbidden: ['researcher', 'publisher', 'delegate'],
  unknown: ['orchestrator', 'mallory', 'delegate'],
};
function receiptOf(kind: (typeof KINDS)[number], run: string, event: string, ms: number): Receipt {
  const base = { run, event, at: at(ms) };
  const edge = EDGES[kind];
  if (edge) return { ...base, type: 'edge', from: edge[0], to: edge[1], kind: edge[2] } as Receipt;
  switch (kind) {
    case 'start3':
      return { ...base, type: 'run.start', contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' } as Receipt;
    case 'start2':
      return { ...base, type: 'run.start', contract: 'research-publish', version: '2', from: 'orchestrator' } as Receipt;
    case 'wait':
      return { ...base, type: 'wait', from: 'researcher', on: 'verifier', edge: 'verifier -> orchestrator : return', deadline: at(ms + 5_000) } as Receipt;
    case 'outcome':
      return { ...base, type: 'outcome', verified: true, from: 'orchestrator' } as Receipt;
    case 'end':
      return { ...base, type: 'run.end', result: 'completed', from: 'orchestrator' } as Receipt;
    case 'gap':
      return { ...base, type: 'gap', reason: 'caller_unresolved' } as Receipt;
  }
  throw new Error(`no receipt for kind ${kind}`);
}

const op = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('ingest' as const), receipts: fc.array(fc.record({ run: fc.integer({ min: 0, max: 5 }), kind: fc.constantFrom(...KINDS), event: fc.integer({ min: 0, max: 30 }) }), { minLength: 1, maxLength: 6 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('time' as const), ms: fc.integer({ min: 1, max: 120_000 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('prune' as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop' as const), run: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('gauge' as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('ack' as const), run: fc.integer({ min: 0, max: 5 }) }) },
  // time moves to just before, on, or just after the end of the alert window or the stall time of an earlier ingest
  { weight: 3, arbitrary: fc.record({ op: fc.constant('boundary' as const), ingest: fc.nat(), stall: fc.boolean(), delta: fc.integer({ min: -1, max: 1 }) }) },
  // the alerting gauges at a moment (a few ms apart: on and just past the edges of the window and the stall time)
  { weight: 3, arbitrary: fc.record({ op: fc.constant('alerting' as const), ms: fc.integer({ min: 0, max: 3 }), other: fc.boolean() }) },
);
const WINDOW_MS = 20_000;
const STALL_MS = 7_000;

describe('the topology_runs, alerting and stalled gauges', () => {
  it('equal a count made from scratch after any ingests, time, deadlines, acknowledgements, prunes, drops and a restart', async () => {
    let pruned = 0;
    let alerted = 0;
    let stalled = 0;
    let feedChecked = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
        const dir = tempDir('ta-gauge-');
        const engine = engineOver(dir);
        let now = t0;
        const ingestedAt: number[] = [];
        const dropped = new Set<string>();
        // The per-run alerts' change feed (alertChanges, issue 44): every run that entered, left or changed among
        // alertingRuns since the last look is in it (RunAlerts.tick looks at those only between resends).
        let seen = new Map<string, unknown[]>();
        const alertingNow = (at: number, w: number, st: number) => {
          const rows = engine.alerting(at, w, st);
          const changes = engine.alertChanges();
          const cur = new Map<string, unknown[]>([...engine.alertingRuns()].map((r) => [r.verdict.run, [r.verdict, r.inWindow, r.stalledAt]]));
          if (changes !== null) {
            for (const run of new Set([...seen.keys(), ...cur.keys()])) {
              const x = seen.get(run);
              const y = cur.get(run);
              if (x && y && x.every((v, i) => v === y[i])) continue;
              expect(changes.has(run), run).toBe(true);
              feedChecked++;
            }
          }
          seen = cur;
          return rows;
        };
        for (const o of ops) {
          if (o.op === 'ingest') {
            now += 1000;
            ingestedAt.push(now);
            // an event id names one receipt of a run: the same id with another kind is a conflict, also counted
            await engine.ingest(o.receipts.map((x) => receiptOf(x.kind, `r${x.run}`, `e${x.event}-${x.kind}`, now - t0)), 'src', now);
            for (const x of o.receipts) dropped.delete(`r${x.run}`);
          } else if (o.op === 'time') {
            now += o.ms;
            engine.tick(now);
          } else if (o.op === 'prune') pruned += engine.prune(now);
          else if (o.op === 'drop') {
            if (engine.drop(`r${o.run}`)) dropped.add(`r${o.run}`);
          }
          else if (o.op === 'ack') {
            // the gauges as a scrape saw them, an operator acknowledges, the next scrape
            alertingNow(now, WINDOW_MS, STALL_MS);
            engine.ack(`r${o.run}`, now);
            expect(alertRows(alertingNow(now, WINDOW_MS, STALL_MS))).toEqual(alertRows(alertingByWalk(engine, now, WINDOW_MS, STALL_MS)));
            expect(rowsOfRuns(engine)).toEqual(alertRows(alertingByWalk(engine, now, WINDOW_MS, STALL_MS)));
          }
          else if (o.op === 'boundary') {
            if (ingestedAt.length === 0) continue;
            const to = ingestedAt[o.ingest % ingestedAt.length] + (o.stall ? STALL_MS : WINDOW_MS) + o.delta;
            if (to <= now) continue;
            now = to;
            expect(alertRows(alertingNow(now, WINDOW_MS, STALL_MS))).toEqual(alertRows(alertingByWalk(engine, now, WINDOW_MS, STALL_MS)));
          }
          else if (o.op === 'alerting') {
            now += o.ms;
            // now and then other parameters (counted from scratch), then back
            const [w, st] = o.other ? [WINDOW_MS / 2, STALL_MS * 2] : [WINDOW_MS, STALL_MS];
            expect(alertRows(alertingNow(now, w, st))).toEqual(alertRows(alertingByWalk(engine, now, w, st)));
            expect(rowsOfRuns(engine)).toEqual(alertRows(alertingByWalk(engine, now, w, st)));
          } else expect(gaugeRows(engine)).toEqual(await recount(engine, now, dropped));
        }
        expect(gaugeRows(engine)).toEqual(await recount(engine, now, dropped));
        expect(alertRows(engine.alerting(now, WINDOW_MS, STALL_MS))).toEqual(alertRows(alertingByWalk(engine, now, WINDOW_MS, STALL_MS)));
        expect(rowsOfRuns(engine)).toEqual(alertRows(alertingByWalk(engine, now, WINDOW_MS, STALL_MS)));
        alerted += alertingByWalk(engine, now, WINDOW_MS, STALL_MS).alerting.length;
        stalled += alertingByWalk(engine, now, WINDOW_MS, STALL_MS).stalled.length;
        const restarted = engineOver(dir);
        expect(gaugeRows(restarted)).toEqual(await recount(restarted, now));
        expect(alertRows(restarted.alerting(now, WINDOW_MS, STALL_MS))).toEqual(alertRows(alertingByWalk(restarted, now, WINDOW_MS, STALL_MS)));
      }),
      { numRuns: 100, endOnFailure: true },
    );
    // the sequences did prune settled runs, and ended with runs alerting and stalled
    expect(pruned).toBeGreaterThan(0);
    expect(feedChecked).toBeGreaterThan(50);
    expect(alerted).toBeGreaterThan(0);
    expect(stalled).toBeGreaterThan(0);
  });

  it('counts runs of several verdicts and pins, and a run leaves its row when it moves or is forgotten', async () => {
    const engine = engineOver(tempDir('ta-gauge-'));
    const now = t0 + 1000;
    await engine.ingest([receiptOf('start3', 'a', 's', 0), receiptOf('delegate', 'a', 'd', 1)], 'src', now);
    await engine.ingest([receiptOf('start3', 'b', 's', 0), receiptOf('forbidden', 'b', 'f', 1)], 'src', now);
    await engine.ingest([receiptOf('start2', 'c', 's', 0), receiptOf('delegate', 'c', 'd', 1)], 'src', now);
    const rows = gaugeRows(engine);
    expect(rows).toEqual(await recount(engine, now));
    expect(rows).toContain('research-publish|3|forbidden_edge=1');
    expect(rows.filter((r) => r.startsWith('research-publish|3|')).map((r) => Number(r.split('=')[1])).reduce((x, y) => x + y)).toBe(2);
    expect(rows.some((r) => r.startsWith('research-publish|2|'))).toBe(true);
    // run a becomes forbidden_edge too: one row of two runs, a's old row gone
    await engine.ingest([receiptOf('forbidden', 'a', 'f', 2)], 'src', now + 1);
    expect(gaugeRows(engine)).toEqual(await recount(engine, now + 1));
    expect(gaugeRows(engine)).toContain('research-publish|3|forbidden_edge=2');
    engine.drop('b');
    expect(gaugeRows(engine)).toContain('research-publish|3|forbidden_edge=1');
    engine.drop('a');
    expect(gaugeRows(engine).some((r) => r.startsWith('research-publish|3|'))).toBe(false);
    expect(gaugeRows(engine)).toEqual(await recount(engine, now + 1, new Set(['a', 'b'])));
    // c ends (settled: false_complete, no verified outcome) and is pruned once idle past the retention
    await engine.ingest([receiptOf('end', 'c', 'end', 3)], 'src', now + 2);
    expect(engine.verdictOf('c')?.settled).toBe(true);
    expect(engine.prune(now + 2 + RETENTION_MS + 1)).toBe(1);
    expect(gaugeRows(engine)).toEqual([]);
  });

  it('the sliced retention prune (issue 44): 450 settled runs leave the store, memory and the gauges batch by batch, each counted once', async () => {
    const engine = engineOver(tempDir('ta-gauge-sliced-'));
    const now = t0 + 1000;
    const N = 450;
    for (let i = 0; i < N; i += 50) {
      const batch: Receipt[] = [];
      for (let j = i; j < i + 50; j++) batch.push(receiptOf('start3', `s${j}`, 's', 0), receiptOf('forbidden', `s${j}`, 'f', 1), receiptOf('end', `s${j}`, 'end', 2));
      await engine.ingest(batch, 'src', now);
    }
    await engine.ingest([receiptOf('start3', 'open', 's', 0), receiptOf('delegate', 'open', 'd', 1)], 'src', now);
    expect(gaugeRows(engine)).toEqual(await recount(engine, now));
    expect(gaugeRows(engine)).toContain(`research-publish|3|forbidden_edge=${N}`);
    let pauses = 0;
    const slicer = { due: () => true, pause: async () => void pauses++ };
    await engine.pruneSliced(now + RETENTION_MS + 10_000, slicer);
    expect(pauses).toBeGreaterThanOrEqual(3); // 200 + 200 + 50: a pause between batches, and before the WAL scrub
    // Every settled run left the gauges exactly once; the open run stays.
    expect(gaugeRows(engine)).toEqual(await recount(engine, now));
    expect(gaugeRows(engine).some((r) => r.includes('forbidden_edge'))).toBe(false);
    expect(engine.verdictOf('s0')).toBeNull();
    expect(engine.verdictOf(`s${N - 1}`)).toBeNull();
    expect(engine.verdictOf('open')).not.toBeNull();
    // A second pass finds nothing: no count leaves twice.
    const before = gaugeRows(engine);
    await engine.pruneSliced(now + RETENTION_MS + 20_000, slicer);
    expect(gaugeRows(engine)).toEqual(before);
  });

  it('the synchronous prune deletes every batch: a run left in the store would leave its count twice', async () => {
    const engine = engineOver(tempDir('ta-gauge-sync-'));
    const now = t0 + 1000;
    const batch: Receipt[] = [];
    for (let j = 0; j < 250; j++) batch.push(receiptOf('start3', `p${j}`, 's', 0), receiptOf('forbidden', `p${j}`, 'f', 1), receiptOf('end', `p${j}`, 'end', 2));
    await engine.ingest(batch, 'src', now);
    await engine.ingest([receiptOf('start3', 'q', 's', 0), receiptOf('forbidden', 'q', 'f', 1), receiptOf('end', 'q', 'end', 2)], 'src', now + RETENTION_MS + 5_000);
    engine.prune(now + RETENTION_MS + 1_000);
    expect(gaugeRows(engine)).toEqual(['research-publish|3|forbidden_edge=1']);
    engine.prune(now + RETENTION_MS + 2_000);
    expect(gaugeRows(engine)).toEqual(['research-publish|3|forbidden_edge=1']);
  });
});
