/**
 * The run list of the live runs and (a single instance) of the stored runs: the held runs' list, the pages of the
 * run list in keyset order (newest first by first receipt, server time) with their cursors, the runs per verdict,
 * and a run that left live memory read from the store and evaluated now. A cluster pages the shared store through
 * ClusterReads.storedPage.
 */
import { millisOf } from '../core/time.js';
import type { Receipt, RunVerdict } from '../core/types.js';
import { viewReceipts, type ClusterReads, type RunView } from './cluster-reads.js';
import type { LiveRuns } from './live-runs.js';
import { listOrder, matchesAlertFilter, type ListFilter, type ListedRun } from './listing.js';
import type { Pinner } from './pinning.js';
import type { DetachedRun, EngineStore } from './store.js';

/** A page of the run list yields to the event loop after this much work (ms). */
const LIST_SLICE_MS = 20;

/** The run list's cursor: the last row's first receipt time and run id, base64url (opaque to clients). */
function cursorOf(c: { firstAt: number; run: string }): string {
  return Buffer.from(JSON.stringify([c.firstAt, c.run])).toString('base64url');
}

/** A cursor back; a malformed one is the client's error (ListCursorError). */
function parseCursor(s: string): { firstAt: number; run: string } {
  try {
    const v = JSON.parse(Buffer.from(s, 'base64url').toString()) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'number' && Number.isFinite(v[0]) && typeof v[1] === 'string') return { firstAt: v[0], run: v[1] };
  } catch {
    // below
  }
  throw new ListCursorError('after: not a cursor of this list (use the `next` of the page before)');
}

/** A run list cursor that is not one (`?after=`): the client's error. */
export class ListCursorError extends Error {}

/** What the run list reads besides the live runs. */
export interface RunListHost {
  readonly store: EngineStore;
  readonly pinner: Pinner;
  /** Whether settled runs leave live memory (a single instance): the store then lists every run. */
  readonly retires: boolean;
  syncReceipts(run: string): Receipt[];
  alertStateOf(run: string, now: number, windowMs?: number, stallMs?: number): ListedRun['alert'];
  /** A cluster's pages of the shared store (ClusterReads.storedPage, storedAfter); null: not a cluster. */
  readonly cluster: Pick<ClusterReads, 'storedPage' | 'storedAfter'> | null;
}

/** A key of the run list's keyset order (first receipt as stored, run id): what a cursor holds. */
type Cursor = { firstAt: number; run: string };

/** A stored run read for a page: its key, and the run as listed (null: it does not pass the filter). */
type KeyedRun = Cursor & { listed: ListedRun | null };

/**
 * A page of `limit` listed runs after the key `after`: the store's rows read `want` at a time (rows filtered out are
 * read past, at most 64 reads a page), the cursor of the last row read as `next` when `more` finds another row.
 */
async function keysetPage(limit: number, after: Cursor | undefined, read: (cursor: Cursor | undefined, want: number) => Promise<KeyedRun[]>, more: (cursor: Cursor) => Promise<boolean>): Promise<{ runs: ListedRun[]; next: string | null }> {
  const out: ListedRun[] = [];
  let cursor = after;
  for (let reads = 0; reads < 64 && out.length < limit; reads++) {
    const want = limit - out.length;
    const rows = await read(cursor, want);
    for (const row of rows) {
      cursor = { firstAt: row.firstAt, run: row.run };
      if (row.listed) out.push(row.listed);
    }
    if (rows.length < want) return { runs: out, next: null };
  }
  return { runs: out, next: cursor && (await more(cursor)) ? cursorOf(cursor) : null };
}

export class RunList {
  constructor(
    private readonly live: LiveRuns,
    private readonly host: RunListHost,
  ) {}

  /** A run that left live memory idle, read from the store and evaluated now (it stays out of live memory). */
  getEvicted(run: string, now = Date.now(), updatedAt = now): RunView | null {
    const receipts = this.host.syncReceipts(run);
    if (receipts.length === 0) return null;
    const record = this.host.store.getPin(run);
    const content = record ? this.host.store.getContractContent(record.contractHash) : null;
    const d: DetachedRun = { run, pin: record ?? null, contractContent: content ?? null, receipts, updatedAt };
    const judged = this.host.pinner.judgeDetached(d, now);
    return { verdict: judged.verdict, receipts: viewReceipts(receipts, judged.conflicts), updatedAt };
  }

  /** The held runs that pass the filter, in list order (at most `limit`, default 100). */
  list(filter: ListFilter): ListedRun[] {
    const out: ListedRun[] = [];
    const now = filter.now ?? Date.now();
    for (const live of this.live.values()) {
      const v = live.verdict;
      if (!v) continue; // created by an ingest's fold, not evaluated yet
      if (filter.verdict && v.verdict !== filter.verdict) continue;
      if (filter.contract && v.pin?.contract !== filter.contract) continue;
      const alert = this.host.alertStateOf(live.state.run, now, filter.windowMs, filter.stallMs);
      if (!matchesAlertFilter(alert, filter)) continue;
      out.push({ verdict: v, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert, enteredAt: live.enteredAt ?? live.updatedAt });
    }
    out.sort(listOrder(filter));
    return out.slice(0, filter.limit ?? 100);
  }

