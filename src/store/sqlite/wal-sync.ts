/**
 * The WAL's fsync off the event loop. better-sqlite3 runs on the calling thread, so with `synchronous=FULL` every
 * group commit waited for its fsync on the event loop: a few ms on a quiet disk, hundreds under another process's
 * writes (a soak measured 289 ms tasks of 3 CPU samples each, the thread parked in fsync). The connection now commits
 * with `synchronous=NORMAL` (the frames are written to the WAL, no fsync), and this syncs the WAL file with
 * fdatasync in libuv's thread pool before a group's appends are answered: an acknowledged receipt is on the device
 * exactly as before (survives power loss), and the event loop never waits on the disk for a commit.
 *
 * SQLite itself still syncs around checkpoints (WAL before, database after), in the checkpoint worker; a WAL is only
 * restarted from its start after a checkpoint that copied and synced every frame, so no acknowledged frame is ever
 * overwritten before it is in the synced database file. The WAL file is never replaced while the store's connection
 * is open (SQLite deletes it only when the last connection closes), so one descriptor serves for the store's life.
 */
import { closeSync, fdatasyncSync, openSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

export class WalSync {
  private handle: FileHandle | null = null;
  /** The fdatasync under way, if any. */
  private inFlight: Promise<void> | null = null;
  /** Callers waiting for a sync that starts after they asked (the next one). */
  private waiters: Waiter[] = [];
  private closed = false;
  /** fdatasync calls made (for tests and metrics: commits share them). */
  syncs = 0;

  constructor(private readonly file: string) {}

  /** Resolves once an fdatasync of the WAL that began after this call has returned (rejects with its error). */
  after(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('receipt store is closed'));
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.next();
    });
  }

  /** Starts the next fdatasync for everyone waiting, unless one is under way (they ride the one after it). */
  private next(): void {
    if (this.inFlight !== null || this.waiters.length === 0 || this.closed) return;
    const batch = this.waiters;
    this.waiters = [];
    this.inFlight = this.syncOnce().then(
      () => {
        for (const w of batch) w.resolve();
      },
      (err: unknown) => {
        const error = err instanceof Error ? err : new Error(String(err));
        for (const w of batch) w.reject(error);
      },
    ).finally(() => {
      this.inFlight = null;
      if (this.closed) void this.release();
      else this.next();
    });
  }

  private async syncOnce(): Promise<void> {
    this.handle ??= await open(this.file, 'r+');
    this.syncs++;
    await this.handle.datasync();
  }

  /**
   * At close, after the last commit: one fdatasync on this thread answers everyone still waiting (a sync under way
   * answers its own callers), and the descriptor is released once nothing uses it.
   */
  closeSync(): void {
    if (this.closed) return;
    this.closed = true;
    const waiting = this.waiters;
    this.waiters = [];
    if (waiting.length === 0) {
      if (this.inFlight === null) void this.release();
      return;
    }
    let failure: Error | null = null;
    try {
      if (this.handle) fdatasyncSync(this.handle.fd);
      else {
        // Never synced before: open, sync and close on this thread.
        const fd = openSync(this.file, 'r+');
        try {
          fdatasyncSync(fd);
        } finally {
          closeSync(fd);
        }
      }
      this.syncs++;
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
    }
    for (const w of waiting) (failure ? w.reject(failure) : w.resolve());
    if (this.inFlight === null) void this.release();
  }

  private async release(): Promise<void> {
    const h = this.handle;
    this.handle = null;
    await h?.close().catch(() => {});
  }
}
