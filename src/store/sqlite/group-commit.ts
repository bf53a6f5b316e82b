/**
 * The embedded store's group commit: `append` queues its receipts; the queue is committed as one transaction when it
 * holds `groupCommitMaxBatch` receipts, or `groupCommitMaxDelayMs` after the first queued append (0: at the end of
 * the current event-loop turn, i.e. everything queued by callers woken in the same turn rides together).
 * better-sqlite3 is synchronous, so while one group commits the event loop is busy and new requests pile up
 * for the next group: the batching follows the load without a fixed wait.
 *
 * Pins, verdict states and contract content ride in the same queue: they are visible to reads at once and
 * durable no later than the next acknowledged append. A run's first pin handed to `append` itself (with its
 * contract's content) is written in the transaction of that append's receipts: durable exactly when they are.
 */
import type { Pin, Verdict } from '../../core/types.js';
import { sharedPin } from '../../core/registry.js';
import { StoreCommitError, emptyResult, type AppendPin, type AppendResult, type PinRecord, type SpanLogEntry, type StoredReceipt } from '../types.js';
import { groupTransaction, type CommittedGroup, type ContractRow, type QueuedAppend, type QueuedGroup, type VerdictState } from './commit.js';
import type { SqliteShared } from './statements.js';
import type { WalSync } from './wal-sync.js';

/** GroupCommit.flushTimer while a group waits for its flush gate. */
const GATED = 'gated' as const;

export interface GroupCommitOptions {
  groupCommit?: boolean;
  groupCommitMaxDelayMs?: number;
  groupCommitMaxBatch?: number;
  retryDelayMs?: number;
  onCommit?: (seconds: number, receipts: number) => void;
  /**
   * The WAL's fsync off the event loop (src/store/sqlite/wal-sync.ts): a group's appends are answered once an
   * fdatasync begun after its commit returns. Null: no per-commit sync (`synchronous: 'NORMAL'`).
   */
  walSync?: WalSync | null;
}

export class GroupCommit {
  private readonly groupCommit: boolean;
  private readonly maxDelayMs: number;
  private readonly maxBatch: number;
  private readonly retryDelayMs: number;
  private readonly onCommit: ((seconds: number, receipts: number) => void) | undefined;
  private readonly walSync: WalSync | null;
  /** Resolves once every commit so far is synced (the sync begun after the latest commit). */
  private synced: Promise<void> = Promise.resolve();

  private queue: QueuedAppend[] = [];
  private queuedReceipts = 0;
  private pendingPins = new Map<string, PinRecord>();
  private pendingVerdicts = new Map<string, VerdictState>();
  private pendingContracts = new Map<string, ContractRow>();
  /** Hashes whose content is committed (content under a hash never changes and is never deleted). */
  private readonly storedContracts = new Set<string>();
  /** The group's scheduled flush: a timer, an immediate, or GATED (waiting for the flush gate's promise). */
  private flushTimer: { timeout: NodeJS.Timeout } | { immediate: NodeJS.Immediate } | typeof GATED | null = null;
  /** See setFlushGate. */
  private flushGate: (() => Promise<void> | null) | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private isHealthy = true;
  private commitCount = 0;
  private failedCommitCount = 0;
  private readonly commitGroup: (group: QueuedGroup) => CommittedGroup;
  /**
   * Runs whose `runs` row a commit created and that have no pin since: getPin answers null for them without a
   * query (a pin row is only ever written for a run that already has its row, by setPin, which forgets the run
   * here). A cache: bounded, cleared when full; a run not in it is looked up as before.
   */
  private readonly pinless = new Set<string>();

  constructor(private readonly shared: SqliteShared, opts: GroupCommitOptions) {
    this.groupCommit = opts.groupCommit ?? true;
    this.maxDelayMs = Math.max(0, opts.groupCommitMaxDelayMs ?? 0);
    this.maxBatch = Math.max(1, opts.groupCommitMaxBatch ?? 2000);
    this.retryDelayMs = Math.max(1, opts.retryDelayMs ?? 1000);
    this.onCommit = opts.onCommit;
    this.walSync = opts.walSync ?? null;
    this.commitGroup = groupTransaction(shared.db, shared.stmt, this.storedContracts);
  }

