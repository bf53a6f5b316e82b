/**
 * The shared PostgreSQL store of a cluster (src/store/pg-store.ts) behind the storage port. Writes that the database
 * fences (verdict states, the retention prune, span log deletes) are limited to the partitions this instance holds,
 * `ownedParts` (the ownership strategy's answer: src/cluster/); the span log is this instance's own.
 */
import type { AckRecord, Pin, Receipt, Verdict } from '../../core/types.js';
import type { PgStore } from './pg-store.js';
import { runRowOf, type RunPage, type RunRow, type StoragePort } from '../port.js';
import type { AppendPin, AppendResult, PinRecord, SpanLogEntry, StoredReceipt } from '../types.js';

export class PgPort implements StoragePort {
  constructor(
    readonly store: PgStore,
    /** The partitions whose leases this instance holds. */
    private readonly ownedParts: () => readonly number[],
  ) {}

  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    return this.store.append(items, spanLog, pins);
  }

  sync(): Promise<void> {
    return this.store.sync();
  }

  readReceipts(run: string): Promise<Receipt[]> {
    return this.store.runReceipts(run);
  }

  async getRun(run: string): Promise<RunRow | null> {
    const r = await this.store.getRun(run);
    return r ? runRowOf(r) : null;
  }

  async listRuns(page: RunPage): Promise<RunRow[]> {
    return (await this.store.listRuns(page)).map(runRowOf);
  }

  verdictCounts(filter: { contract?: string }): Promise<Record<string, number>> {
    return this.store.verdictCounts(filter);
  }

  getPin(run: string): Promise<PinRecord | null> {
    return this.store.getPin(run);
  }

  setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord> {
    return this.store.setPin(run, pin, contractHash);
  }

  putContractContent(hash: string, contract: string, version: string, content: string): Promise<void> {
    return this.store.putContractContent(hash, contract, version, content);
  }

  getContractContent(hash: string): Promise<string | null> {
    return this.store.getContractContent(hash);
  }

  async setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number): Promise<void> {
    await this.store.setVerdictStates([{ run, verdict, settled, updatedAt }]);
  }

  prune(olderThanMs: number, now: number): Promise<number> {
    return this.store.prune(olderThanMs, now, this.ownedParts());
  }

  putAck(run: string, ack: AckRecord): Promise<void> {
    return this.store.putAck(run, ack);
  }

  getAck(run: string): Promise<AckRecord | null> {
    return this.store.getAck(run);
  }

  async spanLog(): Promise<{ seq: number; traceId: string; body: string }[]> {
    return (await this.store.spanLog(this.ownedParts(), this.store.instance)).map(({ seq, traceId, body }) => ({ seq, traceId, body }));
  }

  async deleteSpanLogUpTo(seq: number): Promise<void> {
    const upTo = (await this.spanLog()).filter((e) => e.seq <= seq).map((e) => e.seq);
    await this.store.deleteSpanLog(upTo);
  }

  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean): Promise<number> {
    return this.store.pruneSpanLog(before, stillPending, this.store.instance);
  }

  healthy(): boolean {
    return this.store.healthy();
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
