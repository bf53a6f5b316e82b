/**
 * The checkpointer's thread (src/store/checkpointer.ts): its own connection to the receipt store, copying the WAL into
 * the database with PASSIVE checkpoints (they never block the main thread's writers) every `everyMs`, and at once when
 * asked. Messages in: `{ id }` (a checkpoint now; answered `{ id }`), `'close'` (close the connection, then set
 * `closed[0]` and notify: the main thread may be waiting on it synchronously).
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

interface Data {
  file: string;
  everyMs: number;
  closed: Int32Array;
}

const { file, everyMs, closed } = workerData as Data;
const db = new Database(file, { fileMustExist: true });
// The checkpoint syncs the WAL before copying it and the database after (the main connection commits with NORMAL and
// syncs the WAL itself, src/store/sqlite/wal-sync.ts): a WAL restarts from its start only after that database sync.
db.pragma('synchronous = FULL');
let timer: NodeJS.Timeout | null = null;

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

parentPort!.on('message', (m: { id: number } | 'close') => {
  if (m === 'close') {
    if (timer) clearTimeout(timer);
    db.close();
    Atomics.store(closed, 0, 1);
    Atomics.notify(closed, 0);
    parentPort!.close();
    return;
  }
  checkpoint();
  parentPort!.postMessage({ id: m.id });
});
schedule();
