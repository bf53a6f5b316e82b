/**
 * Content-free decoder for opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest (protobuf wire
 * format), shared by the OTLP/HTTP and OTLP/gRPC receivers.
 *
 * It walks the wire format field by field and decides each attribute from its key bytes: the value of a key
 * that is not on the allow-list is skipped by its length prefix and never becomes a JS value, so prompts,
 * outputs, tool arguments and status messages never exist as strings in this process. Unknown fields are
 * skipped by wire type (forward compatible); malformed input throws OtlpDecodeError.
 *
 * Field numbers (opentelemetry-proto, trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto):
 *   ExportTraceServiceRequest: 1 resource_spans
 *   ResourceSpans: 1 resource, 2 scope_spans, 3 schema_url
 *   Resource: 1 attributes, 2 dropped_attributes_count
 *   ScopeSpans: 1 scope, 2 spans, 3 schema_url
 *   Span: 1 trace_id, 2 span_id, 3 trace_state, 4 parent_span_id, 5 name, 6 kind, 7 start_time_unix_nano (fixed64),
 *         8 end_time_unix_nano (fixed64), 9 attributes, 10 dropped_attributes_count, 11 events,
 *         12 dropped_events_count, 13 links, 14 dropped_links_count, 15 status, 16 flags (fixed32)
 *   Span.Event: 1 time_unix_nano (fixed64), 2 name, 3 attributes, 4 dropped_attributes_count
 *   Span.Link: 1 trace_id, 2 span_id, 3 trace_state, 4 attributes, 5 dropped_attributes_count, 6 flags
 *   Status: 2 message, 3 code
 *   KeyValue: 1 key, 2 value
 *   AnyValue: 1 string_value, 2 bool_value, 3 int_value, 4 double_value, 5 array_value, 6 kvlist_value, 7 bytes_value
 */
import { OtlpDecodeError } from './errors.js';
import { agentLikeKeyAt, keptKeyAt, libraryOf, metadataKeyAt, frameworkScopeAt } from './keys.js';
import { langgraphFieldsOf, type LangGraphFields, LANGGRAPH_NODE_ATTRIBUTE, LANGGRAPH_NS_ATTRIBUTE, LANGGRAPH_STEP_ATTRIBUTE, METADATA_ATTRIBUTE } from './metadata.js';
import type { AttrValue, DecodedExport, SpanEventRecord, SpanLinkRecord, SpanRecord } from './types.js';
import { isAgentType, keptTypedCandidates, lcAgentNameOf, LC_AGENT_NAME, LC_AGENT_NAME_KEY, MAX_TYPED_CANDIDATES, setTypedIdentity, TYPED_AGENT_KEY, typedKeyText, typedRoleAt, type TypedCandidate, type TypedRole } from './typed.js';
import { LANGGRAPH_AGENT_ATTRIBUTE } from './metadata.js';
import {
  allZero,
  hexOf,
  int64PartsToNumber,
  utf8Text,
  WIRE_FIXED64,
  WIRE_LEN,
  WIRE_VARINT,
  WireReader,
} from './wire.js';

export { OtlpDecodeError };

type Attrs = Record<string, AttrValue>;

const TRACE_ID_BYTES = 16;
const SPAN_ID_BYTES = 8;

/** Kept resource attributes, as parallel arrays for a quick merge under each span's own. */
interface ResourceAttrs {
  keys: string[];
  values: AttrValue[];
}
const NO_RESOURCE_ATTRS: ResourceAttrs = { keys: [], values: [] };

/** Where the last decoded trace id's bytes are, and its hex string. */
interface TraceIdMemo {
  at: number;
  hex: string | null;
}

/** Tags (field << 3 | wire type) of the hot fields, for a one-compare dispatch. */
const TAG_KEY_VALUE_KEY = (1 << 3) | WIRE_LEN;
const TAG_KEY_VALUE_VALUE = (2 << 3) | WIRE_LEN;
const TAG_ANY_STRING = (1 << 3) | WIRE_LEN;
const TAG_ANY_BOOL = (2 << 3) | WIRE_VARINT;
const TAG_ANY_INT = (3 << 3) | WIRE_VARINT;
const TAG_ANY_DOUBLE = (4 << 3) | WIRE_FIXED64;
const TAG_ANY_ARRAY = (5 << 3) | WIRE_LEN;
const TAG_ANY_KVLIST = (6 << 3) | WIRE_LEN;
const TAG_ANY_BYTES = (7 << 3) | WIRE_LEN;

