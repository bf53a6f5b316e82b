/**
 * The receipt schema (interfaces.md, NDJSON receipts) and the id and time rules it is built from. `Receipt` is its
 * output type: a union discriminated by `type`, one member per receipt type (EdgeReceipt, WaitReceipt, ...), so a
 * `switch (r.type)` narrows to the fields that type has. Validation: ./validate.ts; NDJSON handling: src/core/receipt.ts of the auditor.
 */
import { z } from 'zod';
import { EDGE_KINDS, EFFECT_STATUSES, HANDOFF_STATES } from './vocab.js';
import { EdgeSyntaxError, parseEdge } from './edge-text.js';
import { RFC3339_TEXT, instantTextError } from './instant-text.js';

/**
 * Identities (runs, events, agents, contracts) are ids, never text: no whitespace, no path separators,
 * bounded length. A sentence, a multi-line prompt or a file path is refused wherever an id is expected.
 */
export const ID_PATTERN = /^[A-Za-z0-9_.:@#+=-]{1,200}$/;
export const Id = z.string().regex(ID_PATTERN, 'an id: 1-200 of letters, digits and _ . : @ # + = - (no spaces, no paths)');
/**
 * Run and event ids (semantics.md 2a): the id set plus "/" (`tenant-7/run-42`). The one rule every path uses:
 * explicit receipts, every span dialect, span-log replay and the API (`isRunId`, `isAgentId` below).
 */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_.:@#+=\/-]{1,200}$/;
/**
 * Why a text is not a run or event id, or null when it is one (semantics 2a "Ids"): 1-200 of the id set plus "/",
 * not `.` or `..`, and no "/"-separated segment empty, `.` or `..` (`a//b`, `../x`, `run/.` are refused: such an
 * id could never be addressed in an API path). The one check every ingest path and the API use.
 */
export function runIdError(v: string): string | null {
  if (v.length > 200 || !RUN_ID_PATTERN.test(v)) return RUN_ID_TEXT;
  return runIdSegmentError(v);
}
const RUN_ID_TEXT = 'a run or event id: 1-200 of letters, digits and _ . : @ # + = - / (no spaces, no control characters)';
/** The segment rule of runIdError, for a text of the id set (no allocation: ids are checked on every span). */
function runIdSegmentError(v: string): string | null {
  let start = 0;
  for (;;) {
    const slash = v.indexOf('/', start);
    const end = slash === -1 ? v.length : slash;
    const n = end - start;
    if (n === 0) return `a run or event id has no empty "/"-separated segment (${JSON.stringify(v)})`;
    if (n <= 2 && v.charCodeAt(start) === 46 && (n === 1 || v.charCodeAt(start + 1) === 46)) {
      return `a run or event id is not "." or "..", and has no "." or ".." segment between "/" (${JSON.stringify(v)})`;
    }
    if (slash === -1) return null;
    start = slash + 1;
  }
}
export const RunId = z
  .string()
  .regex(RUN_ID_PATTERN, RUN_ID_TEXT)
  .superRefine((v, ctx) => {
    const error = RUN_ID_PATTERN.test(v) ? runIdSegmentError(v) : null; // the pattern's own issue says the rest
    if (error !== null) ctx.addIssue({ code: 'custom', message: error });
  });
export const isRunId = (v: unknown): v is string => typeof v === 'string' && runIdError(v) === null;
/**
 * Agent ids also appear inside edge strings (`a -> b : kind`), so they hold no ":" and do not start with "-".
 */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9_.@#+=][A-Za-z0-9_.@#+=-]{0,199}$/;
export const AgentId = z.string().regex(AGENT_ID_PATTERN, 'an agent id: 1-200 of letters, digits and _ . @ # + = - (no ":", no leading "-", no spaces, no paths)');
export const isAgentId = (v: unknown): v is string => typeof v === 'string' && v.length <= 200 && AGENT_ID_PATTERN.test(v);

/** RFC 3339 with at most nine fraction digits (the Time rule; the fields' ranges are checked by instantTextError). */
export const RFC3339 = RFC3339_TEXT;
/** An instant as text: the one check of src/core/time.ts (`instantTextError`), also used directly by src/ingest/extract.ts. */
export const Time = z
  .string()
  .regex(RFC3339_TEXT, 'an RFC 3339 time, e.g. 2026-01-02T03:04:05Z, with at most nine fraction digits (nanoseconds)')
  .superRefine((s, ctx) => {
    const error = RFC3339_TEXT.test(s) ? instantTextError(s) : null; // the pattern's own issue says the rest
    if (error !== null) ctx.addIssue({ code: 'custom', message: error });
  });

/** A version as text (the Version rule's string form). */
export const VERSION_PATTERN = /^[A-Za-z0-9_.+-]{1,64}$/;
const Version = z
  .union([z.string().regex(VERSION_PATTERN, 'a version: letters, digits, _ . + -'), z.number().int().nonnegative()])
  .transform((v) => String(v))
  .describe('the contract version; a JSON integer is read as its decimal text, any other number is refused');

const EdgeString = z
  .string()
  .max(500)
  .superRefine((s, ctx) => {
    try {
      const e = parseEdge(s);
      if (e.to.length !== 1 || s.includes('[')) {
        ctx.addIssue({ code: 'custom', message: 'a wait names exactly one edge "from -> to : kind" (no bracketed choice)' });
        return;
      }
      if (!AGENT_ID_PATTERN.test(e.from) || !e.to.every((t) => AGENT_ID_PATTERN.test(t))) ctx.addIssue({ code: 'custom', message: 'edge agents must be agent ids' });
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof EdgeSyntaxError ? err.message : String(err) });
    }
  });

