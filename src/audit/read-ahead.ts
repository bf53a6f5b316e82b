/**
 * The receipt source of the live RunStates, and the explicit step that loads a run's history. A RunState holds
 * aggregates, not receipts, and reads its run back from the store for a conflict's rebuild or an event listing. The
 * embedded SQLite store answers synchronously; the cluster's shared store only asynchronously, so there the engine
 * asks before a step whether the step reads the run back (RunState.readsBackToAdd, evaluationReadsBack), loads the
 * run's history when it does (awaited), and then runs the step with the history read ahead.
 */
import type { ReceiptSource } from '../core/classify.js';
import type { Receipt } from '../core/types.js';
import type { ReceiptReader, ReceiptReads } from './store.js';

export class ReadAhead {
  /** Runs read ahead, with how many steps use the read. */
  private readonly reads = new Map<string, { receipts: Receipt[]; users: number }>();

  constructor(
    private readonly store: ReceiptReader & ReceiptReads,
    /** The version of a live run's state (undefined: not live): a read is taken again while it moved. */
    private readonly versionOf: (run: string) => number | undefined,
  ) {}

  /** What live RunStates read back through: the read ahead, else the store's synchronous read. */
  readonly source: ReceiptSource = (run) => this.receipts(run);

  /** Whether the store answers synchronously (then nothing is ever read ahead). */
  get synchronous(): boolean {
    return this.store.synchronousReads;
  }

  /** Whether a step may read the run back now: the store reads synchronously, or its history is read ahead. */
  loaded(run: string): boolean {
    return this.store.synchronousReads || this.reads.has(run);
  }

  /**
   * A run's receipts for a step that reads it back. The engine loads a run's history before any step that reads it
   * (see loaded): a read with nothing loaded is a broken invariant of the engine, never a way to ask for a load.
   */
  receipts(run: string): Receipt[] {
    const read = this.reads.get(run);
    if (read) return read.receipts;
    if (this.store.synchronousReads) return this.store.runReceipts(run);
    throw new Error(`run ${run}: its history was read back before it was loaded (the engine loads it before the step)`);
  }

  /**
   * The load step: runs `step` with the runs' receipts read ahead (a store with synchronous reads needs none). The read is taken
   * again while a fold into the run happened during it, so every receipt the run's state holds is in the read (a
   * fold only follows its commit).
   */
  async around<T>(runs: readonly string[], step: () => T | Promise<T>): Promise<T> {
    if (this.synchronous) return await step();
    const wanted = new Set(runs);
    const prefilled = await this.readMany([...wanted].filter((run) => !this.reads.has(run)));
    const mine: string[] = [];
    try {
      for (const run of wanted) {
        if (!this.reads.has(run)) await this.read(run);
        else this.reads.get(run)!.users++;
        mine.push(run);
      }
    } catch (e) {
      // A read failed: nothing of this step stays read ahead (a read kept unused would answer a later step, stale).
      for (const run of mine) this.release(run);
      for (const run of prefilled) if (this.reads.get(run)?.users === 0) this.reads.delete(run);
      throw e;
    }
    try {
      return await step();
    } finally {
      for (const run of mine) this.release(run);
    }
  }

  /**
   * Runs not read yet, in one read where the store can (a batch's runs loaded again): kept unused (users 0) for the
   * step's loop below, which takes each; a run whose state moved during the read is read again there, alone.
   */
  private async readMany(runs: readonly string[]): Promise<string[]> {
    if (runs.length < 2 || !this.store.readManyReceipts) return [];
    const versions = runs.map((run) => this.versionOf(run));
    const read = await this.store.readManyReceipts(runs);
    const kept: string[] = [];
    runs.forEach((run, i) => {
      if (this.reads.has(run) || this.versionOf(run) !== versions[i]) return;
      this.reads.set(run, { receipts: read.get(run) ?? [], users: 0 });
      kept.push(run);
    });
    return kept;
  }

  private async read(run: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const version = this.versionOf(run);
      const receipts = await this.store.readReceipts(run);
      const again = this.reads.get(run); // read meanwhile by another step
      if (again) {
        again.users++;
        return;
      }
      if (this.versionOf(run) === version || attempt >= 4) {
        this.reads.set(run, { receipts, users: 1 });
        return;
      }
    }
  }

  /** Runs a synchronous step with a read the caller made already (a takeover reads every receipt of its runs). */
  withRead<T>(run: string, receipts: readonly Receipt[], step: () => T): T {
    const read = this.reads.get(run);
    if (read) read.users++;
    else this.reads.set(run, { receipts: [...receipts], users: 1 });
    try {
      return step();
    } finally {
      this.release(run);
    }
  }

  private release(run: string): void {
    const read = this.reads.get(run)!;
    if (--read.users === 0) this.reads.delete(run);
  }
}
