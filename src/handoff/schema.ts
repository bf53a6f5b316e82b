/**
 * Handoff documents (interfaces.md "Handoff documents"): one zod schema per document gives the
 * TypeScript type, the validation error and the JSON Schema.
 *
 * Fields whose absence is a typed admission denial (finalOwner, ownerDuringSlice, completeWhen,
 * cancelRef, onTimeout; the citation and no-evidence fields of a result) are optional here on
 * purpose: a document that omits them is well-formed and is refused by admission with a reason
 * code, not rejected as bad input.
 */
import { z } from 'zod';
import { EFFECT_STATUSES, HANDOFF_STATES } from '../core/types.js';
import { compareInstants, instantTextError, parseInstant } from '../core/time.js';

/**
 * RFC 3339 time with a `Z` or numeric offset, at most nine fraction digits, a date and time that exist: the one
 * instant check of every path (src/core/time.ts `instantTextError`, as receipts use), with its reason as the error.
 */
export const rfc3339 = z
  .string()
  .superRefine((s, ctx) => {
    const error = instantTextError(s);
    if (error !== null) ctx.addIssue({ code: 'custom', message: error });
  })
  .meta({ format: 'date-time' });

/** A state version: a non-negative integer or a non-empty string (opaque: compared by `sameStateVersion`). */
export const stateVersion = z.union([z.int().nonnegative(), z.string().min(1)]);
export type StateVersion = z.infer<typeof stateVersion>;

