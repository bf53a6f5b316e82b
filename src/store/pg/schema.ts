/**
 * PostgreSQL schema of the shared receipt store, as numbered migrations (docs/postgres.md).
 *
 * Every server applies the migrations it knows on open, in order, in one transaction under
 * `pg_advisory_xact_lock(MIGRATION_LOCK)`, so servers starting together do not race; `schema_migrations` records
 * each applied version. A database whose version is newer than this build's is refused.
 *
 * Content-free like the SQLite schema: receipt bodies are the compact JSON of the receipt's known fields; span log
 * bodies are the allow-listed span records the SQLite store keeps; ids of runs, events, traces and instances.
 *
 * meta: `partitions`, the number of hash partitions of run (and trace) ids, fixed when the schema is created.
 * receipts: one row per distinct delivery of (run, event), `variant` 0 first, conflicts 1, 2, ... (as in SQLite).
 *   `seq` orders the rows in commit order across all servers (appends take LOG_LOCK, see group-commit.ts); `origin` is
 *   the instance that appended the row; `part` the partition of its run.
 * runs: one row per live run: partition, first receipt time, last update, last verdict, settled.
 * pins: the pin of a run, first write wins. contracts: pinned contract content by content hash.
 * span_log: pending span records, `part` = partition of the trace id, `origin` = the instance that logged it.
 * instances: live servers (heartbeats, database clock). leases: one row per partition: its owner and lease expiry.
 * acks (version 2): the verdict an operator acknowledged per run, at any instance; its owner applies it.
 * Version 5 (issue 32): forwarded span records, process lives, lease epochs (fencing); see the migration.
 * Version 6 (issue 32): runs.listed, the owner's last verdict with its findings (the list views read it).
 * Version 8 (issue 35): receipts_by_run dropped (the unique key serves its queries), runs fillfactor 80.
 * Version 9 (issue 44): the tables written and pruned all day are vacuumed at 2% dead rows, not 20%.
 */
export interface PgMigration {
  version: number;
  sql: string;
}

/** Advisory lock key held while migrating (per database). */
export const MIGRATION_LOCK = 7_461_626_901;
/** Advisory lock key every append transaction takes first: commits (and so `seq` visibility) follow `seq` order. */
export const LOG_LOCK = 7_461_626_902;

/** Default number of hash partitions of a new schema. */
export const DEFAULT_PARTITIONS = 64;

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    sql: `
CREATE TABLE meta (
  key text PRIMARY KEY,
  value text NOT NULL
);
CREATE TABLE receipts (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run text NOT NULL,
  event text NOT NULL,
  variant integer NOT NULL,
  body text NOT NULL,
  source text NOT NULL,
  received_at bigint NOT NULL,
  origin text NOT NULL,
  part integer NOT NULL,
  UNIQUE (run, event, variant)
);
CREATE INDEX receipts_by_part ON receipts (part, seq);
CREATE INDEX receipts_by_run ON receipts (run, seq);
CREATE TABLE runs (
  run text PRIMARY KEY,
  part integer NOT NULL,
  first_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  verdict text,
  settled boolean NOT NULL DEFAULT false
);
CREATE INDEX runs_by_settled_age ON runs (settled, updated_at);
CREATE INDEX runs_by_part ON runs (part);
CREATE INDEX runs_by_first_at ON runs (first_at);
CREATE TABLE pins (
  run text PRIMARY KEY,
  contract text NOT NULL,
  version text NOT NULL,
  phase text NOT NULL,
  contract_hash text NOT NULL
);
CREATE TABLE contracts (
  hash text PRIMARY KEY,
  contract text NOT NULL,
  version text NOT NULL,
  content text NOT NULL
);
CREATE TABLE span_log (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  trace_id text NOT NULL,
  part integer NOT NULL,
  origin text NOT NULL,
  logged_at bigint NOT NULL,
  body text NOT NULL
);
CREATE INDEX span_log_by_part ON span_log (part, seq);
CREATE INDEX span_log_by_age ON span_log (logged_at);
CREATE TABLE instances (
  id text PRIMARY KEY,
  seen_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE TABLE leases (
  part integer PRIMARY KEY,
  owner text,
  expires_at timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    // Acknowledgements of verdicts (POST /api/v1/runs/{run}/ack) at any instance, read by the run's owner in `seq`
    // order (written under LOG_LOCK, like receipts, so a reader never skips one committed late).
    version: 2,
    sql: `
CREATE TABLE acks (
  run text PRIMARY KEY,
  part integer NOT NULL,
  verdict text NOT NULL,
  acked_at bigint NOT NULL,
  seq bigint NOT NULL
);
CREATE SEQUENCE acks_seq;
CREATE INDEX acks_by_part_seq ON acks (part, seq);
`,
  },
  {
    // An instance at its live limit (--max-live-runs / --max-live-receipts) says so with its heartbeat: the other
    // instances then refuse receipts that would start new runs in its partitions (docs/scaling.md).
    version: 3,
    sql: `ALTER TABLE instances ADD COLUMN at_limit boolean NOT NULL DEFAULT false;`,
  },
  {
    // Who acknowledged a run and why (operator text, bounded by the API), shown on the run after any restart.
    version: 4,
    sql: `ALTER TABLE acks ADD COLUMN acked_by text, ADD COLUMN reason text;`,
  },
  {
    // Issue 32. span_log.forwarded: spans forwarded (--span-routing any) to whoever owns the trace's partition when it
    // reads them, never pruned unread. span_log.life / instances.life: the process (one per start) that holds a
    // pending record, so the records of an instance restarted under the same name are adopted too. leases.epoch:
    // raised by every claim; owner writes are fenced by (owner, epoch, unexpired). meta 'ingest_trust' (no DDL): the
    // hash of the instances' shared --ingest-tokens configuration.
    version: 5,
    sql: `
