/**
 * The embedded store's reads of runs: a run's receipts, its row with its pin, the run lists and their counts, and what
 * a restart restores (the live runs page by page, the settled runs counted, the pinned contents). Every read but a
 * run's receipts first commits what is queued (SqliteShared.flush), so it sees what was written before it.
 */
import type { Receipt, Verdict } from '../../core/types.js';
import { CHANGEABLE_RUN } from './schema.js';
import { StoreRowError, type LiveRun } from '../types.js';
import type { VerdictState } from './commit.js';
import type { Row, SqliteShared } from './statements.js';
import type Database from 'better-sqlite3';

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

export class RunReads {
  private runVerdictStmt?: Database.Statement<[string], { verdict: string | null; settled: number }>;

  /** `pendingVerdict`: a run's verdict state set but not committed yet (the group commit's). */
  constructor(
    private readonly shared: SqliteShared,
    private readonly pendingVerdict: (run: string) => VerdictState | undefined,
  ) {}

  /**
   * A run's receipts in insertion order; both versions of a conflicting (run, event) are returned. A body that is
   * not JSON throws a StoreRowError naming the table and row.
   */
  runReceipts(run: string): Receipt[] {
    // One prepared statement for every call: the engine reads a run back for the API and for conflict rebuilds.
    return this.shared.stmt.runReceipts
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
    this.shared.flush();
    const page = this.shared.db.prepare<[number, string, number], Row>(
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
    this.shared.flush();
    return this.shared.db
      .prepare<[], { contract: string | null; version: string | null; verdict: Verdict; runs: number }>(
        `SELECT p.contract, p.version, r.verdict, count(*) AS runs FROM runs r LEFT JOIN pins p ON p.run = r.run
         WHERE NOT ${CHANGEABLE_RUN} GROUP BY p.contract, p.version, r.verdict`)
      .all()
      .map((r) => ({ contract: r.contract ?? '', version: r.version ?? '', verdict: r.verdict, runs: r.runs }));
  }

  /** Every pinned contract content stored (one row per content hash; a few per contract version ever pinned). */
  pinnedContents(): { hash: string; contract: string; version: string; content: string }[] {
    this.shared.flush();
    return this.shared.db.prepare<[], { hash: string; contract: string; version: string; content: string }>('SELECT hash, contract, version, content FROM contracts').all();
  }

  /** A stored run pinned to this content hash, if any (a scan of the pins: asked only for content the registry lacks). */
  runPinnedTo(hash: string): string | null {
    return this.shared.db.prepare<[string], { run: string }>('SELECT run FROM pins WHERE contract_hash = ? LIMIT 1').get(hash)?.run ?? null;
  }

  /**
   * All runs not yet pruned, for rebuilding in-memory state on start. Read into an array (not a cursor), so the
   * caller may write to the store while walking it.
   */
  liveRuns(): LiveRun[] {
    this.shared.flush();
    return this.shared.stmt.liveRuns.all().map(liveRunOf);
  }

  /** A run's stored verdict state (the latest written wins), or null when the run is not stored (run lists, gauges). */
  runVerdict(run: string): { verdict: Verdict | null; settled: boolean } | null {
    const pending = this.pendingVerdict(run);
    if (pending) return { verdict: pending.verdict, settled: pending.settled };
    this.runVerdictStmt ??= this.shared.db.prepare<[string], { verdict: string | null; settled: number }>('SELECT verdict, settled FROM runs WHERE run = ?');
    const row = this.runVerdictStmt.get(run);
    return row ? { verdict: row.verdict as Verdict | null, settled: row.settled === 1 } : null;
  }

  /** One run's row with its pin (its verdict state as last set), or null when the run is not stored. */
  getRun(run: string): LiveRun | null {
    this.shared.flush();
    const row = this.shared.db
      .prepare<[string], Row>(`SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = ?`)
      .get(run);
    return row ? liveRunOf(row) : null;
  }

  /** The settled runs `prune(olderThanMs, now)` would delete, with their stored verdict and pin (the gauges count them). */
  prunableRuns(olderThanMs: number, now: number): { run: string; verdict: Verdict | null; contract: string; version: string }[] {
    this.shared.flush();
    return this.shared.db
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
  listRuns(f: ListRunsFilter): LiveRun[] {
    this.shared.flush();
    const { sql, args } = listRunsQuery(f);
    let stmt = this.listStmts.get(sql);
    if (!stmt) this.listStmts.set(sql, (stmt = this.shared.db.prepare<(string | number)[], Row>(sql)));
    return stmt.all(...args).map(liveRunOf);
  }

  /** listRuns' statements by SQL text (at most 2 orders x 2^3 filter shapes). */
  private readonly listStmts = new Map<string, Database.Statement<(string | number)[], Row>>();

  /** Stored runs per verdict (optionally of one pinned contract), for the run list's counts. */
  verdictCounts(f: { contract?: string } = {}): Record<string, number> {
    this.shared.flush();
    const db = this.shared.db;
    const rows = f.contract
      ? db.prepare<[string], { verdict: string | null; n: number }>('SELECT r.verdict, count(*) AS n FROM runs r JOIN pins p ON p.run = r.run WHERE p.contract = ? GROUP BY r.verdict').all(f.contract)
      : db.prepare<[], { verdict: string | null; n: number }>('SELECT verdict, count(*) AS n FROM runs GROUP BY verdict').all();
    const out: Record<string, number> = {};
    for (const r of rows) if (r.verdict !== null) out[r.verdict] = r.n;
    return out;
  }
}

/** What listRuns filters on: a verdict, a pinned contract, the order, the keyset cursor, the page size. */
export interface ListRunsFilter {
  verdict?: string;
  contract?: string;
  oldest?: boolean;
  after?: { firstAt: number; run: string };
  limit: number;
}

/**
 * listRuns' statement and its arguments. The cursor is a row value, not `first_at > ? OR (first_at = ? AND run > ?)`:
 * with bound parameters SQLite seeks runs_by_first to a row value, where it scanned the index from its start for the OR
 * form (180 ms a page at 150,000 runs against 9 ms; the soak's paging of every run held the event loop for seconds).
 */
export function listRunsQuery(f: ListRunsFilter): { sql: string; args: (string | number)[] } {
  const cmp = f.oldest ? '>' : '<';
  const dir = f.oldest ? 'ASC' : 'DESC';
  const where: string[] = [];
  const args: (string | number)[] = [];
  if (f.after) {
    where.push(`(r.first_at, r.run) ${cmp} (?, ?)`);
    args.push(f.after.firstAt, f.after.run);
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
  return { sql, args };
}