const identity = z.string().min(1);
/** Capability names and effect ids on receipts: ids, never text (same pattern as core receipt ids). */
const receiptId = z.string().regex(/^[A-Za-z0-9_.:@#+=-]{1,200}$/, 'an id: 1-200 of letters, digits and _ . : @ # + = -');
const count = z.int().nonnegative();

export const budgetsSchema = z.strictObject({
  actions: count,
  contextUnits: count,
  effects: count,
});
export type Budgets = z.infer<typeof budgetsSchema>;

export const consequenceSchema = z.enum(['read', 'effect']);
export type Consequence = z.infer<typeof consequenceSchema>;

export const handoffSchema = z.strictObject({
  handoffId: identity,
  attempt: z.int().min(1).default(1),
  source: identity,
  target: identity,
  taskSlice: z.string().min(1),
  consequence: consequenceSchema,
  stateRef: z.strictObject({ id: identity, version: stateVersion }),
  ownerDuringSlice: z.string().optional(),
  finalOwner: z.string().optional(),
  allowedCapabilities: z.array(identity),
  delegation: z.strictObject({ tenant: identity, resource: identity, expiresAt: rfc3339 }),
  budgets: budgetsSchema,
  duplicateKey: identity,
  leaseExpiresAt: rfc3339,
  completeWhen: z.string().optional(),
  cancelRef: z.string().optional(),
  onTimeout: z.string().optional(),
});
export type Handoff = z.infer<typeof handoffSchema>;
export type HandoffInput = z.input<typeof handoffSchema>;

export const parentEnvelopeSchema = z.strictObject({
  agent: identity,
  agents: z.array(identity),
  tenants: z.array(identity),
  resources: z.array(identity),
  capabilities: z.record(identity, consequenceSchema),
  expiresAt: rfc3339,
  /** What is still unreserved in the parent's budget. */
  budgets: budgetsSchema,
});
export type ParentEnvelope = z.infer<typeof parentEnvelopeSchema>;

export const activeLeaseSchema = z.strictObject({
  duplicateKey: identity,
  handoffId: identity,
  attempt: z.int().min(1).default(1),
  leaseExpiresAt: rfc3339,
});
export type ActiveLease = z.infer<typeof activeLeaseSchema>;

export const handoffStateDocSchema = z
  .strictObject({
    now: rfc3339,
    stateVersion,
    cancelled: z.boolean(),
    cancelledAt: rfc3339.optional(),
    activeLeases: z.array(activeLeaseSchema),
  })
  .superRefine((s, ctx) => {
    if (s.cancelledAt !== undefined && !s.cancelled) {
      ctx.addIssue({ code: 'custom', path: ['cancelledAt'], message: 'cancelledAt is given but cancelled is false' });
    }
    if (s.cancelledAt !== undefined && compareTimes(s.cancelledAt, s.now) > 0) {
      ctx.addIssue({ code: 'custom', path: ['cancelledAt'], message: 'cancelledAt is after now: a cancellation cannot have committed yet' });
    }
  });
/** The state document (`--state`). Named HandoffStateDoc: `HandoffState` is the lifecycle state in core/types. */
export type HandoffStateDoc = z.infer<typeof handoffStateDocSchema>;

export const citationSchema = z.strictObject({
  source: z.string().optional(),
  edition: z.string().optional(),
  passage: z.string().optional(),
  trust: z.string().optional(),
});
export type Citation = z.infer<typeof citationSchema>;

export const noEvidenceSchema = z.strictObject({
  corpus: z.string().optional(),
  version: stateVersion.optional(),
  scope: z.string().optional(),
  stopReason: z.string().optional(),
  limitations: z.union([z.string(), z.array(z.string())]).optional(),
});
export type NoEvidence = z.infer<typeof noEvidenceSchema>;

export const handoffResultSchema = z.strictObject({
  handoffId: identity,
  attempt: z.int().min(1).default(1),
  target: identity,
  observedStateVersion: stateVersion,
  returnedAt: rfc3339,
  usage: budgetsSchema,
  capabilitiesUsed: z.array(identity),
  outcome: z.enum(['evidence', 'no_evidence']),
  citations: z.array(citationSchema).optional(),
  noEvidence: noEvidenceSchema.optional(),
});
export type HandoffResult = z.infer<typeof handoffResultSchema>;

/**
 * A `handoff` receipt (NDJSON line, the receipt format of interfaces.md plus the `handoff` type).
 * A budget root (`budgetOp: "root"`) names the run's root budget in `units` and needs no handoff or
 * state; every other handoff receipt records one lifecycle transition of one attempt and needs
 * `handoff` and `state`; any budget operation needs `units`.
 */
export const unitsSchema = z.strictObject({
  actions: count.optional(),
  contextUnits: count.optional(),
  effects: count.optional(),
});

export const handoffReceiptSchema = z
  .strictObject({
    run: identity,
    event: identity,
    type: z.literal('handoff'),
    at: rfc3339,
    version: z.string().optional(),
    status: z.enum(['ok', 'error', 'unset']).optional(),
    from: identity.optional(),
    to: identity.optional(),
    handoff: identity.optional(),
    attempt: z.int().min(1).optional(),
    state: z.enum(HANDOFF_STATES).optional(),
    duplicateKey: identity.optional(),
    leaseExpiresAt: rfc3339.optional(),
    stateVersion: z.string().min(1).optional(),
    finalOwner: identity.optional(),
    onTimeout: identity.optional(),
    units: unitsSchema.optional(),
    budgetOp: z.enum(['root', 'reserve', 'consume', 'release', 'reject']).optional(),
    capabilities: z.array(receiptId).max(32).optional(),
    effects: z.array(z.strictObject({ id: receiptId, status: z.enum(EFFECT_STATUSES) })).max(32).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.budgetOp !== 'root') {
      if (r.handoff === undefined) ctx.addIssue({ code: 'custom', path: ['handoff'], message: 'a handoff transition needs `handoff`' });
      if (r.state === undefined) ctx.addIssue({ code: 'custom', path: ['state'], message: 'a handoff transition needs `state`' });
    }
    if (r.budgetOp !== undefined && r.units === undefined) {
      ctx.addIssue({ code: 'custom', path: ['units'], message: 'a budget operation needs `units`' });
    }
  });
export type HandoffReceipt = z.infer<typeof handoffReceiptSchema>;

export const HANDOFF_SCHEMAS = {
  handoff: handoffSchema,
  parent: parentEnvelopeSchema,
  state: handoffStateDocSchema,
  result: handoffResultSchema,
  'handoff-receipt': handoffReceiptSchema,
} as const;
export type HandoffSchemaName = keyof typeof HANDOFF_SCHEMAS;

/** JSON Schema of each handoff document (input shape: defaulted fields are optional). */
export function handoffJsonSchemas(): Record<HandoffSchemaName, Record<string, unknown>> {
  const out = {} as Record<HandoffSchemaName, Record<string, unknown>>;
  for (const [name, schema] of Object.entries(HANDOFF_SCHEMAS) as [HandoffSchemaName, z.ZodType][]) {
    out[name] = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  }
  return out;
}

/** `a.b[0].c` from a zod issue path. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? '(document)' : out;
}

export { sameStateVersion } from '../core/index.js';

/**
 * The order of two RFC 3339 times (already validated by the schemas), exact to the nanosecond (semantics 5: times at
 * full precision): negative when a is before b, 0 at the same instant, positive after.
 */
export function compareTimes(a: string, b: string): number {
  return compareInstants(parseInstant(a), parseInstant(b));
}
