/** The shared store's rows as its readers answer them, and the parse of a stored body. */
import type { Receipt, Verdict } from '../../core/types.js';
import { StoreRowError, type LiveRun } from '../types.js';

export type Row = Record<string, unknown>;

/** An acknowledgement as acksSince reads it. */
export interface AckSince {
  seq: number;
  run: string;
  verdict: string;
  ackedAt: number;
  by: string | null;
  reason: string | null;
}

export interface ListedRun {
  run: string;
  verdict: string | null;
  settled: boolean;
  firstAt: number;
  updatedAt: number;
  /** The verdict its owner last wrote for the list views (compact JSON of a RunVerdict without `run`), or null. */
  listed: string | null;
}

/** A span_log row as the span-log readers return it. */
export const spanLogEntry = (r: Row): { seq: number; traceId: string; origin: string; body: string } => ({ seq: Number(r.seq), traceId: r.trace_id as string, origin: r.origin as string, body: r.body as string });

export function parseBody(body: string, table: string, row: string): Receipt {
  try {
    return JSON.parse(body) as Receipt;
  } catch (e) {
    throw new StoreRowError(table, row, (e as Error).message);
  }
}

export function liveRunOf(row: Row): LiveRun {
  const hasPin = row.contract !== null && row.contract !== undefined;
  return {
    run: row.run as string,
    firstAt: Number(row.first_at),
    updatedAt: Number(row.updated_at),
    verdict: (row.verdict as Verdict | null) ?? null,
    settled: row.settled === true,
    pin: hasPin ? { contract: row.contract as string, version: row.version as string, phase: row.phase as string } : null,
    contractHash: hasPin ? (row.contract_hash as string) : null,
  };
}