/** Every field present from the start: one hidden class for the decoder's hot loop. */
const newKept = (): KeptAttribute => ({ key: '', value: '', ns: undefined, step: undefined, dropped: undefined, lcAgent: undefined, typed: undefined });

/** The kept key and value of the last KeyValue decodeKeptKeyValue accepted. */
interface KeptAttribute {
  key: string;
  value: AttrValue;
  /** With `metadata.langgraph_node`: the task's checkpoint namespace, when the metadata held a plain one. */
  ns?: string;
  /** With `metadata.langgraph_node`: the node's superstep, when the metadata held a plain one. */
  step?: number;
  /** A dropped key that looks agent-like (its key only, for coverage), when decodeKeptKeyValue returned false. */
  dropped?: string | null;
  /** With `metadata.langgraph_node`: the metadata's `lc_agent_name`, when it held a plain one. */
  lcAgent?: string;
  /**
   * A dropped key with a role in the agent-typing rule (src/otlp/typed.ts): where its key and value are; `value` only
   * for a type key whose value is `agent` and an `lc_agent_name` that is an id (no other value is read here).
   */
  typed?: { role: TypedRole; keyStart: number; keyLen: number; valueStart: number; valueEnd: number; value?: string };
}

/**
 * Decodes one ExportTraceServiceRequest. Every span is returned (content attributes skipped) so that parentage
 * through spans that carry no receipt can be resolved; `spanCount` counts them all.
 */
export function decodeExportTraceRequest(buf: Uint8Array): DecodedExport {
  if (!(buf instanceof Uint8Array)) throw new OtlpDecodeError('request body must be bytes');
  const r = new WireReader(buf);
  const spans: SpanRecord[] = [];
  const end = buf.length;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag >>> 3 === 1) {
      r.expectWireType(tag, WIRE_LEN, 'ExportTraceServiceRequest.resource_spans');
      const len = r.length(end);
      decodeResourceSpans(r, r.pos + len, spans);
    } else {
      r.skip(tag & 7, end);
    }
  }
  return { spans, spanCount: spans.length };
}

/** ResourceSpans: kept resource attributes are merged under every span's own; the resource may come last. */
function decodeResourceSpans(r: WireReader, end: number, out: SpanRecord[]): void {
  let resourceAttrs: Attrs | null = null;
  let scopeSpans: number[] | null = null; // [start, end) pairs, decoded once the resource is known
  while (r.pos < end) {
    const tag = r.tag(end);
    const field = tag >>> 3;
    if (field === 1) {
      r.expectWireType(tag, WIRE_LEN, 'ResourceSpans.resource');
      const len = r.length(end);
      resourceAttrs = decodeResource(r, r.pos + len, resourceAttrs);
    } else if (field === 2) {
      r.expectWireType(tag, WIRE_LEN, 'ResourceSpans.scope_spans');
      const len = r.length(end);
      (scopeSpans ??= []).push(r.pos, r.pos + len);
      r.pos += len;
    } else {
      r.skip(tag & 7, end);
    }
  }
  if (scopeSpans === null) return;
  const resource: ResourceAttrs =
    resourceAttrs === null ? NO_RESOURCE_ATTRS : { keys: Object.keys(resourceAttrs), values: Object.values(resourceAttrs) };
  const lastTraceId: TraceIdMemo = { at: 0, hex: null };
  for (let i = 0; i < scopeSpans.length; i += 2) {
    r.pos = scopeSpans[i];
    decodeScopeSpans(r, scopeSpans[i + 1], resource, lastTraceId, out);
  }
  r.pos = end;
}

