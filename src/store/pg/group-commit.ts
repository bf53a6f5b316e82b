/**
 * The shared store's group commit: appends queued in the same event-loop turn, and those arriving while a commit is
 * in flight, are committed together in one transaction; at most one commit per store is in flight. A failed commit
 * rejects every append of its group with StoreCommitError (nothing of the group is stored or acknowledged).
 *
 * Ordering lock: every append transaction first takes `pg_advisory_xact_lock(LOG_LOCK)` and holds it to COMMIT, so
 * across all instances `seq` values are assigned and become visible in commit order: a reader tailing `seq > X`
 * never skips a row that commits later with a lower seq. (Without it, two instances' transactions could commit in the
 * opposite order of their sequence values.) Inside the lock a group of new receipts is inserted with one batched
 * statement (src/store/pg/append-sql.ts); when a receipt was stored before (a retry or a conflict), the stored
 * variants of the group's keys are read once instead and every delivery is decided in input order
 * (src/store/pg/decide.ts), so outcomes and `seq` order are the SQLite store's.
 */
import type { PoolClient } from 'pg';
import { sharedPin } from '../../core/registry.js';
import { compactReceiptJson } from '../../core/canonical.js';
import { StoreCommitError, emptyResult, type AppendOutcome, type AppendPin, type AppendResult, type PinRecord, type SpanLogEntry, type StoredReceipt } from '../types.js';
import { LOG_LOCK } from './schema.js';
import { writeRowsSql } from './append-sql.js';
import { decide, type NewRow } from './decide.js';
import type { Row } from './rows.js';
import { inTransaction, type PgShared } from './shared.js';

interface QueuedAppend {
  items: StoredReceipt[];
  spanLog: SpanLogEntry[];
  pins: readonly AppendPin[];
  promise: Promise<AppendResult>;
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

/** The parameters of writeRowsSql, made before the transaction opens (JSON texts). */
interface WriteParams {
  /** $1-$12 of writeRowsSql: the receipt rows' and the span log entries' columns (the bodies joined: `joined`). */
  columns: unknown[];
  joined: boolean;
  pins: string;
  contracts: string;
  /** Receipt rows, span log entries and pins to write (0: nothing to do). */
  count: number;
  receipts: number;
}

/**
 * A group's first pins: per run the first carried (group order), in run order as JSON, with their contracts' content
 * (but those this store committed before: `stored`).
 */
interface GroupPins {
  byRun: Map<string, AppendPin>;
  pins: string;
  contracts: string;
}

function groupPins(group: readonly QueuedAppend[], stored: ReadonlySet<string>): GroupPins {
  const byRun = new Map<string, AppendPin>();
  const contracts = new Map<string, AppendPin>();
  for (const a of group) {
    for (const p of a.pins) {
      if (!byRun.has(p.run)) byRun.set(p.run, p);
      if (!stored.has(p.contractHash) && !contracts.has(p.contractHash)) contracts.set(p.contractHash, p);
    }
  }
  // Runs in key order, as setPins: two writers' pin inserts never wait on each other in a cycle.
  const runs = [...byRun.keys()].sort();
  return {
    byRun,
    pins: JSON.stringify(runs.map((run) => {
      const p = byRun.get(run)!;
      return [run, p.pin.contract, p.pin.version, p.pin.phase, p.contractHash];
    })),
    contracts: JSON.stringify([...contracts.values()].map((p) => [p.contractHash, p.contract, p.version, p.content])),
  };
}

function saturated(waiting: number): StoreCommitError {
  const cause = Object.assign(new Error(`store saturated: ${waiting} receipts wait for commit`), { code: 'STORE_SATURATED' });
  return new StoreCommitError(cause);
}

export class PgGroupCommit {
  private readonly maxBatch: number;
  private readonly maxQueued: number;
  private readonly onCommit: ((seconds: number, receipts: number) => void) | undefined;
  private queue: QueuedAppend[] = [];
  private queuedReceipts = 0;
  private inFlight: QueuedAppend[] | null = null;
  private flushScheduled = false;
  private commitCount = 0;
  private failedCommitCount = 0;
  /** Contract hashes whose content an append of this store committed (content under a hash never changes). */
  private readonly storedContracts = new Set<string>();

