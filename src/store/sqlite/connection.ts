/**
 * The embedded store's connection: the data directory kept private, SQLite opened in WAL mode with the chosen
 * durability, the schema applied, and the database size cap.
 *
 * Durability: `synchronous: 'FULL'` (the default) means every commit's WAL frames are on the device before `append`
 * resolves. The connection itself commits with SQLite's `synchronous=NORMAL` (the frames written to the WAL, no
 * fsync in COMMIT, so no wait on the disk on the event loop) and src/store/sqlite/wal-sync.ts fdatasyncs the WAL in
 * libuv's thread pool before the group's appends are answered. An acknowledged receipt therefore survives `kill -9`
 * of the process (the frames are in the kernel once write() returns) and also a power loss or kernel crash (they are
 * on the device once fdatasync returns). `synchronous: 'NORMAL'` skips that sync: still safe against a killed
 * process, not against power loss. Group commit (src/store/sqlite/group-commit.ts) shares one transaction among
 * concurrent appends, and commits made while a sync is under way share the next one.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SCHEMA_SQL, SCHEMA_VERSION } from './schema.js';

export const DATABASE_FILE = 'receipts.db';

/**
 * The data directory is the owner's alone: the directory 0700 and its files 0600. The database file is
 * created 0600 before SQLite opens it, and SQLite gives its -wal and -shm files the database file's mode.
 */
function privateFiles(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const file = join(dir, DATABASE_FILE);
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  for (const name of readdirSync(dir)) if (name.startsWith(DATABASE_FILE)) chmodSync(join(dir, name), 0o600);
}

/** Opens (creating if needed) the database in `dir` with its schema; closed again if any step fails. */
export function openDatabase(dir: string): Database.Database {
  privateFiles(dir);
  const db = new Database(join(dir, DATABASE_FILE));
  try {
    // Deleted rows (pruned runs, spent span log) are overwritten with zeros, not left in free pages.
    db.pragma('secure_delete = ON');
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (String(mode).toLowerCase() !== 'wal') throw new Error(`receipt store: WAL mode unavailable (got ${String(mode)})`);
    // Commits write the WAL without an fsync; FULL durability is WalSync's fdatasync before the answer (see above).
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_size_limit = 67108864');
    const version = Number(db.pragma('user_version', { simple: true }));
    if (version > SCHEMA_VERSION) throw new Error(`receipt store: schema version ${version} is newer than this build (${SCHEMA_VERSION})`);
    db.exec(SCHEMA_SQL);
    if (version < SCHEMA_VERSION) db.pragma(`user_version = ${SCHEMA_VERSION}`);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Caps the database size (bytes, rounded down to whole pages); null lifts the cap. */
export function setMaxDbBytes(db: Database.Database, bytes: number | null): void {
  const pageSize = Number(db.pragma('page_size', { simple: true }));
  const pages = bytes === null ? 4294967294 : Math.max(1, Math.floor(bytes / pageSize));
  db.pragma(`max_page_count = ${pages}`);
}

/** Committed rows counted once at open (the parts keep the counts from there). */
export function countRows(db: Database.Database): { receipts: number; runs: number } {
  return {
    receipts: (db.prepare('SELECT count(*) AS n FROM receipts').get() as { n: number }).n,
    runs: (db.prepare('SELECT count(*) AS n FROM runs').get() as { n: number }).n,
  };
}