function decodeResource(r: WireReader, end: number, attrs: Attrs | null): Attrs | null {
  const kept: KeptAttribute = newKept();
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag >>> 3 === 1) {
      r.expectWireType(tag, WIRE_LEN, 'Resource.attributes');
      const len = r.length(end);
      if (decodeKeptKeyValue(r, r.pos + len, kept)) (attrs ??= {})[kept.key] = kept.value;
    } else {
      r.skip(tag & 7, end);
    }
  }
  return attrs;
}

function decodeScopeSpans(r: WireReader, end: number, resource: ResourceAttrs, lastTraceId: TraceIdMemo, out: SpanRecord[]): void {
  let scope: string | null = null;
  let library = libraryOf(null, null);
  const first = out.length;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag >>> 3 === 2) {
      r.expectWireType(tag, WIRE_LEN, 'ScopeSpans.spans');
      const len = r.length(end);
      out.push(decodeSpan(r, r.pos + len, resource, lastTraceId));
    } else if (tag >>> 3 === 1) {
      r.expectWireType(tag, WIRE_LEN, 'ScopeSpans.scope');
      const len = r.length(end);
      ({ scope, library } = decodeScopeName(r, r.pos + len));
    } else {
      r.skip(tag & 7, end); // schema_url (3) is not needed
    }
  }
  for (let i = first; i < out.length; i++) {
    if (scope !== null) out[i].scope = scope;
    out[i].library = library;
  }
}

/**
 * InstrumentationScope.name (field 1) as `scope` only when it is a known agent-framework scope (see
 * frameworkScopeAt); and name + version (field 2) as the coverage report's library (bounded, keys.ts libraryOf).
 */
function decodeScopeName(r: WireReader, end: number): { scope: string | null; library: { name: string; version: string } } {
  let name: string | null = null;
  let full: string | null = null;
  let version: string | null = null;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === TAG_KEY_VALUE_KEY) {
      const len = r.length(end);
      name = frameworkScopeAt(r.buf, r.pos, len);
      full = len <= 128 ? utf8Text(r.buf, r.pos, r.pos + len) : '\u0000';
      r.pos += len;
    } else if (tag === TAG_KEY_VALUE_VALUE) {
      const len = r.length(end);
      version = len <= 64 ? utf8Text(r.buf, r.pos, r.pos + len) : '\u0000';
      r.pos += len;
    } else {
      r.skip(tag & 7, end);
    }
  }
  return { scope: name, library: libraryOf(full, version) };
}

