/**
 * The durable embedded receipt store: SQLite (better-sqlite3) in WAL mode with group commit.
 *
 * Durability: WAL with `synchronous=FULL` (the default here). Every commit appends its frames to the WAL and
 * fsyncs the WAL before `COMMIT` returns, and `append` resolves only after that. An acknowledged receipt
 * therefore survives `kill -9` of the process (the frames are in the kernel once write() returns) and also a
 * power loss or kernel crash (they are on the device once fsync returns). `synchronous: 'NORMAL'` skips the
 * per-commit fsync: still safe against a killed process, not against power loss. Group commit is what makes
 * FULL affordable: concurrent appends share one transaction and one fsync.
 *
 * Group commit: `append` queues its receipts; the queue is committed as one transaction when it holds
 * `groupCommitMaxBatch` receipts, or `groupCommitMaxDelayMs` after the first queued append (0: at the end of
 * the current event-loop turn, i.e. everything queued by callers woken in the same turn rides together).
 * better-sqlite3 is synchronous, so while one group commits the event loop is busy and new requests pile up
 * for the next group: the batching follows the load without a fixed wait.
 *
 * Pins, verdict states and contract content ride in the same queue: they are visible to reads at once and
 * durable no later than the next acknowledged append. A run's first pin handed to `append` itself (with its
 * contract's content) is written in the transaction of that append's receipts: durable exactly when they are.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { AckRecord, Pin, Receipt, Verdict } from '../core/types.js';
import { sharedPin } from '../core/registry.js';
import { canonicalReceiptJson, compactReceiptJson } from '../core/canonical.js';
import { Checkpointer } from './checkpointer.js';
import { CHANGEABLE_RUN, SCHEMA_SQL, SCHEMA_VERSION } from './schema.js';
import { SpanLogPruner, UNSLICED, type Slicer } from './span-log-prune.js';
import {
  StoreCommitError,
  StoreRowError,
  countOutcome,
  emptyResult,
  sourceScopedEvent,
  type AppendOutcome,
  type AppendPin,
  type AppendResult,
  type LiveRun,
  type PinRecord,
  type PrunableRun,
  type SpanLogEntry,
  type StoredReceipt,
} from './types.js';

interface AckRow {
  verdict: string;
  by: string | null;
  acked_at: number;
  reason: string | null;
}

const ackOf = (row: AckRow): AckRecord => ({ verdict: row.verdict as Verdict, by: row.by, at: Number(row.acked_at), reason: row.reason });

/** ReceiptStore.flushTimer while a group waits for its flush gate. */
const GATED = 'gated' as const;

export interface ReceiptStoreOptions {
  /** Gather appends into one transaction (default true). False: one transaction per append (for comparison). */
  groupCommit?: boolean;
  /** Longest wait after the first queued append before its group commits; 0 = end of the event-loop turn. Default 0. */
  groupCommitMaxDelayMs?: number;
  /** A group commits at once when it holds this many receipts. Default 2000. */
  groupCommitMaxBatch?: number;
  /** FULL (default): survives power loss. NORMAL: survives a killed process only. */
  synchronous?: 'FULL' | 'NORMAL';
  /** Cap on the database size in bytes; a commit that would grow past it fails like a full disk. */
  maxDbBytes?: number;
  /** Delay before retrying pins / verdict states / contracts whose commit failed. Default 1000 ms. */
  retryDelayMs?: number;
  /** Called after each group commit lands, with its duration in seconds and its number of receipts (for metrics). */
  onCommit?: (seconds: number, receipts: number) => void;
  /**
   * Checkpoints in a worker thread every this many ms (src/store/checkpointer.ts), none on the event loop but the
   * scrub's last few frames; unset: SQLite's auto-checkpoint in the committing call (the CLI, tests). `serve` sets it.
   */
  checkpointEveryMs?: number;
  /** Called when the checkpoint worker is lost (SQLite's auto-checkpoint is back on). */
  onCheckpointerLost?: (error: Error) => void;
}

