/**
 * The shared receipt store on PostgreSQL (issue 18; docs/postgres.md): any number of server instances append to
 * and read from one database. Same outcomes as the embedded SQLite store (receipt-store.ts): a redelivery with
 * equal canonical content is a duplicate, a different content under a stored (run, event) is a new variant (a
 * conflict), and an append resolves only after its transaction's COMMIT returned.
 *
 * Group commit: appends queued in the same event-loop turn, and those arriving while a commit is in flight, are
 * committed together in one transaction; at most one commit per PgStore is in flight. A failed commit rejects every
 * append of its group with StoreCommitError (nothing of the group is stored or acknowledged).
 *
 * Ordering lock: every append transaction first takes `pg_advisory_xact_lock(LOG_LOCK)` and holds it to COMMIT, so
 * across all instances `seq` values are assigned and become visible in commit order: a reader tailing `seq > X`
 * never skips a row that commits later with a lower seq. (Without it, two instances' transactions could commit in the
 * opposite order of their sequence values.) Inside the lock a group of new receipts is inserted with one batched
 * statement; when a receipt was stored before (a retry or a conflict), the stored variants of the group's keys are
 * read once instead and every delivery is decided in input order, so outcomes and `seq` order are the SQLite
 * store's. Prune takes the same lock.
 *
 * Leases: one row per hash partition of run ids; an owner renews before `expires_at` (database clock `now()`);
 * an expired lease is lost and any instance may claim it (FOR UPDATE SKIP LOCKED). Every claim raises the lease's
 * `epoch`. Fencing: an owner's writes (verdict states, pruning, deleting span records it replayed) carry the epochs
 * this store holds and change only rows of partitions whose lease is still this instance's, at that epoch and
 * unexpired, checked by the database in the writing statement with the lease rows share-locked (a claim waits
 * for it or skips the partition): an instance that was paused past its lease writes nothing there.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { PoolClient } from 'pg';
import type { AckRecord, Pin, Receipt, Verdict } from '../core/types.js';
import { sharedPin } from '../core/registry.js';
import { canonicalReceiptJson, compactReceiptJson } from '../core/canonical.js';
import {
  StoreCommitError,
  countOutcome,
  emptyResult,
  StoreRowError,
  scopedEventId,
  sourceScopedEvent,
  type AppendOutcome,
  type AppendPin,
  type AppendResult,
  type LiveRun,
  type PinRecord,
  type SpanLogEntry,
  type StoredReceipt,
} from './types.js';
import { DEFAULT_PARTITIONS, LOG_LOCK, MIGRATION_LOCK, migrate } from './pg-schema.js';
import { SpanLogPruner, type Slicer, type SpanLogRows } from './span-log-prune.js';

/** An instance whose trust configuration differs from the live cluster's (PgStore.joinTrust). */

/**
 * The one statement that stores a group's receipt rows ($1-$7: run, event, variant, body, source, received_at, part,
 * one typed array each, inserted in order, ON CONFLICT DO NOTHING), touches `runs` for the rows that went in (in run
 * order, as setVerdictStates, so the two never wait on each other's row locks in a cycle; a run whose first_at and
 * updated_at would not change is left as it is) and inserts the span log entries ($8-$12: trace_id, part, logged_at,
 * body, forwarded); $13 the instance, $14 its life; the first pins the appends carry ($15, JSON, in run order as
 * setPins; ON CONFLICT DO NOTHING: the first pin written wins) and their contracts' content ($16, JSON, by hash, first
 * write wins). `gate` is a condition evaluated before the first row goes in (the fast path takes the ordering lock
 * there: before a receipt or a pin row goes in); `inserted` computes the answer from `n`, the number of receipt rows
 * that went in; `pinned` lists the runs whose pin went in. Rows and span log entries come as typed arrays (unnest):
 * as one jsonb parameter, its parse (jsonb_in) was ~5% of PostgreSQL's CPU in the append (issue 35). The bodies ($4,
 * $11) are compact JSON, which holds no raw newline: `joined`, each column comes as one text of the bodies joined by
 * newlines (split by string_to_array; no escaping on either side); otherwise (a body with a newline: never one this
 * build writes) as a text[].
 */
function writeRowsSql(gate: string, inserted: string, joined: boolean): string {
  const bodies = (n: number): string => (joined ? `string_to_array($${n}::text, E'\\n')` : `$${n}::text[]`);
  return `WITH ins AS (
     INSERT INTO receipts (run, event, variant, body, source, received_at, origin, part)
     SELECT e.run, e.event, e.variant, e.body, e.source, e.received_at, $13, e.part
     FROM unnest($1::text[], $2::text[], $3::int[], ${bodies(4)}, $5::text[], $6::bigint[], $7::int[])
       WITH ORDINALITY AS e(run, event, variant, body, source, received_at, part, ord)
     WHERE ${gate}
     ORDER BY e.ord
     ON CONFLICT (run, event, variant) DO NOTHING
     RETURNING run, part, received_at
   ), touched AS (
     INSERT INTO runs (run, part, first_at, updated_at)
     SELECT run, min(part), min(received_at), max(received_at) FROM ins GROUP BY run ORDER BY run
     ON CONFLICT (run) DO UPDATE SET first_at = LEAST(runs.first_at, excluded.first_at),
       updated_at = GREATEST(runs.updated_at, excluded.updated_at)
     WHERE runs.first_at > excluded.first_at OR runs.updated_at < excluded.updated_at
   ), spans AS (
     INSERT INTO span_log (trace_id, part, origin, logged_at, body, forwarded, life)
     SELECT s.trace_id, s.part, $13, s.logged_at, s.body, s.forwarded, $14
     FROM unnest($8::text[], $9::int[], $10::bigint[], ${bodies(11)}, $12::boolean[])
       WITH ORDINALITY AS s(trace_id, part, logged_at, body, forwarded, ord)
     ORDER BY s.ord
   ), pinned AS (
     INSERT INTO pins (run, contract, version, phase, contract_hash)
     SELECT p.v->>0, p.v->>1, p.v->>2, p.v->>3, p.v->>4
     FROM jsonb_array_elements($15::jsonb) WITH ORDINALITY AS p(v, ord)
     WHERE ${gate}
     ORDER BY p.ord
     ON CONFLICT (run) DO NOTHING
     RETURNING run
   ), pinned_contracts AS (
     INSERT INTO contracts (hash, contract, version, content)
     SELECT k.v->>0, k.v->>1, k.v->>2, k.v->>3
     FROM jsonb_array_elements($16::jsonb) WITH ORDINALITY AS k(v, ord)
     WHERE ${gate}
     ORDER BY k.ord
     ON CONFLICT (hash) DO NOTHING
   )
   SELECT ${inserted} AS inserted, (SELECT coalesce(json_agg(run), '[]'::json) FROM pinned) AS pinned
   FROM (SELECT count(*) AS n FROM ins) AS c`;
}

export class TrustMismatchError extends Error {}

export interface PgStoreOptions {
  /** This server instance's id: recorded as `origin` of its rows and as lease owner. */
  instance: string;
  /** Hash partitions of a NEW schema (default 64); an existing schema keeps its own count (see `partitions`). */
  partitions?: number;
  /** A group takes whole queued appends until it holds at least this many receipts. Default 2000. */
  groupCommitMaxBatch?: number;
  /** Connections in the pool. Default 4. */
  poolSize?: number;
  /** Appends are refused (StoreCommitError, code STORE_SATURATED) while more than this many receipts wait. Default 50,000. */
  maxQueuedReceipts?: number;
  /** Longest wait for a lock (the ordering lock, a row lock) before the statement fails. Default 15,000 ms. */
  lockTimeoutMs?: number;
  /**
   * A session idle inside a transaction longer than this is ended by the database (its transaction rolled back, its
   * locks released): an instance paused inside an append holds the ordering lock at most this long. Default 2,000 ms.
   */
  idleInTransactionMs?: number;
  /** Called after each group commit lands, with its duration in seconds and its number of receipts. */
  onCommit?: (seconds: number, receipts: number) => void;
  /**
   * Every statement's deadline (issue 49): the database cancels a statement running longer (statement_timeout), and
   * the client gives up on an answer that has not come QUERY_GRACE_MS after it (a hung socket: the connection is
   * dropped from the pool and replaced). Default 30,000 ms.
   */
  statementTimeoutMs?: number;
  /** The deadline of a heartbeat (`beat`, on its own connection): past it the beat failed. Default 3,000 ms. */
  beatTimeoutMs?: number;
}

/** How long after its statement_timeout the client gives up on an answer (the socket hangs: no answer, no reset). */
const QUERY_GRACE_MS = 2_000;
/** TCP keepalive of every connection: a peer gone silently is noticed by the kernel (probes after this idle time). */
const KEEPALIVE_IDLE_MS = 5_000;

