/**
 * OTLP/JSON specifics: enum names and numbers, int64 as strings or numbers, hex ids in either case, unknown
 * fields ignored, and shape errors that name the JSON path without quoting the payload.
 */
import { describe, expect, it } from 'vitest';
import { decodeExportTraceJson, decodeExportTraceRequest, OtlpDecodeError } from '../src/otlp/index.js';
import { hexBytes, Pb } from './fixtures/otlp/expect.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const PARENT = '00f067aa0ba902b7';
const MARKER = 'JSON-CONTENT-MARKER-5d1c';

type Json = Record<string, unknown>;

function requestWith(span: Json, resourceAttributes: Json[] = []): Json {
  return {
    resourceSpans: [
      {
        resource: { attributes: resourceAttributes },
        scopeSpans: [{ scope: { name: 's' }, spans: [{ traceId: TRACE, spanId: SPAN, name: 'n', ...span }] }],
      },
    ],
  };
}

function decodeSpan(span: Json, resourceAttributes?: Json[]) {
  const decoded = decodeExportTraceJson(JSON.stringify(requestWith(span, resourceAttributes)));
  expect(decoded.spanCount).toBe(1);
  return decoded.spans[0];
}

function expectJsonError(body: unknown, message: RegExp): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  expect(() => decodeExportTraceJson(text)).toThrow(OtlpDecodeError);
  expect(() => decodeExportTraceJson(text)).toThrow(message);
}