interface QueuedAppend {
  items: StoredReceipt[];
  spanLog?: SpanLogEntry[];
  pins?: readonly AppendPin[];
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

interface VerdictState {
  verdict: Verdict;
  settled: boolean;
  updatedAt: number;
}

interface ContractRow {
  hash: string;
  contract: string;
  version: string;
  content: string;
}

/** Everything one transaction commits. */
interface QueuedGroup {
  appends: QueuedAppend[];
  pins: [string, PinRecord][];
  verdicts: [string, VerdictState][];
  contracts: ContractRow[];
}

interface RunTouch {
  firstAt: number;
  lastAt: number;
}

export const DATABASE_FILE = 'receipts.db';

/** Least time between two WAL scrubs after sliced span-log prunes. */
const SPAN_LOG_SCRUB_MS = 60_000;
/** Runs read per transaction by the retention prune (at most; see PRUNE_BATCH_MS). */
const PRUNE_RUNS_BATCH = 200;
/**
 * A retention prune transaction stops deleting once it has run this long (at least one run each): with secure_delete
 * a run's pages are overwritten, so a run's cost varies with its receipts and a count alone does not bound the slice.
 */
const PRUNE_BATCH_MS = 8;

type Row = Record<string, unknown>;

function touchRun(touched: Map<string, RunTouch>, run: string, at: number): void {
  const seen = touched.get(run);
  if (seen === undefined) touched.set(run, { firstAt: at, lastAt: at });
  else {
    if (at < seen.firstAt) seen.firstAt = at;
    if (at > seen.lastAt) seen.lastAt = at;
  }
}

/** A `runs` row joined with its pin, as the engine restores it. */
function liveRunOf(row: Record<string, unknown>): LiveRun {
  const hasPin = row.contract !== null;
  return {
    run: row.run as string,
    firstAt: row.first_at as number,
    updatedAt: row.updated_at as number,
    verdict: (row.verdict as Verdict | null) ?? null,
    settled: row.settled === 1,
    pin: hasPin ? { contract: row.contract as string, version: row.version as string, phase: row.phase as string } : null,
    contractHash: hasPin ? (row.contract_hash as string) : null,
  };
}

/**
 * Over ~450 lines (about 540) on purpose: it owns one SQLite connection, its prepared statements and the group commit
 * (the queue, and the pins, verdict states and contracts written with the next group), so every write shares one
 * transaction and one fsync; splitting it would share the connection and the open transaction between objects. Much
 * of its length is SQL text and doc comments.
 */
export class ReceiptStore {
  private readonly db: Database.Database;
  private readonly groupCommit: boolean;
  private readonly maxDelayMs: number;
  private readonly maxBatch: number;
  private readonly retryDelayMs: number;
  private readonly onCommit: ((seconds: number, receipts: number) => void) | undefined;

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
  /** Runs the WAL checkpoints off the event loop, when `checkpointEveryMs` is set. */
  private checkpointer: Checkpointer | null = null;
  private isHealthy = true;
  private closed = false;
  private receiptCount: number;
  private runCount: number;
  private commitCount = 0;
  private failedCommitCount = 0;

  private readonly stmt: {
    insertFirst: Database.Statement<[string, string, string, string, number]>;
    variants: Database.Statement<[string, string], { variant: number; body: string }>;
    firstSource: Database.Statement<[string, string], { source: string }>;
    insertVariant: Database.Statement<[string, string, number, string, string, number]>;
    touchRun: Database.Statement<[string, number, number]>;
    insertPin: Database.Statement<[string, string, string, string, string]>;
    getPin: Database.Statement<[string], Row>;
    upsertVerdict: Database.Statement<[string, number, number, string, number]>;
    insertContract: Database.Statement<[string, string, string, string]>;
    getContract: Database.Statement<[string], { content: string }>;
    runReceipts: Database.Statement<[string], { seq: number; event: string; body: string }>;
    liveRuns: Database.Statement<[], Row>;
    prunable: Database.Statement<[number, number], { run: string; verdict: Verdict | null; contract: string | null; version: string | null }>;
    deleteReceipts: Database.Statement<[string]>;
    deletePin: Database.Statement<[string]>;
    deleteAck: Database.Statement<[string]>;
    putAck: Database.Statement<[string, string, string | null, number, string | null]>;
    getAck: Database.Statement<[string], AckRow>;
    allAcks: Database.Statement<[], AckRow & { run: string }>;
    deleteRun: Database.Statement<[string]>;
    isNewRun: Database.Statement<[string], { one: number }>;
    insertSpanLog: Database.Statement<[string, number, string]>;
    spanLogAfter: Database.Statement<[number, number], { seq: number; trace_id: string; logged_at: number }>;
    deleteSpanLogSeqs: Database.Statement<[string]>;
    spanLogLast: Database.Statement<[], { seq: number | null }>;
  };
  private readonly spanLogPruner: SpanLogPruner;
  private spanLogScrubbedAt = 0;
  private readonly commitGroup: (group: QueuedGroup) => { results: AppendResult[]; newRuns: number; created: string[] };
  /**
   * Runs whose `runs` row a commit created and that have no pin since: getPin answers null for them without a
   * query (a pin row is only ever written for a run that already has its row, by setPin, which forgets the run
   * here). A cache: bounded, cleared when full; a run not in it is looked up as before.
   */
  private readonly pinless = new Set<string>();

