/** Validation of one decoded JSON value as a receipt, with messages that name the field. */
import { z } from 'zod';
import { ReceiptSchema, type Receipt } from './schema.js';

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
