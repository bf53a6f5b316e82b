/**
 * Cluster reads: runs other instances hold, read from the shared store (RemoteRuns) and evaluated here with the same
 * pure verdict function (any instance answers for any run); the pins of such runs for the run-scope rule; the list
 * views over the whole cluster (as the owners last wrote each run's verdict and findings). On a single instance (no
 * remote) every answer is the held runs'.
 */
import { isRunId } from '../core/receipt.js';
import type { ShadowVerdict } from '../core/shadow.js';
import type { AckRecord, Receipt, RunVerdict } from '../core/types.js';
import { LIST_GROUP, listOrder, matchesAlertFilter, parseListed, type ListFilter, type ListedRun } from './listing.js';
import type { LiveRun } from './live-run.js';
import type { Pinner } from './pinning.js';
import type { DetachedRun, RemoteRuns, StoredListRow } from './store.js';

/** Runs held elsewhere whose handoff receipts are kept for the handoff party rule (oldest dropped first beyond this). */
const MAX_FOREIGN_HANDOFF_RUNS = 10_000;

export type RunView = { verdict: RunVerdict; receipts: Receipt[]; updatedAt: number; shadow?: ShadowVerdict[] };

/**
 * A run's receipts as `get` and `fetch` show them, wherever the run is held: the folded ones in the order stored, then
 * every version of each conflicted event id (conflicts in the order they appeared).
 */
export function viewReceipts(stored: Receipt[], conflicts: ReadonlyMap<string, unknown>): Receipt[] {
  if (conflicts.size === 0) return stored;
  const versions = new Map<string, Receipt[]>([...conflicts.keys()].map((event) => [event, []]));
  const folded = stored.filter((r) => {
    const v = versions.get(r.event);
    if (v) v.push(r);
    return !v;
  });
  return [...folded, ...[...versions.values()].flat()];
}

/** What cluster reads ask of the runs held here. */
export interface HeldRuns {
  /** A held run with its receipts (read from the store), or null. */
  view(run: string): Promise<RunView | null>;
  held(run: string): LiveRun | undefined;
  list(filter: ListFilter): ListedRun[];
  ackOf(run: string): (AckRecord & { current: boolean }) | null;
  alertStateOf(run: string, now: number, windowMs?: number, stallMs?: number): ListedRun['alert'];
}

export class ClusterReads {
  /**
   * The stored evaluations the last read of a page parsed, by run (the text and what it parsed to): a page repeated by
   * a dashboard parses only the runs whose owners wrote something new since. Bounded by one page (at most 10,000
   * runs): each read keeps only the entries it used.
   */
  private parsedListed = new Map<string, { text: string; parsed: NonNullable<ReturnType<typeof parseListed>> }>();

  constructor(
    private readonly held: HeldRuns,
    private readonly pinner: Pinner,
    readonly remote: RemoteRuns | null,
  ) {}

  /**
   * The run as `get` gives it, for any run: held here, or (cluster mode) read from the shared store and evaluated
   * now with the same pure verdict function. Null when no instance stored the run.
   */
  async fetch(run: string, now: number, maxAgeMs?: number): Promise<RunView | null> {
    const held = await this.held.view(run);
    // Only a valid run id can name a stored run: anything else (prose, 100 KB, a NUL) never reaches the shared store.
    if (held || !this.remote || !isRunId(run)) return held;
    const detached = await this.remote.load(run, maxAgeMs);
    if (!detached) return null;
    const again = await this.held.view(run); // it may have become live here while the store answered
    if (again) return again;
    const judged = this.pinner.judgeDetached(detached, now);
    return { verdict: judged.verdict, receipts: viewReceipts(detached.receipts, judged.conflicts), updatedAt: detached.updatedAt };
  }

  /** A run's verdict as fetch gives it. */
  async fetchVerdict(run: string, now: number, maxAgeMs?: number): Promise<RunVerdict | null> {
    const held = this.held.held(run)?.verdict ?? null;
    if (held) return held;
    // A single instance: a run that left live memory (settled) is read back from the store.
    if (!this.remote) return (await this.held.view(run))?.verdict ?? null;
    return (await this.fetch(run, now, maxAgeMs))?.verdict ?? null;
  }

