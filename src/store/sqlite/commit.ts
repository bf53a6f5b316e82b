/**
 * One group's transaction in the embedded store: every queued append's deliveries (accepted, duplicate or a
 * conflicting version), their span log entries, the runs they touch, the pins set before and those the appends carry
 * (with their contracts' content), the verdict states and the contracts, in one transaction and one fsync.
 */
import type Database from 'better-sqlite3';
import type { Receipt, Verdict } from '../../core/types.js';
import { sharedPin } from '../../core/registry.js';
import { canonicalReceiptJson, compactReceiptJson } from '../../core/canonical.js';
import {
  countOutcome,
  emptyResult,
  sourceScopedEvent,
  type AppendOutcome,
  type AppendPin,
  type AppendResult,
  type PinRecord,
  type SpanLogEntry,
  type StoredReceipt,
} from '../types.js';
import type { Statements } from './statements.js';

export interface QueuedAppend {
  items: StoredReceipt[];
  spanLog?: SpanLogEntry[];
  pins?: readonly AppendPin[];
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

export interface VerdictState {
  verdict: Verdict;
  settled: boolean;
  updatedAt: number;
}

export interface ContractRow {
  hash: string;
  contract: string;
  version: string;
  content: string;
}

/** Everything one transaction commits. */
export interface QueuedGroup {
  appends: QueuedAppend[];
  pins: [string, PinRecord][];
  verdicts: [string, VerdictState][];
  contracts: ContractRow[];
}

/** What a group's commit answers: each append's result, and the runs whose `runs` row it created. */
export interface CommittedGroup {
  results: AppendResult[];
  newRuns: number;
  created: string[];
}

interface RunTouch {
  firstAt: number;
  lastAt: number;
}

function touchRun(touched: Map<string, RunTouch>, run: string, at: number): void {
  const seen = touched.get(run);
  if (seen === undefined) touched.set(run, { firstAt: at, lastAt: at });
  else {
    if (at < seen.firstAt) seen.firstAt = at;
    if (at > seen.lastAt) seen.lastAt = at;
  }
}

/** Inserts one delivery: new (accepted), equal to a stored version (duplicate) or a new version (conflict). */
function storeOne(stmt: Statements, item: StoredReceipt): AppendOutcome {
  let { receipt } = item;
  const { source, receivedAt } = item;
  let body = item.body ?? compactReceiptJson(receipt);
  if (stmt.insertFirst.run(receipt.run, receipt.event, body, source, receivedAt).changes === 1) return 'accepted';
  const canonical = canonicalReceiptJson(receipt);
  let stored = stmt.variants.all(receipt.run, receipt.event);
  if (stored.some((v) => canonicalReceiptJson(JSON.parse(v.body) as Receipt) === canonical)) return 'duplicate';
  if (item.scope !== undefined && source !== 'auditor') {
    // Other content under this (run, event), stored first by another source: that receipt is never masked or
    // replaced; this one is stored under its own source-scoped id (a redelivery finds it there).
    const scoped = sourceScopedEvent(item, stmt.firstSource.get(receipt.run, receipt.event)?.source);
    if (scoped !== null) {
      receipt = { ...receipt, event: scoped };
      body = compactReceiptJson(receipt);
      item.storedAs = receipt.event;
      if (stmt.insertFirst.run(receipt.run, receipt.event, body, source, receivedAt).changes === 1) return 'accepted';
      const scopedCanonical = canonicalReceiptJson(receipt);
      stored = stmt.variants.all(receipt.run, receipt.event);
      if (stored.some((v) => canonicalReceiptJson(JSON.parse(v.body) as Receipt) === scopedCanonical)) return 'duplicate';
    }
  }
  const nextVariant = stored.reduce((max, v) => Math.max(max, v.variant), 0) + 1;
  stmt.insertVariant.run(receipt.run, receipt.event, nextVariant, body, source, receivedAt);
  return 'conflict';
}

/**
 * Inside a commit: an append's first pins (ON CONFLICT DO NOTHING: a pin written before stays) and their contracts'
 * content, unless stored; returns the pins in force.
 */
function insertAppendPins(stmt: Statements, storedContracts: ReadonlySet<string>, pins: readonly AppendPin[], contentsWritten: Set<string>): Map<string, PinRecord> {
  const inForce = new Map<string, PinRecord>();
  for (const p of pins) {
    if (!storedContracts.has(p.contractHash) && !contentsWritten.has(p.contractHash)) {
      stmt.insertContract.run(p.contractHash, p.contract, p.version, p.content);
      contentsWritten.add(p.contractHash);
    }
    if (stmt.insertPin.run(p.run, p.pin.contract, p.pin.version, p.pin.phase, p.contractHash).changes === 1) {
      inForce.set(p.run, { pin: sharedPin(p.pin.contract, p.pin.version, p.pin.phase), contractHash: p.contractHash });
      continue;
    }
    const row = stmt.getPin.get(p.run);
    if (row !== undefined) inForce.set(p.run, { pin: sharedPin(row.contract as string, row.version as string, row.phase as string), contractHash: row.contract_hash as string });
  }
  return inForce;
}

/**
 * The group's transaction (better-sqlite3's: BEGIN, the body, COMMIT; ROLLBACK when it throws). `storedContracts`:
 * the hashes whose content is committed already (not written again).
 */
export function groupTransaction(db: Database.Database, stmt: Statements, storedContracts: ReadonlySet<string>): (group: QueuedGroup) => CommittedGroup {
  return db.transaction(({ appends, pins, verdicts, contracts }: QueuedGroup): CommittedGroup => {
    const touched = new Map<string, RunTouch>();
    const results = appends.map((queued) => {
      const result = emptyResult();
      for (const item of queued.items) {
        const outcome = storeOne(stmt, item);
        countOutcome(result, outcome);
        if (outcome !== 'duplicate') touchRun(touched, item.receipt.run, item.receivedAt);
      }
      if (queued.spanLog) for (const e of queued.spanLog) stmt.insertSpanLog.run(e.traceId, e.loggedAt, e.body);
      return result;
    });
    const created: string[] = [];
    for (const [run, touch] of touched) {
      if (stmt.isNewRun.get(run) === undefined) created.push(run);
      stmt.touchRun.run(run, touch.firstAt, touch.lastAt);
    }
    for (const [run, p] of pins) stmt.insertPin.run(run, p.pin.contract, p.pin.version, p.pin.phase, p.contractHash);
    // The first pins the appends carry, after those set before (the first written wins), with their content.
    const contentsWritten = new Set<string>();
    for (let i = 0; i < appends.length; i++) {
      const carried = appends[i].pins;
      if (carried) results[i].pins = insertAppendPins(stmt, storedContracts, carried, contentsWritten);
    }
    for (const [run, state] of verdicts) {
      if (!touched.has(run) && stmt.isNewRun.get(run) === undefined) created.push(run);
      stmt.upsertVerdict.run(run, state.updatedAt, state.updatedAt, state.verdict, state.settled ? 1 : 0);
    }
    for (const c of contracts) stmt.insertContract.run(c.hash, c.contract, c.version, c.content);
    return { results, newRuns: created.length, created };
  });
}
