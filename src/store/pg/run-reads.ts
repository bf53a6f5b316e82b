/**
 * The shared store's reads: a run's receipts and rows, the run lists and their counts, and what a takeover loads. (The
 * tail of committed receipts an owner folds is the cluster's: src/cluster/tail.ts.)
 */
import { ALERTING_VERDICTS, type Receipt, type Verdict } from '../../core/types.js';
import type { LiveRun } from '../types.js';
import { liveRunOf, parseBody, type ListedRun, type Row } from './rows.js';
import type { PgShared } from './shared.js';

/** A run that can still change or alert (a takeover loads it): not settled, not evaluated, or in an alerting verdict. */
const CHANGEABLE_RUN = `(NOT r.settled OR r.verdict IS NULL OR r.verdict IN (${ALERTING_VERDICTS.map((v) => `'${v}'`).join(', ')}))`;

/**
 * What PgStore.listRuns filters on: a stored verdict, a pinned contract, the order, the keyset cursor, the page
 * size; `exceptParts` partitions left out; `orRuns` runs read whatever their stored verdict and pin (with a filter on
 * either: the caller holds them newer than stored and filters them itself).
 */
export interface ListRunsFilter {
  verdict?: string;
  contract?: string;
  limit: number;
  oldest?: boolean;
  after?: { firstAt: number; run: string };
  exceptParts?: readonly number[];
  orRuns?: readonly string[];
}

export class PgRunReads {
  constructor(private readonly s: PgShared) {}