  /** The latest acknowledgement of any run: held here, or (cluster mode) read from the shared store. */
  async fetchAck(run: string, now = Date.now()): Promise<(AckRecord & { current: boolean }) | null> {
    const held = this.held.ackOf(run);
    if (held || this.held.held(run) || !this.remote?.ack || !isRunId(run)) return held;
    const stored = await this.remote.ack(run);
    if (!stored) return null;
    const v = await this.fetchVerdict(run, now);
    return { ...stored, current: v?.verdict === stored.verdict };
  }

  /**
   * Cluster mode: what the trust rules read of runs another instance holds, read from the shared store before they
   * run: the stored pins of `pinRuns` (the run-scope rule then judges them by the pinned contract, as the owner would)
   * and the stored handoff receipts of `partyRuns` (the handoff party rule then sees the parties their earlier
   * handoffs named, as the single instance does). Runs held here are judged by their live state.
   */
  async prefetchTrust(pinRuns: Iterable<string>, partyRuns: Iterable<string> = []): Promise<void> {
    const remote = this.remote;
    if (!remote) return;
    const elsewhere = (r: string) => isRunId(r) && !this.held.held(r);
    const pins = new Set([...pinRuns].filter((r) => elsewhere(r) && !this.pinner.hasForeign(r)));
    const parties = new Set([...partyRuns].filter(elsewhere));
    const wanted = [...new Set([...pins, ...parties])];
    // A group of runs per query, one group at a time: 20,000 run.starts in one post hold one connection, not the pool.
    for (let i = 0; i < wanted.length; i += LIST_GROUP) {
      const group = wanted.slice(i, i + LIST_GROUP);
      const loaded = await this.loadFresh(remote, group, pins);
      for (const run of group) {
        const d = loaded.get(run);
        if (pins.has(run) && d) this.pinner.rememberForeign(run, d.pin, d.contractContent, () => d.receipts);
        if (parties.has(run)) this.rememberHandoffs(run, d ? d.receipts.filter((r) => r.type === 'handoff') : []);
      }
    }
  }

  /** The runs as stored now (never a cached read): in a few queries where the reader can, else one by one. */
  private async loadFresh(remote: RemoteRuns, runs: readonly string[], pinsOnly: ReadonlySet<string>): Promise<Map<string, DetachedRun>> {
    if (remote.loadMany) return remote.loadMany(runs);
    const out = new Map<string, DetachedRun>();
    await Promise.all(
      runs.map(async (run) => {
        if (pinsOnly.has(run)) {
          // The pin alone, where one is stored (its owner writes the pin just after the first evaluation).
          const p = await remote.pin(run);
          if (p) return void this.pinner.rememberForeign(run, p.record, p.contractContent, () => []);
        }
        const d = await remote.load(run, 0);
        if (d) out.set(run, d);
      }),
    );
    return out;
  }

  /** The stored handoff receipts of runs held elsewhere, as prefetchTrust last read them (bounded, oldest dropped first). */
  private readonly foreignHandoffs = new Map<string, Receipt[]>();

  private rememberHandoffs(run: string, handoffs: Receipt[]): void {
    this.foreignHandoffs.delete(run);
    if (this.foreignHandoffs.size >= MAX_FOREIGN_HANDOFF_RUNS) this.foreignHandoffs.delete(this.foreignHandoffs.keys().next().value!);
    this.foreignHandoffs.set(run, handoffs);
  }

  /** A run held elsewhere: its stored handoff receipts as prefetchTrust read them (empty when not read). */
  foreignHandoffReceipts(run: string): Receipt[] {
    return this.foreignHandoffs.get(run) ?? [];
  }

  /**
   * A page of the run list of the whole cluster (cluster mode): `want` rows of the shared store after the key `after`,
   * of every partition, in the store's (first_at, run) order, each with the run as listed (null: it does not pass the
   * filter, or is gone). The order and the cursor are the store's alone: which instance holds a run changes only which
   * verdict is shown, never where the run falls, so a run moving owner between two pages is neither listed twice nor
   * skipped. A run held here shows its live verdict and alert state (memory wins: the owner's current evaluation,
   * which its stored one may lag); the others their owners' stored evaluations. A page costs its own rows (an index
   * seek, see PgStore.listRuns), never a walk of the held runs. A run held here but not stored yet is not acknowledged
   * yet: it is listed once its receipts are committed, as on a single instance.
   */
  async storedPage(filter: ListFilter, after: { firstAt: number; run: string } | undefined, want: number, now: number): Promise<{ firstAt: number; run: string; listed: ListedRun | null }[]> {
    const remote = this.remote!;
    const rows = await remote.list({ verdict: filter.verdict, contract: filter.contract, limit: want, oldest: filter.oldest, after });
    const listed = await this.listedRows(rows, filter, now);
    return rows.map((row) => {
      const l = listed.get(row.run);
      return { firstAt: row.firstAt, run: row.run, listed: l && passes(l, filter) ? l : null };
    });
  }

