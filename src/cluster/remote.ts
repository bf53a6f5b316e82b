/**
 * Runs other instances of the cluster hold, read from the shared store for the API, the web view and `gate`: the
 * verdict is a pure function of (pin, receipts, now), so any instance evaluates any run (AuditEngine.fetch). Reads
 * are cached briefly (a second by default, bounded), so a dashboard or a long-polling gate does not read the same
 * run on every request.
 */
import type { DetachedRun, RemoteRuns } from '../audit/engine.js';
import type { StoredListFilter, StoredListRow } from '../audit/store.js';
import type { PgStore } from '../store/pg-store.js';
import type { PinRecord } from '../store/index.js';
import type { AckRecord, Verdict } from '../core/types.js';

export class SharedStoreRuns implements RemoteRuns {
  private readonly cache = new Map<string, { at: number; run: DetachedRun | null }>();

  constructor(
    private readonly pg: PgStore,
    private readonly opts: {
      cacheMs?: number;
      maxCached?: number;
      clock?: () => number;
      /** Runs held here whose verdict state or pin is not written yet (ClusterEngineStore.unwritten). */
      unwritten?: () => readonly string[];
    } = {},
  ) {}

  async load(run: string, maxAgeMs = this.opts.cacheMs ?? 1000): Promise<DetachedRun | null> {
    const now = (this.opts.clock ?? Date.now)();
    const hit = this.cache.get(run);
    if (hit && now - hit.at < maxAgeMs) return hit.run;
    const [row, receipts] = await Promise.all([this.pg.getRun(run), this.pg.runReceipts(run)]);
    let detached: DetachedRun | null = null;
    if (row && receipts.length > 0) {
      const pin = row.pin && row.contractHash ? { pin: row.pin, contractHash: row.contractHash } : null;
      const contractContent = pin ? await this.pg.getContractContent(pin.contractHash) : null;
      detached = { run, pin, contractContent, receipts, updatedAt: row.updatedAt };
    }
    if (this.cache.size >= (this.opts.maxCached ?? 1000)) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(run, { at: now, run: detached });
    return detached;
  }

  async ack(run: string): Promise<AckRecord | null> {
    return this.pg.getAck(run);
  }

  /**
   * Pinned contract contents by hash: a hash names one content for ever, so what was read once is kept (bounded: a
   * deployment pins a handful of contract versions).
   */
  private readonly contents = new Map<string, string>();

  /**
   * Many runs for the list views: one query (their rows, pins and receipts, one row per run), plus one for pinned
   * contracts not read before.
   */
  async loadMany(runs: readonly string[]): Promise<Map<string, DetachedRun>> {
    const out = new Map<string, DetachedRun>();
    if (runs.length === 0) return out;
    const rows = await this.pg.runsWithReceipts(runs);
    const missing = [...new Set(rows.flatMap(({ row: r }) => (r.pin && r.contractHash && !this.contents.has(r.contractHash) ? [r.contractHash] : [])))];
    if (missing.length) {
      const read = await this.pg.contractContents(missing);
      if (this.contents.size + read.size > 10_000) this.contents.clear();
      for (const [hash, content] of read) this.contents.set(hash, content);
    }
    for (const { row, receipts } of rows) {
      if (receipts.length === 0) continue;
      const pin = row.pin && row.contractHash ? { pin: row.pin, contractHash: row.contractHash } : null;
      out.set(row.run, { run: row.run, pin, contractContent: pin ? (this.contents.get(pin.contractHash) ?? null) : null, receipts, updatedAt: row.updatedAt });
    }
    return out;
  }

  async pin(run: string): Promise<{ record: PinRecord; contractContent: string | null } | null> {
    const record = await this.pg.getPin(run);
    if (!record) return null;
    return { record, contractContent: await this.pg.getContractContent(record.contractHash) };
  }

  counts(filter: { contract?: string }): Promise<Record<string, number>> {
    return this.pg.verdictCounts(filter);
  }

  /**
   * A page of the runs of every partition with the verdict their owner last wrote, for the list views (one query;
   * never evaluated): its order and cursor are the store's (first_at, run), whoever holds each run now. Filtered on a
   * verdict or contract, the runs held here whose verdict or pin is not written yet are read whatever is stored (the
   * caller filters on what memory holds).
   */
  async list(filter: StoredListFilter): Promise<StoredListRow[]> {
    const unwritten = filter.verdict !== undefined || filter.contract !== undefined ? this.opts.unwritten?.() : undefined;
    return this.pg.listRuns(unwritten?.length ? { ...filter, orRuns: unwritten } : filter);
  }
}
