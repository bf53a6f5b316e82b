/**
 * spans -> receipts. Explicit receipts come from `topology.*` attributes on spans and span events; derived
 * receipts come from agent-framework dialects (src/ingest/dialects.ts) such as GenAI `invoke_agent` spans.
 * Only ids, enums and times are read; nothing else on a span can reach a receipt.
 */
import { AGENT_ID_PATTERN, ID_PATTERN, VERSION_PATTERN, isAgentId, isRunId, validateReceipt } from '../core/receipt.js';
import { isInstantText } from '../core/time.js';
import { parseEdge } from '../core/edge.js';
import { EDGE_KINDS, type Receipt } from '../core/types.js';
import type { AttrValue, SpanRecord } from '../otlp/types.js';
import type { RejectReason } from './trust.js';
import { exactIso } from '../otlp/wire.js';

export interface SpanRejection {
  spanId: string;
  /** A content-free message for the sender. */
  reason: string;
  /** The reason, from a small fixed set (the metric label). */
  code: RejectReason;
}

/** The reason code of a receipt-shaped object that failed validation. */
export function rejectCode(raw: Record<string, unknown>): RejectReason {
  if (!isRunId(raw.run)) return 'run_id_invalid';
  if (!isRunId(raw.event)) return 'event_id_invalid';
  for (const k of ['from', 'to', 'on']) if (raw[k] !== undefined && !isAgentId(raw[k])) return 'agent_id_invalid';
  return 'receipt_invalid';
}

const str = (v: AttrValue | undefined): string | undefined => (v === undefined ? undefined : typeof v === 'string' ? v : String(v));

/** Run id: `topology.run.id`, else `gen_ai.conversation.id`, else the trace id. */
export function runIdOf(attrs: Record<string, AttrValue>, traceId: string): string {
  return str(attrs['topology.run.id']) ?? str(attrs['gen_ai.conversation.id']) ?? traceId;
}

/** OTLP status code -> local status. Unset means "no error reported" in OpenTelemetry and is read as ok. */
export function localStatus(code: number): 'ok' | 'error' {
  return code === 2 ? 'error' : 'ok';
}

/** RFC 3339 text of a span time, exact to the nanosecond when the decoder gave the sub-ms part. */
const iso = exactIso;

/**
 * Build the receipt an explicit `topology.event.type` span (or span event) describes.
 * Returns the receipt, or a rejection reason when it cannot become a valid receipt.
 */
export function explicitReceipt(
  attrs: Record<string, AttrValue>,
  ids: { run: string; event: string },
  atMs: number,
  statusCode: number,
  atNs?: number,
): { receipt: Receipt } | { reason: string; code: RejectReason } {
  const type = str(attrs['topology.event.type']);
  const raw: Record<string, unknown> = { run: ids.run, event: ids.event, type, at: iso(atMs, atNs) };
  const status = localStatus(statusCode);
  if (status !== 'ok') raw.status = status;
  const set = (field: string, key: string) => {
    const v = attrs[key];
    if (v !== undefined) raw[field] = typeof v === 'number' && field === 'version' && Number.isInteger(v) ? String(v) : v;
  };
  set('version', 'topology.contract.version');
  switch (type) {
    case 'run.start':
      set('contract', 'topology.contract.id');
      set('phase', 'topology.phase');
      set('from', 'topology.edge.from');
      break;
    case 'edge':
      set('from', 'topology.edge.from');
      set('to', 'topology.edge.to');
      set('kind', 'topology.edge.kind');
      break;
    case 'wait':
      set('on', 'topology.wait.on');
      set('edge', 'topology.wait.edge');
      set('deadline', 'topology.wait.deadline');
      set('from', 'topology.edge.from');
      break;
    case 'outcome': {
      const v = attrs['topology.outcome.verified'];
      raw.verified = v === true || v === 'true' ? true : v === false || v === 'false' ? false : v;
      set('from', 'topology.edge.from');
      break;
    }
    case 'run.end':
      set('result', 'topology.run.result');
      set('from', 'topology.edge.from');
      break;
    case 'gap':
      set('reason', 'topology.gap.reason');
      set('to', 'topology.edge.to');
      set('from', 'topology.edge.from');
      break;
    default:
      return { reason: 'topology.event.type is not one of run.start, edge, wait, outcome, run.end, gap', code: 'receipt_invalid' };
  }
  const fast = checkedReceipt(type, raw);
  if (fast !== null) return { receipt: fast };
  const r = validateReceipt(raw);
  return r.ok ? { receipt: r.receipt } : { reason: r.error, code: rejectCode(raw) };
}

