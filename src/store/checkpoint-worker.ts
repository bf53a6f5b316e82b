/**
 * The checkpointer's thread (src/store/checkpointer.ts): its own connection to the receipt store, copying the WAL into
 * the database with PASSIVE checkpoints (they never block the main thread's writers) every `everyMs`, and at once when
 * asked. Messages in: `{ id }` (a PASSIVE checkpoint now; answered `{ id }`), `{ id, truncate: true }` (the scrub's
 * TRUNCATE checkpoint: every frame copied, the database synced, the WAL cut to zero bytes; answered `{ id, done }`,
 * done false when a reader or writer kept it from completing), `'close'` (close the connection, then set `closed[0]`
 * and notify: the main thread may be waiting on it synchronously).
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

interface Data {
  file: string;
  everyMs: number;
  closed: Int32Array;
}

const { file, everyMs, closed } = workerData as Data;
// A short busy wait: the main thread holds its writes while this truncates (src/store/sqlite/retention.ts), so the
// lock is the worker's at once but for a commit already under way; past it the main thread scrubs itself.
const db = new Database(file, { fileMustExist: true, timeout: 1_000 });
// The checkpoint syncs the WAL before copying it and the database after (the main connection commits with NORMAL and
// syncs the WAL itself, src/store/sqlite/wal-sync.ts): a WAL restarts from its start only after that database sync.
db.pragma('synchronous = FULL');
let timer: NodeJS.Timeout | null = null;

/** The scrub's checkpoint: true when it completed (every frame copied, the WAL truncated). */
function truncate(): boolean {
  try {
    const [row] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return row?.busy === 0;
  } catch {
    return false;
  }
}

function checkpoint(): void {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or failing now (e.g. a full disk): the next turn tries again; the main thread's scrub reports real failures.
  }
}

function schedule(): void {
  timer = setTimeout(() => {
    checkpoint();
    schedule();
  }, everyMs);
}

parentPort!.on('message', (m: { id: number; truncate?: boolean } | 'close') => {
  if (m === 'close') {
    if (timer) clearTimeout(timer);
    db.close();
    Atomics.store(closed, 0, 1);
    Atomics.notify(closed, 0);
    parentPort!.close();
    return;
  }
  if (m.truncate) {
    parentPort!.postMessage({ id: m.id, done: truncate() });
    return;
  }
  checkpoint();
  parentPort!.postMessage({ id: m.id });
});
schedule();
