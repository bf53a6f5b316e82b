// The cluster list (ClusterReads.listAll): the runs of partitions an instance lists from its memory merged with the
// shared store's rows of the others (issue 32: the store leaves the held partitions out), in order, filtered, to the
// limit, each run once; the owners' stored evaluations parsed once per text.
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

/** A shared store's side: rows as PgStore.listRuns gives them (newest first, limited), counting the calls. */
function storeSide(rows: () => Row[]): RemoteRuns & { calls: number } {
  const side = {
    calls: 0,
    load: async () => null,
    pin: async () => null,
    counts: async () => ({}),
    list: async (f: { verdict?: string; limit: number; oldest?: boolean }) => {
      side.calls++;
      const sign = f.oldest ? 1 : -1;
      return rows()
        .filter((r) => !f.verdict || r.verdict === f.verdict)
        .sort((a, b) => sign * (a.firstAt - b.firstAt))
        .slice(0, f.limit);
    },
  };
  return side;
}

const stored = (v: RunVerdict, firstAt: number): Row => ({ run: v.run, firstAt, updatedAt: firstAt + 1, verdict: v.verdict, settled: v.settled, listed: listedJson(v, firstAt) });

describe('the cluster list merges the runs held here with the shared store rows of the others', () => {
  const held = [
    { verdict: verdictOf('h1', 'healthy'), updatedAt: 10, firstAt: 1_000, alert: { acked: false, alerting: false, stalled: false } },
    { verdict: verdictOf('h2', 'forbidden_edge'), updatedAt: 30, firstAt: 3_000, alert: { acked: false, alerting: false, stalled: false } },
    { verdict: verdictOf('h3', 'working'), updatedAt: 50, firstAt: 5_000, alert: { acked: false, alerting: false, stalled: false } },
  ];
  const others = [verdictOf('o1', 'forbidden_edge'), verdictOf('o2', 'healthy'), verdictOf('o3', 'waiting')];
  const rows = () => [stored(others[0], 2_000), stored(others[1], 4_000), stored(others[2], 6_000)];

  it('newest first, oldest first, by verdict, to the limit, each run once (a held run the store also listed)', async () => {
    // h2 is also in the store's rows (taken over while the store answered): listed once, from memory.
    const store = storeSide(() => [...rows(), { run: 'h2', firstAt: 3_000, updatedAt: 31, verdict: 'forbidden_edge', settled: true, listed: null }]);
    const reads = new ClusterReads(heldSide(held), null as unknown as Pinner, store);
    const runs = async (f: ListFilter) => (await reads.listAll(f, 10_000)).map((r) => r.verdict.run);
    expect(await runs({ limit: 100 })).toEqual(['o3', 'h3', 'o2', 'h2', 'o1', 'h1']);
    expect(await runs({ limit: 100, oldest: true })).toEqual(['h1', 'o1', 'h2', 'o2', 'h3', 'o3']);
    expect(await runs({ limit: 3 })).toEqual(['o3', 'h3', 'o2']);
    expect(await runs({ limit: 100, verdict: 'forbidden_edge' })).toEqual(['h2', 'o1']);
    const all = await reads.listAll({ limit: 100 }, 10_000);
    // The others' rows carry their owners' evaluation (findings and messages), the held ones their alert state.
    expect(all.find((r) => r.verdict.run === 'o1')!.verdict.findings[0].message).toBe('forbidden_edge of o1');
    expect(all.find((r) => r.verdict.run === 'o1')!.alert).toBeNull();
    expect(all.find((r) => r.verdict.run === 'h2')!.alert).toEqual({ acked: false, alerting: false, stalled: false });
  });

  it('parses a stored evaluation once per text: an unchanged row reuses it, a rewritten one is read anew', async () => {
    let current = rows();
    const reads = new ClusterReads(heldSide([]), null as unknown as Pinner, storeSide(() => current));
    const first = await reads.listAll({ limit: 100 }, 10_000);
    const again = await reads.listAll({ limit: 100 }, 10_000);
    const o1 = (l: ListedRun[]) => l.find((r) => r.verdict.run === 'o1')!.verdict;
    expect(o1(again)).toBe(o1(first)); // the same object: not parsed again
    // Its owner writes a new evaluation: the list shows it.
    current = [stored(verdictOf('o1', 'forbidden_edge', 'a new message'), 2_000), ...current.slice(1)];
    const third = await reads.listAll({ limit: 100 }, 10_000);
    expect(o1(third)).not.toBe(o1(first));
    expect(o1(third).findings[0].message).toBe('a new message');
    expect(third.map((r) => r.verdict.run)).toEqual(['o3', 'o2', 'o1']);
  });
});
