/**
 * The decided path of the shared store's append (src/store/pg/group-commit.ts): when a receipt of the group was stored
 * before (a retry, a conflict) every delivery is decided in input order from one read of the stored variants, as
 * SQLite's storeOne: accepted, a duplicate, or a conflicting variant; a source-scoped id where sourceScopedEvent says.
 */
import type { PoolClient } from 'pg';
import type { Receipt } from '../../core/types.js';
import { canonicalReceiptJson, compactReceiptJson } from '../../core/canonical.js';
import { countOutcome, emptyResult, scopedEventId, sourceScopedEvent, type AppendOutcome, type AppendResult, type StoredReceipt } from '../types.js';
import type { Row } from './rows.js';

interface StoredVariant {
  body: string;
  canonical?: string;
}

/** A receipt row to insert, decided. */
export interface NewRow {
  receipt: Receipt;
  body: string;
  variant: number;
  source: string;
  receivedAt: number;
}

interface KeyState {
  variants: StoredVariant[];
  maxVariant: number;
  /** The source of variant 0 (the first stored), for the source-scoped event id rule. */
  firstSource?: string;
}

/** Whether a key already holds this receipt's canonical content (a duplicate). */
function holds(state: KeyState, receipt: Receipt): boolean {
  const canonical = canonicalReceiptJson(receipt);
  return state.variants.some((v) => {
    v.canonical ??= canonicalReceiptJson(JSON.parse(v.body) as Receipt);
    return v.canonical === canonical;
  });
}

/**
 * Reads the stored variants of the group's (run, event) keys once (and, for deliveries with a source scope, of their
 * source-scoped ids) and decides every delivery in input order, as SQLite's storeOne: a delivery whose key holds
 * other content stored first by another bound source goes to its source-scoped id (sourceScopedEvent).
 */
export async function decide(client: PoolClient, group: readonly { items: StoredReceipt[] }[]): Promise<{ results: AppendResult[]; rows: NewRow[] }> {
  const keyRuns: string[] = [];
  const keyEvents: string[] = [];
  const states = new Map<string, KeyState | null>();
  const want = (run: string, event: string): void => {
    const key = `${run}\u0000${event}`;
    if (states.has(key)) return;
    states.set(key, null);
    keyRuns.push(run);
    keyEvents.push(event);
  };
  for (const a of group) {
    for (const { receipt, scope } of a.items) {
      want(receipt.run, receipt.event);
      if (scope !== undefined) want(receipt.run, scopedEventId(receipt.event, scope));
    }
  }
  if (keyRuns.length > 0) {
    const stored = await client.query(
      `SELECT r.run, r.event, r.variant, r.body, r.source FROM receipts r
       JOIN unnest($1::text[], $2::text[]) AS k(run, event) ON r.run = k.run AND r.event = k.event
       ORDER BY r.run, r.event, r.variant`,
      [keyRuns, keyEvents],
    );
    for (const row of stored.rows as Row[]) {
      const key = `${row.run as string}\u0000${row.event as string}`;
      let state = states.get(key) ?? null;
      if (state === null) {
        state = { variants: [], maxVariant: -1 };
        states.set(key, state);
      }
      state.variants.push({ body: row.body as string });
      state.maxVariant = Math.max(state.maxVariant, row.variant as number);
      if (row.variant === 0) state.firstSource = row.source as string;
    }
  }
  const rows: NewRow[] = [];
  const results = group.map((a) => {
    const result = emptyResult();
    for (const item of a.items) {
      const outcome = decideOne(item, states, rows);
      countOutcome(result, outcome);
    }
    return result;
  });
  return { results, rows };
}

/** One delivery against the key states read (updated in place): its outcome, and its row when one is written. */
export function decideOne(item: StoredReceipt, states: Map<string, KeyState | null>, rows: NewRow[]): AppendOutcome {
  const { source, receivedAt } = item;
  let { receipt } = item;
  let key = `${receipt.run}\u0000${receipt.event}`;
  let body = compactReceiptJson(receipt);
  let state = states.get(key) ?? null;
  if (state === null) {
    states.set(key, { variants: [{ body }], maxVariant: 0, firstSource: source });
    rows.push({ receipt, body, variant: 0, source, receivedAt });
    return 'accepted';
  }
  if (holds(state, receipt)) return 'duplicate';
  const scoped = sourceScopedEvent(item, state.firstSource);
  if (scoped !== null) {
    // Other content under this (run, event), stored first by another source: never masked or replaced; this
    // delivery is stored under its own source-scoped id (a redelivery finds it there).
    receipt = { ...receipt, event: scoped };
    item.storedAs = scoped;
    key = `${receipt.run}\u0000${scoped}`;
    body = compactReceiptJson(receipt);
    state = states.get(key) ?? null;
    if (state === null) {
      states.set(key, { variants: [{ body }], maxVariant: 0, firstSource: source });
      rows.push({ receipt, body, variant: 0, source, receivedAt });
      return 'accepted';
    }
    if (holds(state, receipt)) return 'duplicate';
  }
  state.maxVariant++;
  state.variants.push({ body, canonical: canonicalReceiptJson(receipt) });
  rows.push({ receipt, body, variant: state.maxVariant, source, receivedAt });
  return 'conflict';
}