function decodeSpan(r: WireReader, end: number, resource: ResourceAttrs, lastTraceId: TraceIdMemo): SpanRecord {
  const buf = r.buf;
  const spanAt = r.pos;
  let traceId: string | null = null;
  let spanId: string | null = null;
  let parentSpanId: string | null = null;
  let name = '';
  let kind = 0;
  let startMs = 0;
  let endMs = 0;
  let startNs = 0;
  let endNs = 0;
  let statusCode = 0;
  const attrs: Attrs = {};
  let agentKeys: string[] | undefined;
  let typed: NonNullable<KeptAttribute['typed']>[] | undefined;
  const events: SpanEventRecord[] = [];
  const links: SpanLinkRecord[] = [];
  const kept: KeptAttribute = newKept();
  while (r.pos < end) {
    const tag = r.tag(end);
    switch (tag >>> 3) {
      case 1:
        r.expectWireType(tag, WIRE_LEN, 'Span.trace_id');
        traceId = readTraceId(r, end, lastTraceId);
        break;
      case 2:
        r.expectWireType(tag, WIRE_LEN, 'Span.span_id');
        spanId = readId(r, end, SPAN_ID_BYTES, 'Span.span_id');
        break;
      case 4:
        r.expectWireType(tag, WIRE_LEN, 'Span.parent_span_id');
        parentSpanId = readParentId(r, end);
        break;
      case 5: {
        r.expectWireType(tag, WIRE_LEN, 'Span.name');
        const len = r.length(end);
        name = utf8Text(buf, r.pos, r.pos + len);
        r.pos += len;
        break;
      }
      case 6:
        r.expectWireType(tag, WIRE_VARINT, 'Span.kind');
        kind = r.varint(end) | 0;
        break;
      case 7:
        r.expectWireType(tag, WIRE_FIXED64, 'Span.start_time_unix_nano');
        startMs = r.fixed64Millis(end);
        startNs = r.subNs;
        break;
      case 8:
        r.expectWireType(tag, WIRE_FIXED64, 'Span.end_time_unix_nano');
        endMs = r.fixed64Millis(end);
        endNs = r.subNs;
        break;
      case 9: {
        r.expectWireType(tag, WIRE_LEN, 'Span.attributes');
        const len = r.length(end);
        kept.ns = undefined;
        kept.step = undefined;
        kept.dropped = null;
        kept.lcAgent = undefined;
        kept.typed = undefined;
        if (decodeKeptKeyValue(r, r.pos + len, kept)) {
          attrs[kept.key] = kept.value;
          if (kept.ns !== undefined) attrs[LANGGRAPH_NS_ATTRIBUTE] = kept.ns;
          if (kept.step !== undefined) attrs[LANGGRAPH_STEP_ATTRIBUTE] = kept.step;
          if (kept.lcAgent !== undefined) attrs[LANGGRAPH_AGENT_ATTRIBUTE] = kept.lcAgent;
        } else {
          if (kept.dropped && (agentKeys ??= []).length < 16 && !agentKeys.includes(kept.dropped)) agentKeys.push(kept.dropped);
          if (kept.typed !== undefined && (typed ??= []).length < MAX_TYPED_CANDIDATES) typed.push(kept.typed);
        }
        kept.dropped = undefined;
        kept.typed = undefined;
        break;
      }
      case 11: {
        r.expectWireType(tag, WIRE_LEN, 'Span.events');
        const len = r.length(end);
        const event = decodeEvent(r, r.pos + len, kept);
        if (event !== null) events.push(event);
        break;
      }
      case 13: {
        r.expectWireType(tag, WIRE_LEN, 'Span.links');
        const len = r.length(end);
        links.push(decodeLink(r, r.pos + len));
        break;
      }
      case 15: {
        r.expectWireType(tag, WIRE_LEN, 'Span.status');
        const len = r.length(end);
        statusCode = decodeStatusCode(r, r.pos + len);
        break;
      }
      default:
        r.skip(tag & 7, end); // trace_state, dropped counts, flags, and fields from newer protocol versions
    }
  }
  if (traceId === null) r.fail('span without trace_id', spanAt);
  if (spanId === null) r.fail('span without span_id', spanAt);
  if (typed !== undefined) typedAttributes(r, { start: spanAt, end }, typed, attrs);
  const keys = resource.keys;
  for (let i = 0; i < keys.length; i++) if (attrs[keys[i]] === undefined) attrs[keys[i]] = resource.values[i];
  const rec: SpanRecord = { traceId, spanId, parentSpanId, name, kind, startMs, endMs, startNs, endNs, statusCode, attrs, events, links };
  if (agentKeys !== undefined) rec.agentKeys = agentKeys;
  return rec;
}

/** A trace or span id: exactly `size` bytes, not all zero, as lowercase hex. */
function readId(r: WireReader, end: number, size: 8 | 16, field: string): string {
  const at = r.pos;
  const len = r.length(end);
  if (len !== size) r.fail(`${field} is ${len} bytes, expected ${size}`, at);
  if (allZero(r.buf, r.pos, len)) r.fail(`${field} is all zero (invalid)`, at);
  const hex = hexOf(r.buf, r.pos, size);
  r.pos += len;
  return hex;
}

/**
 * Span.trace_id. Spans of one trace usually sit together in a batch, so the previous span's id string is
 * reused when the bytes are the same.
 */
function readTraceId(r: WireReader, end: number, previous: TraceIdMemo): string {
  const at = r.pos;
  const len = r.length(end);
  if (len !== TRACE_ID_BYTES) r.fail(`Span.trace_id is ${len} bytes, expected ${TRACE_ID_BYTES}`, at);
  const buf = r.buf;
  const start = r.pos;
  r.pos += len;
  if (previous.hex !== null) {
    const p = previous.at;
    let same = true;
    for (let i = 0; i < TRACE_ID_BYTES; i++) {
      if (buf[start + i] !== buf[p + i]) {
        same = false;
        break;
      }
    }
    if (same) return previous.hex;
  }
  if (allZero(buf, start, len)) r.fail('Span.trace_id is all zero (invalid)', at);
  previous.at = start;
  previous.hex = hexOf(buf, start, TRACE_ID_BYTES);
  return previous.hex;
}