// ---- The receipt schema's checks for the fields explicitReceipt sets, without the schema library ----
//
// validateReceipt (zod's ReceiptSchema) cost about 5% of an OTLP server's CPU. explicitReceipt knows which fields it
// set and that each holds a string, number or boolean, so the same rules are checked directly here and the receipt
// is built as the schema's parse builds it (its fields in the schema's order, the version as text). Anything this
// check does not accept goes to validateReceipt, which decides and words the rejection: the fast path only ever
// accepts what the schema accepts, with the same result (test/extract-fast.test.ts compares the two).

const isTime = isInstantText;
const isId = (v: unknown): v is string => typeof v === 'string' && ID_PATTERN.test(v);
const isAgent = (v: unknown): v is string => typeof v === 'string' && AGENT_ID_PATTERN.test(v);
const optAgent = (v: unknown) => v === undefined || isAgent(v);
const KINDS: ReadonlySet<unknown> = new Set(EDGE_KINDS);
const RESULTS: ReadonlySet<unknown> = new Set(['completed', 'failed', 'cancelled']);

/** The schema's rule for a wait's edge: one `from -> to : kind` edge between agent ids, at most 500 characters. */
function isWaitEdge(v: unknown): v is string {
  if (typeof v !== 'string' || v.length > 500 || v.includes('[')) return false;
  try {
    const e = parseEdge(v);
    return e.to.length === 1 && AGENT_ID_PATTERN.test(e.from) && AGENT_ID_PATTERN.test(e.to[0]);
  } catch {
    return false;
  }
}

/** The receipt the schema would parse from `raw` when every check passes here; null: let the schema decide (exported for its test). */
export function checkedReceipt(type: string | undefined, raw: Record<string, unknown>): Receipt | null {
  const { run, event, at, version, status } = raw;
  if (!isRunId(run) || !isRunId(event) || !isTime(at)) return null;
  if (version !== undefined && !(typeof version === 'string' && VERSION_PATTERN.test(version))) return null;
  if (status !== undefined && status !== 'error') return null;
  const r: Record<string, unknown> = { run, event, at };
  if (version !== undefined) r.version = version;
  if (status !== undefined) r.status = status;
  r.type = type;
  switch (type) {
    case 'run.start':
      if (!isId(raw.contract) || !(raw.phase === undefined || isId(raw.phase)) || !optAgent(raw.from)) return null;
      r.contract = raw.contract;
      if (raw.phase !== undefined) r.phase = raw.phase;
      break;
    case 'edge':
      if (!isAgent(raw.from) || !isAgent(raw.to) || !KINDS.has(raw.kind)) return null;
      r.from = raw.from;
      r.to = raw.to;
      r.kind = raw.kind;
      return r as unknown as Receipt;
    case 'wait':
      if (!isAgent(raw.on) || !isWaitEdge(raw.edge) || !isTime(raw.deadline) || !optAgent(raw.from)) return null;
      r.on = raw.on;
      r.edge = raw.edge;
      r.deadline = raw.deadline;
      break;
    case 'outcome':
      if (typeof raw.verified !== 'boolean' || !optAgent(raw.from)) return null;
      r.verified = raw.verified;
      break;
    case 'run.end':
      if (!RESULTS.has(raw.result) || !optAgent(raw.from)) return null;
      r.result = raw.result;
      break;
    case 'gap':
      if (!isId(raw.reason) || !optAgent(raw.to) || !optAgent(raw.from)) return null;
      r.reason = raw.reason;
      if (raw.to !== undefined) r.to = raw.to;
      break;
    default:
      return null;
  }
  if (raw.from !== undefined) r.from = raw.from;
  return r as unknown as Receipt;
}

export interface ExtractResult {
  receipts: Receipt[];
  rejected: SpanRejection[];
  /** Spans that produced no receipt (content, model, tool and retrieval spans). */
  dropped: number;
}

/** Explicit receipts of one span: the span itself and each of its topology events. */
export function explicitReceiptsOf(span: SpanRecord, out: ExtractResult): boolean {
  let produced = false;
  if (span.attrs['topology.event.type'] !== undefined) {
    produced = true;
    const r = explicitReceipt(span.attrs, { run: runIdOf(span.attrs, span.traceId), event: span.spanId }, span.startMs, span.statusCode, span.startNs);
    if ('receipt' in r) out.receipts.push(r.receipt);
    else out.rejected.push({ spanId: span.spanId, reason: r.reason, code: r.code });
  }
  const events = span.events;
  for (let i = 0; i < events.length; i++) {
    const ev = events[i];
    if (ev.attrs['topology.event.type'] === undefined) continue;
    produced = true;
    const attrs = { ...span.attrs, ...ev.attrs };
    const r = explicitReceipt(attrs, { run: runIdOf(attrs, span.traceId), event: `${span.spanId}.${i}` }, ev.timeMs, span.statusCode, ev.timeNs);
    if ('receipt' in r) out.receipts.push(r.receipt);
    else out.rejected.push({ spanId: span.spanId, reason: r.reason, code: r.code });
  }
  return produced;
}
