// A page of the cluster list (ClusterReads.storedPage, issue 50): the shared store's rows of every partition in its
// keyset order after the cursor, each run once; a run held here shown with the verdict in memory (newer than the one
// its owner last stored), the others as their owners last wrote them (parsed once per text); filtered on the verdict shown.
import { describe, expect, it } from 'vitest';
import { ClusterReads, type HeldRuns } from '../src/audit/cluster-reads.js';
import { listOrder, listedJson, type ListFilter, type ListedRun } from '../src/audit/listing.js';
import type { RemoteRuns } from '../src/audit/store.js';
import type { RunVerdict, Verdict } from '../src/core/types.js';
import type { Pinner } from '../src/audit/pinning.js';

const verdictOf = (run: string, verdict: Verdict, message = `${verdict} of ${run}`): RunVerdict => ({
  run,
  pin: { contract: 'research', version: '3', phase: 'research' },
  verdict,
  naive: 'green',
  settled: verdict !== 'working',
  findings: verdict === 'healthy' ? [] : [{ verdict, code: verdict, agents: ['a'], events: ['e1'], message, settled: verdict !== 'working' }],
  nextChangeAt: null,
});

/** A held side: its live runs listed as AuditEngine.list lists them. */
function heldSide(live: ListedRun[]): HeldRuns {
  return {
    view: async () => null,
    held: (run) => (live.some((r) => r.verdict.run === run) ? ({ verdict: live.find((r) => r.verdict.run === run)!.verdict, updatedAt: 1, state: { firstAt: live.find((r) => r.verdict.run === run)!.firstAt } } as never) : undefined),
    list: (f: ListFilter) => live.filter((r) => !f.verdict || r.verdict.verdict === f.verdict).sort(listOrder(f)).slice(0, f.limit ?? 100),
    ackOf: () => null,
    alertStateOf: (run) => (live.some((r) => r.verdict.run === run) ? { acked: false, alerting: false, stalled: false } : null),
  };
}

type Row = { run: string; firstAt: number; updatedAt: number; verdict: string | null; settled: boolean; listed: string | null };

/** A shared store's side: rows as PgStore.listRuns gives them (keyset order after the cursor, limited), counting the calls. */
function storeSide(rows: () => Row[]): RemoteRuns & { calls: number } {
  const side = {
    calls: 0,
    load: async () => null,
    pin: async () => null,
    counts: async () => ({}),
    list: async (f: { verdict?: string; limit: number; oldest?: boolean; after?: { firstAt: number; run: string } }) => {
      side.calls++;
      const sign = f.oldest ? 1 : -1;
      const order = (a: { firstAt: number; run: string }, b: { firstAt: number; run: string }) => sign * (a.firstAt - b.firstAt || (a.run < b.run ? -1 : a.run > b.run ? 1 : 0));
      return rows()
        .filter((r) => (!f.verdict || r.verdict === f.verdict) && (!f.after || order(r, f.after) > 0))
        .sort(order)
        .slice(0, f.limit);
    },
  };
  return side;
}

const stored = (v: RunVerdict, firstAt: number): Row => ({ run: v.run, firstAt, updatedAt: firstAt + 1, verdict: v.verdict, settled: v.settled, listed: listedJson(v, firstAt) });

describe('a page of the cluster list: the rows of the shared store in its order, runs held here shown from memory', () => {
  const held = [
    { verdict: verdictOf('h1', 'healthy'), updatedAt: 10, firstAt: 1_000, alert: { acked: false, alerting: false, stalled: false } },
    { verdict: verdictOf('h2', 'forbidden_edge'), updatedAt: 30, firstAt: 3_000, alert: { acked: false, alerting: false, stalled: false } },
  ];
  const others = [verdictOf('o1', 'forbidden_edge'), verdictOf('o2', 'healthy'), verdictOf('o3', 'waiting')];
  // h1, h2 are stored too (every held run is): h2's stored evaluation lags its owner's (working, then forbidden_edge).
  const rows = () => [
    stored(held[0].verdict, 1_000),
    stored(others[0], 2_000),
    { run: 'h2', firstAt: 3_000, updatedAt: 29, verdict: 'working', settled: false, listed: null },
    stored(others[1], 4_000),
    stored(others[2], 6_000),
  ];
  const page = async (reads: ClusterReads, f: ListFilter, after?: { firstAt: number; run: string }, want = 100) =>
    (await reads.storedPage(f, after, want, 10_000)).map((r) => [r.run, r.listed?.verdict.verdict ?? null]);

  it('newest first, oldest first, after a cursor, to the limit, each run once with the verdict held here', async () => {
    const reads = new ClusterReads(heldSide(held), null as unknown as Pinner, storeSide(rows));
    expect(await page(reads, {})).toEqual([['o3', 'waiting'], ['o2', 'healthy'], ['h2', 'forbidden_edge'], ['o1', 'forbidden_edge'], ['h1', 'healthy']]);
    expect(await page(reads, { oldest: true })).toEqual([['h1', 'healthy'], ['o1', 'forbidden_edge'], ['h2', 'forbidden_edge'], ['o2', 'healthy'], ['o3', 'waiting']]);
    expect(await page(reads, {}, { firstAt: 4_000, run: 'o2' }, 2)).toEqual([['h2', 'forbidden_edge'], ['o1', 'forbidden_edge']]);
    // The filter applies to the verdict shown: h2, stored as working, is held as forbidden_edge (a row read, not listed).
    expect(await page(reads, { verdict: 'working' })).toEqual([['h2', null]]);
    const all = await reads.storedPage({}, undefined, 100, 10_000);
    // The others' rows carry their owners' evaluation (findings and messages), the held ones their alert state.
    expect(all.find((r) => r.run === 'o1')!.listed!.verdict.findings[0].message).toBe('forbidden_edge of o1');
    expect(all.find((r) => r.run === 'o1')!.listed!.alert).toBeNull();
    expect(all.find((r) => r.run === 'h2')!.listed!.alert).toEqual({ acked: false, alerting: false, stalled: false });
  });

  it('parses a stored evaluation once per text: an unchanged row reuses it, a rewritten one is read anew', async () => {
    let current = [stored(others[0], 2_000), stored(others[1], 4_000), stored(others[2], 6_000)];
    const reads = new ClusterReads(heldSide([]), null as unknown as Pinner, storeSide(() => current));
    const o1 = async () => (await reads.storedPage({}, undefined, 100, 10_000)).find((r) => r.run === 'o1')!.listed!.verdict;
    const first = await o1();
    const again = await o1();
    expect(again).toBe(first); // the same object: not parsed again
    // Its owner writes a new evaluation: the list shows it.
    current = [stored(verdictOf('o1', 'forbidden_edge', 'a new message'), 2_000), ...current.slice(1)];
    const third = await o1();
    expect(third).not.toBe(first);
    expect(third.findings[0].message).toBe('a new message');
  });
});
