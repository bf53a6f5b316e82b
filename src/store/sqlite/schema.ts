/**
 * SQLite schema of the receipt store. Version 1.
 *
 * receipts: one row per distinct delivery of (run, event). `variant` 0 is the first content seen; a later
 *   delivery with different content (a conflict) is kept as variant 1, 2, ... so the classifier sees every
 *   version and reports the conflict. Retries with equal content are not stored again. `seq` (the rowid) is
 *   the insertion order. `body` is the compact JSON of the receipt's known fields only.
 * runs: one row per live run: first receipt time (server clock), last update, last verdict.
 * pins: the pin of a run, first write wins.
 * contracts: pinned contract content by content hash, so a running run keeps its pinned content.
 * acks: the latest acknowledgement of a run (verdict, who, when, why); deleted with the run.
 */
import { ALERTING_VERDICTS } from '../../core/types.js';

export const SCHEMA_VERSION = 1;

/**
 * The runs a restart loads into memory (the partial index runs_changeable): not settled, or settled in a verdict that
 * alerts. The others stay in the store only (counted by settledRunCounts). A query uses the index only when its WHERE
 * holds this same text.
 */
export const CHANGEABLE_RUN = `(settled = 0 OR verdict IS NULL OR verdict IN (${ALERTING_VERDICTS.map((v) => `'${v}'`).join(', ')}))`;

export const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS receipts (
  seq INTEGER PRIMARY KEY,
  run TEXT NOT NULL,
  event TEXT NOT NULL,
  variant INTEGER NOT NULL,
  body TEXT NOT NULL,
  source TEXT NOT NULL,
  received_at INTEGER NOT NULL,
  UNIQUE (run, event, variant)
);
CREATE TABLE IF NOT EXISTS runs (
  run TEXT PRIMARY KEY,
  first_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  verdict TEXT,
  settled INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_settled_age ON runs (settled, updated_at);
CREATE INDEX IF NOT EXISTS runs_by_first ON runs (first_at, run);
CREATE INDEX IF NOT EXISTS runs_changeable ON runs (first_at, run) WHERE ${CHANGEABLE_RUN};
CREATE TABLE IF NOT EXISTS pins (
  run TEXT PRIMARY KEY,
  contract TEXT NOT NULL,
  version TEXT NOT NULL,
  phase TEXT NOT NULL,
  contract_hash TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS span_log (
  seq INTEGER PRIMARY KEY,
  trace_id TEXT NOT NULL,
  logged_at INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS span_log_by_age ON span_log (logged_at);
CREATE TABLE IF NOT EXISTS acks (
  run TEXT PRIMARY KEY,
  verdict TEXT NOT NULL,
  by TEXT,
  acked_at INTEGER NOT NULL,
  reason TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS contracts (
  hash TEXT PRIMARY KEY,
  contract TEXT NOT NULL,
  version TEXT NOT NULL,
  content TEXT NOT NULL
) WITHOUT ROWID;
`;
