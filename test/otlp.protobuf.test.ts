/**
 * Wire-format edge cases of the protobuf decoder, on hand-built messages (field order, unknown fields of every
 * wire type, oneof semantics, id and length checks). Conformance with real exporters is in
 * otlp.exporters.test.ts; these cover what exporters rarely send.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { decodeExportTraceRequest, OtlpDecodeError } from '../src/otlp/index.js';
import { hexBytes, Pb } from './fixtures/otlp/expect.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const PARENT = '00f067aa0ba902b7';
const CONTENT = 'CONTENT-MARKER-93be1d ' + 'lorem ipsum dolor sit amet, '.repeat(8);
const T_NANOS = 1_767_225_600_123_456_789n;

type Build = (pb: Pb) => void;

function keyValue(key: string, value: Build): Build {
  return (kv) => kv.string(1, key).message(2, value);
}
const str = (s: string): Build => (v) => v.string(1, s);

function request(spans: Build[], resource?: Build): Uint8Array {
  return Pb.of((req) =>
    req.message(1, (rs) => {
      if (resource) rs.message(1, resource);
      rs.message(2, (ss) => {
        ss.message(1, (scope) => scope.string(1, 'scope'));
        for (const span of spans) ss.message(2, span);
      });
    }),
  );
}

function span(extra: Build = () => {}): Build {
  return (s) => {
    s.bytesField(1, hexBytes(TRACE)).bytesField(2, hexBytes(SPAN)).string(5, 'invoke_agent a');
    extra(s);
  };
}

function decodeOne(extra: Build) {
  const decoded = decodeExportTraceRequest(request([span(extra)]));
  expect(decoded.spans).toHaveLength(1);
  return decoded.spans[0];
}

function expectDecodeError(bytes: Uint8Array, message: RegExp): void {
  expect(() => decodeExportTraceRequest(bytes)).toThrow(OtlpDecodeError);
  expect(() => decodeExportTraceRequest(bytes)).toThrow(message);
}

describe('decodeExportTraceRequest: well-formed messages', () => {
  it('decodes an empty request and a request with no spans', () => {
    expect(decodeExportTraceRequest(new Uint8Array(0))).toEqual({ spans: [], spanCount: 0 });
    expect(decodeExportTraceRequest(request([]))).toEqual({ spans: [], spanCount: 0 });
  });

  it('reads ids as lowercase hex, times as milliseconds, kind and status code', () => {
    const s = decodeOne((p) =>
      p
        .bytesField(4, hexBytes(PARENT))
        .uint(6, 3)
        .fixed64(7, T_NANOS)
        .fixed64(8, T_NANOS + 2_500_000n)
        .message(15, (st) => st.string(2, CONTENT).uint(3, 2)),
    );
    expect(s).toMatchObject({ traceId: TRACE, spanId: SPAN, parentSpanId: PARENT, name: 'invoke_agent a', kind: 3, statusCode: 2 });
    expect(s.startMs).toBe(1_767_225_600_123.456789);
    expect(s.startNs).toBe(456_789); // the exact nanoseconds below the millisecond
    expect(s.endMs - s.startMs).toBeCloseTo(2.5, 3);
    expect(JSON.stringify(s)).not.toContain('CONTENT-MARKER');
  });

  it('converts the whole fixed64 range of nanoseconds without BigInt, to the nearest millisecond double', () => {
    for (const nanos of [0n, 1n, 999_999n, 1_000_000n, 4_294_967_295n, 4_294_967_296n, 2n ** 53n + 1n, 2n ** 64n - 1n]) {
      const s = decodeOne((p) => p.fixed64(7, nanos));
      const whole = nanos / 1_000_000n;
      const expected = Number(whole) + Number(nanos % 1_000_000n) / 1e6;
      expect(s.startMs).toBe(expected);
    }
  });

  it('decodes names of every short length and long or non-ASCII names', () => {
    const names = ['', 'a', 'x'.repeat(63), 'y'.repeat(64), 'z'.repeat(65), 'w'.repeat(5000), 'é', 'agent ✓ '.repeat(20), '\u{1F916} bot'];
    for (const name of names) {
      const s = decodeExportTraceRequest(request([(p) => p.bytesField(1, hexBytes(TRACE)).bytesField(2, hexBytes(SPAN)).string(5, name)])).spans[0];
      expect(s.name).toBe(name);
    }
  });

  it('reuses nothing wrongly across spans: consecutive spans of different traces keep their own trace ids', () => {
    const other = 'ffeeddccbbaa99887766554433221100';
    const spanOf = (trace: string, id: string): Build => (p) => p.bytesField(1, hexBytes(trace)).bytesField(2, hexBytes(id));
    const decoded = decodeExportTraceRequest(
      request([spanOf(TRACE, SPAN), spanOf(TRACE, PARENT), spanOf(other, SPAN), spanOf(TRACE, SPAN)]),
    );
    expect(decoded.spans.map((s) => s.traceId)).toEqual([TRACE, TRACE, other, TRACE]);
    expect(decoded.spans.map((s) => s.spanId)).toEqual([SPAN, PARENT, SPAN, SPAN]);
  });

  it('treats an empty or all-zero parent_span_id as a root span', () => {
    expect(decodeOne((p) => p.bytesField(4, [])).parentSpanId).toBeNull();
    expect(decodeOne((p) => p.bytesField(4, new Uint8Array(8))).parentSpanId).toBeNull();
    expect(decodeOne(() => {}).parentSpanId).toBeNull();
  });

  it('decodes kept scalar values: string, bool, int64 (signed, large), double', () => {
    const s = decodeOne((p) =>
      p
        .message(9, keyValue('topology.run.id', str('x')))
        .message(9, keyValue('topology.outcome.verified', (v) => v.uint(2, 1)))
        .message(9, keyValue('topology.edge.kind', (v) => v.uint(2, 0)))
        .message(9, keyValue('topology.contract.version', (v) => v.uint(3, 42)))
        .message(9, keyValue('topology.wait.on', (v) => v.uint(3, -7n)))
        .message(9, keyValue('topology.wait.edge', (v) => v.uint(3, -(2n ** 63n))))
        .message(9, keyValue('topology.wait.deadline', (v) => v.uint(3, 2n ** 63n - 1n)))
        .message(9, keyValue('topology.phase', (v) => v.double(4, -1.5)))
        .message(9, keyValue('gen_ai.agent.name', str('agent ✓ é'))),
    );
    expect(s.attrs).toEqual({
      'topology.run.id': 'x',
      'topology.outcome.verified': true,
      'topology.edge.kind': false,
      'topology.contract.version': 42,
      'topology.wait.on': -7,
      'topology.wait.edge': -(2 ** 63),
      'topology.wait.deadline': 2 ** 63,
      'topology.phase': -1.5,
      'gen_ai.agent.name': 'agent ✓ é',
    });
  });

  it('leaves out kept keys whose value is an array, kvlist, bytes or empty', () => {
    const s = decodeOne((p) =>
      p
        .message(9, keyValue('topology.edge.from', (v) => v.message(5, (a) => a.message(1, str('a')))))
        .message(9, keyValue('topology.edge.to', (v) => v.message(6, (l) => l.message(1, keyValue('k', str('v'))))))
        .message(9, keyValue('topology.contract.id', (v) => v.bytesField(7, [1, 2, 3])))
        .message(9, keyValue('topology.phase', () => {}))
        .message(9, (kv) => kv.string(1, 'topology.run.result')),
    );
    expect(s.attrs).toEqual({});
  });

  it('AnyValue is a oneof: the last member present wins', () => {
    const s = decodeOne((p) =>
      p
        .message(9, keyValue('topology.run.id', (v) => v.string(1, 'first').uint(3, 5)))
        .message(9, keyValue('topology.outcome.verified', (v) => v.uint(3, 5).message(5, () => {}))),
    );
    expect(s.attrs).toEqual({ 'topology.run.id': 5 });
  });

  it('accepts KeyValue fields in any order, and the last key wins', () => {
    const s = decodeOne((p) =>
      p
        .message(9, (kv) => kv.message(2, str('value first')).string(1, 'topology.phase'))
        .message(9, (kv) => kv.string(1, 'topology.edge.to').string(1, 'gen_ai.input.messages').message(2, str(CONTENT)))
        .message(9, (kv) => kv.string(1, 'gen_ai.input.messages').string(1, 'topology.gap.reason').message(2, str('k'))),
    );
    expect(s.attrs).toEqual({ 'topology.phase': 'value first', 'topology.gap.reason': 'k' });
  });

  it('merges kept resource attributes under span attributes, even when the resource comes after the spans', () => {
    const resource: Build = (r) =>
      r
        .message(1, keyValue('topology.run.id', str('from-resource')))
        .message(1, keyValue('gen_ai.conversation.id', str('svc')))
        .message(1, keyValue('process.command_line', str(CONTENT)))
        .uint(2, 0);
    const spanBuild = span((p) => p.message(9, keyValue('topology.run.id', str('from-span'))));
    const resourceLast = Pb.of((req) =>
      req.message(1, (rs) => rs.message(2, (ss) => ss.message(2, spanBuild)).message(1, resource)),
    );
    for (const bytes of [request([spanBuild], resource), resourceLast]) {
      expect(decodeExportTraceRequest(bytes).spans[0].attrs).toEqual({ 'topology.run.id': 'from-span', 'gen_ai.conversation.id': 'svc' });
    }
  });

  it('keeps only events with a kept attribute, and links by id', () => {
    const s = decodeOne((p) =>
      p
        .message(11, (e) => e.fixed64(1, T_NANOS).string(2, 'content only').message(3, keyValue('gen_ai.prompt', str(CONTENT))))
        .message(11, (e) => e.message(3, keyValue('topology.event.type', str('wait'))).string(2, 'wait').fixed64(1, T_NANOS).uint(4, 3))
        .message(11, (e) => e.string(2, 'no attributes'))
        .message(13, (l) => l.bytesField(1, hexBytes(TRACE)).bytesField(2, hexBytes(PARENT)).string(3, 'ts').fixed32(6, 0x301)),
    );
    expect(s.events).toEqual([{ name: 'wait', timeMs: 1_767_225_600_123.456789, timeNs: 456_789, attrs: { 'topology.event.type': 'wait' } }]);
    expect(s.links).toEqual([{ traceId: TRACE, spanId: PARENT }]);
  });

  it('skips unknown fields of every wire type at every level (forward compatible)', () => {
    const unknown: Build = (p) => p.uint(900, 2n ** 63n).fixed64(901, 7n).string(902, CONTENT).fixed32(903, 9);
    const bytes = Pb.of((req) => {
      unknown(req);
      req.message(1, (rs) => {
        unknown(rs);
        rs.message(1, (r) => {
          unknown(r);
          r.message(1, (kv) => {
            unknown(kv);
            kv.string(1, 'gen_ai.conversation.id').message(2, (v) => {
              unknown(v);
              v.string(1, 'svc');
            });
          });
        });
        rs.message(2, (ss) => {
          unknown(ss);
          ss.message(2, (s) => {
            span((p) => {
              unknown(p);
              p.message(15, (st) => {
                unknown(st);
                st.uint(3, 1);
              });
              p.message(11, (e) => {
                unknown(e);
                e.message(3, keyValue('topology.event.type', str('y')));
              });
              p.message(13, (l) => {
                unknown(l);
                l.bytesField(1, hexBytes(TRACE)).bytesField(2, hexBytes(SPAN));
              });
            })(s);
          });
        });
      });
    });
    const s = decodeExportTraceRequest(bytes).spans[0];
    expect(s.attrs).toEqual({ 'gen_ai.conversation.id': 'svc' });
    expect(s.statusCode).toBe(1);
    expect(s.events).toHaveLength(1);
    expect(s.links).toHaveLength(1);
  });

  it('counts every span, including content-only spans', () => {
    const decoded = decodeExportTraceRequest(
      request([span(), span((p) => p.message(9, keyValue('gen_ai.input.messages', str(CONTENT)))), span()]),
    );
    expect(decoded.spanCount).toBe(3);
    expect(decoded.spans).toHaveLength(3);
  });
});

describe('decodeExportTraceRequest: content is never materialised', () => {
  afterEach(() => vi.restoreAllMocks());

  it('never turns a dropped value (or a status message) into a string', () => {
    const made: string[] = [];
    const decode = TextDecoder.prototype.decode;
    vi.spyOn(TextDecoder.prototype, 'decode').mockImplementation(function (this: TextDecoder, ...args) {
      const text = decode.apply(this, args);
      made.push(text);
      return text;
    });
    const s = decodeOne((p) =>
      p
        .message(9, keyValue('gen_ai.input.messages', str(CONTENT)))
        .message(9, keyValue('topology.gap.reason', str('kept ' + 'x'.repeat(60))))
        .message(11, (e) => e.string(2, CONTENT).message(3, keyValue('gen_ai.prompt', str(CONTENT))))
        .message(15, (st) => st.string(2, CONTENT).uint(3, 2)),
    );
    expect(s.attrs['topology.gap.reason']).toMatch(/^kept x+$/);
    expect(made.some((t) => t.startsWith('kept '))).toBe(true); // the spy does see what is decoded
    expect(made.filter((t) => t.includes('CONTENT-MARKER'))).toEqual([]);
  });
});

describe('decodeExportTraceRequest: malformed input throws OtlpDecodeError', () => {
  it('rejects non-bytes input', () => {
    expect(() => decodeExportTraceRequest('x' as unknown as Uint8Array)).toThrow(OtlpDecodeError);
  });

  it('rejects truncated varints, lengths past the end, and overlong varints', () => {
    expectDecodeError(Uint8Array.of(0x0a), /truncated varint/);
    expectDecodeError(Uint8Array.of(0x0a, 0x05, 1, 2), /runs past the end/);
    // Field 2 is unknown in ExportTraceServiceRequest: these reach the generic skip paths.
    expectDecodeError(Uint8Array.of(0x10, 0xff, 0xff), /truncated varint/);
    expectDecodeError(Uint8Array.of(0x10, ...new Array(10).fill(0xff), 0x01), /longer than 10 bytes/);
    expectDecodeError(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f), /runs past the end/);
    expectDecodeError(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), /length >= 2\^32/);
    expectDecodeError(Uint8Array.of(0x11, 1, 2, 3), /truncated fixed64/);
    expectDecodeError(Uint8Array.of(0x15, 1, 2, 3), /truncated fixed32/);
    expectDecodeError(Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x80, 0x01), /field tag out of range/);
  });

  it('rejects a child message whose length runs past its parent, not just past the buffer', () => {
    // ResourceSpans of 3 bytes whose scope_spans claims 5: in range of the buffer, out of range of its parent.
    const bytes = Uint8Array.of(0x0a, 0x03, 0x12, 0x05, 0x00, 0x12, 0x00, 0x00, 0x00);
    expectDecodeError(bytes, /runs past the end/);
  });

  it('rejects bad wire types, groups and field number 0', () => {
    expectDecodeError(Uint8Array.of(0x0e), /invalid wire type 6/);
    expectDecodeError(Uint8Array.of(0x0f), /invalid wire type 7/);
    expectDecodeError(Uint8Array.of(0x0b, 0x0c), /group/);
    expectDecodeError(Uint8Array.of(0x02, 0x00), /field number 0/);
    expectDecodeError(Uint8Array.of(0x08, 0x01), /resource_spans \(field 1\) has wire type 0, expected 2/);
    expectDecodeError(request([span((p) => p.tag(5, 0).varint(1))]), /Span.name/);
    expectDecodeError(request([span((p) => p.tag(7, 5).raw([0, 0, 0, 0]))]), /start_time_unix_nano/);
    expectDecodeError(request([span((p) => p.message(9, keyValue('topology.event.type', (v) => v.tag(1, 0).varint(1))))]), /AnyValue field 1/);
  });

  it('rejects ids of the wrong length, all-zero ids, and spans or links without ids', () => {
    const withIds = (trace: ArrayLike<number> | null, spanId: ArrayLike<number> | null): Build => (s) => {
      if (trace) s.bytesField(1, trace);
      if (spanId) s.bytesField(2, spanId);
    };
    expectDecodeError(request([withIds(hexBytes(TRACE).slice(0, 15), hexBytes(SPAN))]), /trace_id is 15 bytes, expected 16/);
    expectDecodeError(request([withIds(hexBytes(TRACE), hexBytes(TRACE))]), /span_id is 16 bytes, expected 8/);
    expectDecodeError(request([withIds(new Uint8Array(16), hexBytes(SPAN))]), /all zero/);
    expectDecodeError(request([withIds(null, hexBytes(SPAN))]), /span without trace_id/);
    expectDecodeError(request([withIds(hexBytes(TRACE), null)]), /span without span_id/);
    expectDecodeError(request([span((p) => p.bytesField(4, [1, 2, 3]))]), /parent_span_id is 3 bytes/);
    expectDecodeError(request([span((p) => p.message(13, (l) => l.bytesField(2, hexBytes(SPAN))))]), /link without trace_id/);
  });

  it('error messages name places, never payload text', () => {
    const bytes = request([span((p) => p.message(9, keyValue('gen_ai.input.messages', str(CONTENT))).tag(5, 0).varint(1))]);
    try {
      decodeExportTraceRequest(bytes);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(OtlpDecodeError);
      expect((err as Error).message).toMatch(/at byte \d+$/);
      expect((err as Error).message).not.toContain('CONTENT');
    }
  });
});
