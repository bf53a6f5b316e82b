/**
 * OTLP/JSON decoder for ExportTraceServiceRequest into the same SpanRecord as the protobuf decoder.
 *
 * OTLP/JSON is the proto3 JSON mapping with OTLP's exceptions: lowerCamelCase field names, trace and span ids
 * as hex (not base64), enums as integers (the enum value names are accepted too), 64-bit integers as decimal
 * strings or numbers. Unknown fields are ignored. JSON.parse necessarily materialises the whole document; this
 * adapter then reads only allow-listed attributes and never looks at the value of any other key, so nothing
 * it returns (or any error it throws) carries content: errors name the JSON path, never a value.
 */
import { OtlpDecodeError } from './errors.js';
import { isKeptAttributeKey } from './types.js';
import { agentLikeKey, frameworkScopeOf, libraryOf } from './keys.js';
import { MAX_TYPED_CANDIDATES, typedJsonAttributes, typedRoleOf, type TypedJsonCandidate } from './typed.js';
import { LANGGRAPH_AGENT_ATTRIBUTE, langgraphFieldsOfString, LANGGRAPH_NODE_ATTRIBUTE, LANGGRAPH_NS_ATTRIBUTE, LANGGRAPH_STEP_ATTRIBUTE, METADATA_ATTRIBUTE } from './metadata.js';
import type { AttrValue, DecodedExport, SpanEventRecord, SpanLinkRecord, SpanRecord } from './types.js';

type Attrs = Record<string, AttrValue>;
type JsonObject = Record<string, unknown>;

const SPAN_KIND_BY_NAME: Readonly<Record<string, number>> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};
const STATUS_CODE_BY_NAME: Readonly<Record<string, number>> = {
  STATUS_CODE_UNSET: 0,
  STATUS_CODE_OK: 1,
  STATUS_CODE_ERROR: 2,
};

const TRACE_ID_HEX = /^[0-9a-fA-F]{32}$/;
const SPAN_ID_HEX = /^[0-9a-fA-F]{16}$/;
const ALL_ZERO = /^0+$/;
const UINT64_DECIMAL = /^[0-9]{1,20}$/;
const INT64_DECIMAL = /^-?[0-9]{1,19}$/;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

const utf8Decoder = new TextDecoder('utf-8');

/**
 * Where in the document the walk is, kept as a stack of keys and indexes so that the path string (for an
 * error message) is only built when something is wrong.
 */
class Trail {
  private readonly parts: (string | number)[] = [];

  enter(part: string | number): void {
    this.parts.push(part);
  }

  leave(): void {
    this.parts.pop();
  }

  /** Throws OtlpDecodeError naming the current path (plus `field`) and the problem. */
  fail(field: string | null, problem: string): never {
    let path = '';
    for (const part of field === null ? this.parts : [...this.parts, field]) {
      path += typeof part === 'number' ? `[${part}]` : path === '' ? part : `.${part}`;
    }
    throw new OtlpDecodeError(`${path === '' ? 'request' : path} ${problem}`);
  }
}