  private constructor(db: Database.Database, opts: ReceiptStoreOptions) {
    this.db = db;
    this.groupCommit = opts.groupCommit ?? true;
    this.maxDelayMs = Math.max(0, opts.groupCommitMaxDelayMs ?? 0);
    this.maxBatch = Math.max(1, opts.groupCommitMaxBatch ?? 2000);
    this.retryDelayMs = Math.max(1, opts.retryDelayMs ?? 1000);
    this.onCommit = opts.onCommit;

    this.stmt = {
      insertFirst: db.prepare(
        `INSERT INTO receipts (run, event, variant, body, source, received_at) VALUES (?, ?, 0, ?, ?, ?)
         ON CONFLICT (run, event, variant) DO NOTHING`),
      variants: db.prepare('SELECT variant, body FROM receipts WHERE run = ? AND event = ? ORDER BY variant'),
      firstSource: db.prepare('SELECT source FROM receipts WHERE run = ? AND event = ? AND variant = 0'),
      insertVariant: db.prepare(
        'INSERT INTO receipts (run, event, variant, body, source, received_at) VALUES (?, ?, ?, ?, ?, ?)'),
      touchRun: db.prepare(
        `INSERT INTO runs (run, first_at, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (run) DO UPDATE SET updated_at = max(updated_at, excluded.updated_at)`),
      insertPin: db.prepare(
        `INSERT INTO pins (run, contract, version, phase, contract_hash) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (run) DO NOTHING`),
      getPin: db.prepare('SELECT contract, version, phase, contract_hash FROM pins WHERE run = ?'),
      upsertVerdict: db.prepare(
        `INSERT INTO runs (run, first_at, updated_at, verdict, settled) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, settled = excluded.settled,
           updated_at = max(updated_at, excluded.updated_at)`),
      insertContract: db.prepare(
        `INSERT INTO contracts (hash, contract, version, content) VALUES (?, ?, ?, ?)
         ON CONFLICT (hash) DO NOTHING`),
      getContract: db.prepare('SELECT content FROM contracts WHERE hash = ?'),
      runReceipts: db.prepare('SELECT seq, event, body FROM receipts WHERE run = ? ORDER BY seq'),
      liveRuns: db.prepare(
        `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled,
                p.contract, p.version, p.phase, p.contract_hash
         FROM runs r LEFT JOIN pins p ON p.run = r.run ORDER BY r.first_at, r.run`),
      prunable: db.prepare(
        'SELECT r.run, r.verdict, p.contract, p.version FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.settled = 1 AND r.updated_at < ? ORDER BY r.settled, r.updated_at LIMIT ?',
      ),
      deleteReceipts: db.prepare('DELETE FROM receipts WHERE run = ?'),
      deletePin: db.prepare('DELETE FROM pins WHERE run = ?'),
      deleteAck: db.prepare('DELETE FROM acks WHERE run = ?'),
      putAck: db.prepare('INSERT INTO acks (run, verdict, by, acked_at, reason) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, by = excluded.by, acked_at = excluded.acked_at, reason = excluded.reason'),
      getAck: db.prepare('SELECT verdict, by, acked_at, reason FROM acks WHERE run = ?'),
      allAcks: db.prepare('SELECT run, verdict, by, acked_at, reason FROM acks'),
      deleteRun: db.prepare('DELETE FROM runs WHERE run = ?'),
      isNewRun: db.prepare('SELECT 1 AS one FROM runs WHERE run = ?'),
      insertSpanLog: db.prepare('INSERT INTO span_log (trace_id, logged_at, body) VALUES (?, ?, ?)'),
      spanLogAfter: db.prepare('SELECT seq, trace_id, logged_at FROM span_log WHERE seq > ? ORDER BY seq LIMIT ?'),
      deleteSpanLogSeqs: db.prepare('DELETE FROM span_log WHERE seq IN (SELECT value FROM json_each(?))'),
      spanLogLast: db.prepare('SELECT max(seq) AS seq FROM span_log'),
    };
    // The span-log prune walks the table by its primary key from a cursor (src/store/span-log-prune.ts).
    this.spanLogPruner = new SpanLogPruner({
      after: (after, limit) => this.closed ? [] : this.stmt.spanLogAfter.all(after, limit).map((r) => ({ seq: r.seq, traceId: r.trace_id, loggedAt: r.logged_at })),
      remove: (seqs) => (this.closed ? 0 : this.stmt.deleteSpanLogSeqs.run(JSON.stringify(seqs)).changes),
      lastSeq: () => (this.closed ? 0 : (this.stmt.spanLogLast.get()?.seq ?? 0)),
    });

    this.commitGroup = db.transaction(({ appends, pins, verdicts, contracts }: QueuedGroup) => {
      const touched = new Map<string, RunTouch>();
      const results = appends.map((queued) => {
        const result = emptyResult();
        for (const item of queued.items) {
          const outcome = this.storeOne(item);
          countOutcome(result, outcome);
          if (outcome !== 'duplicate') touchRun(touched, item.receipt.run, item.receivedAt);
        }
        if (queued.spanLog) for (const e of queued.spanLog) this.stmt.insertSpanLog.run(e.traceId, e.loggedAt, e.body);
        return result;
      });
      const created: string[] = [];
      for (const [run, touch] of touched) {
        if (this.stmt.isNewRun.get(run) === undefined) created.push(run);
        this.stmt.touchRun.run(run, touch.firstAt, touch.lastAt);
      }
      for (const [run, p] of pins) this.stmt.insertPin.run(run, p.pin.contract, p.pin.version, p.pin.phase, p.contractHash);
      // The first pins the appends carry, after those set before (the first written wins), with their content.
      const contentsWritten = new Set<string>();
      for (let i = 0; i < appends.length; i++) if (appends[i].pins) results[i].pins = this.insertAppendPins(appends[i].pins!, contentsWritten);
      for (const [run, state] of verdicts) {
        if (!touched.has(run) && this.stmt.isNewRun.get(run) === undefined) created.push(run);
        this.stmt.upsertVerdict.run(run, state.updatedAt, state.updatedAt, state.verdict, state.settled ? 1 : 0);
      }
      for (const c of contracts) this.stmt.insertContract.run(c.hash, c.contract, c.version, c.content);
      return { results, newRuns: created.length, created };
    });

    this.receiptCount = (db.prepare('SELECT count(*) AS n FROM receipts').get() as { n: number }).n;
    this.runCount = (db.prepare('SELECT count(*) AS n FROM runs').get() as { n: number }).n;
  }