const common = {
  run: RunId,
  event: RunId,
  at: Time,
  version: Version.optional(),
  status: z.enum(['ok', 'error', 'unset']).optional(),
};
const Units = z.strictObject({
  actions: z.number().int().nonnegative().optional(),
  contextUnits: z.number().int().nonnegative().optional(),
  effects: z.number().int().nonnegative().optional(),
});

export const ReceiptSchema = z.discriminatedUnion('type', [
  z.strictObject({ ...common, type: z.literal('run.start'), contract: Id, phase: Id.optional(), from: AgentId.optional() }),
  z.strictObject({ ...common, type: z.literal('edge'), from: AgentId, to: AgentId, kind: z.enum(EDGE_KINDS) }),
  z.strictObject({ ...common, type: z.literal('wait'), on: AgentId, edge: EdgeString, deadline: Time, from: AgentId.optional() }),
  z.strictObject({ ...common, type: z.literal('outcome'), verified: z.boolean(), from: AgentId.optional() }),
  z.strictObject({ ...common, type: z.literal('run.end'), result: z.enum(['completed', 'failed', 'cancelled']), from: AgentId.optional() }),
  z.strictObject({ ...common, type: z.literal('gap'), reason: Id, to: AgentId.optional(), from: AgentId.optional() }),
  z.strictObject({
    ...common,
    type: z.literal('handoff'),
    handoff: Id.optional().describe('the logical handoff; absent only on a root budget receipt (budgetOp "root")'),
    attempt: z.number().int().min(1).optional(),
    state: z.enum(HANDOFF_STATES).optional(),
    from: AgentId.optional(),
    to: AgentId.optional(),
    duplicateKey: Id.optional(),
    leaseExpiresAt: Time.optional(),
    stateVersion: Version.optional(),
    finalOwner: AgentId.optional(),
    onTimeout: Id.optional().describe('the timeout disposition, as an id (e.g. cancel, retry, return-ownership)'),
    units: Units.optional(),
    budgetOp: z.enum(['root', 'reserve', 'consume', 'release', 'reject']).optional(),
    capabilities: z.array(Id).max(32).optional().describe('capability names granted to the attempt; names only'),
    effects: z.array(z.strictObject({ id: Id, status: z.enum(EFFECT_STATUSES) })).max(32).optional().describe('effect ids and statuses; never arguments'),
  }),
]);

/** One content-free receipt, as validated: the output of ReceiptSchema (a version is its text, whatever was sent). */
export type Receipt = z.output<typeof ReceiptSchema>;
/** The receipt member of one type. */
export type ReceiptOf<T extends Receipt['type']> = Extract<Receipt, { type: T }>;
export type RunStartReceipt = ReceiptOf<'run.start'>;
export type EdgeReceipt = ReceiptOf<'edge'>;
export type WaitReceipt = ReceiptOf<'wait'>;
export type OutcomeReceipt = ReceiptOf<'outcome'>;
export type RunEndReceipt = ReceiptOf<'run.end'>;
export type GapReceipt = ReceiptOf<'gap'>;
export type HandoffReceipt = ReceiptOf<'handoff'>;
/** Every field name some receipt type has (`keyof Receipt` is only the fields all types share). */
export type ReceiptField = Receipt extends infer R ? (R extends unknown ? keyof R : never) : never;