/** parent_span_id: empty (or all zero) means a root span. */
function readParentId(r: WireReader, end: number): string | null {
  const at = r.pos;
  const len = r.length(end);
  if (len === 0) return null;
  if (len !== SPAN_ID_BYTES) r.fail(`Span.parent_span_id is ${len} bytes, expected ${SPAN_ID_BYTES} or 0`, at);
  const hex = allZero(r.buf, r.pos, len) ? null : hexOf(r.buf, r.pos, len);
  r.pos += len;
  return hex;
}

/** Span.Event, or null when none of its attributes is kept (its name is then never decoded). */
function decodeEvent(r: WireReader, end: number, kept: KeptAttribute): SpanEventRecord | null {
  let timeMs = 0;
  let timeNs = 0;
  let nameStart = 0;
  let nameEnd = 0;
  let attrs: Attrs | null = null;
  while (r.pos < end) {
    const tag = r.tag(end);
    switch (tag >>> 3) {
      case 1:
        r.expectWireType(tag, WIRE_FIXED64, 'Span.Event.time_unix_nano');
        timeMs = r.fixed64Millis(end);
        timeNs = r.subNs;
        break;
      case 2: {
        r.expectWireType(tag, WIRE_LEN, 'Span.Event.name');
        const len = r.length(end);
        nameStart = r.pos;
        nameEnd = r.pos + len;
        r.pos = nameEnd;
        break;
      }
      case 3: {
        r.expectWireType(tag, WIRE_LEN, 'Span.Event.attributes');
        const len = r.length(end);
        if (decodeKeptKeyValue(r, r.pos + len, kept)) (attrs ??= {})[kept.key] = kept.value;
        break;
      }
      default:
        r.skip(tag & 7, end);
    }
  }
  if (attrs === null) return null;
  return { name: utf8Text(r.buf, nameStart, nameEnd), timeMs, timeNs, attrs };
}

function decodeLink(r: WireReader, end: number): SpanLinkRecord {
  const linkAt = r.pos;
  let traceId: string | null = null;
  let spanId: string | null = null;
  while (r.pos < end) {
    const tag = r.tag(end);
    const field = tag >>> 3;
    if (field === 1) {
      r.expectWireType(tag, WIRE_LEN, 'Span.Link.trace_id');
      traceId = readId(r, end, TRACE_ID_BYTES, 'Span.Link.trace_id');
    } else if (field === 2) {
      r.expectWireType(tag, WIRE_LEN, 'Span.Link.span_id');
      spanId = readId(r, end, SPAN_ID_BYTES, 'Span.Link.span_id');
    } else {
      r.skip(tag & 7, end); // trace_state, attributes, counts, flags
    }
  }
  if (traceId === null) r.fail('link without trace_id', linkAt);
  if (spanId === null) r.fail('link without span_id', linkAt);
  return { traceId, spanId };
}

/** Status.code; the message (field 2) is free text that may carry content, so it is skipped unread. */
function decodeStatusCode(r: WireReader, end: number): number {
  let code = 0;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag >>> 3 === 3) {
      r.expectWireType(tag, WIRE_VARINT, 'Status.code');
      code = r.varint(end) | 0;
    } else {
      r.skip(tag & 7, end);
    }
  }
  return code;
}

/**
 * One KeyValue. The key is matched against the allow-list from its bytes; only a kept key's value is decoded
 * (after the whole KeyValue is read, so field order does not matter and the last key wins, as protobuf merges).
 * Returns true and fills `kept` when the attribute is kept and has a scalar value.
 */