  /** Opens (creating if needed) the store in `dir`. */
  static open(dir: string, opts: ReceiptStoreOptions = {}): ReceiptStore {
    ReceiptStore.privateFiles(dir);
    const db = new Database(join(dir, DATABASE_FILE));
    try {
      // Deleted rows (pruned runs, spent span log) are overwritten with zeros, not left in free pages.
      db.pragma('secure_delete = ON');
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() !== 'wal') throw new Error(`receipt store: WAL mode unavailable (got ${String(mode)})`);
      db.pragma(`synchronous = ${opts.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_size_limit = 67108864');
      const version = Number(db.pragma('user_version', { simple: true }));
      if (version > SCHEMA_VERSION) throw new Error(`receipt store: schema version ${version} is newer than this build (${SCHEMA_VERSION})`);
      db.exec(SCHEMA_SQL);
      if (version < SCHEMA_VERSION) db.pragma(`user_version = ${SCHEMA_VERSION}`);
      const store = new ReceiptStore(db, opts);
      if (opts.maxDbBytes !== undefined) store.setMaxDbBytes(opts.maxDbBytes);
      if (opts.checkpointEveryMs) store.checkpointInWorker(join(dir, DATABASE_FILE), opts.checkpointEveryMs, opts.onCheckpointerLost);
      return store;
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /**
   * Stores receipts. Resolves only after they are durably committed; concurrent calls share one transaction.
   * Rejects with StoreCommitError (nothing of the group stored) when the commit fails, e.g. disk full.
   */
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new Error('receipt store is closed'));
    if (items.length === 0 && !spanLog?.length) return Promise.resolve(emptyResult());
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ items: [...items], spanLog: spanLog?.length ? [...spanLog] : undefined, pins: pins?.length ? pins : undefined, resolve, reject });
      this.queuedReceipts += items.length;
      if (!this.groupCommit || this.queuedReceipts >= this.maxBatch) this.flush();
      else this.scheduleFlush();
    });
  }

  /** Resolves once everything queued so far (receipts, pins, verdict states, contracts) is committed. */
  sync(): Promise<void> {
    const failure = this.flush();
    return failure === null ? Promise.resolve() : Promise.reject(failure);
  }

  /** runReceipts for the engine's asynchronous reader (src/audit/store.ts): the same rows, already committed. */
  readReceipts(run: string): Promise<Receipt[]> {
    return Promise.resolve(this.runReceipts(run));
  }

  /**
   * A run's receipts in insertion order; both versions of a conflicting (run, event) are returned. A body that is
   * not JSON throws a StoreRowError naming the table and row.
   */
  runReceipts(run: string): Receipt[] {
    // One prepared statement for every call: the engine reads a run back for the API and for conflict rebuilds.
    return this.stmt.runReceipts
      .all(run)
      .map((row) => {
        try {
          return JSON.parse(row.body) as Receipt;
        } catch (e) {
          throw new StoreRowError('receipts', `seq ${row.seq} (run ${JSON.stringify(run)}, event ${JSON.stringify(row.event)})`, (e as Error).message);
        }
      });
  }

  /**
   * liveRuns, streamed: read page by page (keyset pagination on (first_at, run), no cursor held open), so a restart
   * never holds every row at once and the caller may write to the store between pages. `changeable`: only the runs
   * a restart loads (CHANGEABLE_RUN, by its partial index): a restart then costs what can still change, not what is
   * stored; settledRunCounts counts the rest.
   */
  *iterateLiveRuns(pageSize = 1000, changeable = false): Generator<LiveRun> {
    this.flush();
    const page = this.db.prepare<[number, string, number], Row>(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled,
              p.contract, p.version, p.phase, p.contract_hash
       FROM runs r ${changeable ? 'INDEXED BY runs_changeable' : ''} LEFT JOIN pins p ON p.run = r.run
       WHERE (r.first_at, r.run) > (?, ?) ${changeable ? `AND ${CHANGEABLE_RUN}` : ''} ORDER BY r.first_at, r.run LIMIT ?`);
    let after: [number, string] = [Number.MIN_SAFE_INTEGER, ''];
    for (;;) {
      const rows = page.all(after[0], after[1], pageSize);
      for (const row of rows) {
        yield liveRunOf(row);
      }
      if (rows.length < pageSize) return;
      const last = rows[rows.length - 1];
      after = [last.first_at as number, last.run as string];
    }
  }