/** Decodes an OTLP/JSON ExportTraceServiceRequest body (text or UTF-8 bytes). */
export function decodeExportTraceJson(body: string | Uint8Array): DecodedExport {
  const text = typeof body === 'string' ? body : body instanceof Uint8Array ? utf8Decoder.decode(body) : null;
  if (text === null) throw new OtlpDecodeError('request body must be text or bytes');
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch {
    // The parser's own message quotes the input; it could quote content, so it is not passed on.
    throw new OtlpDecodeError('request body is not valid JSON');
  }
  const trail: Trail = new Trail();
  if (!isObject(root)) trail.fail(null, 'must be an object');
  const spans: SpanRecord[] = [];
  const resourceSpans = asArray(root.resourceSpans, trail, 'resourceSpans');
  trail.enter('resourceSpans');
  for (let i = 0; i < resourceSpans.length; i++) {
    trail.enter(i);
    decodeResourceSpans(asObject(resourceSpans[i], trail, null), trail, spans);
    trail.leave();
  }
  return { spans, spanCount: spans.length };
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asObject(value: unknown, trail: Trail, field: string | null): JsonObject {
  if (!isObject(value)) trail.fail(field, 'must be an object');
  return value;
}

function asOptionalObject(value: unknown, trail: Trail, field: string): JsonObject | null {
  return isAbsent(value) ? null : asObject(value, trail, field);
}

/** A repeated field: absent or null is empty. */
function asArray(value: unknown, trail: Trail, field: string): readonly unknown[] {
  if (isAbsent(value)) return [];
  if (!Array.isArray(value)) trail.fail(field, 'must be an array');
  return value;
}

function decodeResourceSpans(rs: JsonObject, trail: Trail, out: SpanRecord[]): void {
  const resource = asOptionalObject(rs.resource, trail, 'resource');
  let resourceAttrs: Attrs | null = null;
  if (resource !== null) {
    trail.enter('resource');
    resourceAttrs = decodeKeptAttributes(resource.attributes, trail, 'attributes');
    trail.leave();
  }
  const scopeSpans = asArray(rs.scopeSpans, trail, 'scopeSpans');
  trail.enter('scopeSpans');
  for (let i = 0; i < scopeSpans.length; i++) {
    trail.enter(i);
    const ss = asObject(scopeSpans[i], trail, null);
    const spans = asArray(ss.spans, trail, 'spans');
    const scopeName = isObject(ss.scope) && typeof ss.scope.name === 'string' ? frameworkScopeOf(ss.scope.name) : null;
    const rawName = isObject(ss.scope) && typeof ss.scope.name === 'string' ? ss.scope.name : null;
    const rawVersion = isObject(ss.scope) && typeof ss.scope.version === 'string' ? ss.scope.version : null;
    const library = libraryOf(rawName !== null && rawName.length > 128 ? '\u0000' : rawName, rawVersion !== null && rawVersion.length > 64 ? '\u0000' : rawVersion);
    trail.enter('spans');
    for (let j = 0; j < spans.length; j++) {
      trail.enter(j);
      const rec = decodeSpan(asObject(spans[j], trail, null), trail, resourceAttrs);
      if (scopeName !== null) rec.scope = scopeName;
      rec.library = library;
      out.push(rec);
      trail.leave();
    }
    trail.leave();
    trail.leave();
  }
  trail.leave();
}

function decodeSpan(span: JsonObject, trail: Trail, resourceAttrs: Attrs | null): SpanRecord {
  const agentKeys: string[] = [];
  const typed: TypedJsonCandidate[] = [];
  const attrs = decodeKeptAttributes(span.attributes, trail, 'attributes', agentKeys, typed) ?? {};
  if (typed.length > 0) typedJsonAttributes(typed, attrs, () => typedJsonCandidates(span.attributes));
  if (resourceAttrs !== null) {
    for (const key in resourceAttrs) if (attrs[key] === undefined) attrs[key] = resourceAttrs[key];
  }
  const status = asOptionalObject(span.status, trail, 'status');
  let statusCode = 0;
  if (status !== null) {
    trail.enter('status');
    statusCode = enumValue(status.code, STATUS_CODE_BY_NAME, trail, 'code');
    trail.leave();
  }
  const rec: SpanRecord = {
    traceId: requiredId(span.traceId, TRACE_ID_HEX, trail, 'traceId'),
    spanId: requiredId(span.spanId, SPAN_ID_HEX, trail, 'spanId'),
    parentSpanId: parentId(span.parentSpanId, trail),
    name: optionalString(span.name, trail, 'name'),
    kind: enumValue(span.kind, SPAN_KIND_BY_NAME, trail, 'kind'),
    startMs: nanosToMillis(span.startTimeUnixNano, trail, 'startTimeUnixNano'),
    endMs: nanosToMillis(span.endTimeUnixNano, trail, 'endTimeUnixNano'),
    startNs: subMillisNanos(span.startTimeUnixNano),
    endNs: subMillisNanos(span.endTimeUnixNano),
    statusCode,
    attrs,
    events: decodeEvents(span.events, trail),
    links: decodeLinks(span.links, trail),
  };
  if (agentKeys.length > 0) rec.agentKeys = agentKeys;
  return rec;
}

/** Events that carry at least one kept attribute. */
function decodeEvents(value: unknown, trail: Trail): SpanEventRecord[] {
  const events = asArray(value, trail, 'events');
  const kept: SpanEventRecord[] = [];
  if (events.length === 0) return kept;
  trail.enter('events');
  for (let i = 0; i < events.length; i++) {
    trail.enter(i);
    const event = asObject(events[i], trail, null);
    const attrs = decodeKeptAttributes(event.attributes, trail, 'attributes');
    if (attrs !== null) {
      kept.push({
        name: optionalString(event.name, trail, 'name'),
        timeMs: nanosToMillis(event.timeUnixNano, trail, 'timeUnixNano'),
        timeNs: subMillisNanos(event.timeUnixNano),
        attrs,
      });
    }
    trail.leave();
  }
  trail.leave();
  return kept;
}

function decodeLinks(value: unknown, trail: Trail): SpanLinkRecord[] {
  const links = asArray(value, trail, 'links');
  const out: SpanLinkRecord[] = [];
  if (links.length === 0) return out;
  trail.enter('links');
  for (let i = 0; i < links.length; i++) {
    trail.enter(i);
    const link = asObject(links[i], trail, null);
    out.push({
      traceId: requiredId(link.traceId, TRACE_ID_HEX, trail, 'traceId'),
      spanId: requiredId(link.spanId, SPAN_ID_HEX, trail, 'spanId'),
    });
    trail.leave();
  }
  trail.leave();
  return out;
}

/**
 * The kept attributes of a repeated KeyValue, or null if none is kept. A dropped key's value is not read at
 * all; a kept key whose value is not a scalar (array, kvlist, bytes, empty) is left out.
 */
/** `agentKeys`: collects the keys (never values) of dropped attributes that look agent-like (at most 16). */
/** The dropped id/key and name attributes of a span typed agent, with their string values (already parsed). */
function typedJsonCandidates(list: unknown): TypedJsonCandidate[] {
  const out: TypedJsonCandidate[] = [];
  if (!Array.isArray(list)) return out;
  for (const kv of list) {
    if (out.length >= MAX_TYPED_CANDIDATES) break;
    if (!isObject(kv) || typeof kv.key !== 'string' || isKeptAttributeKey(kv.key)) continue;
    const role = typedRoleOf(kv.key);
    if (role === 'id' || role === 'name') out.push({ key: kv.key, role, value: isObject(kv.value) ? kv.value.stringValue : undefined });
  }
  return out;
}

/** `typed`: collects the dropped keys with a role in the agent-typing rule (src/otlp/typed.ts), with their values. */
function decodeKeptAttributes(value: unknown, trail: Trail, field: string, agentKeys?: string[], typed?: TypedJsonCandidate[]): Attrs | null {
  const list = asArray(value, trail, field);
  let attrs: Attrs | null = null;
  for (let i = 0; i < list.length; i++) {
    const kv = list[i];
    if (!isObject(kv) || typeof kv.key !== 'string') {
      trail.enter(field);
      trail.enter(i);
      if (!isObject(kv)) trail.fail(null, 'must be an object');
      trail.fail('key', 'must be a string');
    }
    const key = kv.key;
    if (key === METADATA_ATTRIBUTE) {
      // Only the `langgraph_node`, `langgraph_checkpoint_ns` and `langgraph_step` fields of the JSON string are read (src/otlp/metadata.ts).
      const f = isObject(kv.value) && typeof kv.value.stringValue === 'string' ? langgraphFieldsOfString(kv.value.stringValue) : null;
      if (f !== null && f.node !== null) {
        (attrs ??= {})[LANGGRAPH_NODE_ATTRIBUTE] = f.node;
        if (f.ns !== null) attrs[LANGGRAPH_NS_ATTRIBUTE] = f.ns;
        if (f.step !== null) attrs[LANGGRAPH_STEP_ATTRIBUTE] = f.step;
        if (f.agent !== null) attrs[LANGGRAPH_AGENT_ATTRIBUTE] = f.agent;
      }
      continue;
    }
    if (!isKeptAttributeKey(key)) {
      if (agentKeys !== undefined && agentKeys.length < 16) {
        const k = agentLikeKey(key);
        if (k !== null && !agentKeys.includes(k)) agentKeys.push(k);
      }
      if (typed !== undefined && typed.length < MAX_TYPED_CANDIDATES) {
        const role = typedRoleOf(key);
        // id/name attributes matter only on a span typed agent (rare): collected then (typedJsonCandidates).
        if (role === 'type' || role === 'lc') typed.push({ key, role, value: isObject(kv.value) ? kv.value.stringValue : undefined });
      }
      continue;
    }
    if (isAbsent(kv.value)) continue;
    trail.enter(field);
    trail.enter(i);
    const scalar = scalarAnyValue(asObject(kv.value, trail, 'value'), trail);
    trail.leave();
    trail.leave();
    if (scalar !== undefined) (attrs ??= {})[key] = scalar;
  }
  return attrs;
}

function scalarAnyValue(value: JsonObject, trail: Trail): AttrValue | undefined {
  trail.enter('value');
  let scalar: AttrValue | undefined;
  if (!isAbsent(value.stringValue)) {
    if (typeof value.stringValue !== 'string') trail.fail('stringValue', 'must be a string');
    scalar = value.stringValue;
  } else if (!isAbsent(value.boolValue)) {
    if (typeof value.boolValue !== 'boolean') trail.fail('boolValue', 'must be a boolean');
    scalar = value.boolValue;
  } else if (!isAbsent(value.intValue)) {
    scalar = int64Value(value.intValue, trail);
  } else if (!isAbsent(value.doubleValue)) {
    scalar = doubleValue(value.doubleValue, trail);
  } // else arrayValue, kvlistValue, bytesValue or no value: not a scalar
  trail.leave();
  return scalar;
}

function int64Value(value: unknown, trail: Trail): number {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value === 'string' && INT64_DECIMAL.test(value)) return Number(value);
  trail.fail('intValue', 'must be an integer (number or decimal string)');
}