  constructor(private readonly s: PgShared) {
    this.maxBatch = Math.max(1, s.opts.groupCommitMaxBatch ?? 2000);
    this.maxQueued = Math.max(1, s.opts.maxQueuedReceipts ?? 50_000);
    this.onCommit = s.opts.onCommit;
  }

  /**
   * Stores receipts (and span log entries) of one delivery, and the first pins of its runs (`pins`, with their
   * contracts' content) in the same transaction: the result's `pins` are the pins in force. Resolves only after the
   * transaction holding them committed; appends of the same event-loop turn share it. Rejects with StoreCommitError
   * when the commit fails (nothing of the group stored) or when too many receipts already wait (code STORE_SATURATED).
   */
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    if (this.s.closing !== null) return Promise.reject(new Error('receipt store is closed'));
    if (items.length === 0 && !spanLog?.length) return Promise.resolve(emptyResult());
    if (this.s.health.beatDown) return Promise.reject(new StoreCommitError(new Error('the database did not answer the last heartbeat in time')));
    if (this.queuedReceipts + items.length > this.maxQueued && this.queue.length > 0) {
      return Promise.reject(saturated(this.queuedReceipts));
    }
    let resolve!: (result: AppendResult) => void;
    let reject!: (error: Error) => void;
    const promise = new Promise<AppendResult>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.queue.push({ items: [...items], spanLog: spanLog ? [...spanLog] : [], pins: pins ?? [], promise, resolve, reject });
    this.queuedReceipts += items.length;
    this.scheduleFlush();
    return promise;
  }