  /** Whether the shared store has a run after the key `after` (a page's `next`). */
  async storedAfter(filter: ListFilter, after: { firstAt: number; run: string }): Promise<boolean> {
    return (await this.remote!.list({ verdict: filter.verdict, contract: filter.contract, limit: 1, oldest: filter.oldest, after })).length > 0;
  }

  /**
   * The shared store's rows as the list views show them, by run: a run held here (evaluated) with its live verdict
   * and alert state; another as its owner last wrote it, when that is the evaluation of the verdict state stored with
   * it; else read and evaluated here. A run gone from the store meanwhile is absent.
   */
  private async listedRows(rows: readonly StoredListRow[], filter: ListFilter, now: number): Promise<Map<string, ListedRun>> {
    const remote = this.remote!;
    const out = new Map<string, ListedRun>();
    const alertOf = (run: string) => this.held.alertStateOf(run, now, filter.windowMs, filter.stallMs);
    const held = (row: { run: string }): boolean => {
      const live = this.held.held(row.run);
      if (!live?.verdict) return false;
      out.set(row.run, { verdict: live.verdict, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert: alertOf(row.run), enteredAt: live.enteredAt ?? live.updatedAt });
      return true;
    };
    const unlisted: StoredListRow[] = [];
    const cache = this.parsedListed;
    const used = new Map<string, { text: string; parsed: NonNullable<ReturnType<typeof parseListed>> }>();
    for (const row of rows) {
      if (held(row)) continue;
      // The owner's evaluation, when it is the one of the verdict state stored with it (an older build writes the
      // verdict alone: then it is evaluated here). Parsed once per text: the same text parses to the same verdict.
      const text = row.listed ?? null;
      const cached = text === null ? undefined : cache.get(row.run);
      const l = cached !== undefined && cached.text === text ? cached.parsed : parseListed(row.run, text);
      if (l && text !== null) used.set(row.run, cached?.parsed === l ? cached : { text, parsed: l });
      if (l && l.verdict.verdict === row.verdict && (row.settled === undefined || l.verdict.settled === row.settled)) {
        // The owner's first receipt time (as its own list shows it), else the store's first arrival.
        out.set(row.run, { verdict: l.verdict, updatedAt: row.updatedAt, firstAt: l.firstAt ?? row.firstAt, alert: alertOf(row.run) });
      } else unlisted.push(row);
    }
    this.parsedListed = used;
    if (remote.loadMany) {
      // The runs to evaluate here, LIST_GROUP at a time: a few queries per group, not one per run (issue 32); the
      // next group is read while this one is evaluated.
      const groups: StoredListRow[][] = [];
      for (let i = 0; i < unlisted.length; i += LIST_GROUP) groups.push(unlisted.slice(i, i + LIST_GROUP));
      let next = groups.length ? remote.loadMany(groups[0].map((row) => row.run)) : null;
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g];
        const loaded = await next!;
        next = g + 1 < groups.length ? remote.loadMany(groups[g + 1].map((row) => row.run)) : null;
        next?.catch(() => {}); // awaited next turn; never an unhandled rejection meanwhile
        for (const row of group) {
          if (held(row)) continue; // it became live here while the store answered
          const d = loaded.get(row.run);
          if (d) out.set(row.run, { verdict: this.pinner.evaluateDetached(d, now), updatedAt: d.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
        }
      }
    } else {
      for (const row of unlisted) {
        if (held(row)) continue;
        const r = await this.fetch(row.run, now);
        if (r) out.set(row.run, { verdict: r.verdict, updatedAt: r.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
      }
    }
    return out;
  }
}

/** Whether a listed run passes the list's filter: its verdict and pinned contract as listed, its alert state. */
function passes(r: ListedRun, filter: ListFilter): boolean {
  return (!filter.verdict || r.verdict.verdict === filter.verdict) && (!filter.contract || r.verdict.pin?.contract === filter.contract) && matchesAlertFilter(r.alert, filter);
}
