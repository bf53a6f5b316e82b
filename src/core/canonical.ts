/**
 * Receipt equality for duplicate detection (semantics 2a: "Duplicates compare receipts after normalisation
 * (defaults filled, times as instants, versions as strings)"), and the compact stored form.
 * Pure functions, no I/O.
 */
import type { Receipt, ReceiptField } from './receipt-schema.js';
import { millisOf, subMillisOf } from './time.js';

/**
 * Every field a receipt may carry. Typed as a record over ReceiptField (the fields of every receipt type) so the
 * compiler forces this list to follow the receipt schema. The stored JSON holds these fields only: anything else on the object (it cannot
 * come from a validated receipt) is never written, so the store stays content-free by construction.
 */
const RECEIPT_FIELDS: Readonly<Record<ReceiptField, true>> & Readonly<Record<string, true | undefined>> = {
  run: true, event: true, type: true, at: true, version: true, status: true, contract: true, phase: true,
  from: true, to: true, kind: true, on: true, edge: true, deadline: true, verified: true, result: true,
  reason: true, handoff: true, attempt: true, state: true, duplicateKey: true, leaseExpiresAt: true,
  stateVersion: true, finalOwner: true, onTimeout: true, units: true, budgetOp: true, capabilities: true, effects: true,
};
const UNIT_FIELDS = ['actions', 'contextUnits', 'effects'] as const;

/** Fields holding an RFC 3339 instant: compared as instants, not as text. */
const INSTANT_FIELDS: ReadonlySet<string> = new Set(['at', 'deadline', 'leaseExpiresAt']);
/** Fields holding a version: compared as text (a JSON integer 2 equals "2"). */
const VERSION_FIELDS: ReadonlySet<string> = new Set(['version', 'stateVersion']);
/** Fields holding an edge string: compared with spaces ignored (`a->b:kind` equals `a -> b : kind`). */
const EDGE_FIELDS: ReadonlySet<string> = new Set(['edge']);

type Json = string | number | boolean | Json[] | { [key: string]: Json };

/** The receipt with only its known fields, absent (undefined) fields dropped: what the store writes. */
export function storedReceiptFields(receipt: Receipt): Record<string, Json> {
  const kept: Record<string, Json> = {};
  const fields: Readonly<Record<string, unknown>> = receipt;
  for (const key of Object.keys(fields)) {
    if (RECEIPT_FIELDS[key] !== true) continue;
    const value = fields[key];
    if (value === undefined || value === null) continue;
    if (key === 'units') {
      const units = value as Readonly<Record<string, unknown>>; // only the unit counts are kept, whatever else it holds
      const keptUnits: Record<string, Json> = {};
      for (const unit of UNIT_FIELDS) {
        const n = units[unit];
        if (typeof n === 'number') keptUnits[unit] = n;
      }
      kept.units = keptUnits;
      continue;
    }
    kept[key] = value as Json;
  }
  return kept;
}

/**
 * Compact JSON of the receipt's known fields, as stored. A plain object holding only known fields, none null and
 * no `units` (every receipt a span or an NDJSON line produces) serialises as it is: JSON.stringify already drops
 * undefined fields and keeps the key order, so the copy storedReceiptFields makes would be the same.
 */
export function compactReceiptJson(receipt: Receipt): string {
  if (Object.getPrototypeOf(receipt) !== Object.prototype) return JSON.stringify(storedReceiptFields(receipt));
  const fields: Readonly<Record<string, unknown>> = receipt;
  for (const key in fields) {
    if (RECEIPT_FIELDS[key] !== true || key === 'units' || fields[key] === null) {
      return JSON.stringify(storedReceiptFields(receipt));
    }
  }
  return JSON.stringify(receipt);
}

function normalisedValue(key: string, value: Json): Json {
  if (INSTANT_FIELDS.has(key) && typeof value === 'string') {
    // Exact to the nanosecond: whole milliseconds, plus the sub-millisecond nanoseconds when there are any.
    const ms = millisOf(value);
    if (Number.isNaN(ms)) return value;
    const ns = subMillisOf(value);
    return ns === 0 ? ms : `${ms}+${ns}ns`;
  }
  if (VERSION_FIELDS.has(key) && typeof value === 'number') return String(value);
  if (EDGE_FIELDS.has(key) && typeof value === 'string') return value.replace(/\s+/g, '');
  return value;
}

function sortedJson(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Canonical JSON of a receipt: known fields only, keys sorted, `status` defaulted to `ok` (nothing else), instants
 * as epoch milliseconds exact to the nanosecond, versions as text, edge strings without spaces. Two deliveries are the same receipt exactly
 * when their canonical forms are equal.
 */
export function canonicalReceiptJson(receipt: Receipt): string {
  const fields = storedReceiptFields(receipt);
  // Only `status` is defaulted (semantics 2a): pin defaults are not filled, so a run.start with and one without
  // `phase` under one event id conflict.
  const normalised: Record<string, Json> = { status: 'ok' };
  for (const [key, value] of Object.entries(fields)) normalised[key] = normalisedValue(key, value);
  return sortedJson(normalised);
}

/** True when two deliveries of one (run, event) carry the same receipt (a retry), false when they conflict. */
export function sameReceipt(a: Receipt, b: Receipt): boolean {
  return canonicalReceiptJson(a) === canonicalReceiptJson(b);
}