  /** Stored runs that a restart leaves in the store (settled, not alerting), counted by contract, version and verdict. */
  settledRunCounts(): { contract: string; version: string; verdict: Verdict; runs: number }[] {
    this.flush();
    return this.db
      .prepare<[], { contract: string | null; version: string | null; verdict: Verdict; runs: number }>(
        `SELECT p.contract, p.version, r.verdict, count(*) AS runs FROM runs r LEFT JOIN pins p ON p.run = r.run
         WHERE NOT ${CHANGEABLE_RUN} GROUP BY p.contract, p.version, r.verdict`)
      .all()
      .map((r) => ({ contract: r.contract ?? '', version: r.version ?? '', verdict: r.verdict, runs: r.runs }));
  }

  /** Every pinned contract content stored (one row per content hash; a few per contract version ever pinned). */
  pinnedContents(): { hash: string; contract: string; version: string; content: string }[] {
    this.flush();
    return this.db.prepare<[], { hash: string; contract: string; version: string; content: string }>('SELECT hash, contract, version, content FROM contracts').all();
  }

  /** A stored run pinned to this content hash, if any (a scan of the pins: asked only for content the registry lacks). */
  runPinnedTo(hash: string): string | null {
    return this.db.prepare<[string], { run: string }>('SELECT run FROM pins WHERE contract_hash = ? LIMIT 1').get(hash)?.run ?? null;
  }

  /**
   * All runs not yet pruned, for rebuilding in-memory state on start. Read into an array (not a cursor), so the
   * caller may write to the store while walking it.
   */
  liveRuns(): LiveRun[] {
    this.flush();
    return this.stmt.liveRuns.all().map(liveRunOf);
  }

  private runVerdictStmt?: Database.Statement<[string], { verdict: string | null; settled: number }>;

  /** A run's stored verdict state (the latest written wins), or null when the run is not stored (run lists, gauges). */
  runVerdict(run: string): { verdict: Verdict | null; settled: boolean } | null {
    const pending = this.pendingVerdicts.get(run);
    if (pending) return { verdict: pending.verdict, settled: pending.settled };
    this.runVerdictStmt ??= this.db.prepare<[string], { verdict: string | null; settled: number }>('SELECT verdict, settled FROM runs WHERE run = ?');
    const row = this.runVerdictStmt.get(run);
    return row ? { verdict: row.verdict as Verdict | null, settled: row.settled === 1 } : null;
  }

  /** One run's row with its pin (its verdict state as last set), or null when the run is not stored. */
  getRun(run: string): LiveRun | null {
    this.flush();
    const row = this.db
      .prepare<[string], Row>(`SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = ?`)
      .get(run);
    return row ? liveRunOf(row) : null;
  }

  /** The settled runs `prune(olderThanMs, now)` would delete, with their stored verdict and pin (the gauges count them). */
  prunableRuns(olderThanMs: number, now: number): { run: string; verdict: Verdict | null; contract: string; version: string }[] {
    this.flush();
    return this.db
      .prepare<[number], { run: string; verdict: Verdict | null; contract: string | null; version: string | null }>(
        'SELECT r.run, r.verdict, p.contract, p.version FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.settled = 1 AND r.updated_at < ?',
      )
      .all(now - olderThanMs)
      .map((r) => ({ run: r.run, verdict: r.verdict, contract: r.contract ?? '', version: r.version ?? '' }));
  }

  /**
   * A page of the stored runs for the run lists: newest first by first receipt (server time; `oldest`: oldest first),
   * then by run id, after the cursor `after`, optionally of one verdict or pinned contract (keyset paging on
   * runs_by_first: a page costs its own rows, whatever the number of runs).
   */
  listRuns(f: { verdict?: string; contract?: string; oldest?: boolean; after?: { firstAt: number; run: string }; limit: number }): LiveRun[] {
    this.flush();
    const cmp = f.oldest ? '>' : '<';
    const dir = f.oldest ? 'ASC' : 'DESC';
    const where: string[] = [];
    const args: (string | number)[] = [];
    if (f.after) {
      where.push(`(r.first_at ${cmp} ? OR (r.first_at = ? AND r.run ${cmp} ?))`);
      args.push(f.after.firstAt, f.after.firstAt, f.after.run);
    }
    if (f.verdict) {
      where.push('r.verdict = ?');
      args.push(f.verdict);
    }
    if (f.contract) {
      where.push('p.contract = ?');
      args.push(f.contract);
    }
    args.push(f.limit);
    const sql = `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY r.first_at ${dir}, r.run ${dir} LIMIT ?`;
    return this.db.prepare<(string | number)[], Row>(sql).all(...args).map(liveRunOf);
  }