function decodeKeptKeyValue(r: WireReader, end: number, kept: KeptAttribute): boolean {
  const buf = r.buf;
  let key: string | null = null;
  let valueStart = -1;
  let valueEnd = -1;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === TAG_KEY_VALUE_KEY) {
      const len = r.length(end);
      key = keptKeyAt(buf, r.pos, len) ?? metadataKeyAt(buf, r.pos, len);
      if (key === null && kept.dropped === null) {
        kept.dropped = agentLikeKeyAt(buf, r.pos, len) ?? undefined;
        const role = typedRoleAt(buf, r.pos, len);
        // id/name attributes matter only on a span typed agent (rare): found then by a second walk (typedAttributes).
        if (role === 'type' || role === 'lc') kept.typed = { role, keyStart: r.pos, keyLen: len, valueStart: -1, valueEnd: -1 };
      }
      r.pos += len;
    } else if (tag === TAG_KEY_VALUE_VALUE) {
      const len = r.length(end);
      valueStart = r.pos;
      valueEnd = r.pos + len;
      r.pos = valueEnd;
    } else {
      const field = tag >>> 3;
      if (field === 1 || field === 2) r.expectWireType(tag, WIRE_LEN, field === 1 ? 'KeyValue.key' : 'KeyValue.value');
      r.skip(tag & 7, end);
    }
  }
  if (key === null) {
    const t = kept.typed;
    if (t === undefined || valueStart < 0) {
      kept.typed = undefined;
      return false;
    }
    t.valueStart = valueStart;
    t.valueEnd = valueEnd;
    // Only these values are read: a type key kept only when it says `agent` (compared in place: nothing is decoded
    // for `tool`, `chain`, ...), an `lc_agent_name` only when it is made of id characters.
    if (t.role === 'type') {
      if (isAgentStringAt(buf, valueStart, valueEnd)) t.value = 'agent';
      else kept.typed = undefined;
    } else {
      r.pos = valueStart;
      const keep = lcAgentNameOf(decodeScalarAnyValue(r, valueEnd));
      if (keep === null) kept.typed = undefined;
      else t.value = keep;
    }
    r.pos = end;
    return false;
  }
  if (valueStart < 0) return false;
  r.pos = valueStart;
  if (key === METADATA_ATTRIBUTE) {
    const f = decodeLanggraphFields(r, valueEnd);
    r.pos = end;
    if (f.node === null) return false;
    kept.key = LANGGRAPH_NODE_ATTRIBUTE;
    kept.value = f.node;
    if (f.ns !== null) kept.ns = f.ns;
    if (f.step !== null) kept.step = f.step;
    if (f.agent !== null) kept.lcAgent = f.agent;
    return true;
  }
  const value = decodeScalarAnyValue(r, valueEnd);
  r.pos = end;
  if (value === undefined) return false;
  kept.key = key;
  kept.value = value;
  return true;
}

const AGENT_BYTES = [0x61, 0x67, 0x65, 0x6e, 0x74]; // "agent"

/** Is the AnyValue in `buf[start, end)` exactly the string `agent` in any case (its only field string_value, 5 bytes)? */
function isAgentStringAt(buf: Uint8Array, start: number, end: number): boolean {
  if (end - start !== 7 || buf[start] !== TAG_ANY_STRING || buf[start + 1] !== 5) return false;
  for (let i = 0; i < 5; i++) {
    const b = buf[start + 2 + i];
    if ((b >= 0x41 && b <= 0x5a ? b | 0x20 : b) !== AGENT_BYTES[i]) return false;
  }
  return true;
}

/**
 * The agent-typing rule's attributes of a span (src/otlp/typed.ts): the first type key saying `agent`, the id/key and
 * name attributes of its namespace (their values read now, from where the span's bytes hold them), and the first
 * `lc_agent_name` that is an id.
 */
