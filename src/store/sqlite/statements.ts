/**
 * The embedded store's prepared statements, made once per connection and shared by its parts (the group commit, the
 * run reads, the retention and the span log of src/store/sqlite/).
 */
import type Database from 'better-sqlite3';
import type { Verdict } from '../../core/types.js';

export type Row = Record<string, unknown>;

export interface AckRow {
  verdict: string;
  by: string | null;
  acked_at: number;
  reason: string | null;
}

export interface Statements {
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
}

export function prepareStatements(db: Database.Database): Statements {
  return {
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
}

/**
 * What the parts of one open store share: the connection, its statements, the committed row counts, whether it is
 * closed, and the commit of everything queued (a read sees what was written before it).
 */
export interface SqliteShared {
  readonly db: Database.Database;
  readonly stmt: Statements;
  readonly rows: { receipts: number; runs: number };
  closed: boolean;
  flush(): void;
  /**
   * Set while the checkpoint worker truncates the WAL (the scrub, src/store/sqlite/retention.ts): it holds SQLite's
   * write lock, so the main thread's writers wait for this promise instead of SQLite's busy handler, which would
   * sleep on the event loop. Group commits queue meanwhile; the prunes' writes await it.
   */
  writeHold: Promise<void> | null;
}