  /** Stored runs per verdict (optionally of one pinned contract), for the run list's counts. */
  verdictCounts(f: { contract?: string } = {}): Record<string, number> {
    this.flush();
    const rows = f.contract
      ? this.db.prepare<[string], { verdict: string | null; n: number }>('SELECT r.verdict, count(*) AS n FROM runs r JOIN pins p ON p.run = r.run WHERE p.contract = ? GROUP BY r.verdict').all(f.contract)
      : this.db.prepare<[], { verdict: string | null; n: number }>('SELECT verdict, count(*) AS n FROM runs GROUP BY verdict').all();
    const out: Record<string, number> = {};
    for (const r of rows) if (r.verdict !== null) out[r.verdict] = r.n;
    return out;
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
    const row = this.stmt.getPin.get(run);
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

  /**
   * Records an acknowledgement (the run's latest replaces an earlier one). Committed at once, on its own, before the
   * API answers: an acknowledgement is an operator's action and outlives a restart.
   */
  putAck(run: string, ack: AckRecord): void {
    try {
      this.stmt.putAck.run(run, ack.verdict, ack.by, ack.at, ack.reason);
    } catch (e) {
      throw new StoreCommitError(e);
    }
  }

  getAck(run: string): AckRecord | null {
    const row = this.stmt.getAck.get(run);
    return row ? ackOf(row) : null;
  }

  /** Every stored acknowledgement (restored at start). */
  acks(): { run: string; ack: AckRecord }[] {
    return this.stmt.allAcks.all().map((row) => ({ run: row.run, ack: ackOf(row) }));
  }

  /** Stores pinned contract content by its hash (first write wins; a hash names one content). */
  putContractContent(hash: string, contract: string, version: string, content: string): void {
    if (this.storedContracts.has(hash) || this.pendingContracts.has(hash)) return;
    if (this.stmt.getContract.get(hash) !== undefined) {
      this.storedContracts.add(hash);
      return;
    }
    this.pendingContracts.set(hash, { hash, contract, version, content });
    this.scheduleFlush();
  }

  getContractContent(hash: string): string | null {
    return this.pendingContracts.get(hash)?.content ?? this.stmt.getContract.get(hash)?.content ?? null;
  }

  /**
   * Deletes settled runs (receipts, pin, acknowledgement, state) last updated before `now - olderThanMs`, at most
   * PRUNE_RUNS_BATCH of them, oldest first (one transaction; pruneSliced does the rest). Returns how many.
   */
  prune(olderThanMs: number, now: number): number {
    const n = this.pruneBatch(now - olderThanMs, PRUNE_RUNS_BATCH, Infinity).runs;
    if (n > 0) this.scrubWal();
    return n;
  }

  /**
   * The retention prune in slices: transactions of at most PRUNE_RUNS_BATCH runs and PRUNE_BATCH_MS each, pausing
   * when `slicer`'s budget is spent; one WAL scrub at the end. Costs the runs that passed the retention since the last call.
   */
  async pruneSliced(olderThanMs: number, now: number, slicer: Slicer = UNSLICED, retired?: (runs: readonly PrunableRun[]) => void): Promise<number> {
    let total = 0;
    for (;;) {
      if (this.closed) break;
      const batch = this.pruneBatch(now - olderThanMs, PRUNE_RUNS_BATCH, PRUNE_BATCH_MS, retired);
      total += batch.runs;
      if (batch.last) break;
      if (slicer.due()) await slicer.pause();
    }
    if (total === 0) return 0;
    await slicer.pause(); // the scrub in a slice of its own
    await this.scrub();
    return total;
  }

  /** Committed rows: receipts (conflicting versions included) and live runs. */
  counts(): { receipts: number; runs: number } {
    return { receipts: this.receiptCount, runs: this.runCount };
  }

  /** Transactions committed and failed by group commit since open (for metrics: receipts per commit). */
  commitStats(): { commits: number; failedCommits: number } {
    return { commits: this.commitCount, failedCommits: this.failedCommitCount };
  }

  /** False after a failed commit, until a later commit succeeds. */
  /** The span log, oldest first (replayed through the ingest pipeline on start). */
  spanLog(): { seq: number; traceId: string; body: string }[] {
    this.flush();
    return (this.db.prepare('SELECT seq, trace_id, body FROM span_log ORDER BY seq').all() as { seq: number; trace_id: string; body: string }[]).map((r) => ({
      seq: r.seq,
      traceId: r.trace_id,
      body: r.body,
    }));
  }

  /** Forget span log entries up to `seq` (after they were replayed and re-logged where still pending). */
  deleteSpanLogUpTo(seq: number): void {
    this.flush();
    if (this.db.prepare('DELETE FROM span_log WHERE seq <= ?').run(seq).changes > 0) this.scrubWal();
    this.spanLogPruner.forget(seq);
  }

  /**
   * Forget span log entries older than `before` whose trace holds no pending work any more. Returns the count. Costs
   * the rows aged since the last call (and the traces held pending), in slices of `slicer`'s budget: see
   * src/store/span-log-prune.ts.
   */
  async pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, slicer?: Slicer): Promise<number> {
    const n = await this.spanLogPruner.prune(before, stillPending, slicer);
    if (n === 0) return 0;
    // The scrub (a checkpoint that copies the WAL into the database and truncates it, with fsyncs) in a slice of its
    // own, and from the periodic job at most once a minute (the span log holds allow-listed fields only); the
    // retention prune and close scrub every time.
    if (slicer) {
      if (Date.now() - this.spanLogScrubbedAt < SPAN_LOG_SCRUB_MS) return n;
      await slicer.pause();
    }
    await this.scrub();
    this.spanLogScrubbedAt = Date.now();
    return n;
  }

