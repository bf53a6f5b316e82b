// An OTLP/JSON ExportTraceServiceRequest (the object, as bench/soak.mjs builds it) as the protobuf bytes an OTLP/HTTP
// protobuf exporter sends for it (the OpenTelemetry Collector's otlphttp exporter and the SDKs' -proto exporters):
// resource_spans { resource { attributes } scope_spans { scope { name } spans { trace_id span_id parent_span_id name
// kind start_time_unix_nano end_time_unix_nano attributes } } }, with string and int attribute values. The field
// numbers are those of opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto; only the fields the
// benchmarks send are written.

/** A varint (non-negative bigint or number). */
function varint(v) {
  let n = BigInt(v);
  const out = [];
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return Buffer.from(out);
}

const tag = (no, wire) => varint((no << 3) | wire);
const lengthDelimited = (no, bytes) => Buffer.concat([tag(no, 2), varint(bytes.length), bytes]);
const string = (no, s) => lengthDelimited(no, Buffer.from(s, 'utf8'));
const hexBytes = (no, h) => lengthDelimited(no, Buffer.from(h, 'hex'));
function fixed64(no, v) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return Buffer.concat([tag(no, 1), b]);
}

function anyValue(v) {
  if (v.stringValue !== undefined) return string(1, v.stringValue);
  if (v.intValue !== undefined) return Buffer.concat([tag(3, 0), varint(BigInt.asUintN(64, BigInt(v.intValue)))]);
  throw new Error(`otlp-proto: an attribute value of a kind not written here: ${Object.keys(v)}`);
}
const keyValue = (no, kv) => lengthDelimited(no, Buffer.concat([string(1, kv.key), lengthDelimited(2, anyValue(kv.value))]));

function span(s) {
  const parts = [hexBytes(1, s.traceId), hexBytes(2, s.spanId)];
  if (s.parentSpanId) parts.push(hexBytes(4, s.parentSpanId));
  parts.push(string(5, s.name));
  if (s.kind) parts.push(Buffer.concat([tag(6, 0), varint(s.kind)]));
  parts.push(fixed64(7, s.startTimeUnixNano), fixed64(8, s.endTimeUnixNano));
  for (const kv of s.attributes ?? []) parts.push(keyValue(9, kv));
  return lengthDelimited(2, Buffer.concat(parts));
}

/** The protobuf body of an OTLP/JSON trace export object ({ resourceSpans: [...] }). */
export function encodeTraceRequest(req) {
  return Buffer.concat(
    req.resourceSpans.map((rs) => {
      const parts = [];
      if (rs.resource) parts.push(lengthDelimited(1, Buffer.concat((rs.resource.attributes ?? []).map((kv) => keyValue(1, kv)))));
      for (const ss of rs.scopeSpans ?? []) {
        const scope = ss.scope ? [lengthDelimited(1, string(1, ss.scope.name ?? ''))] : [];
        parts.push(lengthDelimited(2, Buffer.concat([...scope, ...ss.spans.map(span)])));
      }
      return lengthDelimited(1, Buffer.concat(parts));
    }),
  );
}
