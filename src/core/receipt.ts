import { z } from 'zod';
import { ReceiptSchema, type Receipt } from './receipt-schema.js';
import { canonicalReceiptJson } from './canonical.js';
import { millisOf } from './time.js';

export * from './receipt-schema.js';

export function receiptJsonSchema(): unknown {
  return z.toJSONSchema(ReceiptSchema, { io: 'input', target: 'draft-2020-12' });
}

export type ReceiptParse = { ok: true; receipt: Receipt } | { ok: false; error: string };

function describe(err: z.ZodError): string {
  return err.issues
    .map((i) => {
      const field = i.path.join('.');
      if (i.code === 'unrecognized_keys') return `unknown field(s) ${i.keys.map((k) => JSON.stringify(k)).join(', ')}`;
      if (i.code === 'invalid_union' && i.path.length === 0) return 'unknown or missing "type" (run.start, edge, wait, outcome, run.end, gap, handoff)';
      return field ? `${field}: ${i.message}` : i.message;
    })
    .join('; ');
}

/** Validate one decoded JSON value as a receipt. */
export function validateReceipt(value: unknown): ReceiptParse {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { ok: false, error: 'a receipt is a JSON object' };
  const r = ReceiptSchema.safeParse(value);
  if (!r.success) return { ok: false, error: describe(r.error) };
  return { ok: true, receipt: r.data };
}

/** Parse one NDJSON line. */
export function parseReceiptLine(line: string): ReceiptParse {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return { ok: false, error: `invalid JSON: ${(e as Error).message}` };
  }
  return validateReceipt(value);
}

export interface LineResult {
  line: number;
  result: ReceiptParse;
}

/** Split NDJSON text into numbered, validated lines (blank lines are skipped). */
export function parseNdjson(text: string): LineResult[] {
  const out: LineResult[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i].trim();
    if (l === '') continue;
    out.push({ line: i + 1, result: parseReceiptLine(l) });
  }
  return out;
}

export class ReceiptFileError extends Error {
  constructor(public readonly file: string, public readonly line: number, public readonly reason: string) {
    super(`${file}:${line}: ${reason}`);
  }
}

/** For replay: the whole input is refused at the first invalid line. */
export function parseReceiptFile(text: string, file: string): Receipt[] {
  const receipts: Receipt[] = [];
  for (const { line, result } of parseNdjson(text)) {
    if (!result.ok) throw new ReceiptFileError(file, line, result.error);
    receipts.push(result.receipt);
  }
  return receipts;
}

/**
 * Whole milliseconds since the epoch of an RFC 3339 time (validated upstream), the sub-millisecond part dropped
 * (truncated). For exact comparisons use parseInstant / subMillisOf (src/core/time.ts).
 */
export function instant(t: string): number {
  return millisOf(t);
}

/**
 * Normalised content for duplicate detection: defaults filled, times as instants, versions as strings,
 * keys in a fixed order. Equal canon = duplicate delivery; different = conflict. One rule for the store and the classifier.
 */
export const receiptCanon = canonicalReceiptJson;
