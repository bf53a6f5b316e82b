/**
 * Encoders for what the receivers answer: ExportTraceServiceResponse (protobuf and OTLP/JSON) and
 * google.rpc.Status, the body of an OTLP/HTTP error response.
 *
 *   ExportTraceServiceResponse: 1 partial_success (ExportTracePartialSuccess)
 *   ExportTracePartialSuccess:  1 rejected_spans (int64), 2 error_message (string)
 *   google.rpc.Status:          1 code (int32), 2 message (string), 3 details (repeated Any; never sent)
 */

/** Spans the server refused in an otherwise accepted request, and why (a fixed, content-free sentence). */
export interface ExportPartialSuccess {
  rejectedSpans: number;
  errorMessage?: string;
}

/** gRPC status codes the receivers use (google.rpc.Code). */
export const GrpcStatusCode = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

const utf8 = new TextEncoder();

/** A growable byte buffer with the three protobuf primitives these small messages need. */
class ProtoWriter {
  private bytes: number[] = [];

  /** A varint of a non-negative integer up to 2^64 - 1 (exact below 2^53). */
  varint(value: number): this {
    let v = value;
    while (v >= 0x80) {
      this.bytes.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.bytes.push(v);
    return this;
  }

  /** An int32 varint: a negative value is sign-extended to 64 bits (ten bytes), as protobuf encodes it. */
  int32Varint(value: number): this {
    if (value >= 0) return this.varint(value);
    let lo = value >>> 0;
    let hi = 0xffffffff;
    while (hi !== 0 || lo >= 0x80) {
      this.bytes.push((lo & 0x7f) | 0x80);
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    this.bytes.push(lo);
    return this;
  }

  tag(field: number, wireType: number): this {
    return this.varint(field * 8 + wireType);
  }

  lengthDelimited(field: number, payload: Uint8Array): this {
    this.tag(field, 2).varint(payload.length);
    for (const b of payload) this.bytes.push(b);
    return this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

function hasPartialSuccess(partial: ExportPartialSuccess | undefined): partial is ExportPartialSuccess {
  return partial !== undefined && (partial.rejectedSpans > 0 || (partial.errorMessage ?? '') !== '');
}

function checkRejectedSpans(n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError('rejectedSpans must be a non-negative safe integer');
}

/**
 * ExportTraceServiceResponse as protobuf. Without rejected spans or a message it is the empty message (zero
 * bytes), which is what OTLP asks for on full success.
 */
export function encodeExportTraceResponseProtobuf(partial?: ExportPartialSuccess): Uint8Array {
  if (!hasPartialSuccess(partial)) return new Uint8Array(0);
  checkRejectedSpans(partial.rejectedSpans);
  const inner = new ProtoWriter();
  if (partial.rejectedSpans > 0) inner.tag(1, 0).varint(partial.rejectedSpans);
  if (partial.errorMessage) inner.lengthDelimited(2, utf8.encode(partial.errorMessage));
  return new ProtoWriter().lengthDelimited(1, inner.finish()).finish();
}

/** ExportTraceServiceResponse as OTLP/JSON: `{}` on full success; int64 rejectedSpans as a decimal string. */
export function encodeExportTraceResponseJson(partial?: ExportPartialSuccess): string {
  if (!hasPartialSuccess(partial)) return '{}';
  checkRejectedSpans(partial.rejectedSpans);
  const body: { rejectedSpans?: string; errorMessage?: string } = {};
  if (partial.rejectedSpans > 0) body.rejectedSpans = String(partial.rejectedSpans);
  if (partial.errorMessage) body.errorMessage = partial.errorMessage;
  return JSON.stringify({ partialSuccess: body });
}

/** google.rpc.Status as protobuf, for OTLP/HTTP protobuf error bodies. */
export function encodeRpcStatusProtobuf(code: number, message = ''): Uint8Array {
  if (!Number.isInteger(code) || code < -2147483648 || code > 2147483647) throw new RangeError('code must be an int32');
  const w = new ProtoWriter();
  if (code !== 0) w.tag(1, 0).int32Varint(code);
  if (message !== '') w.lengthDelimited(2, utf8.encode(message));
  return w.finish();
}

/** google.rpc.Status as JSON, for OTLP/HTTP JSON error bodies. */
export function encodeRpcStatusJson(code: number, message = ''): string {
  return JSON.stringify({ code, message });
}