function doubleValue(value: unknown, trail: Trail): number {
  if (typeof value === 'number') return value;
  if (value === 'NaN') return NaN;
  if (value === 'Infinity') return Infinity;
  if (value === '-Infinity') return -Infinity;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  trail.fail('doubleValue', 'must be a number');
}

/** A proto3 enum: an int32, or one of the value names. */
function enumValue(value: unknown, byName: Readonly<Record<string, number>>, trail: Trail, field: string): number {
  if (isAbsent(value)) return 0;
  if (typeof value === 'number' && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX) return value;
  if (typeof value === 'string' && Object.hasOwn(byName, value)) return byName[value];
  trail.fail(field, 'must be an enum number or name');
}

function optionalString(value: unknown, trail: Trail, field: string): string {
  if (isAbsent(value)) return '';
  if (typeof value !== 'string') trail.fail(field, 'must be a string');
  return value;
}

function requiredId(value: unknown, shape: RegExp, trail: Trail, field: string): string {
  if (typeof value !== 'string' || !shape.test(value)) {
    trail.fail(field, `must be ${shape === TRACE_ID_HEX ? 32 : 16} hex digits`);
  }
  if (ALL_ZERO.test(value)) trail.fail(field, 'is all zero (invalid)');
  return value.toLowerCase();
}

