/**
 * OTLP/JSON decoder for ExportTraceServiceRequest into the same SpanRecord as the protobuf decoder.
 *
 * OTLP/JSON is the proto3 JSON mapping with OTLP's exceptions: lowerCamelCase field names, trace and span ids
 * as hex (not base64), enums as integers (the enum value names are accepted too), 64-bit integers as decimal
 * strings or numbers. Unknown fields are ignored. JSON.parse necessarily materialises the whole document; this
 * adapter then reads only allow-listed attributes and never looks at the value of any other key, so nothing
 * it returns (or any error it throws) carries content.
 */
import { OtlpDecodeError } from './errors.js';
import { isKeptAttributeKey } from './types.js';
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

function fail(path: string, problem: string): never {
  throw new OtlpDecodeError(`${path} ${problem}`);
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
  const request = asObject(root, 'request');
  const spans: SpanRecord[] = [];
  const resourceSpans = asArray(request.resourceSpans, 'resourceSpans');
  for (let i = 0; i < resourceSpans.length; i++) {
    decodeResourceSpans(asObject(resourceSpans[i], `resourceSpans[${i}]`), `resourceSpans[${i}]`, spans);
  }
  return { spans, spanCount: spans.length };
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

function asObject(value: unknown, path: string): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(path, 'must be an object');
  return value as JsonObject;
}

function asOptionalObject(value: unknown, path: string): JsonObject | null {
  return isAbsent(value) ? null : asObject(value, path);
}

/** A repeated field: absent or null is empty. */
function asArray(value: unknown, path: string): readonly unknown[] {
  if (isAbsent(value)) return [];
  if (!Array.isArray(value)) fail(path, 'must be an array');
  return value;
}

function decodeResourceSpans(rs: JsonObject, path: string, out: SpanRecord[]): void {
  const resource = asOptionalObject(rs.resource, `${path}.resource`);
  const resourceAttrs = resource === null ? null : decodeKeptAttributes(resource.attributes, `${path}.resource.attributes`);
  const scopeSpans = asArray(rs.scopeSpans, `${path}.scopeSpans`);
  for (let i = 0; i < scopeSpans.length; i++) {
    const scopePath = `${path}.scopeSpans[${i}]`;
    const spans = asArray(asObject(scopeSpans[i], scopePath).spans, `${scopePath}.spans`);
    for (let j = 0; j < spans.length; j++) {
      const spanPath = `${scopePath}.spans[${j}]`;
      out.push(decodeSpan(asObject(spans[j], spanPath), spanPath, resourceAttrs));
    }
  }
}

function decodeSpan(span: JsonObject, path: string, resourceAttrs: Attrs | null): SpanRecord {
  const attrs = decodeKeptAttributes(span.attributes, `${path}.attributes`) ?? {};
  if (resourceAttrs !== null) {
    for (const key in resourceAttrs) if (!(key in attrs)) attrs[key] = resourceAttrs[key];
  }
  const status = asOptionalObject(span.status, `${path}.status`);
  return {
    traceId: requiredId(span.traceId, TRACE_ID_HEX, `${path}.traceId`),
    spanId: requiredId(span.spanId, SPAN_ID_HEX, `${path}.spanId`),
    parentSpanId: parentId(span.parentSpanId, `${path}.parentSpanId`),
    name: optionalString(span.name, `${path}.name`),
    kind: enumValue(span.kind, SPAN_KIND_BY_NAME, `${path}.kind`),
    startMs: nanosToMillis(span.startTimeUnixNano, `${path}.startTimeUnixNano`),
    endMs: nanosToMillis(span.endTimeUnixNano, `${path}.endTimeUnixNano`),
    statusCode: status === null ? 0 : enumValue(status.code, STATUS_CODE_BY_NAME, `${path}.status.code`),
    attrs,
    events: decodeEvents(span.events, `${path}.events`),
    links: decodeLinks(span.links, `${path}.links`),
  };
}

/** Events that carry at least one kept attribute. */
function decodeEvents(value: unknown, path: string): SpanEventRecord[] {
  const events = asArray(value, path);
  const kept: SpanEventRecord[] = [];
  for (let i = 0; i < events.length; i++) {
    const eventPath = `${path}[${i}]`;
    const event = asObject(events[i], eventPath);
    const attrs = decodeKeptAttributes(event.attributes, `${eventPath}.attributes`);
    if (attrs === null) continue;
    kept.push({
      name: optionalString(event.name, `${eventPath}.name`),
      timeMs: nanosToMillis(event.timeUnixNano, `${eventPath}.timeUnixNano`),
      attrs,
    });
  }
  return kept;
}

