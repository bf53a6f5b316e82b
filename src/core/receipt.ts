import { validateReceipt, type Receipt, type ReceiptParse } from '@topology-audit/receipt';
import { canonicalReceiptJson } from './canonical.js';
import { millisOf } from './time.js';

export * from './receipt-schema.js';

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

/** Invalid lines a receipts file error lists at most (the rest are counted), so one run shows what to fix. */
export const MAX_LISTED_LINE_ERRORS = 20;

export class ReceiptFileError extends Error {
  /** The first invalid line and its reason; `others` lists the next invalid lines (bounded), `unlisted` counts the rest. */
  constructor(
    public readonly file: string,
    public readonly line: number,
    public readonly reason: string,
    public readonly others: readonly { line: number; reason: string }[] = [],
    public readonly unlisted = 0,
  ) {
    super([`${file}:${line}: ${reason}`, ...others.map((o) => `${file}:${o.line}: ${o.reason}`), ...(unlisted ? [`${file}: ${unlisted} more invalid line(s)`] : [])].join('\n'));
  }
}

/** For replay: the whole input is refused when a line is invalid, every invalid line said (up to MAX_LISTED_LINE_ERRORS). */
export function parseReceiptFile(text: string, file: string): Receipt[] {
  const receipts: Receipt[] = [];
  const bad: { line: number; reason: string }[] = [];
  let unlisted = 0;
  for (const { line, result } of parseNdjson(text)) {
    if (result.ok) receipts.push(result.receipt);
    else if (bad.length < MAX_LISTED_LINE_ERRORS) bad.push({ line, reason: result.error });
    else unlisted++;
  }
  if (bad.length) throw new ReceiptFileError(file, bad[0].line, bad[0].reason, bad.slice(1), unlisted);
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
