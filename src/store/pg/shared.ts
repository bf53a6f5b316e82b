/**
 * What the parts of one PostgreSQL store share (src/store/pg/): the pool (replaced after a cluster's heartbeat got no
 * answer), this instance and its life, the partitions, the fence, health and closing; and the pool's making,
 * with every statement's deadline, and the transaction helper.
 */
import pg from 'pg';
import type { PoolClient } from 'pg';
import type { OwnerFence } from './fence.js';

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
}

/** How long after its statement_timeout the client gives up on an answer (the socket hangs: no answer, no reset). */
export const QUERY_GRACE_MS = 2_000;
/** TCP keepalive of every connection: a peer gone silently is noticed by the kernel (probes after this idle time). */
export const KEEPALIVE_IDLE_MS = 5_000;

/** A statement whose answer did not come in time (node-postgres's client-side query_timeout). */
export const isReadTimeout = (e: unknown): boolean => (e as Error)?.message === 'Query read timeout';

export const noop = (): void => {};

/**
 * The pool of a store: every statement with a deadline (statement_timeout on the server, query_timeout on the client
 * for a socket that hangs), TCP keepalive, and a session idle in a transaction ended by the database.
 */
export function newPool(url: string, opts: PgStoreOptions): pg.Pool {
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
export function destroyClient(client: pg.Client): void {
  client.end().catch(noop);
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/** The state the parts of one store share. */
export interface PgShared {
  /** The pool of every statement but the heartbeat's: replaced after a heartbeat got no answer (PgStore.replacePool). */
  pool: pg.Pool;
  readonly url: string;
  readonly opts: PgStoreOptions;
  /** This server instance's id: `origin` of its rows and lease owner. */
  readonly instance: string;
  /** This process's life (one per open): span records it holds are its own; records of earlier lives are adopted. */
  readonly life: string;
  readonly partitions: number;
  /** The leases this store holds, by partition, at their epochs: what every owner write is checked against (fence.ts). */
  fence: OwnerFence;
  /** Owner writes (rows) the database refused since open because this instance no longer held the lease. */
  fencedWrites: number;
  /**
   * `ok`: false after a failed commit or heartbeat, until one lands. `beatDown`: the last heartbeat failed or did not
   * answer in time: appends are refused at once (nothing acknowledged) and readiness says so, until a beat lands.
   */
  readonly health: { ok: boolean; beatDown: boolean };
  /** Set by close: appends after it are rejected. */
  closing: Promise<void> | null;
  /** The hash partition of a run (or trace) id in this database. */
  partitionOf(key: string): number;
}

/** Runs `work` in a transaction opened by `begin` (one round trip; may hold more statements, no parameters). */
export async function inTransaction<T>(pool: pg.Pool, work: (client: PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect();
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