/** A statement whose answer did not come in time (node-postgres's client-side query_timeout). */
const isReadTimeout = (e: unknown): boolean => (e as Error)?.message === 'Query read timeout';

export interface TailedReceipt {
  seq: number;
  receipt: Receipt;
  variant: number;
  source: string;
  origin: string;
  receivedAt: number;
}

/** An acknowledgement as acksSince reads it. */
export interface AckSince {
  seq: number;
  run: string;
  verdict: string;
  ackedAt: number;
  by: string | null;
  reason: string | null;
}

export interface ListedRun {
  run: string;
  verdict: string | null;
  settled: boolean;
  firstAt: number;
  updatedAt: number;
  /** The verdict its owner last wrote for the list views (compact JSON of a RunVerdict without `run`), or null. */
  listed: string | null;
}

export interface LeaseRow {
  part: number;
  owner: string | null;
  /** Milliseconds until the lease expires (negative: expired), by the database clock. */
  expiresInMs: number;
}

interface QueuedAppend {
  items: StoredReceipt[];
  spanLog: SpanLogEntry[];
  pins: readonly AppendPin[];
  promise: Promise<AppendResult>;
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

interface StoredVariant {
  body: string;
  canonical?: string;
}

/** A receipt row to insert, decided. */
interface NewRow {
  receipt: Receipt;
  body: string;
  variant: number;
  source: string;
  receivedAt: number;
}

interface KeyState {
  variants: StoredVariant[];
  maxVariant: number;
  /** The source of variant 0 (the first stored), for the source-scoped event id rule. */
  firstSource?: string;
}

/** Whether a key already holds this receipt's canonical content (a duplicate). */
function holds(state: KeyState, receipt: Receipt): boolean {
  const canonical = canonicalReceiptJson(receipt);
  return state.variants.some((v) => {
    v.canonical ??= canonicalReceiptJson(JSON.parse(v.body) as Receipt);
    return v.canonical === canonical;
  });
}

type Row = Record<string, unknown>;

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

/** The span-log prune starts again from the first row every this many passes (about a minute at one pass in 5 s). */
const SPAN_LOG_RESCAN_PASSES = 12;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/**
 * The partitions whose lease this instance ($1) holds at the epochs it knows ($2 parts, $3 epochs), unexpired by the
 * database clock, their lease rows share-locked until the writing transaction ends (a claim skips or waits for them).
 */
const FENCE_CTE = `mine AS (
  SELECT l.part FROM leases l JOIN unnest($2::int[], $3::bigint[]) AS f(part, epoch) ON f.part = l.part AND f.epoch = l.epoch
  WHERE l.owner = $1 AND l.expires_at > now() FOR SHARE OF l
)`;

/** A span_log row as the span-log readers return it. */
const spanLogEntry = (r: Row): { seq: number; traceId: string; origin: string; body: string } => ({ seq: Number(r.seq), traceId: r.trace_id as string, origin: r.origin as string, body: r.body as string });

/** A tailed receipt row (seq, run, event, variant, body, source, origin, received_at) as the tail answers it. */
function tailedReceiptOf(row: Row): TailedReceipt {
  return {
    seq: Number(row.seq),
    receipt: parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(row.run)}, event ${JSON.stringify(row.event)})`),
    variant: row.variant as number,
    source: row.source as string,
    origin: row.origin as string,
    receivedAt: Number(row.received_at),
  };
}

/**
 * The heartbeat as CTEs (`up`, `forgotten`) of one statement: this instance ($1) alive for $2 ms by the database
 * clock, at its live limit or not ($3), in its life $4; instances silent for a day forgotten. Used by heartbeat and beat.
 */
const HEARTBEAT_CTE = `up AS (
         INSERT INTO instances (id, seen_at, expires_at, at_limit, life) VALUES ($1, now(), now() + $2::bigint * interval '1 millisecond', $3, $4)
         ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at, at_limit = excluded.at_limit, life = excluded.life
         RETURNING id
       ), forgotten AS (
         DELETE FROM instances WHERE expires_at < now() - interval '1 day' AND id <> $1
       )`;

/**
 * The hash partition of a run or trace id: FNV-1a (32 bit) over its UTF-8 bytes, modulo `partitions`. Stable across
 * instances, builds and platforms (a lone surrogate hashes as U+FFFD, as TextEncoder encodes it).
 */
export function partitionOf(key: string, partitions: number): number {
  let h = FNV_OFFSET;
  const mix = (byte: number): void => {
    h = Math.imul(h ^ byte, FNV_PRIME) >>> 0;
  };
  for (let i = 0; i < key.length; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      mix(c);
      continue;
    }
    if (c < 0x800) {
      mix(0xc0 | (c >> 6));
      mix(0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < key.length) {
      const d = key.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        mix(0xf0 | (cp >> 18));
        mix(0x80 | ((cp >> 12) & 0x3f));
        mix(0x80 | ((cp >> 6) & 0x3f));
        mix(0x80 | (cp & 0x3f));
        i++;
        continue;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    mix(0xe0 | (c >> 12));
    mix(0x80 | ((c >> 6) & 0x3f));
    mix(0x80 | (c & 0x3f));
  }
  return h % partitions;
}

function saturated(waiting: number): StoreCommitError {
  const cause = Object.assign(new Error(`store saturated: ${waiting} receipts wait for commit`), { code: 'STORE_SATURATED' });
  return new StoreCommitError(cause);
}

function parseBody(body: string, table: string, row: string): Receipt {
  try {
    return JSON.parse(body) as Receipt;
  } catch (e) {
    throw new StoreRowError(table, row, (e as Error).message);
  }
}

function liveRunOf(row: Row): LiveRun {
  const hasPin = row.contract !== null && row.contract !== undefined;
  return {
    run: row.run as string,
    firstAt: Number(row.first_at),
    updatedAt: Number(row.updated_at),
    verdict: (row.verdict as Verdict | null) ?? null,
    settled: row.settled === true,
    pin: hasPin ? { contract: row.contract as string, version: row.version as string, phase: row.phase as string } : null,
    contractHash: hasPin ? (row.contract_hash as string) : null,
  };
}

const noop = (): void => {};

/**
 * The pool of a store: every statement with a deadline (statement_timeout on the server, query_timeout on the client
 * for a socket that hangs), TCP keepalive, and a session idle in a transaction ended by the database.
 */
function newPool(url: string, opts: PgStoreOptions): pg.Pool {
  const statementTimeoutMs = Math.max(1, opts.statementTimeoutMs ?? 30_000);
  const pool = new pg.Pool({
    connectionString: url,
    max: Math.max(1, opts.poolSize ?? 4),
    connectionTimeoutMillis: 10_000,
    statement_timeout: statementTimeoutMs,
    query_timeout: statementTimeoutMs + QUERY_GRACE_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    idleTimeoutMillis: 30_000,
    // A server that stalls inside a transaction (a pause, a long GC) must not hold the ordering lock for long: the
    // database ends its session, the others go on (issue 32).
    idle_in_transaction_session_timeout: Math.max(1, opts.idleInTransactionMs ?? 2_000),
    lock_timeout: Math.max(1, opts.lockTimeoutMs ?? 15_000),
    application_name: `topology-audit/${opts.instance}`.slice(0, 63),
  });
  // An idle connection that breaks (server restart) is dropped by the pool; the next query reports the failure.
  pool.on('error', noop);
  // Span log bodies (~14 KB per trace entry) are TOASTed and compressed on insert: with the default pglz that was
  // ~14% of PostgreSQL's CPU in the append (issue 35). lz4 (PostgreSQL 14+, when built with it) compresses several
  // times faster; where the setting is unknown or lz4 is missing the SET fails, harmlessly, and pglz stays.
  pool.on('connect', (client) => void client.query("SET default_toast_compression = 'lz4'").catch(noop));
  return pool;
}

/** Closes a client at once, whatever its socket does (a hung peer never answers the Terminate message). */
function destroyClient(client: pg.Client): void {
  client.end().catch(noop);
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/**
 * Over ~450 lines (about 1,000) on purpose: it is the one owner of the pool, of the fence (the leases' epochs every
 * owner write is checked against) and of the group-commit queue behind the ordering lock, and every statement that
 * must respect those (appends, verdict states, pins, span log, acks, leases, prune) lives beside them. Split by table,
 * each part would need the fence and the lock rule again. About half of its length is SQL text and doc comments.
 */
export class PgStore {
  readonly instance: string;
  readonly partitions: number;
  /** This process's life (one per open): span records it holds are its own; records of earlier lives are adopted. */
  readonly life = randomUUID();
  /** The leases this store holds, by partition: their epochs (fencing). */
  private readonly fence = new Map<number, number>();
  /**
   * When each partition's fence was last set by a claim or cleared by unfence (a count of such moves): a heartbeat
   * sent before that (it may run beside a claim or a release: the coordinator renews beside its steps) leaves it be.
   */
  private fenceMoves = 0;
  private readonly fenceMovedAt = new Map<number, number>();
  private fencedRows = 0;
  /**
   * Told of every verdict-state write (setVerdictStates): `taken` when its runs are sent (returns a token), `landed`
   * with the runs the database wrote (the others were refused by the fence), or null when the write failed. The
   * coordinator counts a run's verdict transitions once they are in the shared table (metrics sum to the truth over a
   * takeover).
   */
  /** Prune only held span records of partitions whose lease this store holds (the coordinator, `--span-routing any`). */
  pruneHeldOfOwnedOnly = false;
  /** The span-log prune's cursor and held traces, per origin (this process's instance id). */
  private readonly spanLogPruners = new Map<string, SpanLogPruner>();
  onVerdictWrite: { taken(runs: readonly string[]): unknown; landed(token: unknown, written: ReadonlySet<string> | null): void } | null = null;

  private pool: pg.Pool;
  private readonly maxBatch: number;
  private readonly maxQueued: number;
  private readonly onCommit: ((seconds: number, receipts: number) => void) | undefined;

  private queue: QueuedAppend[] = [];
  private queuedReceipts = 0;
  private inFlight: QueuedAppend[] | null = null;
  private flushScheduled = false;
  private isHealthy = true;
  private closing: Promise<void> | null = null;
  private commitCount = 0;
  private failedCommitCount = 0;
  /** Contract hashes whose content an append of this store committed (content under a hash never changes). */
  private readonly storedContracts = new Set<string>();

  private readonly url: string;
  private readonly opts: PgStoreOptions;
  private readonly beatTimeoutMs: number;
  /** Pools replaced after a heartbeat got no answer (their connections may all be dead without a reset). */
  private poolsReplaced = 0;
  private poolReplacedInOutage = false;
  /** The heartbeat's own connection (never waits for a pool slot behind appends and reads); replaced after any failure. */
  private beatClient: pg.Client | null = null;
  /**
   * The last heartbeat failed or did not answer in time: appends are refused at once (503 + Retry-After, nothing
   * acknowledged) and readiness says so, until a heartbeat lands again.
   */
  private beatDown = false;

  private constructor(pool: pg.Pool, url: string, partitions: number, opts: PgStoreOptions) {
    this.pool = pool;
    this.partitions = partitions;
    this.instance = opts.instance;
    this.maxBatch = Math.max(1, opts.groupCommitMaxBatch ?? 2000);
    this.maxQueued = Math.max(1, opts.maxQueuedReceipts ?? 50_000);
    this.onCommit = opts.onCommit;
    this.url = url;
    this.opts = opts;
    this.beatTimeoutMs = Math.max(100, opts.beatTimeoutMs ?? 3_000);
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

  /** The hash partition of a run (or trace) id in this database. */
  partitionOf(key: string): number {
    return partitionOf(key, this.partitions);
  }

  /**
   * Stores receipts (and span log entries) of one delivery, and the first pins of its runs (`pins`, with their
   * contracts' content) in the same transaction: the result's `pins` are the pins in force. Resolves only after the
   * transaction holding them committed; appends of the same event-loop turn share it. Rejects with StoreCommitError
   * when the commit fails (nothing of the group stored) or when too many receipts already wait (code STORE_SATURATED).
   */
  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    if (this.closing !== null) return Promise.reject(new Error('receipt store is closed'));
    if (items.length === 0 && !spanLog?.length) return Promise.resolve(emptyResult());
    if (this.beatDown) return Promise.reject(new StoreCommitError(new Error('the database did not answer the last heartbeat in time')));
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

  /** False after a failed commit, until a later commit succeeds; and while the last heartbeat failed. */
  healthy(): boolean {
    return this.isHealthy && !this.beatDown;
  }

  /** Group commits landed and failed since open (receipts per commit, for metrics). */
  commitStats(): { commits: number; failedCommits: number } {
    return { commits: this.commitCount, failedCommits: this.failedCommitCount };
  }

  /**
   * Committed receipts with `seq > afterSeq`, in seq order, at most `limit`; only of partitions `parts` and not
   * appended by `excludeOrigin` when given. A tailer may also advance its position to a `headSeq()` read before a
   * call that returned fewer than `limit` rows: every seq up to a committed head is final.
   */
  async tail(afterSeq: number, limit: number, parts?: readonly number[], excludeOrigin?: string): Promise<TailedReceipt[]> {
    const where = ['seq > $1'];
    const values: unknown[] = [afterSeq, limit];
    if (parts !== undefined) {
      values.push([...parts]);
      where.push(`part = ANY($${values.length}::int[])`);
    }
    if (excludeOrigin !== undefined) {
      values.push(excludeOrigin);
      where.push(`origin <> $${values.length}`);
    }
    // Named (parsed and planned once per connection): the coordinator tails every 100 ms.
    const res = await this.pool.query({
      name: `ta_tail_v1_${parts !== undefined ? 'p' : ''}${excludeOrigin !== undefined ? 'o' : ''}`,
      text: `SELECT seq, run, event, variant, body, source, origin, received_at FROM receipts WHERE ${where.join(' AND ')} ORDER BY seq LIMIT $2`,
      values,
    });
    return res.rows.map(tailedReceiptOf);
  }

  /**
   * One round trip for an owner's tail read (ClusterCoordinator, every 100 ms): `acksSince(ackAfter, parts)`,
   * `tail(afterSeq, limit, parts, excludeOrigin)` and `headSeq()` as one statement, answered from one snapshot (the
   * acknowledgements and the head as values on every row; a row with no receipt when none is new). When fewer than
   * `limit` receipts come back, every receipt up to `head` that the tail would return is among them (same snapshot;
   * every seq up to a committed head is final), so the tailer may move its position to `head`: the next read does not
   * walk again over the rows it filtered out (its own, other partitions'). Without that, a lone instance's tail read
   * every row it had stored since it started, ten times a second (issue 35, round 3).
   */
  async tailWithAcks(
    afterSeq: number,
    limit: number,
    parts: readonly number[],
    excludeOrigin: string,
    ackAfter: number,
  ): Promise<{ receipts: TailedReceipt[]; acks: AckSince[]; head: number }> {
    if (parts.length === 0) return { receipts: [], acks: [], head: afterSeq };
    const res = await this.pool.query({
      name: 'ta_tail_acks_v2',
      text: `SELECT a.acks, a.head, r.seq, r.run, r.event, r.variant, r.body, r.source, r.origin, r.received_at
       FROM (SELECT coalesce((SELECT json_agg(x ORDER BY x.seq) FROM (
           SELECT seq, run, verdict, acked_at, acked_by, reason FROM acks WHERE part = ANY($3::int[]) AND seq > $5 ORDER BY seq LIMIT 10000
         ) AS x), '[]'::json) AS acks, (SELECT coalesce(max(seq), 0) FROM receipts) AS head) AS a
       LEFT JOIN LATERAL (
         SELECT seq, run, event, variant, body, source, origin, received_at FROM receipts
         WHERE seq > $1 AND part = ANY($3::int[]) AND origin <> $4 ORDER BY seq LIMIT $2
       ) AS r ON true
       ORDER BY r.seq`,
      values: [afterSeq, limit, [...parts], excludeOrigin, ackAfter],
    });
    const rows = res.rows as Row[];
    const acks = ((rows[0]?.acks ?? []) as Row[]).map((r) => ({ seq: Number(r.seq), run: r.run as string, verdict: r.verdict as string, ackedAt: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null }));
    const receipts: TailedReceipt[] = [];
    for (const row of rows) if (row.seq !== null && row.seq !== undefined) receipts.push(tailedReceiptOf(row));
    return { receipts, acks, head: Number(rows[0].head) };
  }

  /** The highest committed seq (0 when there is none). */
  async headSeq(): Promise<number> {
    const res = await this.pool.query('SELECT coalesce(max(seq), 0) AS head FROM receipts');
    return Number(res.rows[0].head);
  }

  /** A run's receipts in seq order, every variant. A body that is not JSON throws StoreRowError naming the row. */
  async runReceipts(run: string): Promise<Receipt[]> {
    const res = await this.pool.query('SELECT seq, event, body FROM receipts WHERE run = $1 ORDER BY seq', [run]);
    return res.rows.map((row: Row) =>
      parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(run)}, event ${JSON.stringify(row.event)})`));
  }

  /** The receipts of several runs, by run, each run's in insertion order (both versions of a conflict included). */
  async receiptsOfRuns(runs: readonly string[]): Promise<Map<string, Receipt[]>> {
    const out = new Map<string, Receipt[]>();
    if (runs.length === 0) return out;
    const res = await this.pool.query('SELECT seq, run, event, body FROM receipts WHERE run = ANY($1::text[]) ORDER BY seq', [[...runs]]);
    for (const row of res.rows as Row[]) {
      const run = row.run as string;
      let list = out.get(run);
      if (!list) out.set(run, (list = []));
      list.push(parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(run)}, event ${JSON.stringify(row.event)})`));
    }
    return out;
  }

  async getPin(run: string): Promise<PinRecord | null> {
    const res = await this.pool.query('SELECT contract, version, phase, contract_hash FROM pins WHERE run = $1', [run]);
    if (res.rows.length === 0) return null;
    const row = res.rows[0] as Row;
    return {
      pin: sharedPin(row.contract as string, row.version as string, row.phase as string),
      contractHash: row.contract_hash as string,
    };
  }

  /** Pins a run; the first pin written (by any instance) wins and is never changed. Returns the pin in force. */
  async setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord> {
    const res = await this.pool.query(
      `INSERT INTO pins (run, contract, version, phase, contract_hash) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (run) DO NOTHING`,
      [run, pin.contract, pin.version, pin.phase, contractHash],
    );
    if (res.rowCount === 1) return { pin: sharedPin(pin.contract, pin.version, pin.phase), contractHash };
    const inForce = await this.getPin(run);
    if (inForce === null) throw new Error(`postgres store: pin of run ${JSON.stringify(run)} vanished`);
    return inForce;
  }

  /**
   * Pins runs in one statement (one transaction, one WAL flush, rather than one per run); per run the first pin
   * written (by any instance) wins and is never changed. Returns the pins in force of the given runs.
   */
  async setPins(rows: readonly { run: string; pin: Pin; contractHash: string }[]): Promise<Map<string, PinRecord>> {
    const inForce = new Map<string, PinRecord>();
    if (rows.length === 0) return inForce;
    const first = new Map<string, { pin: Pin; contractHash: string }>();
    for (const r of rows) if (!first.has(r.run)) first.set(r.run, r);
    // Runs in key order, so two instances' pin writes never wait on each other's inserts in a cycle.
    const runs = [...first.keys()].sort();
    const of = (f: (r: { pin: Pin; contractHash: string }) => string) => runs.map((run) => f(first.get(run)!));
    await this.pool.query(
      `INSERT INTO pins (run, contract, version, phase, contract_hash)
       SELECT run, contract, version, phase, contract_hash
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(run, contract, version, phase, contract_hash, ord)
       ORDER BY ord
       ON CONFLICT (run) DO NOTHING`,
      [runs, of((r) => r.pin.contract), of((r) => r.pin.version), of((r) => r.pin.phase), of((r) => r.contractHash)],
    );
    const res = await this.pool.query('SELECT run, contract, version, phase, contract_hash FROM pins WHERE run = ANY($1::text[])', [runs]);
    for (const row of res.rows as Row[]) {
      inForce.set(row.run as string, {
        pin: sharedPin(row.contract as string, row.version as string, row.phase as string),
        contractHash: row.contract_hash as string,
      });
    }
    return inForce;
  }

  /** Stores pinned contract content by its hash (first write wins; a hash names one content). */
  async putContractContent(hash: string, contract: string, version: string, content: string): Promise<void> {
    await this.pool.query(
      'INSERT INTO contracts (hash, contract, version, content) VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING',
      [hash, contract, version, content],
    );
  }

  async getContractContent(hash: string): Promise<string | null> {
    const res = await this.pool.query('SELECT content FROM contracts WHERE hash = $1', [hash]);
    return res.rows.length === 0 ? null : (res.rows[0].content as string);
  }

  /**
   * Records runs' latest verdicts in one statement (the last row per run wins; updated_at only grows), each with
   * `listed`, the verdict as the list views show it (compact JSON; null when not given: a stale one is never kept).
   * Fenced: only rows of partitions whose lease this instance holds (at the epoch it holds, unexpired) are written.
   * Returns how many rows the fence refused.
   */
  async setVerdictStates(rows: readonly { run: string; verdict: Verdict; settled: boolean; updatedAt: number; listed?: string | null }[]): Promise<number> {
    if (rows.length === 0) return 0;
    const latest = new Map<string, { verdict: Verdict; settled: boolean; updatedAt: number; listed?: string | null }>();
    for (const r of rows) latest.set(r.run, r);
    const runs = [...latest.keys()];
    const [parts, epochs] = this.fenceArrays();
    const token = this.onVerdictWrite?.taken(runs);
    let res;
    try {
      // In run order, as appends touch runs, so the two never wait on each other's row locks in a cycle.
      res = await this.pool.query({
        name: 'ta_verdict_states_v2',
        text: `WITH ${FENCE_CTE}
         INSERT INTO runs (run, part, first_at, updated_at, verdict, settled, listed)
         SELECT run, part, updated_at, updated_at, verdict, settled, listed
         FROM unnest($4::text[], $5::int[], $6::bigint[], $7::text[], $8::boolean[], $9::text[]) AS u(run, part, updated_at, verdict, settled, listed)
         WHERE part IN (SELECT part FROM mine)
         ORDER BY run
         ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, settled = excluded.settled, listed = excluded.listed,
           updated_at = GREATEST(runs.updated_at, excluded.updated_at)
         RETURNING run`,
        values: [
          this.instance,
          parts,
          epochs,
          runs,
          runs.map((r) => this.partitionOf(r)),
          runs.map((r) => latest.get(r)!.updatedAt),
          runs.map((r) => latest.get(r)!.verdict),
          runs.map((r) => latest.get(r)!.settled),
          runs.map((r) => latest.get(r)!.listed ?? null),
        ],
      });
    } catch (e) {
      this.onVerdictWrite?.landed(token, null);
      throw e;
    }
    const written = new Set<string>(res.rows.map((r: Row) => r.run as string));
    this.onVerdictWrite?.landed(token, written);
    const refused = runs.length - written.size;
    this.fencedRows += refused;
    return refused;
  }

  /** Records that an operator acknowledged `verdict` of `run` (the latest acknowledgement wins). */
  async putAck(run: string, ack: AckRecord): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(${LOG_LOCK})`);
      await client.query(
        `INSERT INTO acks (run, part, verdict, acked_at, seq, acked_by, reason) VALUES ($1, $2, $3, $4, nextval('acks_seq'), $5, $6)
         ON CONFLICT (run) DO UPDATE SET verdict = excluded.verdict, acked_at = excluded.acked_at, seq = excluded.seq, acked_by = excluded.acked_by, reason = excluded.reason`,
        [run, this.partitionOf(run), ack.verdict, ack.at, ack.by ?? null, ack.reason ?? null],
      );
    });
  }

  /** The latest acknowledgement of a run, from any instance. */
  async getAck(run: string): Promise<AckRecord | null> {
    const res = await this.pool.query('SELECT verdict, acked_at, acked_by, reason FROM acks WHERE run = $1', [run]);
    const r = res.rows[0] as Row | undefined;
    return r ? { verdict: r.verdict as Verdict, at: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null } : null;
  }

  /** Acknowledgements of partitions `parts` written after `afterSeq`, in seq order. */
  async acksSince(afterSeq: number, parts: readonly number[]): Promise<AckSince[]> {
    if (parts.length === 0) return [];
    const res = await this.pool.query({ name: 'ta_acks_since_v1', text: 'SELECT seq, run, verdict, acked_at, acked_by, reason FROM acks WHERE part = ANY($1::int[]) AND seq > $2 ORDER BY seq LIMIT 10000', values: [[...parts], afterSeq] });
    return res.rows.map((r: Row) => ({ seq: Number(r.seq), run: r.run as string, verdict: r.verdict as string, ackedAt: Number(r.acked_at), by: (r.acked_by as string | null) ?? null, reason: (r.reason as string | null) ?? null }));
  }

  /** Runs per stored verdict (runs not evaluated yet are left out), optionally of one pinned contract. */
  async verdictCounts(filter: { contract?: string }): Promise<Record<string, number>> {
    const res =
      filter.contract === undefined
        ? await this.pool.query('SELECT verdict, count(*) AS n FROM runs WHERE verdict IS NOT NULL GROUP BY verdict')
        : await this.pool.query('SELECT r.verdict, count(*) AS n FROM runs r JOIN pins p ON p.run = r.run WHERE r.verdict IS NOT NULL AND p.contract = $1 GROUP BY r.verdict', [filter.contract]);
    return Object.fromEntries(res.rows.map((r: Row) => [r.verdict as string, Number(r.n)]));
  }

  /** One run's row with its pin, or null when no receipt of it is stored. */
  async getRun(run: string): Promise<LiveRun | null> {
    const res = await this.pool.query(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = $1`,
      [run],
    );
    return res.rows.length ? liveRunOf(res.rows[0]) : null;
  }

  /** Runs' rows with their pins (those stored), in one query. */
  async getRuns(runs: readonly string[]): Promise<LiveRun[]> {
    if (runs.length === 0) return [];
    const res = await this.pool.query(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = ANY($1::text[])`,
      [[...runs]],
    );
    return res.rows.map(liveRunOf);
  }

  /**
   * Runs' rows with their pins and their receipts (each run's in seq order, every variant), in one query and one row
   * per run: the receipts come as one JSON array text per run (one parse each), not one row per receipt. Runs not
   * stored, or without receipts, are absent. For the list views of a cluster instance.
   */
  async runsWithReceipts(runs: readonly string[]): Promise<{ row: LiveRun; receipts: Receipt[] }[]> {
    if (runs.length === 0) return [];
    const res = await this.pool.query({
      name: 'ta_runs_with_receipts_v1',
      text: `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash,
               (SELECT '[' || string_agg(x.body, ',' ORDER BY x.seq) || ']' FROM receipts x WHERE x.run = r.run) AS bodies
             FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = ANY($1::text[])`,
      values: [[...runs]],
    });
    const out: { row: LiveRun; receipts: Receipt[] }[] = [];
    for (const row of res.rows as Row[]) {
      const bodies = row.bodies as string | null;
      if (bodies === null) continue;
      out.push({ row: liveRunOf(row), receipts: parseBody(bodies, 'receipts', `of run ${JSON.stringify(row.run)}`) as unknown as Receipt[] });
    }
    return out;
  }

  /** Pinned contract contents by hash (those stored), in one query. */
  async contractContents(hashes: readonly string[]): Promise<Map<string, string>> {
    if (hashes.length === 0) return new Map();
    const res = await this.pool.query('SELECT hash, content FROM contracts WHERE hash = ANY($1::text[])', [[...hashes]]);
    return new Map(res.rows.map((r: Row) => [r.hash as string, r.content as string]));
  }

  /** The runs of partitions `parts`, with their pins (to take over a partition), oldest first. */
  async partitionRuns(parts: readonly number[]): Promise<LiveRun[]> {
    if (parts.length === 0) return [];
    const res = await this.pool.query(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.part = ANY($1::int[]) ORDER BY r.first_at, r.run`,
      [[...parts]],
    );
    return res.rows.map(liveRunOf);
  }

  /**
   * Runs, newest first (by first receipt; `oldest`: oldest first), optionally of one verdict and/or one pinned
   * contract, each with the verdict its owner last wrote for the list views (`listed`, or null; null too for the runs
   * of partitions this instance holds, which the list views read from memory), leaving out the runs of partitions
   * `exceptParts` (those the caller lists from its memory); `after`: the page after that cursor (keyset). Lean for lists of 10,000 (issue 32):
   * no pin columns (the list views take the pin from `listed` or from memory), rows as arrays, instants as numbers.
   */
  async listRuns(filter: { verdict?: string; contract?: string; limit: number; oldest?: boolean; after?: { firstAt: number; run: string }; exceptParts?: readonly number[] }): Promise<ListedRun[]> {
    const where: string[] = [];
    const values: unknown[] = [filter.limit];
    if (filter.after) {
      // Keyset paging, as the embedded store pages: after the cursor in the listing's order.
      values.push(filter.after.firstAt, filter.after.run);
      const cmp = filter.oldest ? '>' : '<';
      where.push(`(r.first_at ${cmp} $${values.length - 1} OR (r.first_at = $${values.length - 1} AND r.run ${cmp} $${values.length}))`);
    }
    if (filter.exceptParts?.length) {
      if (filter.exceptParts.length >= this.partitions) return [];
      values.push([...filter.exceptParts]);
      where.push(`r.part <> ALL($${values.length}::int[])`);
    }
    if (filter.verdict !== undefined) {
      values.push(filter.verdict);
      where.push(`r.verdict = $${values.length}`);
    }
    if (filter.contract !== undefined) {
      values.push(filter.contract);
      where.push(`EXISTS (SELECT 1 FROM pins p WHERE p.run = r.run AND p.contract = $${values.length})`);
    }
    // The runs of partitions this instance holds are listed from its memory: their stored evaluation is not sent.
    values.push(this.fenceArrays()[0]);
    const heldParts = `$${values.length}::int[]`;
    const res = await this.pool.query({
      text: `SELECT r.run, r.first_at::float8, r.updated_at::float8, r.verdict, r.settled, CASE WHEN r.part = ANY(${heldParts}) THEN NULL ELSE r.listed END
       FROM runs r ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY ${filter.oldest ? 'r.first_at, r.run' : 'r.first_at DESC, r.run DESC'} LIMIT $1`,
      values,
      rowMode: 'array',
    });
    const out: ListedRun[] = new Array(res.rows.length);
    for (let i = 0; i < res.rows.length; i++) {
      const [run, firstAt, updatedAt, verdict, settled, listed] = res.rows[i] as [string, number, number, string | null, boolean, string | null];
      out[i] = { run, firstAt, updatedAt, verdict, settled, listed };
    }
    return out;
  }

  /**
   * Deletes settled runs of partitions `parts` last updated before `now - olderThanMs`: receipts, pin and run row,
   * in transactions of at most 500 runs under the ordering lock (so no append of the same run interleaves).
   * Returns how many runs.
   */
  async prune(olderThanMs: number, now: number, parts: readonly number[]): Promise<number> {
    if (parts.length === 0) return 0;
    const cutoff = now - olderThanMs;
    const batch = 500;
    let total = 0;
    for (;;) {
      const [fparts, epochs] = this.fenceArrays();
      const n = await this.inTransaction(async (client) => {
        await client.query(`SELECT pg_advisory_xact_lock(${LOG_LOCK})`);
        const res = await client.query(
          `WITH ${FENCE_CTE}, gone AS (
             DELETE FROM runs WHERE run IN (
               SELECT run FROM runs WHERE part = ANY($4::int[]) AND part IN (SELECT part FROM mine) AND settled AND updated_at < $5 LIMIT $6 FOR UPDATE
             ) RETURNING run
           ), pins_gone AS (
             DELETE FROM pins WHERE run IN (SELECT run FROM gone)
           ), receipts_gone AS (
             DELETE FROM receipts WHERE run IN (SELECT run FROM gone)
           ), acks_gone AS (
             DELETE FROM acks WHERE run IN (SELECT run FROM gone)
           )
           SELECT count(*) AS n FROM gone`,
          [this.instance, fparts, epochs, [...parts], cutoff, batch],
        );
        return Number(res.rows[0].n);
      });
      total += n;
      if (n < batch) return total;
    }
  }

  /** Span log entries of partitions `parts` (optionally of one origin), oldest first. */
  async spanLog(parts: readonly number[], origin?: string): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    if (parts.length === 0) return [];
    const values: unknown[] = [[...parts]];
    if (origin !== undefined) values.push(origin);
    const res = await this.pool.query(
      `SELECT seq, trace_id, origin, body FROM span_log WHERE part = ANY($1::int[]) ${origin !== undefined ? 'AND origin = $2' : ''} ORDER BY seq`,
      values,
    );
    return res.rows.map(spanLogEntry);
  }

  /**
   * Held (not forwarded) span records of partitions `parts` whose holder is gone: logged by a process (instance and
   * life) that is not alive, e.g. an instance killed, or one restarted under the same name (this one included).
   * After `afterSeq`, oldest first, at most `limit`. What a partition's owner adopts.
   */
  async orphanSpanLog(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    return (await this.orphanSpanLogPage(parts, afterSeq, limit, anyHolder)).entries;
  }

  /**
   * `orphanSpanLog` in one statement with, from the same snapshot, `head` (the highest span log seq, 0 when none) and
   * `live` (the live processes, instance and life, as one text): every seq up to a committed head is final (span log
   * rows are inserted by the append, under the ordering lock held to COMMIT), so a reader that got fewer than `limit`
   * rows has seen every adoptable record up to `head`; a record up to it becomes adoptable later only when its holder
   * stops being live, which changes `live` (issue 35, round 4: the adoption scan read every owned record twice a
   * second).
   */
  async orphanSpanLogPage(parts: readonly number[], afterSeq: number, limit: number, anyHolder = false): Promise<{ entries: { seq: number; traceId: string; origin: string; body: string }[]; head: number; live: string }> {
    if (parts.length === 0) return { entries: [], head: afterSeq, live: '' };
    // anyHolder (`--span-routing any`, where only a partition's owner holds its traces' records): every other process's
    // records are adopted, a live instance's that lost the partition too.
    const res = await this.pool.query({
      name: `ta_orphan_span_log_page_v1${anyHolder ? 'a' : ''}`,
      text: `SELECT h.head, h.live, s.seq, s.trace_id, s.origin, s.body
       FROM (SELECT (SELECT coalesce(max(seq), 0) FROM span_log) AS head,
               (SELECT coalesce(string_agg(i.id || '/' || i.life, ',' ORDER BY i.id, i.life), '') FROM instances i WHERE i.expires_at > now()) AS live) AS h
       LEFT JOIN LATERAL (
         SELECT s.seq, s.trace_id, s.origin, s.body FROM span_log s
         WHERE s.part = ANY($1::int[]) AND NOT s.forwarded AND s.seq > $2
           AND NOT (s.origin = $4 AND s.life = $5)
           ${anyHolder ? '' : 'AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = s.origin AND i.life = s.life AND i.expires_at > now())'}
         ORDER BY s.seq LIMIT $3
       ) AS s ON true
       ORDER BY s.seq`,
      values: [[...parts], afterSeq, limit, this.instance, this.life],
    });
    const rows = res.rows as Row[];
    const entries = rows.filter((r) => r.seq !== null && r.seq !== undefined).map(spanLogEntry);
    return { entries, head: Number(rows[0].head), live: rows[0].live as string };
  }

  /**
   * Span records forwarded (by any instance, this one included) to the owner of partitions `parts`, oldest first, at
   * most `limit`: the owner replays them into its own resolution, then deletes them.
   */
  async forwardedSpanLog(parts: readonly number[], limit: number): Promise<{ seq: number; traceId: string; origin: string; body: string }[]> {
    if (parts.length === 0) return [];
    const res = await this.pool.query({ name: 'ta_forwarded_span_log_v1', text: 'SELECT seq, trace_id, origin, body FROM span_log WHERE part = ANY($1::int[]) AND forwarded ORDER BY seq LIMIT $2', values: [[...parts], limit] });
    return res.rows.map(spanLogEntry);
  }

  /**
   * Forgets span log entries by seq, after the owner of their partitions replayed them: fenced, so an instance that
   * lost a partition meanwhile deletes nothing of it (its new owner reads them). Returns how many were deleted.
   */
  async deleteSpanLog(seqs: readonly number[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const [parts, epochs] = this.fenceArrays();
    const res = await this.pool.query(
      `WITH ${FENCE_CTE}
       DELETE FROM span_log WHERE seq = ANY($4::bigint[]) AND part IN (SELECT part FROM mine)`,
      [this.instance, parts, epochs, [...seqs]],
    );
    const n = res.rowCount ?? 0;
    this.fencedRows += seqs.length - n;
    return n;
  }

  /**
   * Forgets the held span records this process logged, older than `before`, whose trace holds no pending work any
   * more. Forwarded records are never pruned here: only their reader deletes them. Returns the count. A cursor walk by
   * seq in pages (src/store/span-log-prune.ts), set-based deletes by seq, pausing when `slicer`'s budget is spent; it
   * rescans from the start every SPAN_LOG_RESCAN_PASSES passes (rows of concurrent transactions may commit out of seq
   * order), which costs the rows left then: the pending ones.
   */
  async pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, origin: string, slicer?: Slicer): Promise<number> {
    let pruner = this.spanLogPruners.get(origin);
    if (pruner === undefined) {
      if (this.spanLogPruners.size >= 16) this.spanLogPruners.clear();
      this.spanLogPruners.set(origin, (pruner = new SpanLogPruner(this.spanLogRowsOf(origin), SPAN_LOG_RESCAN_PASSES)));
    }
    return pruner.prune(before, stillPending, slicer);
  }

  /** The prune's two statements over this process's own held records (with pruneHeldOfOwnedOnly: of owned partitions). */
  private spanLogRowsOf(origin: string): SpanLogRows {
    // With pruneHeldOfOwnedOnly, only records of partitions this store holds leases of: those of a partition it lost
    // are adopted by the new owner, never pruned unread here.
    const owned = () => (this.pruneHeldOfOwnedOnly ? [...this.fence.keys()] : null);
    return {
      after: async (after, limit) => {
        const parts = owned();
        if (parts !== null && parts.length === 0) return [];
        const res = await this.pool.query({
          name: `ta_span_log_prune_page_v1${parts !== null ? 'o' : ''}`,
          text: `SELECT seq, trace_id, logged_at FROM span_log WHERE seq > $1 AND origin = $2 AND life = $3 AND NOT forwarded ${parts !== null ? 'AND part = ANY($5::int[])' : ''} ORDER BY seq LIMIT $4`,
          values: parts !== null ? [after, origin, this.life, limit, parts] : [after, origin, this.life, limit],
        });
        return res.rows.map((r: Row) => ({ seq: Number(r.seq), traceId: r.trace_id as string, loggedAt: Number(r.logged_at) }));
      },
      remove: async (seqs) => {
        const parts = owned();
        if (parts !== null && parts.length === 0) return 0;
        const res = await this.pool.query({
          name: `ta_span_log_prune_delete_v1${parts !== null ? 'o' : ''}`,
          text: `DELETE FROM span_log WHERE seq = ANY($1::bigint[]) AND origin = $2 AND life = $3 AND NOT forwarded ${parts !== null ? 'AND part = ANY($4::int[])' : ''}`,
          values: parts !== null ? [[...seqs], origin, this.life, parts] : [[...seqs], origin, this.life],
        });
        return res.rowCount ?? 0;
      },
    };
  }

  /** The leases held (partition -> epoch) as two arrays for FENCE_CTE. */
  private fenceArrays(): [number[], number[]] {
    const parts = [...this.fence.keys()];
    return [parts, parts.map((p) => this.fence.get(p)!)];
  }

  /** Stops writing as the owner of `parts` (the coordinator dropped them: lapsed locally, or released). */
  unfence(parts: readonly number[]): void {
    for (const p of parts) {
      this.fence.delete(p);
      this.fenceMovedAt.set(p, ++this.fenceMoves);
    }
  }

  /** Owner writes (rows) the database refused since open because this instance no longer held the lease (fencing). */
  get fencedWrites(): number {
    return this.fencedRows;
  }

  /**
   * Marks this instance alive for `ttlMs` (database clock), and whether it is at its live limit (`full`). Returns how
   * many instances are alive, this one included.
   */
  async heartbeat(ttlMs: number, full = false): Promise<{ liveInstances: number }> {
    let res;
    try {
      res = await this.pool.query({
      name: 'ta_heartbeat_v1',
      text: `WITH ${HEARTBEAT_CTE}
       SELECT 1 + (SELECT count(*) FROM instances WHERE expires_at > now() AND id <> $1) AS live`,
      values: [this.instance, Math.round(ttlMs), full, this.life],
      });
    } catch (e) {
      this.isHealthy = false; // readiness follows the store with no traffic too (issue 32)
      throw e;
    }
    // The heartbeat is a committed write: the store can commit again (after a restart of PostgreSQL, say), even when
    // no export has come to prove it (a load balancer that waits for readiness sends none).
    this.isHealthy = true;
    return { liveInstances: Number(res.rows[0].live) };
  }

  /**
   * Joins the cluster's trust configuration: `digest` names this instance's ingest trust (its --ingest-tokens). In one
   * transaction under the migration lock, with a first heartbeat: when another instance is alive and the cluster's
   * recorded digest differs, nothing changes and this throws (the instance must not join); otherwise the digest is
   * recorded (the first instance, or every one restarted with a new file once none of the old ones is alive).
   */
  async joinTrust(digest: string, ttlMs: number): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
      const res = await client.query(
        `SELECT (SELECT value FROM meta WHERE key = 'ingest_trust') AS digest,
           (SELECT string_agg(id, ', ' ORDER BY id) FROM instances WHERE expires_at > now() AND id <> $1) AS live`,
        [this.instance],
      );
      const recorded = (res.rows[0].digest as string | null) ?? null;
      const live = (res.rows[0].live as string | null) ?? null;
      if (recorded !== null && recorded !== digest && live !== null) {
        throw new TrustMismatchError(`postgres store: this instance's ingest trust configuration (--ingest-tokens) differs from the cluster's (live instances: ${live}); every instance must be given the same token file (refusing to join)`);
      }
      await client.query(`INSERT INTO meta (key, value) VALUES ('ingest_trust', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, [digest]);
      await client.query(
        `INSERT INTO instances (id, seen_at, expires_at, at_limit, life) VALUES ($1, now(), now() + $2::bigint * interval '1 millisecond', false, $3)
         ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at, life = excluded.life`,
        [this.instance, Math.round(ttlMs), this.life],
      );
    });
  }

  /**
   * The renewal step of a coordinator (every ttl/5, at most 500 ms) in one statement and one round trip: heartbeat
   * (as `heartbeat`), lease renewal (as `renewLeases`: the fence follows it) and the partitions of other instances at
   * their live limit (as `fullPartitions`), from one snapshot. Readiness follows it as the heartbeat's.
   */
  async beat(ttlMs: number, full: boolean): Promise<{ liveInstances: number; held: number[]; fullParts: number[]; dbNow: number }> {
    let res;
    const movesSent = this.fenceMoves;
    try {
      const client = await this.beatConnection();
      res = await client.query({
        name: 'ta_beat_v2',
        text: `WITH ${HEARTBEAT_CTE}, renewed AS (
           UPDATE leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
           WHERE owner = $1 AND expires_at > now() RETURNING part, epoch
         )
         SELECT 1 + (SELECT count(*) FROM instances WHERE expires_at > now() AND id <> $1) AS live,
           (SELECT coalesce(json_agg(json_build_array(part, epoch)), '[]'::json) FROM renewed) AS held,
           (SELECT coalesce(json_agg(l.part ORDER BY l.part), '[]'::json) FROM leases l JOIN instances i ON i.id = l.owner
            WHERE i.at_limit AND i.expires_at > now() AND l.expires_at > now() AND l.owner <> $1) AS full_parts,
           (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS db_now`,
        values: [this.instance, Math.round(ttlMs), full, this.life],
        query_timeout: this.beatTimeoutMs,
      } as pg.QueryConfig);
    } catch (e) {
      this.isHealthy = false; // readiness follows the store with no traffic too (issue 32)
      this.dropBeatConnection();
      // No answer at all (not an error answer): the network may hold every connection of the pool dead without a
      // reset (a black hole, a half-open connection), where each would wait for its own deadline. New connections
      // replace them; statements still on the old ones fail at their deadlines.
      // Once per outage (until a heartbeat lands): a long black hole does not pile up pools of dead sockets.
      if (!this.poolReplacedInOutage && (isReadTimeout(e) || /connection timeout/i.test((e as Error)?.message ?? ''))) {
        this.poolReplacedInOutage = true;
        this.replacePool();
      }
      // Appends waiting for a commit behind a connection that may hang: refused now (nothing was acknowledged).
      this.beatOverdue();
      throw e;
    }
    this.isHealthy = true;
    this.beatDown = false;
    this.poolReplacedInOutage = false;
    const row = res.rows[0] as Row;
    const held = new Set<number>();
    const settled = (p: number) => (this.fenceMovedAt.get(p) ?? 0) <= movesSent;
    for (const [part, epoch] of row.held as [number, number | string][]) {
      held.add(part);
      if (settled(part)) this.fence.set(part, Number(epoch));
    }
    for (const p of [...this.fence.keys()]) if (!held.has(p) && settled(p)) this.fence.delete(p);
    return { liveInstances: Number(row.live), held: [...held].sort((a, b) => a - b), fullParts: row.full_parts as number[], dbNow: Number(row.db_now) };
  }

  /** Swaps the pool for a new one; the old one closes once its connections are released (by answer or deadline). */
  private replacePool(): void {
    if (this.closing !== null) return;
    const old = this.pool;
    this.pool = newPool(this.url, this.opts);
    this.poolsReplaced++;
    old.end().catch(noop);
  }

  /** Heartbeats that failed and pools replaced since open (for metrics and tests). */
  beatStats(): { down: boolean; poolsReplaced: number } {
    return { down: this.beatDown, poolsReplaced: this.poolsReplaced };
  }

  /**
   * The coordinator's renewal is overdue (its step has not come back within the beat's deadline: a hung statement
   * ahead of it): not ready, appends refused, as for a failed beat, until a beat lands.
   */
  beatOverdue(): void {
    if (this.beatDown) return;
    this.isHealthy = false;
    this.beatDown = true;
    const queued = this.queue.splice(0);
    this.queuedReceipts = 0;
    const error = new StoreCommitError(new Error('the database did not answer the heartbeat in time'));
    for (const a of queued) a.reject(error);
  }

  /** The heartbeat's connection, opened when missing (every deadline its own: connect, statement, answer). */
  private async beatConnection(): Promise<pg.Client> {
    if (this.beatClient !== null) return this.beatClient;
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: this.beatTimeoutMs,
      statement_timeout: this.beatTimeoutMs,
      query_timeout: this.beatTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
      application_name: `topology-audit/${this.instance}/beat`.slice(0, 63),
    });
    client.on('error', noop);
    try {
      await client.connect();
    } catch (e) {
      destroyClient(client);
      throw e;
    }
    this.beatClient = client;
    return client;
  }

  /** A failed or late heartbeat: its connection is dropped (the socket destroyed: it may hang) and the next beat opens another. */
  private dropBeatConnection(): void {
    const client = this.beatClient;
    this.beatClient = null;
    if (client) destroyClient(client);
  }

  /** The partitions leased to another live instance that is at its live limit (ascending). */
  async fullPartitions(): Promise<number[]> {
    const res = await this.pool.query({
      name: 'ta_full_partitions_v1',
      text: `SELECT l.part FROM leases l JOIN instances i ON i.id = l.owner
       WHERE i.at_limit AND i.expires_at > now() AND l.expires_at > now() AND l.owner <> $1 ORDER BY l.part`,
      values: [this.instance],
    });
    return res.rows.map((r: Row) => r.part as number);
  }

  /** Which of `runs` the shared store has (any receipt stored). */
  async knownRuns(runs: readonly string[]): Promise<Set<string>> {
    if (runs.length === 0) return new Set();
    const res = await this.pool.query('SELECT run FROM runs WHERE run = ANY($1::text[])', [[...runs]]);
    return new Set(res.rows.map((r: Row) => r.run as string));
  }

  /** The instances whose heartbeat has not expired (this one included once it has beaten). */
  async liveInstances(): Promise<string[]> {
    const res = await this.pool.query('SELECT id FROM instances WHERE expires_at > now() ORDER BY id');
    return res.rows.map((r: Row) => r.id as string);
  }

  /** Extends this instance's leases that have not expired; returns the partitions it still holds (ascending). */
  async renewLeases(ttlMs: number): Promise<number[]> {
    const res = await this.pool.query({
      name: 'ta_renew_v1',
      text: `UPDATE leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
       WHERE owner = $1 AND expires_at > now() RETURNING part, epoch`,
      values: [this.instance, Math.round(ttlMs)],
    });
    const held = new Set<number>();
    for (const r of res.rows as Row[]) {
      held.add(r.part as number);
      this.fence.set(r.part as number, Number(r.epoch));
    }
    for (const p of [...this.fence.keys()]) if (!held.has(p)) this.fence.delete(p);
    return [...held].sort((a, b) => a - b);
  }

  /** Claims up to `max` partitions that are free or whose lease expired; returns those newly claimed (ascending). */
  async claimLeases(max: number, ttlMs: number): Promise<number[]> {
    if (max <= 0) return [];
    const res = await this.pool.query(
      `WITH free AS (
         SELECT part FROM leases WHERE owner IS NULL OR expires_at <= now()
         ORDER BY part LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       UPDATE leases l SET owner = $1, expires_at = now() + $3::bigint * interval '1 millisecond', epoch = l.epoch + 1
       FROM free WHERE l.part = free.part RETURNING l.part, l.epoch`,
      [this.instance, Math.floor(max), Math.round(ttlMs)],
    );
    for (const r of res.rows as Row[]) {
      this.fence.set(r.part as number, Number(r.epoch));
      this.fenceMovedAt.set(r.part as number, ++this.fenceMoves);
    }
    return res.rows.map((r: Row) => r.part as number).sort((a, b) => a - b);
  }

  /** Gives up this instance's leases of `parts` (another instance may claim them at once). */
  async releaseLeases(parts: readonly number[]): Promise<void> {
    if (parts.length === 0) return;
    this.unfence(parts);
    await this.pool.query(
      'UPDATE leases SET owner = NULL, expires_at = now() WHERE owner = $1 AND part = ANY($2::int[])',
      [this.instance, [...parts]],
    );
  }

  /** Every partition's owner and time to expiry (database clock). */
  async leaseTable(): Promise<LeaseRow[]> {
    const res = await this.pool.query(
      `SELECT part, owner, (extract(epoch FROM (expires_at - now())) * 1000)::float8 AS ms FROM leases ORDER BY part`,
    );
    return res.rows.map((r: Row) => ({ part: r.part as number, owner: (r.owner as string | null) ?? null, expiresInMs: Number(r.ms) }));
  }

  /** Committed rows: receipts (conflicting variants included) and runs. */
  async counts(): Promise<{ receipts: number; runs: number }> {
    const res = await this.pool.query('SELECT (SELECT count(*) FROM receipts) AS receipts, (SELECT count(*) FROM runs) AS runs');
    return { receipts: Number(res.rows[0].receipts), runs: Number(res.rows[0].runs) };
  }

  /**
   * Commits what is queued, gives up this instance's leases and liveness (so others take over at once), and closes
   * the pool. Appends after close are rejected.
   */
  close(): Promise<void> {
    if (this.closing === null) this.closing = this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.dropBeatConnection();
    await this.sync().catch(noop);
    try {
      this.fence.clear();
      await this.pool.query('UPDATE leases SET owner = NULL, expires_at = now() WHERE owner = $1', [this.instance]);
      await this.pool.query('UPDATE instances SET expires_at = now() WHERE id = $1', [this.instance]);
    } catch {
      // The database is gone: the leases expire by themselves.
    }
    await this.pool.end().catch(noop);
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
      this.isHealthy = true;
      this.commitCount++;
      group.forEach((a, i) => a.resolve(results[i]));
      try {
        this.onCommit?.(Number(process.hrtime.bigint() - started) / 1e9, receipts);
      } catch {
        // A metrics callback cannot un-acknowledge a committed group.
      }
    } catch (err) {
      this.isHealthy = false;
      this.failedCommitCount++;
      const error = err instanceof StoreCommitError ? err : new StoreCommitError(err);
      for (const a of group) a.reject(error);
    } finally {
      this.inFlight = null;
      this.scheduleFlush();
    }
  }

  /** Runs `work` in a transaction opened by `begin` (one round trip; may hold more statements, no parameters). */
  private async inTransaction<T>(work: (client: PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    const client = await this.pool.connect();
    client.on('error', noop);
    let failed = false;
    try {
      // `work`'s first statement is queued behind BEGIN (sent as soon as BEGIN's answer arrives, with no turn of the
      // event loop between): the session is never idle inside the transaction waiting for this process's other work,
      // only while a statement's answer is handled. If BEGIN (or the ordering lock with it) fails, its error is thrown.
      const began = client.query(begin);
      began.catch(noop);
      const value = await work(client).catch(async (e: unknown) => {
        await began;
        throw e;
      });
      await began;
      await client.query('COMMIT');
      return value;
    } catch (err) {
      failed = true;
      // A statement with no answer: the connection is dropped (below), which ends the transaction on the server; a
      // ROLLBACK would only wait behind it.
      if (!isReadTimeout(err)) await client.query('ROLLBACK').catch(noop);
      throw err;
    } finally {
      client.removeListener('error', noop);
      // After a failure the connection's state is unknown: drop it rather than return it to the pool.
      client.release(failed);
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
    const results = await this.inTransaction(async (client) => {
      const { results, rows } = await this.decide(client, group);
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
    const res = await this.pool.query('SELECT run, contract, version, phase, contract_hash FROM pins WHERE run = ANY($1::text[])', [[...runs]]);
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
      const res = await this.pool.query({
        name: p.joined ? 'ta_append_fast_v4j' : 'ta_append_fast_v4a',
        text: writeRowsSql(`(SELECT true FROM (SELECT pg_advisory_xact_lock(${LOG_LOCK})) AS ordering_lock)`, 'CASE WHEN n = $17::bigint THEN n ELSE n / (n - n) END', p.joined),
        values: [...p.columns, this.instance, this.life, p.pins, p.contracts, p.receipts],
      });
      return res.rows[0].pinned as string[];
    } catch (e) {
      if ((e as { code?: string }).code === '22012') return null; // a row was there: decided in a transaction
      throw e;
    }
  }

  /**
   * Reads the stored variants of the group's (run, event) keys once (and, for deliveries with a source scope, of their
   * source-scoped ids) and decides every delivery in input order, as SQLite's storeOne: a delivery whose key holds
   * other content stored first by another bound source goes to its source-scoped id (sourceScopedEvent).
   */
  private async decide(client: PoolClient, group: QueuedAppend[]): Promise<{ results: AppendResult[]; rows: NewRow[] }> {
    const keyRuns: string[] = [];
    const keyEvents: string[] = [];
    const states = new Map<string, KeyState | null>();
    const want = (run: string, event: string): void => {
      const key = `${run}\u0000${event}`;
      if (states.has(key)) return;
      states.set(key, null);
      keyRuns.push(run);
      keyEvents.push(event);
    };
    for (const a of group) {
      for (const { receipt, scope } of a.items) {
        want(receipt.run, receipt.event);
        if (scope !== undefined) want(receipt.run, scopedEventId(receipt.event, scope));
      }
    }
    if (keyRuns.length > 0) {
      const stored = await client.query(
        `SELECT r.run, r.event, r.variant, r.body, r.source FROM receipts r
         JOIN unnest($1::text[], $2::text[]) AS k(run, event) ON r.run = k.run AND r.event = k.event
         ORDER BY r.run, r.event, r.variant`,
        [keyRuns, keyEvents],
      );
      for (const row of stored.rows as Row[]) {
        const key = `${row.run as string}\u0000${row.event as string}`;
        let state = states.get(key) ?? null;
        if (state === null) {
          state = { variants: [], maxVariant: -1 };
          states.set(key, state);
        }
        state.variants.push({ body: row.body as string });
        state.maxVariant = Math.max(state.maxVariant, row.variant as number);
        if (row.variant === 0) state.firstSource = row.source as string;
      }
    }
    const rows: NewRow[] = [];
    const results = group.map((a) => {
      const result = emptyResult();
      for (const item of a.items) {
        const outcome = this.decideOne(item, states, rows);
        countOutcome(result, outcome);
      }
      return result;
    });
    return { results, rows };
  }

  /** One delivery against the key states read (updated in place): its outcome, and its row when one is written. */
  private decideOne(item: StoredReceipt, states: Map<string, KeyState | null>, rows: NewRow[]): AppendOutcome {
    const { source, receivedAt } = item;
    let { receipt } = item;
    let key = `${receipt.run}\u0000${receipt.event}`;
    let body = compactReceiptJson(receipt);
    let state = states.get(key) ?? null;
    if (state === null) {
      states.set(key, { variants: [{ body }], maxVariant: 0, firstSource: source });
      rows.push({ receipt, body, variant: 0, source, receivedAt });
      return 'accepted';
    }
    if (holds(state, receipt)) return 'duplicate';
    const scoped = sourceScopedEvent(item, state.firstSource);
    if (scoped !== null) {
      // Other content under this (run, event), stored first by another source: never masked or replaced; this
      // delivery is stored under its own source-scoped id (a redelivery finds it there).
      receipt = { ...receipt, event: scoped };
      item.storedAs = scoped;
      key = `${receipt.run}\u0000${scoped}`;
      body = compactReceiptJson(receipt);
      state = states.get(key) ?? null;
      if (state === null) {
        states.set(key, { variants: [{ body }], maxVariant: 0, firstSource: source });
        rows.push({ receipt, body, variant: 0, source, receivedAt });
        return 'accepted';
      }
      if (holds(state, receipt)) return 'duplicate';
    }
    state.maxVariant++;
    state.variants.push({ body, canonical: canonicalReceiptJson(receipt) });
    rows.push({ receipt, body, variant: state.maxVariant, source, receivedAt });
    return 'conflict';
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
      part[i] = this.partitionOf(r.receipt.run);
    }
    const spanBody = spans.map((e) => e.body);
    const joinable = (list: readonly string[]): boolean => list.every((b) => b.length > 0 && !b.includes('\n'));
    const joined = joinable(body) && joinable(spanBody);
    return {
      receipts: n,
      joined,
      columns: [
        run, event, variant, joined ? body.join('\n') : body, source, receivedAt, part,
        spans.map((e) => e.traceId), spans.map((e) => this.partitionOf(e.traceId)), spans.map((e) => e.loggedAt), joined ? spanBody.join('\n') : spanBody, spans.map((e) => e.forwarded === true),
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
      [...p.columns, this.instance, this.life, p.pins, p.contracts],
    );
    return { inserted: Number(res.rows[0].inserted), pinned: res.rows[0].pinned as string[] };
  }
}