  /**
   * Stores receipts. Resolves only after they are durably committed; concurrent calls share one transaction.
   * Rejects with StoreCommitError (nothing of the group stored) when the commit fails, e.g. disk full.
   */
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    if (this.shared.closed) return Promise.reject(new Error('receipt store is closed'));
    if (items.length === 0 && !spanLog?.length) return Promise.resolve(emptyResult());
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ items: [...items], spanLog: spanLog?.length ? [...spanLog] : undefined, pins: pins?.length ? pins : undefined, resolve, reject });
      this.queuedReceipts += items.length;
      if (!this.groupCommit || this.queuedReceipts >= this.maxBatch) this.flush();
      else this.scheduleFlush();
    });
  }

  /** Resolves once everything queued so far (receipts, pins, verdict states, contracts) is committed and synced. */
  sync(): Promise<void> {
    const hold = this.shared.writeHold;
    if (hold) return hold.then(() => this.sync());
    const failure = this.flush();
    return failure === null ? this.synced : Promise.reject(failure);
  }

  /** Pins a run; the first pin written wins and is never changed. Returns the pin in force. */
  setPin(run: string, pin: Pin, contractHash: string): PinRecord {
    const existing = this.getPin(run);
    if (existing !== null) return existing;
    const record: PinRecord = { pin: sharedPin(pin.contract, pin.version, pin.phase), contractHash };
    this.pendingPins.set(run, record);
    this.pinless.delete(run);
    this.scheduleFlush();
    return record;
  }

  getPin(run: string): PinRecord | null {
    const pending = this.pendingPins.get(run);
    if (pending !== undefined) return pending;
    if (this.pinless.has(run)) return null;
    const row = this.shared.stmt.getPin.get(run);
    if (row === undefined) return null;
    return {
      pin: sharedPin(row.contract as string, row.version as string, row.phase as string),
      contractHash: row.contract_hash as string,
    };
  }

  /** Records a run's latest verdict; written with the next group (the latest state per run wins). */
  setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number): void {
    this.pendingVerdicts.set(run, { verdict, settled, updatedAt });
    this.scheduleFlush();
  }

  /** A run's verdict state set but not committed yet, if any. */
  pendingVerdict(run: string): VerdictState | undefined {
    return this.pendingVerdicts.get(run);
  }

  /** Stores pinned contract content by its hash (first write wins; a hash names one content). */
  putContractContent(hash: string, contract: string, version: string, content: string): void {
    if (this.storedContracts.has(hash) || this.pendingContracts.has(hash)) return;
    if (this.shared.stmt.getContract.get(hash) !== undefined) {
      this.storedContracts.add(hash);
      return;
    }
    this.pendingContracts.set(hash, { hash, contract, version, content });
    this.scheduleFlush();
  }

  getContractContent(hash: string): string | null {
    return this.pendingContracts.get(hash)?.content ?? this.shared.stmt.getContract.get(hash)?.content ?? null;
  }

  /** False after a failed commit, until a later commit succeeds. */
  healthy(): boolean {
    return this.isHealthy;
  }

  /** Transactions committed and failed by group commit since open (for metrics: receipts per commit). */
  commitStats(): { commits: number; failedCommits: number; walSyncs: number } {
    return { commits: this.commitCount, failedCommits: this.failedCommitCount, walSyncs: this.walSync?.syncs ?? 0 };
  }

  /**
   * A group's commit, once its timer fires, may wait for work already under way whose appends should ride in the
   * same transaction: `gate` returns a promise of that work (or null: nothing to wait for). serve --workers gives
   * the bodies being decoded in worker threads at that moment: their requests' receipts join this group instead
   * of each decode that finishes on its own turn getting a commit (and an fsync) of its own. Bounded: the gate is
   * asked once per group, and its promise must settle when that work does (success or failure) — a wait of at
   * most one decode; appends that arrive meanwhile join the group. A batch that fills (`groupCommitMaxBatch`),
   * `sync` and `close` commit at once as before. Nothing is acknowledged before its commit, as ever.
   */
  setFlushGate(gate: (() => Promise<void> | null) | null): void {
    this.flushGate = gate;
  }

  /** The last commit before close (appends still queued are rejected if it fails); no retry after it. */
  closing(): void {
    this.flush(true);
    this.walSync?.closeSync();
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private hasPendingWrites(): boolean {
    return this.queue.length > 0 || this.pendingPins.size > 0 || this.pendingVerdicts.size > 0 || this.pendingContracts.size > 0;
  }

  private scheduleFlush(): void {
    if (this.flushTimer !== null || this.shared.closed) return;
    if (!this.groupCommit && this.queue.length > 0) {
      this.flush();
      return;
    }
    this.flushTimer = this.maxDelayMs === 0
      ? { immediate: setImmediate(() => this.gatedFlush()) }
      : { timeout: setTimeout(() => this.gatedFlush(), this.maxDelayMs) };
  }

  private gatedFlush(): void {
    const waiting = this.flushGate?.() ?? null;
    if (waiting === null) {
      this.flush();
      return;
    }
    // Still scheduled: later appends join without scheduling another flush; flush() clears it.
    this.flushTimer = GATED;
    const go = () => {
      if (this.flushTimer !== GATED) return; // flushed meanwhile (a full batch, sync, close)
      // At the end of the turn in which the awaited work finished: its requests' appends are queued by then.
      this.flushTimer = { immediate: setImmediate(() => this.flush()) };
    };
    waiting.then(go, go);
  }

  private cancelFlushTimer(): void {
    const t = this.flushTimer;
    this.flushTimer = null;
    // Each kind with its own clear: clearImmediate given a Timeout would corrupt the immediate queue's counts.
    if (t === null || t === GATED) return;
    if ('immediate' in t) clearImmediate(t.immediate);
    else clearTimeout(t.timeout);
  }

  /**
   * One transaction for everything queued; answers every append in it. Returns the failure, if any. While the
   * checkpoint worker holds the write lock (`writeHold`, the scrub) the group waits for it, queued, unless `force`
   * (the last commit at close, which may wait in SQLite's busy handler).
   */
  flush(force = false): StoreCommitError | null {
    this.cancelFlushTimer();
    if (this.shared.closed || !this.hasPendingWrites()) return null;
    const hold = this.shared.writeHold;
    if (hold && !force) {
      if (this.flushTimer === null) {
        this.flushTimer = GATED;
        void hold.then(() => {
          if (this.flushTimer !== GATED) return;
          this.flushTimer = null;
          this.scheduleFlush();
        });
      }
      return null;
    }
    const appends = this.queue;
    this.queue = [];
    this.queuedReceipts = 0;
    const group: QueuedGroup = {
      appends,
      pins: [...this.pendingPins.entries()],
      verdicts: [...this.pendingVerdicts.entries()],
      contracts: [...this.pendingContracts.values()],
    };
    let committed: CommittedGroup;
    const started = process.hrtime.bigint();
    try {
      committed = this.commitGroup(group);
    } catch (err) {
      this.isHealthy = false;
      this.failedCommitCount++;
      const error = new StoreCommitError(err);
      for (const queued of appends) queued.reject(error);
      this.scheduleRetry();
      return error;
    }
    this.isHealthy = true;
    this.commitCount++;
    if (this.onCommit) {
      let n = 0;
      for (const a of appends) n += a.items.length;
      this.onCommit(Number(process.hrtime.bigint() - started) / 1e9, n);
    }
    for (const c of group.contracts) this.storedContracts.add(c.hash);
    for (const a of appends) if (a.pins) for (const p of a.pins) this.storedContracts.add(p.contractHash);
    this.pendingPins = new Map();
    this.pendingVerdicts = new Map();
    this.pendingContracts = new Map();
    this.shared.rows.runs += committed.newRuns;
    this.notePinless(group, committed.created);
    for (const result of committed.results) this.shared.rows.receipts += result.accepted + result.conflicts;
    const answer = (): void => committed.results.forEach((result, i) => appends[i].resolve(result));
    if (this.walSync === null) {
      answer();
      return null;
    }
    // Answered once the WAL is on the device, in the thread pool; reads already see the group (it is committed).
    const synced = this.walSync.after();
    this.synced = synced;
    synced.then(answer, (err: unknown) => {
      this.isHealthy = false;
      this.failedCommitCount++;
      const error = new StoreCommitError(err);
      for (const queued of appends) queued.reject(error);
    });
    return null;
  }

  /** After a commit: a run it created has no pin unless the commit wrote one (set before, or carried by an append). */
  private notePinless(group: QueuedGroup, created: readonly string[]): void {
    if (this.pinless.size + created.length > 65_536) this.pinless.clear();
    let pinned: Set<string> | null = null;
    for (const a of group.appends) {
      if (a.pins) for (const p of a.pins) (pinned ??= new Set()).add(p.run);
    }
    if (pinned) for (const run of pinned) this.pinless.delete(run);
    if (created.length) for (const [run] of group.pins) (pinned ??= new Set()).add(run);
    for (const run of created) if (!pinned?.has(run)) this.pinless.add(run);
  }

  /** Pins, verdict states and contracts of a failed commit stay queued and are retried. */
  private scheduleRetry(): void {
    if (this.retryTimer !== null || this.shared.closed) return;
    if (this.pendingPins.size + this.pendingVerdicts.size + this.pendingContracts.size === 0) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.flush();
    }, this.retryDelayMs);
    this.retryTimer.unref();
  }
}