  /** A run's receipts in seq order, every variant. A body that is not JSON throws StoreRowError naming the row. */
  async runReceipts(run: string): Promise<Receipt[]> {
    const res = await this.s.pool.query('SELECT seq, event, body FROM receipts WHERE run = $1 ORDER BY seq', [run]);
    return res.rows.map((row: Row) =>
      parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(run)}, event ${JSON.stringify(row.event)})`));
  }

  /** The receipts of several runs, by run, each run's in insertion order (both versions of a conflict included). */
  async receiptsOfRuns(runs: readonly string[]): Promise<Map<string, Receipt[]>> {
    const out = new Map<string, Receipt[]>();
    if (runs.length === 0) return out;
    const res = await this.s.pool.query('SELECT seq, run, event, body FROM receipts WHERE run = ANY($1::text[]) ORDER BY seq', [[...runs]]);
    for (const row of res.rows as Row[]) {
      const run = row.run as string;
      let list = out.get(run);
      if (!list) out.set(run, (list = []));
      list.push(parseBody(row.body as string, 'receipts', `seq ${String(row.seq)} (run ${JSON.stringify(run)}, event ${JSON.stringify(row.event)})`));
    }
    return out;
  }

  /** Runs per stored verdict (runs not evaluated yet are left out), optionally of one pinned contract. */
  async verdictCounts(filter: { contract?: string }): Promise<Record<string, number>> {
    const res =
      filter.contract === undefined
        ? await this.s.pool.query('SELECT verdict, count(*) AS n FROM runs WHERE verdict IS NOT NULL GROUP BY verdict')
        : await this.s.pool.query('SELECT r.verdict, count(*) AS n FROM runs r JOIN pins p ON p.run = r.run WHERE r.verdict IS NOT NULL AND p.contract = $1 GROUP BY r.verdict', [filter.contract]);
    return Object.fromEntries(res.rows.map((r: Row) => [r.verdict as string, Number(r.n)]));
  }

  /** One run's row with its pin, or null when no receipt of it is stored. */
  async getRun(run: string): Promise<LiveRun | null> {
    const res = await this.s.pool.query(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.run = $1`,
      [run],
    );
    return res.rows.length ? liveRunOf(res.rows[0]) : null;
  }

  /** Runs' rows with their pins (those stored), in one query. */
  async getRuns(runs: readonly string[]): Promise<LiveRun[]> {
    if (runs.length === 0) return [];
    const res = await this.s.pool.query(
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
    const res = await this.s.pool.query({
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
    const res = await this.s.pool.query('SELECT hash, content FROM contracts WHERE hash = ANY($1::text[])', [[...hashes]]);
    return new Map(res.rows.map((r: Row) => [r.hash as string, r.content as string]));
  }

  /**
   * The runs of partitions `parts`, with their pins (to take over a partition), oldest first. `changeable`: only the
   * runs that can still change or alert (not settled, not evaluated, or in an alerting verdict); settledCounts counts
   * the others.
   */
  async partitionRuns(parts: readonly number[], changeable = false): Promise<LiveRun[]> {
    if (parts.length === 0) return [];
    const res = await this.s.pool.query(
      `SELECT r.run, r.first_at, r.updated_at, r.verdict, r.settled, p.contract, p.version, p.phase, p.contract_hash
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.part = ANY($1::int[])${changeable ? ` AND ${CHANGEABLE_RUN}` : ''} ORDER BY r.first_at, r.run`,
      [[...parts]],
    );
    return res.rows.map(liveRunOf);
  }

  /** The runs of partitions `parts` that partitionRuns(_, true) leaves out, counted per partition, pinned contract and verdict. */
  async settledCounts(parts: readonly number[]): Promise<{ part: number; contract: string; version: string; verdict: Verdict; runs: number }[]> {
    if (parts.length === 0) return [];
    const res = await this.s.pool.query(
      `SELECT r.part, coalesce(p.contract, '') AS contract, coalesce(p.version, '') AS version, r.verdict, count(*) AS runs
       FROM runs r LEFT JOIN pins p ON p.run = r.run WHERE r.part = ANY($1::int[]) AND NOT ${CHANGEABLE_RUN}
       GROUP BY r.part, 2, 3, r.verdict`,
      [[...parts]],
    );
    return res.rows.map((r: Row) => ({ part: Number(r.part), contract: r.contract as string, version: r.version as string, verdict: r.verdict as Verdict, runs: Number(r.runs) }));
  }

  /**
   * Runs, newest first (by first receipt; `oldest`: oldest first), optionally of one verdict and/or one pinned
   * contract, each with the verdict its owner last wrote for the list views (`listed`, or null when none was written),
   * leaving out the runs of partitions
   * `exceptParts` (those the caller lists from its memory); `after`: the page after that cursor (keyset). Lean for lists of 10,000 (issue 32):
   * no pin columns (the list views take the pin from `listed` or from memory), rows as arrays, instants as numbers.
   */
  async listRuns(filter: ListRunsFilter): Promise<ListedRun[]> {
    const where: string[] = [];
    const values: unknown[] = [filter.limit];
    if (filter.after) {
      // Keyset paging, as the embedded store pages: after the cursor in the listing's order.
      values.push(filter.after.firstAt, filter.after.run);
      const cmp = filter.oldest ? '>' : '<';
      where.push(`(r.first_at, r.run) ${cmp} ($${values.length - 1}, $${values.length})`);
    }
    if (filter.exceptParts?.length) {
      if (filter.exceptParts.length >= this.s.partitions) return [];
      values.push([...filter.exceptParts]);
      where.push(`r.part <> ALL($${values.length}::int[])`);
    }
    const matches: string[] = [];
    if (filter.verdict !== undefined) {
      values.push(filter.verdict);
      matches.push(`r.verdict = $${values.length}`);
    }
    if (filter.contract !== undefined) {
      values.push(filter.contract);
      matches.push(`EXISTS (SELECT 1 FROM pins p WHERE p.run = r.run AND p.contract = $${values.length})`);
    }
    if (matches.length && filter.orRuns?.length) {
      // Runs whose verdict or pin the caller holds newer than stored: read whatever is stored (it filters them).
      values.push([...filter.orRuns]);
      where.push(`(${matches.join(' AND ')} OR r.run = ANY($${values.length}::text[]))`);
    } else where.push(...matches);
    // Every run with its stored evaluation: the runs held in memory here are listed from memory (ClusterReads), the
    // others (another instance's, or one of this instance's that left memory, settled) from what their owner wrote.
    const res = await this.s.pool.query({
      text: `SELECT r.run, r.first_at::float8, r.updated_at::float8, r.verdict, r.settled, r.listed
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

  /** Which of `runs` the shared store has (any receipt stored). */
  async knownRuns(runs: readonly string[]): Promise<Set<string>> {
    if (runs.length === 0) return new Set();
    const res = await this.s.pool.query('SELECT run FROM runs WHERE run = ANY($1::text[])', [[...runs]]);
    return new Set(res.rows.map((r: Row) => r.run as string));
  }

  /** Committed rows: receipts (conflicting variants included) and runs. */
  async counts(): Promise<{ receipts: number; runs: number }> {
    const res = await this.s.pool.query('SELECT (SELECT count(*) FROM receipts) AS receipts, (SELECT count(*) FROM runs) AS runs');
    return { receipts: Number(res.rows[0].receipts), runs: Number(res.rows[0].runs) };
  }
}
