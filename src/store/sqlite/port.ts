/**
 * The embedded store (SQLite, src/store/sqlite/receipt-store.ts) behind the storage port: its synchronous answers as
 * resolved promises. The engine's synchronous fast path (reading a run back in place) stays on ReceiptStore itself.
 */
import type { AckRecord, Pin, Verdict } from '../../core/types.js';
import type { ReceiptStore } from './receipt-store.js';
import { runRowOf, type RunPage, type RunRow, type StoragePort } from '../port.js';
import type { AppendPin, AppendResult, PinRecord, SpanLogEntry, StoredReceipt } from '../types.js';

export class SqlitePort implements StoragePort {
  constructor(readonly store: ReceiptStore) {}

  append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    return this.store.append(items, spanLog, pins);
  }

  sync(): Promise<void> {
    return this.store.sync();
  }

  readReceipts(run: string) {
    return this.store.readReceipts(run);
  }

  async getRun(run: string): Promise<RunRow | null> {
    const r = this.store.getRun(run);
    return r ? runRowOf(r) : null;
  }

  async listRuns(page: RunPage): Promise<RunRow[]> {
    return this.store.listRuns(page).map(runRowOf);
  }

  async verdictCounts(filter: { contract?: string }): Promise<Record<string, number>> {
    return this.store.verdictCounts(filter);
  }

  async getPin(run: string): Promise<PinRecord | null> {
    return this.store.getPin(run);
  }

  async setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord> {
    return this.store.setPin(run, pin, contractHash);
  }

  async putContractContent(hash: string, contract: string, version: string, content: string): Promise<void> {
    this.store.putContractContent(hash, contract, version, content);
  }

  async getContractContent(hash: string): Promise<string | null> {
    return this.store.getContractContent(hash);
  }

  async setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number): Promise<void> {
    this.store.setVerdictState(run, verdict, settled, updatedAt);
  }

  prune(olderThanMs: number, now: number): Promise<number> {
    return this.store.pruneSliced(olderThanMs, now);
  }

  async putAck(run: string, ack: AckRecord): Promise<void> {
    this.store.putAck(run, ack);
  }

  async getAck(run: string): Promise<AckRecord | null> {
    return this.store.getAck(run);
  }

  async spanLog(): Promise<{ seq: number; traceId: string; body: string }[]> {
    return this.store.spanLog();
  }

  async deleteSpanLogUpTo(seq: number): Promise<void> {
    await this.store.deleteSpanLogUpTo(seq);
  }

  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean): Promise<number> {
    return this.store.pruneSpanLog(before, stillPending);
  }

  healthy(): boolean {
    return this.store.healthy();
  }

  async close(): Promise<void> {
    this.store.close();
  }
}
