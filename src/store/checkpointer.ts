/**
 * WAL checkpoints off the event loop (issue 44). A checkpoint copies the WAL's pages into the database and fsyncs it:
 * run by SQLite's auto-checkpoint it lands in whichever commit crosses 1,000 pages, on the main thread, and a
 * truncating one (the scrub after a prune) copies everything since the last. Here a worker thread with its own
 * connection runs PASSIVE checkpoints every `everyMs` (they never block writers), and the store's scrub first asks it
 * for one, then for the truncating one too, while the store holds its own writes (src/store/sqlite/retention.ts):
 * no checkpoint's fsync runs on the event loop.
 *
 * If the worker cannot start or dies, `onLost` is called (the store turns SQLite's auto-checkpoint back on) and
 * `passive()` resolves at once: nothing waits for a thread that is gone.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

/** Most a close waits for the worker to close its connection (it may be inside a checkpoint). */
const CLOSE_WAIT_MS = 2_000;

/** The worker's script: beside this module once built (dist/store); from the sources (tests), the built one. */
function workerScript(): URL {
  const here = new URL('./checkpoint-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  return new URL('../../dist/store/checkpoint-worker.js', import.meta.url);
}

export class Checkpointer {
  private worker: Worker | null;
  private readonly closed = new Int32Array(new SharedArrayBuffer(4));
  private readonly waiting = new Map<number, (done: boolean) => void>();
  private nextId = 1;

  constructor(file: string, everyMs: number, private readonly onLost: (error: Error) => void) {
    this.worker = new Worker(workerScript(), { workerData: { file, everyMs, closed: this.closed } });
    this.worker.unref();
    this.worker.on('message', (m: { id: number; done?: boolean }) => {
      this.waiting.get(m.id)?.(m.done ?? true);
      this.waiting.delete(m.id);
    });
    this.worker.on('error', (e) => this.lost(e));
    this.worker.on('exit', (code) => {
      if (this.worker) this.lost(new Error(`checkpoint worker exited with code ${code}`));
    });
  }

  /** True while the worker runs the checkpoints. */
  get running(): boolean {
    return this.worker !== null;
  }

  /** A PASSIVE checkpoint now, in the worker; resolves when it is done (at once when the worker is gone). */
  async passive(): Promise<void> {
    await this.ask(false);
  }

  /**
   * The scrub's TRUNCATE checkpoint in the worker (it holds SQLite's write lock while it copies, syncs and truncates:
   * the caller holds the main thread's writes meanwhile). True when it completed; false when it could not (busy, or
   * the worker is gone): the caller scrubs on its own connection.
   */
  truncate(): Promise<boolean> {
    return this.ask(true);
  }

  private ask(truncate: boolean): Promise<boolean> {
    const w = this.worker;
    if (!w) return Promise.resolve(false);
    return new Promise((resolve) => {
      const id = this.nextId++;
      this.waiting.set(id, resolve);
      w.postMessage(truncate ? { id, truncate } : { id });
    });
  }

  /** Closes the worker's connection, waiting for it (synchronously, at most CLOSE_WAIT_MS), then ends the thread. */
  close(): void {
    const w = this.worker;
    if (!w) return;
    this.worker = null;
    w.postMessage('close');
    Atomics.wait(this.closed, 0, 0, CLOSE_WAIT_MS);
    void w.terminate();
    this.release();
  }

  private lost(error: Error): void {
    if (!this.worker) return;
    this.worker = null;
    this.release();
    this.onLost(error);
  }

  private release(): void {
    for (const resolve of this.waiting.values()) resolve(false);
    this.waiting.clear();
  }
}