  /** Span-log rows the prune passed over because their trace was pending (the job list's gauge). */
  spanLogHeld(): { traces: number; rows: number } {
    return this.spanLogPruner.heldCount();
  }

  healthy(): boolean {
    return this.isHealthy;
  }

  /** Caps the database size (bytes, rounded down to whole pages); null lifts the cap. */
  setMaxDbBytes(bytes: number | null): void {
    const pageSize = Number(this.db.pragma('page_size', { simple: true }));
    const pages = bytes === null ? 4294967294 : Math.max(1, Math.floor(bytes / pageSize));
    this.db.pragma(`max_page_count = ${pages}`);
  }

  /**
   * The data directory is the owner's alone: the directory 0700 and its files 0600. The database file is
   * created 0600 before SQLite opens it, and SQLite gives its -wal and -shm files the database file's mode.
   */
  private static privateFiles(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    const file = join(dir, DATABASE_FILE);
    if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
    for (const name of readdirSync(dir)) if (name.startsWith(DATABASE_FILE)) chmodSync(join(dir, name), 0o600);
  }

  /**
   * One transaction: at most `limit` settled runs updated before `cutoff`, oldest first (the runs_by_settled_age
   * index), stopping once it has run `budgetMs` (at least one run). `last`: no run past the cutoff is left.
   */
  private pruneBatch(cutoff: number, limit: number, budgetMs: number, retired?: (runs: readonly PrunableRun[]) => void): { runs: number; last: boolean } {
    this.flush();
    const started = performance.now();
    const pruned = this.db.transaction(() => {
      let receipts = 0;
      const rows = this.stmt.prunable.all(cutoff, limit);
      let n = 0;
      while (n < rows.length && (n === 0 || performance.now() - started < budgetMs)) {
        const run = rows[n++].run;
        receipts += this.stmt.deleteReceipts.run(run).changes;
        this.stmt.deletePin.run(run);
        this.stmt.deleteAck.run(run);
        this.stmt.deleteRun.run(run);
      }
      return { runs: n, receipts, rows: rows.slice(0, n), last: n === rows.length && rows.length < limit };
    })();
    this.receiptCount -= pruned.receipts;
    this.runCount -= pruned.runs;
    // Committed: the engine lets go of these runs in this same turn.
    if (retired && pruned.rows.length > 0) retired(pruned.rows.map((r) => ({ run: r.run, verdict: r.verdict, contract: r.contract ?? '', version: r.version ?? '' })));
    return { runs: pruned.runs, last: pruned.last };
  }

  /**
   * Copies the WAL into the database and truncates it to zero bytes, so the frames that held deleted rows are
   * gone from the WAL file too (with secure_delete, their pages in the database are zeroed). After pruning and at close.
   */
  private scrubWal(): boolean {
    const [row] = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return row?.busy === 0;
  }

