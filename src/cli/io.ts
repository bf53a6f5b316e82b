import { readFileSync } from 'node:fs';
import { parseReceiptFile, runIdError } from '../core/receipt.js';
import { instantTextError, parseInstant, type Instant } from '../core/time.js';
import type { Receipt } from '../core/types.js';

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

export const processIo: Io = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

export class UsageError extends Error {}

/** Parse an RFC 3339 time given on the command line. */
export function parseTimeArg(name: string, value: string): number {
  return parseInstantArg(name, value).ms;
}

/**
 * Parse an RFC 3339 time given on the command line, exact to the nanosecond (up to nine fraction digits; more is
 * refused, as in receipts).
 */
export function parseInstantArg(name: string, value: string): Instant {
  const error = instantTextError(value);
  if (error !== null) throw new UsageError(`${name}: not an RFC 3339 time (${error}): ${value}`);
  return parseInstant(value);
}

/**
 * A run id given on the command line (gate, ack, diff, handoff board): refused with the reason when it fails the id
 * rule of semantics 2a (`..`, `../x`, `a//b`, spaces ...), before any server is asked. No run can have such an id,
 * so waiting for it (gate) or asking a server about it could only ever answer "unknown run".
 */
export function runIdArg(name: string, value: string): string {
  const error = runIdError(value);
  if (error !== null) throw new UsageError(`${name}: not a run id: ${error}`);
  return value;
}

/** The receipts of NDJSON files, in file order; a file that cannot be read is a usage error naming it. */
export function readReceiptFiles(files: readonly string[]): Receipt[] {
  const receipts: Receipt[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new UsageError(`${file}: ${(e as Error).message}`);
    }
    // Not push(...list): spreading a million receipts as call arguments overflows the stack.
    for (const r of parseReceiptFile(text, file)) receipts.push(r);
  }
  return receipts;
}

/** Render rows as an aligned text table. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}