function decodeLinks(value: unknown, path: string): SpanLinkRecord[] {
  const links = asArray(value, path);
  const out: SpanLinkRecord[] = new Array(links.length);
  for (let i = 0; i < links.length; i++) {
    const linkPath = `${path}[${i}]`;
    const link = asObject(links[i], linkPath);
    out[i] = {
      traceId: requiredId(link.traceId, TRACE_ID_HEX, `${linkPath}.traceId`),
      spanId: requiredId(link.spanId, SPAN_ID_HEX, `${linkPath}.spanId`),
    };
  }
  return out;
}

/**
 * The kept attributes of a repeated KeyValue, or null if none is kept. A dropped key's value is not read at
 * all; a kept key whose value is not a scalar (array, kvlist, bytes, empty) is left out.
 */
function decodeKeptAttributes(value: unknown, path: string): Attrs | null {
  const list = asArray(value, path);
  let attrs: Attrs | null = null;
  for (let i = 0; i < list.length; i++) {
    const kv = list[i];
    if (typeof kv !== 'object' || kv === null || Array.isArray(kv)) fail(`${path}[${i}]`, 'must be an object');
    const key = (kv as JsonObject).key;
    if (typeof key !== 'string') fail(`${path}[${i}].key`, 'must be a string');
    if (!isKeptAttributeKey(key)) continue;
    const anyValue = asOptionalObject((kv as JsonObject).value, `${path}[${i}].value`);
    if (anyValue === null) continue;
    const scalar = scalarAnyValue(anyValue, `${path}[${i}].value`);
    if (scalar !== undefined) (attrs ??= {})[key] = scalar;
  }
  return attrs;
}

function scalarAnyValue(value: JsonObject, path: string): AttrValue | undefined {
  if (!isAbsent(value.stringValue)) {
    if (typeof value.stringValue !== 'string') fail(`${path}.stringValue`, 'must be a string');
    return value.stringValue;
  }
  if (!isAbsent(value.boolValue)) {
    if (typeof value.boolValue !== 'boolean') fail(`${path}.boolValue`, 'must be a boolean');
    return value.boolValue;
  }
  if (!isAbsent(value.intValue)) return int64Value(value.intValue, `${path}.intValue`);
  if (!isAbsent(value.doubleValue)) return doubleValue(value.doubleValue, `${path}.doubleValue`);
  return undefined; // arrayValue, kvlistValue, bytesValue or no value
}

function int64Value(value: unknown, path: string): number {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value === 'string' && INT64_DECIMAL.test(value)) return Number(value);
  fail(path, 'must be an integer (number or decimal string)');
}

function doubleValue(value: unknown, path: string): number {
  if (typeof value === 'number') return value;
  if (value === 'NaN') return NaN;
  if (value === 'Infinity') return Infinity;
  if (value === '-Infinity') return -Infinity;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  fail(path, 'must be a number');
}

/** A proto3 enum: an int32, or one of the value names. */
function enumValue(value: unknown, byName: Readonly<Record<string, number>>, path: string): number {
  if (isAbsent(value)) return 0;
  if (typeof value === 'number' && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX) return value;
  if (typeof value === 'string' && Object.hasOwn(byName, value)) return byName[value];
  fail(path, 'must be an enum number or name');
}

function optionalString(value: unknown, path: string): string {
  if (isAbsent(value)) return '';
  if (typeof value !== 'string') fail(path, 'must be a string');
  return value;
}

function requiredId(value: unknown, shape: RegExp, path: string): string {
  if (typeof value !== 'string' || !shape.test(value)) fail(path, `must be ${shape === TRACE_ID_HEX ? 32 : 16} hex digits`);
  if (ALL_ZERO.test(value)) fail(path, 'is all zero (invalid)');
  return value.toLowerCase();
}

/** parentSpanId: absent, empty or all zero means a root span. */
function parentId(value: unknown, path: string): string | null {
  if (isAbsent(value) || value === '') return null;
  if (typeof value !== 'string' || !SPAN_ID_HEX.test(value)) fail(path, 'must be 16 hex digits or empty');
  return ALL_ZERO.test(value) ? null : value.toLowerCase();
}

/**
 * Unix nanoseconds (a decimal string, or a number) to milliseconds. Strings are split into whole milliseconds
 * and the nanosecond remainder, both exact, so the result is the same double the protobuf decoder gives.
 */
function nanosToMillis(value: unknown, path: string): number {
  if (isAbsent(value)) return 0;
  if (typeof value === 'string') {
    if (!UINT64_DECIMAL.test(value)) fail(path, 'must be a non-negative decimal integer');
    if (value.length <= 6) return Number(value) / 1e6;
    return Number(value.slice(0, -6)) + Number(value.slice(-6)) / 1e6;
  }
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value / 1e6;
  fail(path, 'must be a non-negative integer (decimal string or number)');
}