function typedAttributes(r: WireReader, span: { start: number; end: number }, typed: NonNullable<KeptAttribute['typed']>[], attrs: Attrs): void {
  const keyOf = (t: NonNullable<KeptAttribute['typed']>) => typedKeyText(utf8Text(r.buf, t.keyStart, t.keyStart + t.keyLen));
  const lc = typed.find((t) => t.role === 'lc' && t.value !== undefined);
  const lcKey = lc && keyOf(lc);
  if (lc && lcKey) {
    attrs[LC_AGENT_NAME] = lc.value!;
    attrs[LC_AGENT_NAME_KEY] = lcKey;
  }
  const type = typed.find((t) => t.role === 'type' && t.value !== undefined);
  const typeKey = type && keyOf(type);
  if (!typeKey) return;
  attrs[TYPED_AGENT_KEY] = typeKey;
  const saved = r.pos;
  const candidates: TypedCandidate[] = keptTypedCandidates(attrs);
  // The span typed agent: walk its attributes again for the id/key and name attributes of the type key's namespace.
  r.pos = span.start;
  while (r.pos < span.end && candidates.length < MAX_TYPED_CANDIDATES) {
    const tag = r.tag(span.end);
    if (tag >>> 3 !== 9 || (tag & 7) !== WIRE_LEN) {
      r.skip(tag & 7, span.end);
      continue;
    }
    const kvLen = r.length(span.end);
    const kvEnd = r.pos + kvLen;
    let keyStart = -1;
    let keyLen = 0;
    let valueStart = -1;
    let valueEnd = -1;
    while (r.pos < kvEnd) {
      const t = r.tag(kvEnd);
      if (t === TAG_KEY_VALUE_KEY || t === TAG_KEY_VALUE_VALUE) {
        const len = r.length(kvEnd);
        if (t === TAG_KEY_VALUE_KEY) [keyStart, keyLen] = [r.pos, len];
        else [valueStart, valueEnd] = [r.pos, r.pos + len];
        r.pos += len;
      } else r.skip(t & 7, kvEnd);
    }
    r.pos = kvEnd;
    const role = keyStart < 0 || valueStart < 0 ? null : typedRoleAt(r.buf, keyStart, keyLen);
    if (role !== 'id' && role !== 'name') continue;
    const key = typedKeyText(utf8Text(r.buf, keyStart, keyStart + keyLen));
    if (key === null || keptKeyAt(r.buf, keyStart, keyLen) !== null) continue; // kept ones are in attrs already
    const [vs, ve] = [valueStart, valueEnd];
    candidates.push({
      key,
      role,
      read: () => {
        r.pos = vs;
        return decodeScalarAnyValue(r, ve);
      },
    });
  }
  setTypedIdentity(typeKey, candidates, attrs);
  r.pos = saved;
}

/** The LangGraph fields of a `metadata` AnyValue's JSON string, scanned in place (never decoded whole). */
function decodeLanggraphFields(r: WireReader, end: number): LangGraphFields {
  let f: LangGraphFields = { node: null, ns: null, step: null, agent: null };
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === TAG_ANY_STRING) {
      const len = r.length(end);
      f = langgraphFieldsOf(r.buf, r.pos, r.pos + len);
      r.pos += len;
    } else {
      const field = tag >>> 3;
      if (field >= 1 && field <= 7) f = { node: null, ns: null, step: null, agent: null };
      r.skip(tag & 7, end);
    }
  }
  return f;
}

/**
 * AnyValue (a oneof: the last member present wins). Strings, booleans, int64 (as the nearest number) and
 * doubles are returned; arrays, key-value lists and bytes are not scalar receipts fields and yield undefined.
 */
function decodeScalarAnyValue(r: WireReader, end: number): AttrValue | undefined {
  let value: AttrValue | undefined;
  while (r.pos < end) {
    const tag = r.tag(end);
    switch (tag) {
      case TAG_ANY_STRING: {
        const len = r.length(end);
        value = utf8Text(r.buf, r.pos, r.pos + len);
        r.pos += len;
        break;
      }
      case TAG_ANY_BOOL:
        value = (r.varint(end) | r.hi) !== 0;
        break;
      case TAG_ANY_INT: {
        const lo = r.varint(end);
        value = int64PartsToNumber(r.hi, lo);
        break;
      }
      case TAG_ANY_DOUBLE:
        value = r.double(end);
        break;
      case TAG_ANY_ARRAY:
      case TAG_ANY_KVLIST:
      case TAG_ANY_BYTES:
        r.skip(WIRE_LEN, end);
        value = undefined;
        break;
      default: {
        const field = tag >>> 3;
        if (field >= 1 && field <= 7) r.fail(`AnyValue field ${field} has wire type ${tag & 7}`);
        r.skip(tag & 7, end);
      }
    }
  }
  return value;
}
