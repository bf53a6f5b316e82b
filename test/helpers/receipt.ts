// Receipts as tests build and read them: every field of every receipt type, optional. `Receipt` (src/core) is a union
// discriminated by `type`, so reading `r.to` off any receipt needs narrowing first; tests that tabulate fields of
// mixed receipts, or build receipts field by field, use this flat view instead.
import type { Receipt, ReceiptField, ReceiptType } from '../../src/core/types.js';

/** The type of `K` on the receipt types that have it. */
type FieldOf<K extends ReceiptField> = Receipt extends infer R ? (R extends unknown ? (K extends keyof R ? R[K] : never) : never) : never;

/** A receipt's fields, flat: run, event, type and at always; any other field of any type optional. */
export type LooseReceipt = { run: string; event: string; type: ReceiptType; at: string } & { [K in Exclude<ReceiptField, 'run' | 'event' | 'type' | 'at'>]?: FieldOf<K> };

/** A built receipt as the core takes it (tests build receipts the schema would accept, and some it would not, on purpose). */
export const asReceipt = (r: LooseReceipt): Receipt => r as Receipt;
