/**
 * The shared receipt store on PostgreSQL (issue 18; docs/postgres.md): any number of server instances append to
 * and read from one database. Same outcomes as the embedded SQLite store (src/store/sqlite/): a redelivery with
 * equal canonical content is a duplicate, a different content under a stored (run, event) is a new variant (a
 * conflict), and an append resolves only after its transaction's COMMIT returned.
 *
 * A facade over its parts, one per job, sharing one pool, the fence and the health (PgShared, shared.ts):
 *   group-commit.ts  appends committed in groups under the ordering lock (append-sql.ts the statement, decide.ts the
 *                    decided path for redeliveries and conflicts)
 *   run-reads.ts     a run's receipts and rows, the run lists
 *   pins.ts          pins and contract content
 *   run-rows.ts      verdict states (fenced), acknowledgements, the retention prune (fenced, under the ordering lock)
 *   span-log.ts      the span log: adoption, forwarding, fenced deletes, the prune
 *   fence.ts         the fence check in the owner writes: the hook a cluster gives the store (fenceWith)
 * port.ts puts it behind the storage port (src/store/port.ts).
 *
 * A store, not a cluster: the leases, the heartbeat, the fence's epochs and the tail an owner folds are the cluster's
 * (src/cluster/: leases.ts, heartbeat.ts, fence.ts, tail.ts), which run their statements on this store's pool and
 * tell it what it needs of them: the fence its owner writes are checked against (fenceWith), and a heartbeat's outcome
 * (heartbeatLanded, heartbeatFailed, beatOverdue, replacePool), which readiness and the appends follow. Fencing: an
 * owner's writes carry the epochs of the fence given and change only rows of partitions whose lease is still this
 * instance's, at that epoch and unexpired, checked by the database in the writing statement (fence.ts).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { AckRecord, Pin, Receipt, Verdict } from '../../core/types.js';
import { StoreCommitError, type AppendPin, type AppendResult, type LiveRun, type PinRecord, type PrunableRun, type SpanLogEntry, type StoredReceipt } from '../types.js';
import { DEFAULT_PARTITIONS, migrate } from './schema.js';
import type { Slicer } from '../span-log-prune.js';
import { NO_LEASES, type OwnerFence } from './fence.js';
import { PgGroupCommit } from './group-commit.js';
import { partitionOf } from './partition.js';
import { PgPins } from './pins.js';
import type { AckSince, ListedRun } from './rows.js';
import { PgRunReads, type ListRunsFilter } from './run-reads.js';
import { PgRunRows, type VerdictWriteObserver } from './run-rows.js';
import { newPool, noop, type PgShared, type PgStoreOptions } from './shared.js';
import { PgSpanLog } from './span-log.js';

export class PgStore {
  private readonly s: PgShared;
  private readonly commits: PgGroupCommit;
  private readonly reads: PgRunReads;
  private readonly pins: PgPins;
  private readonly rows: PgRunRows;
  private readonly log: PgSpanLog;
  private readonly closeWork: (() => Promise<void>)[] = [];

  private constructor(pool: pg.Pool, url: string, partitions: number, opts: PgStoreOptions) {
    this.s = {
      pool,
      url,
      opts,
      instance: opts.instance,
      life: randomUUID(),
      partitions,
      fence: NO_LEASES,
      fencedWrites: 0,
      health: { ok: true, beatDown: false },
      closing: null,
      partitionOf: (key) => partitionOf(key, partitions),
    };
    this.commits = new PgGroupCommit(this.s);
    this.reads = new PgRunReads(this.s);
    this.pins = new PgPins(this.s);
    this.rows = new PgRunRows(this.s);
    this.log = new PgSpanLog(this.s);
  }

  /** Connects, creates or migrates the schema (docs/postgres.md) and returns the store. */
  static async open(url: string, opts: PgStoreOptions): Promise<PgStore> {
    if (typeof opts.instance !== 'string' || opts.instance.length === 0) throw new Error('postgres store: an instance id is required');
    const pool = newPool(url, opts);
    try {
      // On a connection of its own, without the statements' deadlines: a migration (an index over a large table) may
      // take longer.
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, keepAlive: true, application_name: `topology-audit/${opts.instance}`.slice(0, 63) });
      client.on('error', noop);
      let migrated: { partitions: number };
      try {
        await client.connect();
        migrated = await migrate(client, opts.partitions ?? DEFAULT_PARTITIONS);
      } finally {
        await client.end().catch(noop);
      }
      return new PgStore(pool, url, migrated.partitions, opts);
    } catch (err) {
      await pool.end().catch(noop);
      throw err;
    }
  }

  /** This server instance's id: recorded as `origin` of its rows and as lease owner. */
  get instance(): string {
    return this.s.instance;
  }

  /** Hash partitions of this database's schema. */
  get partitions(): number {
    return this.s.partitions;
  }

  /** This process's life (one per open): span records it holds are its own; records of earlier lives are adopted. */
  get life(): string {
    return this.s.life;
  }

  /** Prune only held span records of partitions whose lease this store holds (the coordinator, `--span-routing any`). */
  get pruneHeldOfOwnedOnly(): boolean {
    return this.log.pruneHeldOfOwnedOnly;
  }

  set pruneHeldOfOwnedOnly(v: boolean) {
    this.log.pruneHeldOfOwnedOnly = v;
  }

  /**
   * Told of every verdict-state write (setVerdictStates): `taken` when its runs are sent (returns a token), `landed`
   * with the runs the database wrote (the others were refused by the fence), or null when the write failed. The
   * coordinator counts a run's verdict transitions once they are in the shared table (metrics sum to the truth over a
   * takeover).
   */
  get onVerdictWrite(): VerdictWriteObserver | null {
    return this.rows.onVerdictWrite;
  }

  set onVerdictWrite(observer: VerdictWriteObserver | null) {
    this.rows.onVerdictWrite = observer;
  }

  /** The hash partition of a run (or trace) id in this database. */
  partitionOf(key: string): number {
    return this.s.partitionOf(key);
  }

  /** False after a failed commit, until a later commit succeeds; and while the last heartbeat failed. */
  healthy(): boolean {
    return this.s.health.ok && !this.s.health.beatDown;
  }

  /** Group commits landed and failed since open (receipts per commit, for metrics). */
  commitStats(): { commits: number; failedCommits: number } {
    return this.commits.commitStats();
  }

  /** Owner writes (rows) the database refused since open because this instance no longer held the lease (fencing). */
  get fencedWrites(): number {
    return this.s.fencedWrites;
  }

  // What a cluster (src/cluster/) gives the store and tells it
  /** The leases owner writes are checked against from now on (the cluster's fence: src/cluster/fence.ts). */
  fenceWith(fence: OwnerFence): void {
    this.s.fence = fence;
  }

  /**
   * The pool the store's statements run on, and the cluster's coordination statements beside them (leases, the tail);
   * replaced by replacePool, so read it for every statement.
   */
  get pool(): pg.Pool {
    return this.s.pool;
  }

  /** A connection of its own to this store's database (the cluster's heartbeat: it never waits for a pool slot). */
  openClient(config: Omit<pg.ClientConfig, 'connectionString'>): pg.Client {
    return new pg.Client({ ...config, connectionString: this.s.url });
  }

  /**
   * Swaps the pool for a new one (a heartbeat got no answer: every connection of the pool may be dead without a
   * reset); the old one closes once its connections are released (by answer or deadline). False once closing.
   */
  replacePool(): boolean {
    if (this.s.closing !== null) return false;
    const old = this.s.pool;
    this.s.pool = newPool(this.s.url, this.s.opts);
    old.end().catch(noop);
    return true;
  }

  /** A heartbeat committed: the store can commit again (readiness follows the store with no traffic too, issue 32). */
  heartbeatLanded(): void {
    this.s.health.ok = true;
  }

  /** A heartbeat failed: not healthy until a commit or a heartbeat lands. */
  heartbeatFailed(): void {
    this.s.health.ok = false;
  }

  /** A renewal (the cluster's `beat`) landed: healthy, and appends are taken again. */
  beatLanded(): void {
    this.s.health.ok = true;
    this.s.health.beatDown = false;
  }

  /**
   * The cluster's renewal failed or is overdue (a hung statement ahead of it): not ready, the appends waiting for a
   * commit refused now (nothing was acknowledged) and new ones at once, until a renewal lands (beatLanded).
   */
  beatOverdue(): void {
    if (this.s.health.beatDown) return;
    this.s.health.ok = false;
    this.s.health.beatDown = true;
    this.commits.rejectQueued(new StoreCommitError(new Error('the database did not answer the heartbeat in time')));
  }

  /** The last renewal failed or is overdue (beatOverdue), and none landed since. */
  get beatDown(): boolean {
    return this.s.health.beatDown;
  }

  // The group commit (group-commit.ts)
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    return this.commits.append(items, spanLog, pins);
  }

  sync(): Promise<void> {
    return this.commits.sync();
  }

  // Reads (run-reads.ts)
  runReceipts(run: string): Promise<Receipt[]> {
    return this.reads.runReceipts(run);
  }

  receiptsOfRuns(runs: readonly string[]): Promise<Map<string, Receipt[]>> {
    return this.reads.receiptsOfRuns(runs);
  }

  verdictCounts(filter: { contract?: string }): Promise<Record<string, number>> {
    return this.reads.verdictCounts(filter);
  }

  getRun(run: string): Promise<LiveRun | null> {
    return this.reads.getRun(run);
  }

  getRuns(runs: readonly string[]): Promise<LiveRun[]> {
    return this.reads.getRuns(runs);
  }

  runsWithReceipts(runs: readonly string[]): Promise<{ row: LiveRun; receipts: Receipt[] }[]> {
    return this.reads.runsWithReceipts(runs);
  }

  contractContents(hashes: readonly string[]): Promise<Map<string, string>> {
    return this.reads.contractContents(hashes);
  }

  partitionRuns(parts: readonly number[], changeable = false): Promise<LiveRun[]> {
    return this.reads.partitionRuns(parts, changeable);
  }

  settledCounts(parts: readonly number[]): Promise<{ part: number; contract: string; version: string; verdict: Verdict; runs: number }[]> {
    return this.reads.settledCounts(parts);
  }

  listRuns(filter: ListRunsFilter): Promise<ListedRun[]> {
    return this.reads.listRuns(filter);
  }

  knownRuns(runs: readonly string[]): Promise<Set<string>> {
    return this.reads.knownRuns(runs);
  }

  counts(): Promise<{ receipts: number; runs: number }> {
    return this.reads.counts();
  }

  // Pins and contract content (pins.ts)
  getPin(run: string): Promise<PinRecord | null> {
    return this.pins.getPin(run);
  }

  setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord> {
    return this.pins.setPin(run, pin, contractHash);
  }

  setPins(rows: readonly { run: string; pin: Pin; contractHash: string }[]): Promise<Map<string, PinRecord>> {
    return this.pins.setPins(rows);
  }

  putContractContent(hash: string, contract: string, version: string, content: string): Promise<void> {
    return this.pins.putContractContent(hash, contract, version, content);
  }

  getContractContent(hash: string): Promise<string | null> {
    return this.pins.getContractContent(hash);
  }

  // Verdict states, acknowledgements and retention (run-rows.ts)
  setVerdictStates(rows: readonly { run: string; verdict: Verdict; settled: boolean; updatedAt: number; listed?: string | null }[]): Promise<number> {
    return this.rows.setVerdictStates(rows);
  }

  putAck(run: string, ack: AckRecord): Promise<void> {
    return this.rows.putAck(run, ack);
  }

  getAck(run: string): Promise<AckRecord | null> {
    return this.rows.getAck(run);
  }

  acksSince(afterSeq: number, parts: readonly number[]): Promise<AckSince[]> {
    return this.rows.acksSince(afterSeq, parts);
  }

  /** `pruned`: told each committed batch's runs (with their verdict and pinned contract). */
  prune(olderThanMs: number, now: number, parts: readonly number[], pruned?: (runs: readonly PrunableRun[]) => void): Promise<number> {
    return this.rows.prune(olderThanMs, now, parts, pruned);
  }

  // The span log (span-log.ts)
  spanLog(parts: readonly number[], origin?: string): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    return this.log.spanLog(parts, origin);
  }

  orphanSpanLog(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    return this.log.orphanSpanLog(parts, afterSeq, limit, anyHolder);
  }

  orphanSpanLogPage(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ entries: { seq: number; traceId: string; origin: string; body: string }[]; head: number; live: string }> {
    return this.log.orphanSpanLogPage(parts, afterSeq, limit, anyHolder);
  }

  forwardedSpanLog(parts: readonly number[], limit: number): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    return this.log.forwardedSpanLog(parts, limit);
  }

  deleteSpanLog(seqs: readonly number[]): Promise<number> {
    return this.log.deleteSpanLog(seqs);
  }

  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, origin: string, slicer?: Slicer): Promise<number> {
    return this.log.pruneSpanLog(before, stillPending, origin, slicer);
  }

  /**
   * Commits what is queued, runs the work given to beforeClose (a cluster leaves: gives up this instance's leases and
   * liveness, so others take over at once: src/cluster/coordination.ts), and closes the pool. Appends after close are
   * rejected.
   */
  close(): Promise<void> {
    if (this.s.closing === null) this.s.closing = this.shutdown();
    return this.s.closing;
  }

  private async shutdown(): Promise<void> {
    await this.commits.sync().catch(noop);
    for (const work of this.closeWork.splice(0)) await work().catch(noop);
    await this.s.pool.end().catch(noop);
  }

  /** Work to do on this store's pool when it closes, after the last commit and before the pool ends. */
  beforeClose(work: () => Promise<void>): void {
    this.closeWork.push(work);
  }
}
