/**
 * Reading receipts for `handoff audit`: one JSON object per line. `handoff` receipts are validated
 * by `handoffReceiptSchema`; other types get the envelope checks every receipt needs (run, event,
 * type, at) and are otherwise passed through (the run classifier's receipt validator owns them).
 * The first invalid line refuses the whole input, naming the line and the field.
 */
import type { Receipt } from '../core/types.js';
import { RECEIPT_TYPES } from '../core/types.js';
import { fieldPath, handoffReceiptSchema } from './schema.js';
import { instantTextError } from '../core/time.js';
import { runIdError } from '../core/receipt.js';

export class ReceiptLineError extends Error {
  constructor(
    readonly line: number,
    readonly field: string,
    detail: string,
  ) {
    super(`line ${line}: ${field}: ${detail}`);
  }
}

function envelope(o: Record<string, unknown>, line: number): void {
  for (const f of ['run', 'event', 'type', 'at'] as const) {
    if (typeof o[f] !== 'string' || o[f] === '') throw new ReceiptLineError(line, f, 'required, a non-empty string');
  }
  if (!(RECEIPT_TYPES as readonly string[]).includes(o.type as string)) throw new ReceiptLineError(line, 'type', `unknown receipt type`);
  for (const f of ['run', 'event'] as const) {
    const error = runIdError(o[f] as string);
    if (error !== null) throw new ReceiptLineError(line, f, error);
  }
  const error = instantTextError(o.at as string);
  if (error !== null) throw new ReceiptLineError(line, 'at', `not an RFC 3339 time: ${error}`);
}

export function parseReceiptLines(text: string): Receipt[] {
  const out: Receipt[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === '') return;
    let o: unknown;
    try {
      o = JSON.parse(raw);
    } catch {
      throw new ReceiptLineError(line, '(line)', 'not valid JSON');
    }
    if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new ReceiptLineError(line, '(line)', 'not a JSON object');
    const obj = o as Record<string, unknown>;
    envelope(obj, line);
    if (obj.type === 'handoff') {
      const parsed = handoffReceiptSchema.safeParse(obj);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new ReceiptLineError(line, fieldPath(issue.path), issue.message);
      }
      out.push(parsed.data as Receipt);
    } else {
      out.push(obj as unknown as Receipt);
    }
  });
  return out;
}