  /**
   * A page of the run list, after the cursor `after` (the `next` of the page before; null: the last page), in keyset
   * order, newest first by first receipt (server time, as stored). A single instance lists the store (settled runs
   * are not in memory): held runs show their live verdict and alert state, the others their verdict evaluated from
   * the store. A cluster lists the shared store's rows of every partition the same way (ClusterReads.storedPage:
   * runs held here from memory, the others as their owners last wrote them). A filter on an alert state being true
   * lists held runs only (only they can have one); so does an instance whose store does not list (memory only).
   */
  async page(filter: ListFilter & { after?: string }, now: number): Promise<{ runs: ListedRun[]; next: string | null }> {
    const limit = Math.max(1, filter.limit ?? 100);
    const after = filter.after ? parseCursor(filter.after) : undefined;
    const cluster = this.host.cluster;
    if (filter.acked || filter.alerting || filter.stalled || (!this.host.retires && !cluster)) return this.heldPage(filter, limit, after, now);
    if (cluster) return keysetPage(limit, after, (cursor, want) => cluster.storedPage(filter, cursor, want, now), (cursor) => cluster.storedAfter(filter, cursor));
    const store = this.host.store;
    const rowsAfter = (cursor: Cursor | undefined, want: number) => store.listRuns!({ verdict: filter.verdict, contract: filter.contract, oldest: filter.oldest, after: cursor, limit: want });
    let sliceStart = performance.now();
    const read = async (cursor: Cursor | undefined, want: number): Promise<KeyedRun[]> => {
      const out: KeyedRun[] = [];
      for (const row of rowsAfter(cursor, want)) {
        // A run that left memory is evaluated from the store: a long page yields to the event loop every ~20 ms.
        if (performance.now() - sliceStart > LIST_SLICE_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
        out.push({ firstAt: row.firstAt, run: row.run, listed: this.listedOf(row.run, row.updatedAt, filter, now) });
      }
      return out;
    };
    return keysetPage(limit, after, read, async (cursor) => rowsAfter(cursor, 1).length > 0);
  }

  /** A stored run as the run list shows it (null: it does not pass the filter). */
  private listedOf(run: string, updatedAt: number, filter: ListFilter, now: number): ListedRun | null {
    const live = this.live.get(run);
    let row: ListedRun;
    if (live) {
      if (!live.verdict) return null;
      row = { verdict: live.verdict, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert: this.host.alertStateOf(run, now, filter.windowMs, filter.stallMs), enteredAt: live.enteredAt ?? live.updatedAt };
    } else {
      const v = this.getEvicted(run, now, updatedAt);
      if (!v) return null;
      let firstAt = Infinity;
      for (const r of v.receipts) {
        const t = millisOf(r.at);
        if (t < firstAt) firstAt = t;
      }
      // Left live memory settled: past its alert window (or never alerting), never stalled.
      const ack = this.host.store.getAck!(run);
      // The stored verdict state is written when the verdict changes: its time is when the run entered it.
      row = { verdict: v.verdict, updatedAt: v.updatedAt, firstAt, alert: { acked: ack?.verdict === v.verdict.verdict, alerting: false, stalled: false }, enteredAt: v.updatedAt };
    }
    if (filter.verdict && row.verdict.verdict !== filter.verdict) return null;
    if (filter.contract && row.verdict.pin?.contract !== filter.contract) return null;
    return matchesAlertFilter(row.alert, filter) ? row : null;
  }

  /**
   * A page of the held runs (an alert-state filter, or a store that does not list), in list order (by the runs' own
   * first receipt), after the cursor: every page sorts the held runs that pass the filter (n log n in them).
   */
  private heldPage(filter: ListFilter, limit: number, after: Cursor | undefined, now: number): { runs: ListedRun[]; next: string | null } {
    const order = listOrder(filter);
    let all = this.list({ ...filter, now, limit: Number.MAX_SAFE_INTEGER });
    if (after) {
      const mark: ListedRun = { verdict: { run: after.run } as RunVerdict, firstAt: after.firstAt, updatedAt: 0, alert: null };
      all = all.filter((r) => order(r, mark) > 0);
    }
    const runs = all.slice(0, limit);
    const last = runs[runs.length - 1];
    return { runs, next: all.length > limit && last ? cursorOf({ firstAt: last.firstAt, run: last.verdict.run }) : null };
  }

  /** Stored runs per verdict (a single instance; null: the store does not count, see listAll's counts). */
  verdictCounts(filter: { contract?: string }): Record<string, number> | null {
    return this.host.retires ? this.host.store.verdictCounts!(filter) : null;
  }
}