  /** Resolves once everything queued so far is committed; rejects with the failure if a commit of it failed. */
  async sync(): Promise<void> {
    const waiting = [...(this.inFlight ?? []), ...this.queue].map((a) => a.promise);
    const settled = await Promise.allSettled(waiting);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** Group commits landed and failed since open (receipts per commit, for metrics). */
  commitStats(): { commits: number; failedCommits: number } {
    return { commits: this.commitCount, failedCommits: this.failedCommitCount };
  }

  /** Rejects every queued append (not the group in flight) with `error`: the heartbeat is overdue. */
  rejectQueued(error: Error): void {
    const queued = this.queue.splice(0);
    this.queuedReceipts = 0;
    for (const a of queued) a.reject(error);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.inFlight !== null || this.queue.length === 0) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  /** Commits one group (whole appends, up to maxBatch receipts), then schedules the next if any waits. */
  private async flush(): Promise<void> {
    if (this.inFlight !== null || this.queue.length === 0) return;
    let take = 0;
    let receipts = 0;
    while (take < this.queue.length && (take === 0 || receipts < this.maxBatch)) {
      receipts += this.queue[take].items.length;
      take++;
    }
    const group = this.queue.splice(0, take);
    this.queuedReceipts -= receipts;
    this.inFlight = group;
    const started = process.hrtime.bigint();
    try {
      const results = await this.commitGroup(group);
      this.s.health.ok = true;
      this.commitCount++;
      group.forEach((a, i) => a.resolve(results[i]));
      try {
        this.onCommit?.(Number(process.hrtime.bigint() - started) / 1e9, receipts);
      } catch {
        // A metrics callback cannot un-acknowledge a committed group.
      }
    } catch (err) {
      this.s.health.ok = false;
      this.failedCommitCount++;
      const error = err instanceof StoreCommitError ? err : new StoreCommitError(err);
      for (const a of group) a.reject(error);
    } finally {
      this.inFlight = null;
      this.scheduleFlush();
    }
  }

  /**
   * One transaction for a group of appends, under the ordering lock. Fast path (no (run, event) twice in the
   * group): insert every receipt as variant 0 with ON CONFLICT DO NOTHING; when all went in, they are all accepted
   * (3 round trips: BEGIN + lock + SAVEPOINT, the write, COMMIT). Otherwise (a redelivery or conflict, or a key
   * repeated in the group) the fast attempt is rolled back to its savepoint and every delivery is decided in input
   * order from one read of the stored variants, then written: outcomes and seq order exactly as the SQLite store's.
   */
  private async commitGroup(group: QueuedAppend[]): Promise<AppendResult[]> {
    const items = group.flatMap((a) => a.items);
    const spans = group.flatMap((a) => a.spanLog);
    const pins = groupPins(group, this.storedContracts);
    const keys = new Set<string>();
    for (const { receipt } of items) keys.add(`${receipt.run}\u0000${receipt.event}`);
    if (keys.size === items.length) {
      // Fast path: one statement, one round trip, its own transaction (autocommit): the ordering lock is taken inside
      // it before the first row gets its seq and held to its COMMIT, with no round trip to this process in between.
      // When a row was stored before (a retry, a conflict), the statement fails on purpose (nothing of it stays) and
      // the group is decided in a transaction below.
      const fastRows = items.map(({ receipt, source, receivedAt }) => ({ receipt, body: compactReceiptJson(receipt), variant: 0, source, receivedAt }));
      const pinned = await this.writeAllNew(this.writeParams(fastRows, spans, pins));
      if (pinned !== null) {
        const results = group.map((a): AppendResult => ({ accepted: a.items.length, duplicates: 0, conflicts: 0, results: a.items.map((): AppendOutcome => 'accepted') }));
        return this.withPins(group, results, pins, pinned);
      }
    }
    let pinned: string[] = [];
    const results = await inTransaction(this.s.pool, async (client) => {
      const { results, rows } = await decide(client, group);
      const written = await this.writeRows(client, this.writeParams(rows, spans, pins));
      if (written.inserted !== rows.length) throw new Error(`postgres store: ${rows.length - written.inserted} decided receipts were already stored (a writer without the ordering lock?)`);
      pinned = written.pinned;
      return results;
    }, `BEGIN; SELECT pg_advisory_xact_lock(${LOG_LOCK})`);
    return this.withPins(group, results, pins, pinned);
  }

  /**
   * After a group's COMMIT: each append's result gets the pins in force of the runs whose first pin it carried (those
   * `pinned` by the group's statement; a run pinned before it is read back, in one query).
   */
  private async withPins(group: readonly QueuedAppend[], results: AppendResult[], pins: GroupPins, pinned: readonly string[]): Promise<AppendResult[]> {
    if (pins.byRun.size === 0) return results;
    for (const p of pins.byRun.values()) this.storedContracts.add(p.contractHash);
    const inForce = new Map<string, PinRecord>();
    for (const run of pinned) {
      const p = pins.byRun.get(run);
      if (p) inForce.set(run, { pin: sharedPin(p.pin.contract, p.pin.version, p.pin.phase), contractHash: p.contractHash });
    }
    if (inForce.size < pins.byRun.size) {
      try {
        const before = await this.pinsOf([...pins.byRun.keys()].filter((run) => !inForce.has(run)));
        for (const [run, record] of before) inForce.set(run, record);
      } catch {
        // Committed: the appends are acknowledged; a run without its pin in force here reads it as before (getPin).
      }
    }
    group.forEach((a, i) => {
      if (a.pins.length === 0) return;
      const mine = new Map<string, PinRecord>();
      for (const p of a.pins) {
        const record = inForce.get(p.run);
        if (record) mine.set(p.run, record);
      }
      results[i].pins = mine;
    });
    return results;
  }

  /** The stored pins of runs, by run (runs without one are absent). */
  private async pinsOf(runs: readonly string[]): Promise<Map<string, PinRecord>> {
    const out = new Map<string, PinRecord>();
    if (runs.length === 0) return out;
    const res = await this.s.pool.query('SELECT run, contract, version, phase, contract_hash FROM pins WHERE run = ANY($1::text[])', [[...runs]]);
    for (const row of res.rows as Row[]) {
      out.set(row.run as string, { pin: sharedPin(row.contract as string, row.version as string, row.phase as string), contractHash: row.contract_hash as string });
    }
    return out;
  }

  /**
   * The fast path's one statement (named, so each connection parses and plans it once): under the ordering lock
   * (an InitPlan evaluated before the first row is inserted, so before any seq is drawn), inserts every receipt as
   * variant 0, touches `runs`, inserts the span log entries, and commits. If any receipt row was already stored, the
   * statement raises division_by_zero at its end, so its implicit transaction rolls back whole: false. True when
   * every row went in (committed).
   */
  private async writeAllNew(p: WriteParams): Promise<string[] | null> {
    if (p.count === 0) return [];
    try {
      const res = await this.s.pool.query({
        name: p.joined ? 'ta_append_fast_v4j' : 'ta_append_fast_v4a',
        text: writeRowsSql(`(SELECT true FROM (SELECT pg_advisory_xact_lock(${LOG_LOCK})) AS ordering_lock)`, 'CASE WHEN n = $17::bigint THEN n ELSE n / (n - n) END', p.joined),
        values: [...p.columns, this.s.instance, this.s.life, p.pins, p.contracts, p.receipts],
      });
      return res.rows[0].pinned as string[];
    } catch (e) {
      if ((e as { code?: string }).code === '22012') return null; // a row was there: decided in a transaction
      throw e;
    }
  }

  /**
   * The parameters of writeRows: the rows' and the span log entries' columns, one array each, made before the
   * transaction opens (the driver serialises them before it sends the statement, not between its round trips).
   */
  private writeParams(rows: readonly NewRow[], spans: readonly SpanLogEntry[], pins: GroupPins): WriteParams {
    const n = rows.length;
    const [run, event, variant, body, source, receivedAt, part] = [new Array<string>(n), new Array<string>(n), new Array<number>(n), new Array<string>(n), new Array<string>(n), new Array<number>(n), new Array<number>(n)];
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      run[i] = r.receipt.run;
      event[i] = r.receipt.event;
      variant[i] = r.variant;
      body[i] = r.body;
      source[i] = r.source;
      receivedAt[i] = r.receivedAt;
      part[i] = this.s.partitionOf(r.receipt.run);
    }
    const spanBody = spans.map((e) => e.body);
    const joinable = (list: readonly string[]): boolean => list.every((b) => b.length > 0 && !b.includes('\n'));
    const joined = joinable(body) && joinable(spanBody);
    return {
      receipts: n,
      joined,
      columns: [
        run, event, variant, joined ? body.join('\n') : body, source, receivedAt, part,
        spans.map((e) => e.traceId), spans.map((e) => this.s.partitionOf(e.traceId)), spans.map((e) => e.loggedAt), joined ? spanBody.join('\n') : spanBody, spans.map((e) => e.forwarded === true),
      ],
      pins: pins.pins,
      contracts: pins.contracts,
      count: rows.length + spans.length + pins.byRun.size,
    };
  }

  /**
   * One statement: inserts the rows in order (ON CONFLICT DO NOTHING), touches `runs` for the rows that went in (in
   * run order, as setVerdictStates, so the two never wait on each other's row locks in a cycle) and inserts the span
   * log entries. Returns how many receipt rows went in.
   */
  private async writeRows(client: PoolClient, p: WriteParams): Promise<{ inserted: number; pinned: string[] }> {
    if (p.count === 0) return { inserted: 0, pinned: [] };
    const res = await client.query(
      writeRowsSql('true', 'n', p.joined),
      [...p.columns, this.s.instance, this.s.life, p.pins, p.contracts],
    );
    return { inserted: Number(res.rows[0].inserted), pinned: res.rows[0].pinned as string[] };
  }
}
