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
import type { RemoteRuns } from './store.js';

export type RunView = { verdict: RunVerdict; receipts: Receipt[]; updatedAt: number; shadow?: ShadowVerdict[] };

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
   * The stored evaluations the last list parsed, by run (the text and what it parsed to): a list repeated by a
   * dashboard parses only the runs whose owners wrote something new since. Bounded by one list (at most 10,000 runs):
   * each list keeps only the entries it used.
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
    return { verdict: this.pinner.evaluateDetached(detached, now), receipts: detached.receipts, updatedAt: detached.updatedAt };
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
   * Cluster mode: before the run-scope rule checks run-level receipts of runs another instance holds, read their
   * stored pins (scopeContract then judges them by the pinned contract, as the owner would).
   */
  async prefetchPins(runs: Iterable<string>): Promise<void> {
    const remote = this.remote;
    if (!remote) return;
    const wanted = [...new Set(runs)].filter((r) => isRunId(r) && !this.held.held(r) && !this.pinner.hasForeign(r));
    if (remote.loadMany) {
      // A group of runs per query, one group at a time: 20,000 run.starts in one post hold one connection, not the pool.
      for (let i = 0; i < wanted.length; i += LIST_GROUP) {
        const loaded = await remote.loadMany(wanted.slice(i, i + LIST_GROUP));
        for (const d of loaded.values()) this.pinner.rememberForeign(d.run, d.pin, d.contractContent, () => d.receipts);
      }
      return;
    }
    await Promise.all(
      wanted.map(async (run) => {
        const p = await remote.pin(run);
        if (p) return this.pinner.rememberForeign(run, p.record, p.contractContent, () => []);
        // Not pinned yet (its owner writes the pin just after the first evaluation): the pin its stored run.start names.
        const d = await remote.load(run);
        if (d) this.pinner.rememberForeign(run, null, null, () => d.receipts);
      }),
    );
  }

  /**
   * Runs for the list views: the live runs here and (cluster mode) the runs of the whole cluster from the shared
   * store, newest first. A run another instance holds is listed as its owner last wrote it (the verdict with its
   * findings, runs.listed: one query for the whole list, nothing evaluated here); one whose owner has not written
   * that yet (new, or stored by an older build) is read and evaluated now.
   */
  async listAll(filter: ListFilter, now: number): Promise<ListedRun[]> {
    if (!this.remote) return this.held.list({ ...filter, now });
    const limit = filter.limit ?? 100;
    const remote = this.remote;
    const rows = await remote.list({ verdict: filter.verdict, contract: filter.contract, limit, oldest: filter.oldest });
    const out: ListedRun[] = [];
    const alertOf = (run: string) => this.held.alertStateOf(run, now, filter.windowMs, filter.stallMs);
    const held = (row: { run: string }): boolean => {
      const live = this.held.held(row.run);
      if (!live?.verdict) return false;
      out.push({ verdict: live.verdict, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert: alertOf(row.run), enteredAt: live.enteredAt ?? live.updatedAt });
      return true;
    };
    const unlisted: typeof rows = [];
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
        out.push({ verdict: l.verdict, updatedAt: row.updatedAt, firstAt: l.firstAt ?? row.firstAt, alert: alertOf(row.run) });
      } else unlisted.push(row);
    }
    this.parsedListed = used;
    if (remote.loadMany) {
      // The runs to evaluate here, LIST_GROUP at a time: a few queries per group, not one per run (issue 32); the
      // next group is read while this one is evaluated.
      const groups: (typeof rows)[] = [];
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
          if (d) out.push({ verdict: this.pinner.evaluateDetached(d, now), updatedAt: d.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
        }
      }
    } else {
      for (const row of unlisted) {
        if (held(row)) continue;
        const r = await this.fetch(row.run, now);
        if (r) out.push({ verdict: r.verdict, updatedAt: r.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
      }
    }
    // The runs of partitions listed from memory (the shared store left them out): the held runs' own list, less any
    // run the store listed too (one taken over while it answered).
    const local = this.held.list({ ...filter, limit, now });
    if (local.length) {
      const seen = new Set<string>();
      for (const row of rows) seen.add(row.run);
      for (const r of local) if (!seen.has(r.verdict.run)) out.push(r);
    }
    const filtered = out.filter((r) => (!filter.verdict || r.verdict.verdict === filter.verdict) && (!filter.contract || r.verdict.pin?.contract === filter.contract) && matchesAlertFilter(r.alert, filter));
    filtered.sort(listOrder(filter));
    return filtered.slice(0, limit);
  }
}