/** parentSpanId: absent, empty or all zero means a root span. */
function parentId(value: unknown, trail: Trail): string | null {
  if (isAbsent(value) || value === '') return null;
  if (typeof value !== 'string' || !SPAN_ID_HEX.test(value)) trail.fail('parentSpanId', 'must be 16 hex digits or empty');
  return ALL_ZERO.test(value) ? null : value.toLowerCase();
}

/**
 * The exact nanoseconds below the millisecond of Unix nanoseconds already checked by nanosToMillis (a decimal
 * string: its last six digits; a number: exact only below 2^53, as JSON numbers are).
 */
function subMillisNanos(value: unknown): number {
  if (typeof value === 'string') return Number(value.length <= 6 ? value : value.slice(-6));
  if (typeof value === 'number') return Math.round(value % 1e6);
  return 0;
}

/**
 * Unix nanoseconds (a decimal string, or a number) to milliseconds. Strings are split into whole milliseconds
 * and the nanosecond remainder, both exact, so the result is the same double the protobuf decoder gives.
 */
function nanosToMillis(value: unknown, trail: Trail, field: string): number {
  if (isAbsent(value)) return 0;
  if (typeof value === 'string') {
    if (!UINT64_DECIMAL.test(value)) trail.fail(field, 'must be a non-negative decimal integer');
    if (value.length <= 6) return Number(value) / 1e6;
    return Number(value.slice(0, -6)) + Number(value.slice(-6)) / 1e6;
  }
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value / 1e6;
  trail.fail(field, 'must be a non-negative integer (decimal string or number)');
}