  /**
   * The scrub from a job: the worker's PASSIVE checkpoint copies the WAL first (off the event loop), so the truncating
   * checkpoint here copies only what was written since. Tried again if the worker's own timer held the checkpoint lock.
   */
  private async scrub(): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      await this.checkpointer?.passive();
      if (this.closed || this.scrubWal()) return;
    }
  }

  /** WAL checkpoints in a worker thread: SQLite's auto-checkpoint off while it runs, on again if it is lost. */
  private checkpointInWorker(file: string, everyMs: number, onLost?: (error: Error) => void): void {
    this.db.pragma('wal_autocheckpoint = 0');
    this.checkpointer = new Checkpointer(file, everyMs, (e) => {
      if (!this.closed) this.db.pragma('wal_autocheckpoint = 1000');
      onLost?.(e);
    });
  }

  /** Commits what is queued, then closes. Appends still queued are rejected if that commit fails. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.checkpointer?.close();
    try {
      this.scrubWal();
    } catch {
      // A checkpoint that cannot run (e.g. disk full) leaves the WAL for the next open; closing still proceeds.
    }
    this.db.close();
  }

  private hasPendingWrites(): boolean {
    return this.queue.length > 0 || this.pendingPins.size > 0 || this.pendingVerdicts.size > 0 || this.pendingContracts.size > 0;
  }

  private scheduleFlush(): void {
    if (this.flushTimer !== null || this.closed) return;
    if (!this.groupCommit && this.queue.length > 0) {
      this.flush();
      return;
    }
    this.flushTimer = this.maxDelayMs === 0
      ? { immediate: setImmediate(() => this.gatedFlush()) }
      : { timeout: setTimeout(() => this.gatedFlush(), this.maxDelayMs) };
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

  /** One transaction for everything queued; answers every append in it. Returns the failure, if any. */
  private flush(): StoreCommitError | null {
    this.cancelFlushTimer();
    if (this.closed || !this.hasPendingWrites()) return null;
    const appends = this.queue;
    this.queue = [];
    this.queuedReceipts = 0;
    const group: QueuedGroup = {
      appends,
      pins: [...this.pendingPins.entries()],
      verdicts: [...this.pendingVerdicts.entries()],
      contracts: [...this.pendingContracts.values()],
    };
    let committed: { results: AppendResult[]; newRuns: number; created: string[] };
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
    this.runCount += committed.newRuns;
    if (this.pinless.size + committed.created.length > 65_536) this.pinless.clear();
    // A run this commit created has no pin unless the commit wrote one (set before, or carried by an append).
    let pinned: Set<string> | null = null;
    for (const a of appends) {
      if (a.pins) for (const p of a.pins) (pinned ??= new Set()).add(p.run);
    }
    if (pinned) for (const run of pinned) this.pinless.delete(run);
    if (committed.created.length) for (const [run] of group.pins) (pinned ??= new Set()).add(run);
    for (const run of committed.created) if (!pinned?.has(run)) this.pinless.add(run);
    committed.results.forEach((result, i) => {
      this.receiptCount += result.accepted + result.conflicts;
      appends[i].resolve(result);
    });
    return null;
  }

  /** Pins, verdict states and contracts of a failed commit stay queued and are retried. */
  private scheduleRetry(): void {
    if (this.retryTimer !== null || this.closed) return;
    if (this.pendingPins.size + this.pendingVerdicts.size + this.pendingContracts.size === 0) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.flush();
    }, this.retryDelayMs);
    this.retryTimer.unref();
  }

  /**
   * Inside a commit: an append's first pins (ON CONFLICT DO NOTHING: a pin written before stays) and their contracts'
   * content, unless stored; returns the pins in force.
   */
  private insertAppendPins(pins: readonly AppendPin[], contentsWritten: Set<string>): Map<string, PinRecord> {
    const inForce = new Map<string, PinRecord>();
    for (const p of pins) {
      if (!this.storedContracts.has(p.contractHash) && !contentsWritten.has(p.contractHash)) {
        this.stmt.insertContract.run(p.contractHash, p.contract, p.version, p.content);
        contentsWritten.add(p.contractHash);
      }
      if (this.stmt.insertPin.run(p.run, p.pin.contract, p.pin.version, p.pin.phase, p.contractHash).changes === 1) {
        inForce.set(p.run, { pin: sharedPin(p.pin.contract, p.pin.version, p.pin.phase), contractHash: p.contractHash });
        continue;
      }
      const row = this.stmt.getPin.get(p.run);
      if (row !== undefined) inForce.set(p.run, { pin: sharedPin(row.contract as string, row.version as string, row.phase as string), contractHash: row.contract_hash as string });
    }
    return inForce;
  }

  /** Inserts one delivery: new (accepted), equal to a stored version (duplicate) or a new version (conflict). */
  private storeOne(item: StoredReceipt): AppendOutcome {
    let { receipt } = item;
    const { source, receivedAt } = item;
    let body = item.body ?? compactReceiptJson(receipt);
    if (this.stmt.insertFirst.run(receipt.run, receipt.event, body, source, receivedAt).changes === 1) return 'accepted';
    const canonical = canonicalReceiptJson(receipt);
    let stored = this.stmt.variants.all(receipt.run, receipt.event);
    if (stored.some((v) => canonicalReceiptJson(JSON.parse(v.body) as Receipt) === canonical)) return 'duplicate';
    if (item.scope !== undefined && source !== 'auditor') {
      // Other content under this (run, event), stored first by another source: that receipt is never masked or
      // replaced; this one is stored under its own source-scoped id (a redelivery finds it there).
      const scoped = sourceScopedEvent(item, this.stmt.firstSource.get(receipt.run, receipt.event)?.source);
      if (scoped !== null) {
        receipt = { ...receipt, event: scoped };
        body = compactReceiptJson(receipt);
        item.storedAs = receipt.event;
        if (this.stmt.insertFirst.run(receipt.run, receipt.event, body, source, receivedAt).changes === 1) return 'accepted';
        const scopedCanonical = canonicalReceiptJson(receipt);
        stored = this.stmt.variants.all(receipt.run, receipt.event);
        if (stored.some((v) => canonicalReceiptJson(JSON.parse(v.body) as Receipt) === scopedCanonical)) return 'duplicate';
      }
    }
    const nextVariant = stored.reduce((max, v) => Math.max(max, v.variant), 0) + 1;
    this.stmt.insertVariant.run(receipt.run, receipt.event, nextVariant, body, source, receivedAt);
    return 'conflict';
  }
}
