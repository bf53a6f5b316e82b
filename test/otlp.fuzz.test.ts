/**
 * Property tests: random bytes, random structured protobuf messages, mutations of a real exporter's body, and
 * random or mutated JSON all end in a well-formed DecodedExport or an OtlpDecodeError (never another error).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { decodeExportTraceJson, decodeExportTraceRequest, OtlpDecodeError } from '../src/otlp/index.js';
import { expectResultOrDecodeError, Pb } from './fixtures/otlp/expect.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/otlp/${name}`, import.meta.url));
const protobufBody = new Uint8Array(fixture('agents.pb'));
const jsonText = fixture('agents.json').toString('utf8');
const jsonDocument: unknown = JSON.parse(jsonText);

const decodesSafely = (bytes: Uint8Array) => expectResultOrDecodeError(() => decodeExportTraceRequest(bytes), OtlpDecodeError);
const decodesJsonSafely = (text: string | Uint8Array) => expectResultOrDecodeError(() => decodeExportTraceJson(text), OtlpDecodeError);

/** A random protobuf field tree using OTLP's field numbers, so that random messages reach deep decoders. */
type FieldSpec =
  | { kind: 'varint'; field: number; value: bigint }
  | { kind: 'fixed64'; field: number; value: bigint }
  | { kind: 'fixed32'; field: number; value: number }
  | { kind: 'bytes'; field: number; value: Uint8Array }
  | { kind: 'message'; field: number; children: FieldSpec[] };

const fieldNumber = fc.oneof(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 1, max: 2 ** 29 - 1 }));
const { field: fieldArb } = fc.letrec<{ field: FieldSpec }>((tie) => ({
  field: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ kind: fc.constant('varint' as const), field: fieldNumber, value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ kind: fc.constant('fixed64' as const), field: fieldNumber, value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ kind: fc.constant('fixed32' as const), field: fieldNumber, value: fc.nat() }),
    fc.record({
      kind: fc.constant('bytes' as const),
      field: fieldNumber,
      value: fc.oneof(fc.uint8Array({ minLength: 16, maxLength: 16 }), fc.uint8Array({ minLength: 8, maxLength: 8 }), fc.uint8Array({ maxLength: 24 })),
    }),
    fc.record({ kind: fc.constant('message' as const), field: fieldNumber, children: fc.array(tie('field'), { maxLength: 5 }) }),
  ),
}));

function writeFields(pb: Pb, fields: FieldSpec[]): void {
  for (const f of fields) {
    if (f.kind === 'varint') pb.uint(f.field, f.value);
    else if (f.kind === 'fixed64') pb.fixed64(f.field, f.value);
    else if (f.kind === 'fixed32') pb.fixed32(f.field, f.value);
    else if (f.kind === 'bytes') pb.bytesField(f.field, f.value);
    else pb.message(f.field, (child) => writeFields(child, f.children));
  }
}

/** Byte-level edits of the real exporter's body: overwrite, insert or delete at random places. */
const edit = fc.oneof(
  fc.record({ op: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ op: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }) }),
  fc.record({ op: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 12 }) }),
);
type Edit = typeof edit extends fc.Arbitrary<infer E> ? E : never;

function applyEdits(body: Uint8Array, edits: Edit[]): Uint8Array {
  let bytes = Uint8Array.from(body);
  for (const e of edits) {
    const at = e.at % (bytes.length + 1);
    if (e.op === 'set') {
      if (bytes.length > 0) bytes[at % bytes.length] = e.byte;
    } else if (e.op === 'insert') {
      bytes = Buffer.concat([bytes.subarray(0, at), e.bytes, bytes.subarray(at)]);
    } else {
      bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + e.count)]);
    }
  }
  return bytes;
}

/** Every path (object keys, array indexes) in a JSON document. */
function jsonPaths(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => jsonPaths(v, [...prefix, i], out));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) jsonPaths(v, [...prefix, k], out);
  return out;
}

function replaceAt(doc: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const copy: unknown = structuredClone(doc);
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]] = replacement;
  return copy;
}

const documentPaths = jsonPaths(jsonDocument);
const TRACE_ID = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
const SPAN_ID = Uint8Array.from({ length: 8 }, (_, i) => i + 1);

describe('protobuf decoder under random input', () => {
  it('random bytes', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), decodesSafely), { numRuns: 3000 });
  });

  it('random structured messages with OTLP field numbers', () => {
    fc.assert(
      fc.property(fc.array(fieldArb, { maxLength: 6 }), (fields) => decodesSafely(Pb.of((pb) => writeFields(pb, fields)))),
      { numRuns: 2000 },
    );
  });

  it('random messages nested in the real request shape', () => {
    // request > ResourceSpans > ScopeSpans > Span with valid ids then random fields (which may override them).
    fc.assert(
      fc.property(fc.array(fieldArb, { maxLength: 8 }), (fields) =>
        decodesSafely(
          Pb.of((req) =>
            req.message(1, (rs) =>
              rs.message(2, (ss) =>
                ss.message(2, (span) => writeFields(span.bytesField(1, TRACE_ID).bytesField(2, SPAN_ID), fields)),
              ),
            ),
          ),
        ),
      ),
      { numRuns: 2000 },
    );
  });

  it('mutations of a real exporter body', () => {
    fc.assert(fc.property(fc.array(edit, { minLength: 1, maxLength: 4 }), (edits) => decodesSafely(applyEdits(protobufBody, edits))), {
      numRuns: 1500,
    });
  });
});

describe('JSON decoder under random input', () => {
  it('random JSON documents and random text', () => {
    fc.assert(fc.property(fc.oneof(fc.json(), fc.string({ unit: 'binary' })), decodesJsonSafely), { numRuns: 2000 });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 128 }), decodesJsonSafely), { numRuns: 500 });
  });

  it('a real exporter body with one subtree replaced by a random JSON value', () => {
    fc.assert(
      fc.property(fc.nat(documentPaths.length - 1), fc.jsonValue({ maxDepth: 3 }), (index, replacement) =>
        decodesJsonSafely(JSON.stringify(replaceAt(jsonDocument, documentPaths[index], replacement))),
      ),
      { numRuns: 1500 },
    );
  });

  it('a real exporter body with characters edited', () => {
    fc.assert(
      fc.property(fc.nat(), fc.string({ maxLength: 3 }), fc.nat(3), (at, insert, drop) => {
        const i = at % (jsonText.length + 1);
        decodesJsonSafely(jsonText.slice(0, i) + insert + jsonText.slice(i + drop));
      }),
      { numRuns: 1000 },
    );
  });
});