ALTER TABLE span_log ADD COLUMN forwarded boolean NOT NULL DEFAULT false;
ALTER TABLE span_log ADD COLUMN life text NOT NULL DEFAULT '';
CREATE INDEX span_log_forwarded ON span_log (part, seq) WHERE forwarded;
ALTER TABLE instances ADD COLUMN life text NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
`,
  },
  {
    // Issue 32. runs.listed: the run's verdict as its owner last evaluated it, with what the list views show (pin,
    // naive verdict, first receipt time, findings: codes, ids, instants and messages built from them; content-free like the receipts it
    // is derived from), as compact JSON, written by the owner with the verdict (fenced). Any instance lists the
    // cluster's runs from it without evaluating them. NULL (rows of older builds, or not written yet): evaluated.
    version: 6,
    sql: `ALTER TABLE runs ADD COLUMN listed text;`,
  },
  {
    // The run lists' order (first receipt, then run id) read from the index, with no sort of the runs (issue 32).
    version: 7,
    sql: `CREATE INDEX runs_by_first_at_run ON runs (first_at, run); DROP INDEX runs_by_first_at;`,
  },
  {
    // Issue 35 (PostgreSQL's work per appended receipt). receipts_by_run (run, seq) was a fourth index written with
    // every receipt row; every query that reads a run's receipts (runReceipts, receiptsOfRuns, runsWithReceipts,
    // prune's delete) finds them by the unique (run, event, variant) key, whose leading column is run, and orders
    // the run's few rows by seq. runs fillfactor 80: room left on each page, so the owner's verdict writes (verdict,
    // listed; no indexed column changes) stay HOT updates, with no new entry in the runs' four indexes.
    version: 8,
    sql: `DROP INDEX receipts_by_run; ALTER TABLE runs SET (fillfactor = 80);`,
  },
  {
    // Issue 44 (the database levels off under steady traffic). receipts, runs, pins and span_log are written and
    // deleted all day (the retention prune, the span log's prune): each is vacuumed once 2% of its rows (at least
    // 1,000) are dead, not PostgreSQL's default 20%, so the space of deleted rows is reused before the table grows to
    // hold another fifth of itself. Insert-driven vacuums likewise at 5% (they set the visibility map the prune's
    // index scans use). The cluster soak: the database grew 17% from minute 10 to 30 with the defaults.
    version: 9,
    sql: `
ALTER TABLE receipts SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE pins SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE span_log SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.05);
`,
  },
];

/** The newest schema version this build knows. */
export const PG_SCHEMA_VERSION = PG_MIGRATIONS.reduce((max, m) => Math.max(max, m.version), 0);

/** The minimal client surface migrate() needs (a pg.PoolClient or pg.Client). */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

/**
 * Applies the migrations not yet applied, in one transaction under MIGRATION_LOCK, and on a new schema records
 * `partitions` and creates one lease row per partition. Returns the schema version and the partition count in force.
 * Throws (nothing changed) when the database is newer than this build.
 */
export async function migrate(
  client: PgQueryable,
  partitions: number,
  migrations: readonly PgMigration[] = PG_MIGRATIONS,
): Promise<{ version: number; partitions: number; applied: number[] }> {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > 65_536) {
    throw new Error(`postgres store: partitions must be an integer from 1 to 65536 (got ${partitions})`);
  }
  const latest = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  await client.query('BEGIN');
  try {
    // Another server may be running a long migration: wait for it (bounded), whatever the session's lock_timeout.
    await client.query(`SET LOCAL lock_timeout = '600s'`);
    await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const current = Number((await client.query('SELECT coalesce(max(version), 0) AS v FROM schema_migrations')).rows[0].v);
    if (current > latest) {
      throw new Error(`postgres store: database schema version ${current} is newer than this build (${latest}); upgrade topology-audit`);
    }
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())', [m.version]);
      applied.push(m.version);
    }
    await client.query(`INSERT INTO meta (key, value) VALUES ('partitions', $1) ON CONFLICT (key) DO NOTHING`, [String(partitions)]);
    const inForce = Number((await client.query(`SELECT value FROM meta WHERE key = 'partitions'`)).rows[0].value);
    if (!Number.isInteger(inForce) || inForce < 1) throw new Error(`postgres store: meta.partitions is not a positive integer`);
    await client.query(
      'INSERT INTO leases (part, owner, expires_at) SELECT p, NULL, now() FROM generate_series(0, $1::int - 1) AS p ON CONFLICT (part) DO NOTHING',
      [inForce],
    );
    await client.query('COMMIT');
    return { version: Math.max(current, latest), partitions: inForce, applied };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
