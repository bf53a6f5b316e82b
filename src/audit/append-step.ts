/**
 * The append step of append -> fold -> pin -> evaluate: the receipts of a batch not delivered before (a redelivery of
 * a live run's stored content is a duplicate without a store round trip), the first pins of its new runs (written in
 * the append's transaction), and store.append in chunks that yield to the event loop for a large batch.
 */
import { compactReceiptJson } from '../core/canonical.js';
import type { Receipt } from '../core/types.js';
import type { AppendPin, AppendResult, SpanLogEntry, StoredReceipt } from '../store/index.js';
import { DeliveredDigests, type Digest } from './delivered.js';
import type { LiveRuns } from './live-runs.js';
import type { Ownership } from './ownership.js';
import type { Pinner } from './pinning.js';
import { Slicer } from './slicer.js';
import type { EngineStore } from './store.js';

/** A batch of more receipts is committed in chunks of this many (see AppendStep.appendInChunks). */
const APPEND_CHUNK = 2048;

/** Receipts of a batch per type and result (the receipts metrics). */
export type PerType = Map<string, { accepted: number; duplicate: number; conflict: number }>;

export function countType(perType: PerType, type: string, result: 'accepted' | 'duplicate' | 'conflict'): void {
  const t = perType.get(type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
  t[result]++;
  perType.set(type, t);
}

/** What the append step reads besides the live runs. */
export interface AppendHost {
  readonly store: EngineStore;
  readonly pinner: Pinner;
  readonly ownership: Ownership;
}

export class AppendStep {
  constructor(
    private readonly live: LiveRuns,
    private readonly host: AppendHost,
  ) {}

  /**
   * The first pins of the runs of a batch that this instance folds and that have no pin record (held by the live run
   * or stored), resolved as the pin step would resolve them (Pinner.firstPin): written by the append, in its
   * transaction. A run that left live memory idle is left to its pin step (its fold reloads every stored receipt).
   */
  firstPins(receipts: readonly Receipt[]): AppendPin[] | undefined {
    let starts: Map<string, Receipt[]> | undefined;
    let pinned: Set<string> | undefined;
    for (const r of receipts) {
      const listed = starts?.get(r.run);
      if (listed) {
        if (r.type === 'run.start') listed.push(r);
      } else if (!pinned?.has(r.run)) {
        if (this.needsFirstPin(r.run)) (starts ??= new Map()).set(r.run, r.type === 'run.start' ? [r] : []);
        else (pinned ??= new Set()).add(r.run);
      }
    }
    if (!starts) return undefined;
    const pins: AppendPin[] = [];
    for (const [run, list] of starts) {
      const p = this.host.pinner.firstPin(run, this.live.get(run)?.state.firstStart() ?? null, list);
      if (p) pins.push(p);
    }
    return pins;
  }

  /** Whether a run of a batch gets its first pin with the append (see firstPins). */
  private needsFirstPin(run: string): boolean {
    if (!this.host.ownership.owns(run) || this.live.returning.has(run)) return false;
    const live = this.live.get(run);
    if (!live) return true;
    if (live.pin) return false;
    const stored = this.host.store.getPin(run);
    if (stored) live.pin = stored;
    return !stored;
  }

  /**
   * store.append, in chunks of APPEND_CHUNK receipts for a larger batch, yielding to the event loop between them
   * (one transaction of 20,000 receipts held the loop ~80-150 ms of CPU). Each chunk is committed before the next is
   * queued; a run's first pin goes with the chunk that holds the run's first receipt of the batch (in its COMMIT). The
   * results of the chunks committed, in input order, with the pins in force; `failure`: the error of the first chunk
   * that failed after at least one committed (the first chunk's failure is thrown, as store.append's).
   */
  async appendInChunks(items: StoredReceipt[], spanLog?: SpanLogEntry[], pins?: AppendPin[]): Promise<{ res: AppendResult; failure: unknown }> {
    if (items.length <= APPEND_CHUNK) return { res: await this.host.store.append(items, spanLog, pins), failure: null };
    const res: AppendResult = { accepted: 0, duplicates: 0, conflicts: 0, results: [] };
    const unsent = new Map((pins ?? []).map((p) => [p.run, p]));
    const slice = new Slicer();
    for (let lo = 0; lo < items.length; lo += APPEND_CHUNK) {
      const hi = Math.min(lo + APPEND_CHUNK, items.length);
      const chunk = items.slice(lo, hi);
      let chunkPins: AppendPin[] | undefined;
      if (unsent.size) {
        for (const it of chunk) {
          const p = unsent.get(it.receipt.run);
          if (p === undefined) continue;
          (chunkPins ??= []).push(p);
          unsent.delete(it.receipt.run);
        }
      }
      let part: AppendResult;
      try {
        // the span log with the last chunk: logged only with the commit that completes the batch
        part = await this.host.store.append(chunk, hi === items.length ? spanLog : undefined, chunkPins);
      } catch (e) {
        if (lo === 0) throw e;
        return { res, failure: e };
      }
      res.accepted += part.accepted;
      res.duplicates += part.duplicates;
      res.conflicts += part.conflicts;
      for (let i = 0; i < part.results.length; i++) res.results.push(part.results[i]);
      if (part.pins) for (const [run, record] of part.pins) (res.pins ??= new Map()).set(run, record);
      // storedAs (a source-scoped id) is set on the chunk's items, which are the batch's own objects
      await slice.yieldIfDue();
    }
    return { res, failure: null };
  }

  /**
   * The receipts not delivered before: a redelivery of stored content of a live run is a duplicate without a store
   * round trip (see DeliveredDigests). The stored form is made once here and handed to the store with the receipt.
   * A large batch is digested in slices that yield to the event loop.
   */
  async unseen(incoming: readonly Receipt[], perType: PerType): Promise<{ fresh: Receipt[]; digests: Digest[]; bodies: string[]; known: number }> {
    const fresh: Receipt[] = [];
    const digests: Digest[] = [];
    const bodies: string[] = [];
    let known = 0;
    const slice = new Slicer();
    for (let i = 0; i < incoming.length; i++) {
      if ((i & 255) === 255) await slice.yieldIfDue();
      const r = incoming[i];
      const body = compactReceiptJson(r);
      const d = DeliveredDigests.digestOfJson(body);
      if (this.live.has(r.run) && this.live.delivered.has(r.run, r.event, d)) {
        known++;
        countType(perType, r.type, 'duplicate');
      } else {
        fresh.push(r);
        digests.push(d);
        bodies.push(body);
      }
    }
    return { fresh, digests, bodies, known };
  }
}