describe('decodeExportTraceJson', () => {
  it('decodes an empty request', () => {
    expect(decodeExportTraceJson('{}')).toEqual({ spans: [], spanCount: 0 });
    expect(decodeExportTraceJson('{"resourceSpans":[]}')).toEqual({ spans: [], spanCount: 0 });
    expect(decodeExportTraceJson(new TextEncoder().encode('{"resourceSpans":null}'))).toEqual({ spans: [], spanCount: 0 });
  });

  it('accepts enums as numbers or names, and lowercases hex ids', () => {
    const byNumber = decodeSpan({ kind: 3, status: { code: 2 }, parentSpanId: PARENT });
    const byName = decodeSpan({ kind: 'SPAN_KIND_CLIENT', status: { code: 'STATUS_CODE_ERROR' }, parentSpanId: PARENT.toUpperCase() });
    expect(byName).toEqual(byNumber);
    expect(byName).toMatchObject({ kind: 3, statusCode: 2, parentSpanId: PARENT });
    expect(decodeSpan({ traceId: TRACE.toUpperCase() }).traceId).toBe(TRACE);
  });

  it('reads int64 times as strings or numbers, and int values as strings or numbers', () => {
    const s = decodeSpan({
      startTimeUnixNano: '1767225600123456789',
      endTimeUnixNano: 1767225600200000000,
      attributes: [
        { key: 'topology.run.id', value: { intValue: '-9007199254740993' } },
        { key: 'topology.outcome.verified', value: { intValue: 12 } },
        { key: 'topology.edge.from', value: { doubleValue: 'Infinity' } },
        { key: 'topology.phase', value: { doubleValue: 2.5 } },
        { key: 'topology.edge.to', value: { boolValue: false } },
      ],
    });
    expect(s.startMs).toBe(1_767_225_600_123.456789);
    expect(s.startNs).toBe(456_789); // the exact nanoseconds below the millisecond
    expect(s.endMs).toBeCloseTo(1_767_225_600_200, 3);
    expect(s.attrs).toEqual({ 'topology.run.id': -9007199254740992, 'topology.outcome.verified': 12, 'topology.edge.from': Infinity, 'topology.phase': 2.5, 'topology.edge.to': false });
  });

  it('gives the same time double as the protobuf decoder for the same nanoseconds', () => {
    for (const nanos of [0n, 999_999n, 1_767_225_600_123_456_789n, 2n ** 63n + 12345n, 2n ** 64n - 1n]) {
      const fromJson = decodeSpan({ startTimeUnixNano: nanos.toString() }).startMs;
      const pb = Pb.of((req) =>
        req.message(1, (rs) =>
          rs.message(2, (ss) =>
            ss.message(2, (s) => s.bytesField(1, hexBytes(TRACE)).bytesField(2, hexBytes(SPAN)).fixed64(7, nanos)),
          ),
        ),
      );
      expect(fromJson).toBe(decodeExportTraceRequest(pb).spans[0].startMs);
    }
  });

  it('keeps only allow-listed scalar attributes; resource attributes merge under the span', () => {
    const s = decodeSpan(
      {
        attributes: [
          { key: 'gen_ai.input.messages', value: { stringValue: MARKER } },
          { key: 'gen_ai.tool.call.arguments', value: { kvlistValue: { values: [] } } },
          { key: 'topology.edge.kind', value: { arrayValue: { values: [{ stringValue: 'a' }] } } },
          { key: 'topology.run.id', value: { stringValue: 'span-run' } },
          { key: 'gen_ai.agent.name', value: {} },
          { key: 'gen_ai.agent.id' },
        ],
        events: [
          { name: 'content', timeUnixNano: '1', attributes: [{ key: 'gen_ai.prompt', value: { stringValue: MARKER } }] },
          { name: 'wait', timeUnixNano: '2000000', attributes: [{ key: 'topology.event.type', value: { stringValue: 'wait' } }] },
        ],
        links: [{ traceId: TRACE, spanId: PARENT, attributes: [{ key: 'x', value: { stringValue: MARKER } }] }],
      },
      [
        { key: 'topology.run.id', value: { stringValue: 'resource-run' } },
        { key: 'gen_ai.conversation.id', value: { stringValue: 'svc' } },
        { key: 'process.command_line', value: { stringValue: MARKER } },
      ],
    );
    expect(s.attrs).toEqual({ 'topology.run.id': 'span-run', 'gen_ai.conversation.id': 'svc' });
    expect(s.events).toEqual([{ name: 'wait', timeMs: 2, timeNs: 0, attrs: { 'topology.event.type': 'wait' } }]);
    expect(s.links).toEqual([{ traceId: TRACE, spanId: PARENT }]);
    expect(JSON.stringify(s)).not.toContain(MARKER);
  });

  it('does not even validate the value of a dropped key', () => {
    const s = decodeSpan({ attributes: [{ key: 'gen_ai.input.messages', value: { stringValue: 42, intValue: 'x' } }] });
    expect(s.attrs).toEqual({});
  });

  it('ignores unknown fields and treats null as absent; empty or zero parent is a root', () => {
    const s = decodeSpan({ futureField: { a: 1 }, parentSpanId: '', kind: null, status: null, droppedAttributesCount: 3 });
    expect(s).toMatchObject({ parentSpanId: null, kind: 0, statusCode: 0 });
    expect(decodeSpan({ parentSpanId: '0000000000000000' }).parentSpanId).toBeNull();
  });

  it('rejects invalid JSON without quoting it', () => {
    try {
      decodeExportTraceJson(`{"resourceSpans": [${MARKER}]}`);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(OtlpDecodeError);
      expect((err as Error).message).toBe('request body is not valid JSON');
    }
    expectJsonError('', /not valid JSON/);
  });

  it('rejects wrong shapes with the JSON path, never the value', () => {
    expectJsonError('[]', /^request must be an object$/);
    expectJsonError('null', /^request must be an object$/);
    expectJsonError({ resourceSpans: {} }, /^resourceSpans must be an array$/);
    expectJsonError({ resourceSpans: [1] }, /^resourceSpans\[0\] must be an object$/);
    expectJsonError(requestWith({ traceId: 'zz' + TRACE.slice(2) }), /spans\[0\]\.traceId must be 32 hex digits$/);
    expectJsonError(requestWith({ traceId: undefined }), /traceId must be 32 hex digits/);
    expectJsonError(requestWith({ spanId: TRACE }), /spanId must be 16 hex digits/);
    expectJsonError(requestWith({ spanId: '0000000000000000' }), /spanId is all zero/);
    expectJsonError(requestWith({ parentSpanId: 'abc' }), /parentSpanId must be 16 hex digits or empty/);
    expectJsonError(requestWith({ kind: 'CLIENT' }), /kind must be an enum number or name/);
    expectJsonError(requestWith({ kind: 1.5 }), /kind must be an enum/);
    expectJsonError(requestWith({ startTimeUnixNano: '-1' }), /startTimeUnixNano must be a non-negative decimal integer/);
    expectJsonError(requestWith({ endTimeUnixNano: true }), /endTimeUnixNano must be/);
    expectJsonError(requestWith({ name: 5 }), /name must be a string/);
    expectJsonError(requestWith({ attributes: [{ key: 1 }] }), /attributes\[0\]\.key must be a string/);
    expectJsonError(requestWith({ attributes: [null] }), /attributes\[0\] must be an object/);
    expectJsonError(requestWith({ attributes: [{ key: 'topology.event.type', value: { stringValue: 5 } }] }), /stringValue must be a string/);
    expectJsonError(requestWith({ attributes: [{ key: 'topology.event.type', value: { intValue: '1.5' } }] }), /intValue must be an integer/);
    expectJsonError(requestWith({ attributes: [{ key: 'topology.event.type', value: { boolValue: 'true' } }] }), /boolValue must be a boolean/);
    expectJsonError(requestWith({ links: [{ traceId: TRACE }] }), /links\[0\]\.spanId must be 16 hex digits/);
    expectJsonError(requestWith({ events: {} }), /events must be an array/);
    expectJsonError(requestWith({ status: [] }), /status must be an object/);
  });

  it('error messages never contain the offending value', () => {
    try {
      decodeExportTraceJson(JSON.stringify(requestWith({ traceId: MARKER })));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(OtlpDecodeError);
      expect((err as Error).message).not.toContain(MARKER);
    }
  });
});
