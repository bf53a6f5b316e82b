// Fuzzing of the product's parsers at their trust boundary, with fast-check: random and mutated inputs (the real
// fixtures, edited) must each end in a valid result or the module's own clean error, never another exception and
// never a hang.
//
//   npx tsc -p tsconfig.build.json && node bench/fuzz.mjs [--cases 120000] [--seed N] [--hang-ms 10000] [--only NAME]
//
// Targets (dist/):
//   otlp-protobuf  decodeExportTraceRequest   -> a well-formed DecodedExport, or OtlpDecodeError
//   otlp-json      decodeExportTraceJson      -> a well-formed DecodedExport, or OtlpDecodeError
//   receipts       parseNdjson / validateReceipt -> per line {ok:true, receipt} (which validates again, to the same
//                  canon) or {ok:false, error}; never a throw
//   contracts      parseContract              -> a Contract whose canonical content round-trips to the same hash, or
//                  ContractError with located issues
// Inputs: random bytes/text/JSON/YAML, structure-aware random documents, and mutations of real fixtures
// (test/fixtures/otlp/agents.pb and agents.json, receipts/drift.ndjson, contracts/*.yaml): byte and character
// edits, line operations, subtree replacement, field removal and addition, identity swaps, deep nesting.
//
// Each target runs in its own worker thread; the worker bumps a shared counter per case and the main thread
// watches it: a case that runs longer than --hang-ms terminates the worker and is reported as a hang (with the
// seed and case index to reproduce). Every case is timed (performance.now around the parser call only).
// Prints a table and, last, one JSON line. Exit code 1 on any finding.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import fc from 'fast-check';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

// ----------------------------------------------------------------------------------------------------------------
// Shared generators
// ----------------------------------------------------------------------------------------------------------------

/** Byte-level edits: overwrite, insert or delete at random places. */
const byteEdit = fc.oneof(
  fc.record({ op: fc.constant('set'), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ op: fc.constant('insert'), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }) }),
  fc.record({ op: fc.constant('delete'), at: fc.nat(), count: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ op: fc.constant('truncate'), at: fc.nat() }),
);

function applyByteEdits(body, edits) {
  let bytes = Uint8Array.from(body);
  for (const e of edits) {
    const at = e.at % (bytes.length + 1);
    if (e.op === 'set') {
      if (bytes.length > 0) bytes[at % bytes.length] = e.byte;
    } else if (e.op === 'insert') bytes = Buffer.concat([bytes.subarray(0, at), e.bytes, bytes.subarray(at)]);
    else if (e.op === 'delete') bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + e.count)]);
    else bytes = bytes.subarray(0, at);
  }
  return bytes;
}

/** Characters that matter to the text formats (structure, quoting, escapes, line ends) and some that are odd. */
const syntaxChar = fc.constantFrom(
  '{', '}', '[', ']', ':', ',', '"', "'", '\\', '\n', '\r', '\t', ' ', '-', '#', '&', '*', '!', '|', '>', '?', '%', '@', '`',
  '\u0000', '\u2028', '\ufeff', '\ud800', 'é', '0', '1e999', '-0', 'null', 'true', '~', '->', '<<',
);
const insertText = fc.oneof(fc.string({ maxLength: 4 }), syntaxChar, fc.string({ unit: 'binary', maxLength: 4 }), fc.string({ unit: syntaxChar, maxLength: 6 }));
const charEdit = fc.record({ at: fc.nat(), drop: fc.nat(4), insert: insertText });

function applyCharEdits(text, edits) {
  let t = text;
  for (const e of edits) {
    const i = e.at % (t.length + 1);
    t = t.slice(0, i) + e.insert + t.slice(i + e.drop);
  }
  return t;
}

/** Line-level edits: delete, duplicate, swap, re-indent. */
const lineEdit = fc.record({ op: fc.constantFrom('delete', 'duplicate', 'swap', 'indent', 'dedent'), at: fc.nat(), other: fc.nat(), by: fc.integer({ min: 1, max: 4 }) });

function applyLineEdits(text, edits) {
  const lines = text.split('\n');
  for (const e of edits) {
    if (lines.length === 0) break;
    const i = e.at % lines.length;
    const j = e.other % lines.length;
    if (e.op === 'delete') lines.splice(i, 1);
    else if (e.op === 'duplicate') lines.splice(j, 0, lines[i]);
    else if (e.op === 'swap') [lines[i], lines[j]] = [lines[j], lines[i]];
    else if (e.op === 'indent') lines[i] = ' '.repeat(e.by) + lines[i];
    else lines[i] = lines[i].replace(new RegExp(`^ {1,${e.by}}`), '');
  }
  return lines.join('\n');
}

/** Every path (object keys, array indexes) in a JSON-like value. */
function jsonPaths(value, prefix = [], out = []) {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => jsonPaths(v, [...prefix, i], out));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) jsonPaths(v, [...prefix, k], out);
  return out;
}

function replaceAt(doc, path, replacement) {
  if (path.length === 0) return replacement;
  const copy = structuredClone(doc);
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key];
  node[path[path.length - 1]] = replacement;
  return copy;
}

function deleteAt(doc, path) {
  if (path.length === 0) return undefined;
  const copy = structuredClone(doc);
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key];
  if (Array.isArray(node)) node.splice(path[path.length - 1], 1);
  else delete node[path[path.length - 1]];
  return copy;
}

/** A value nested `depth` levels deep (arrays or objects): for recursion limits. */
function deeplyNested(depth, kind, leaf) {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { k: v };
  return v;
}
const deepText = (depth, kind) => (kind === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"k":'.repeat(depth) + '1' + '}'.repeat(depth));

// ----------------------------------------------------------------------------------------------------------------
// Targets: each is { name, strategies: [{ name, weight, arb, input(value) }], run(input) -> outcome }
// run returns 'valid' or an error-class name for a clean error, and throws Finding for anything else.
// ----------------------------------------------------------------------------------------------------------------

class Finding extends Error {}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

function decodedExportProblem(result, isKept) {
  if (!result || !Array.isArray(result.spans)) return 'spans is not an array';
  if (result.spanCount < result.spans.length) return 'spanCount below spans.length';
  const attrsOk = (a) => a && typeof a === 'object' && Object.entries(a).every(([k, v]) => isKept(k) && ['string', 'number', 'boolean'].includes(typeof v));
  for (const s of result.spans) {
    if (!HEX32.test(s.traceId) || !HEX16.test(s.spanId)) return 'bad id';
    if (s.parentSpanId !== null && !HEX16.test(s.parentSpanId)) return 'bad parent id';
    if (typeof s.name !== 'string') return 'bad name';
    if (!Number.isInteger(s.kind) || !Number.isInteger(s.statusCode)) return 'bad enum';
    if (!Number.isFinite(s.startMs) || !Number.isFinite(s.endMs)) return 'bad time';
    if (!attrsOk(s.attrs)) return 'bad attrs';
    for (const e of s.events) if (typeof e.name !== 'string' || !Number.isFinite(e.timeMs) || !attrsOk(e.attrs) || Object.keys(e.attrs).length === 0) return 'bad event';
    for (const l of s.links) if (!HEX32.test(l.traceId) || !HEX16.test(l.spanId)) return 'bad link';
  }
  return null;
}

function otlpRunner(decode, mod) {
  return (input) => {
    let result;
    try {
      result = decode(input);
    } catch (e) {
      if (e instanceof mod.OtlpDecodeError) return 'OtlpDecodeError';
      throw new Finding(`threw ${e?.constructor?.name}: ${e?.message}`);
    }
    const problem = decodedExportProblem(result, mod.isKeptAttributeKey);
    if (problem) throw new Finding(`invalid result: ${problem}`);
    return 'valid';
  };
}

/** A protobuf field tree with OTLP's field numbers, so that random messages reach the deep decoders. */
const fieldNumber = fc.oneof(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 1, max: 2 ** 29 - 1 }));
const { field: pbField } = fc.letrec((tie) => ({
  field: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ kind: fc.constant('varint'), field: fieldNumber, value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ kind: fc.constant('fixed64'), field: fieldNumber, value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
    fc.record({ kind: fc.constant('fixed32'), field: fieldNumber, value: fc.nat() }),
    fc.record({
      kind: fc.constant('bytes'),
      field: fieldNumber,
      value: fc.oneof(fc.uint8Array({ minLength: 16, maxLength: 16 }), fc.uint8Array({ minLength: 8, maxLength: 8 }), fc.uint8Array({ maxLength: 24 })),
    }),
    fc.record({ kind: fc.constant('string'), field: fieldNumber, value: fc.constantFrom('service.name', 'topology.run.id', 'topology.event.type', 'gen_ai.agent.name', 'prompt', '') }),
    fc.record({ kind: fc.constant('message'), field: fieldNumber, children: fc.array(tie('field'), { maxLength: 5 }) }),
  ),
}));

function varint(out, value) {
  let v = BigInt.asUintN(64, BigInt(value));
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}
function encodeFields(fields) {
  const out = [];
  const tag = (f, wt) => varint(out, (BigInt(f) << 3n) | BigInt(wt));
  const lenDelimited = (f, bytes) => {
    tag(f, 2);
    varint(out, bytes.length);
    for (const b of bytes) out.push(b);
  };
  for (const f of fields) {
    if (f.kind === 'varint') {
      tag(f.field, 0);
      varint(out, f.value);
    } else if (f.kind === 'fixed64') {
      tag(f.field, 1);
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(f.value);
      out.push(...b);
    } else if (f.kind === 'fixed32') {
      tag(f.field, 5);
      const b = Buffer.alloc(4);
      b.writeUInt32LE(f.value >>> 0);
      out.push(...b);
    } else if (f.kind === 'bytes') lenDelimited(f.field, f.value);
    else if (f.kind === 'string') lenDelimited(f.field, Buffer.from(f.value));
    else lenDelimited(f.field, encodeFields(f.children));
  }
  return Uint8Array.from(out);
}
/** Wrap span fields in request > ResourceSpans(1) > ScopeSpans(2) > Span(2), with valid ids first. */
const inRequestShape = (spanFields) =>
  encodeFields([
    { kind: 'message', field: 1, children: [{ kind: 'message', field: 2, children: [{ kind: 'message', field: 2, children: [
      { kind: 'bytes', field: 1, value: Uint8Array.from({ length: 16 }, (_, i) => i + 1) },
      { kind: 'bytes', field: 2, value: Uint8Array.from({ length: 8 }, (_, i) => i + 1) },
      ...spanFields,
    ] }] }] },
  ]);

function otlpProtobufTarget(mod) {
  const body = new Uint8Array(readFileSync(join(ROOT, 'test', 'fixtures', 'otlp', 'agents.pb')));
  const nestedMessages = (depth) => {
    const out = [];
    for (let i = 0; i < depth; i++) out.push(0x0a, 0x80, 0x80, 0x80, 0x80, 0x01); // field 1, length 2^28: never satisfied
    return Uint8Array.from(out);
  };
  return {
    name: 'otlp-protobuf',
    run: otlpRunner(mod.decodeExportTraceRequest, mod),
    strategies: [
      { name: 'random bytes', weight: 6, arb: fc.uint8Array({ maxLength: 512 }), input: (v) => v },
      { name: 'random OTLP-numbered fields', weight: 9, arb: fc.array(pbField, { maxLength: 6 }), input: encodeFields },
      { name: 'random span fields in the request shape', weight: 8, arb: fc.array(pbField, { maxLength: 8 }), input: inRequestShape },
      { name: 'edits of a real exporter body', weight: 12, arb: fc.array(byteEdit, { minLength: 1, maxLength: 5 }), input: (edits) => applyByteEdits(body, edits) },
      {
        name: 'deep nesting and huge lengths',
        weight: 1,
        arb: fc.record({ depth: fc.integer({ min: 1, max: 20000 }), tail: fc.uint8Array({ maxLength: 16 }) }),
        input: ({ depth, tail }) => Buffer.concat([nestedMessages(depth), tail]),
      },
    ],
  };
}

const hex = (n) => fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), minLength: n, maxLength: n });

function otlpJsonTarget(mod) {
  const text = readFileSync(join(ROOT, 'test', 'fixtures', 'otlp', 'agents.json'), 'utf8');
  const doc = JSON.parse(text);
  const paths = jsonPaths(doc);
  const attrKeys = fc.constantFrom('service.name', 'topology.run.id', 'topology.event.type', 'topology.edge.from', 'gen_ai.agent.name', 'gen.ai.prompt', 'x');
  const anyValue = fc.oneof(
    fc.record({ stringValue: fc.oneof(fc.string(), fc.jsonValue()) }, { requiredKeys: [] }),
    fc.record({ intValue: fc.oneof(fc.integer(), fc.string({ maxLength: 25 }), fc.jsonValue()) }),
    fc.record({ boolValue: fc.jsonValue() }),
    fc.record({ doubleValue: fc.oneof(fc.double(), fc.string({ maxLength: 8 })) }),
    fc.record({ arrayValue: fc.jsonValue({ maxDepth: 3 }) }),
    fc.record({ kvlistValue: fc.jsonValue({ maxDepth: 3 }) }),
  );
  const span = fc.record(
    {
      traceId: fc.oneof(hex(32), fc.string({ maxLength: 40 })),
      spanId: fc.oneof(hex(16), fc.string({ maxLength: 20 })),
      parentSpanId: fc.oneof(fc.constant(''), hex(16), fc.jsonValue()),
      name: fc.oneof(fc.string(), fc.jsonValue()),
      kind: fc.oneof(fc.integer({ min: -2, max: 8 }), fc.constantFrom('SPAN_KIND_CLIENT', 'SPAN_KIND_X'), fc.jsonValue()),
      startTimeUnixNano: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String), fc.double(), fc.string({ maxLength: 22 })),
      endTimeUnixNano: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String), fc.integer()),
      attributes: fc.array(fc.record({ key: fc.oneof(attrKeys, fc.jsonValue()), value: fc.oneof(anyValue, fc.jsonValue()) }, { requiredKeys: [] }), { maxLength: 5 }),
      events: fc.jsonValue({ maxDepth: 3 }),
      links: fc.jsonValue({ maxDepth: 3 }),
      status: fc.oneof(fc.record({ code: fc.jsonValue() }), fc.jsonValue()),
    },
    { requiredKeys: [] },
  );
  const request = fc.array(span, { maxLength: 4 }).map((spans) => JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ spans }] }] }));
  return {
    name: 'otlp-json',
    run: otlpRunner(mod.decodeExportTraceJson, mod),
    strategies: [
      { name: 'random JSON and text', weight: 4, arb: fc.oneof(fc.json(), fc.string({ unit: 'binary' })), input: (v) => v },
      { name: 'random bytes', weight: 2, arb: fc.uint8Array({ maxLength: 256 }), input: (v) => v },
      { name: 'random OTLP-shaped requests', weight: 8, arb: request, input: (v) => v },
      {
        name: 'a real body with one subtree replaced or removed',
        weight: 8,
        arb: fc.tuple(fc.nat(paths.length - 1), fc.option(fc.jsonValue({ maxDepth: 3 }), { freq: 4 })),
        input: ([i, v]) => JSON.stringify(v === null ? (deleteAt(doc, paths[i]) ?? null) : replaceAt(doc, paths[i], v)),
      },
      { name: 'a real body with characters edited', weight: 7, arb: fc.array(charEdit, { minLength: 1, maxLength: 4 }), input: (edits) => applyCharEdits(text, edits) },
      {
        name: 'deep nesting',
        weight: 1,
        arb: fc.record({ depth: fc.integer({ min: 1, max: 20000 }), kind: fc.constantFrom('array', 'object'), at: fc.nat(paths.length - 1) }),
        input: ({ depth, kind, at }) => (at % 2 ? deepText(depth, kind) : JSON.stringify(replaceAt(doc, paths[at], deeplyNested(Math.min(depth, 3000), kind, 1)))),
      },
    ],
  };
}

function receiptsTarget(core) {
  const ndjson = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8');
  const lines = ndjson.split('\n').filter((l) => l.trim() !== '');
  const docs = lines.map((l) => JSON.parse(l));
  const keys = [...new Set(docs.flatMap((d) => Object.keys(d)))].concat(['handoff', 'attempt', 'state', 'duplicateKey', 'leaseExpiresAt', 'stateVersion', 'units', 'budgetOp', 'onTimeout', 'finalOwner']);
  const types = ['run.start', 'edge', 'wait', 'outcome', 'run.end', 'gap', 'handoff', 'bogus', ''];
  const idLike = fc.oneof(fc.constantFrom('orchestrator', 'researcher', 'a', 'x'.repeat(201), 'has space', '../etc/passwd', 'line\nbreak'), fc.string({ maxLength: 12 }));
  const timeLike = fc.oneof(
    fc.date({ min: new Date(-1e14), max: new Date(1e14), noInvalidDate: true }).map((d) => d.toISOString()),
    fc.constantFrom('2026-13-45T25:61:61Z', '2026-02-30T00:00:00Z', '2026-01-01T00:00:00.1234567890Z', '2026-01-01 00:00:00+25:00', 'now'),
    fc.string({ maxLength: 30 }),
  );
  const value = fc.oneof(idLike, timeLike, fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('a -> b : return', 'a -> [b, c] : handoff', '->', 'a -> b', 3, -1, 1.5, 1e21, true, null));
  const receiptLike = fc
    .record({ type: fc.constantFrom(...types), fields: fc.dictionary(fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 6 })), value, { maxKeys: 10 }) })
    .map(({ type, fields }) => JSON.stringify({ type, ...fields }));
  const lineMutation = fc.record({
    line: fc.nat(docs.length - 1),
    op: fc.constantFrom('replace', 'delete', 'add', 'type'),
    key: fc.constantFrom(...keys),
    value,
    type: fc.constantFrom(...types),
  });
  const mutateLine = (m) => {
    const d = { ...docs[m.line] };
    const own = Object.keys(d);
    if (m.op === 'replace') d[own[keys.indexOf(m.key) % own.length] ?? 'run'] = m.value;
    else if (m.op === 'delete') delete d[own[keys.indexOf(m.key) % own.length]];
    else if (m.op === 'add') d[m.key] = m.value;
    else d.type = m.type;
    return JSON.stringify(d);
  };
  return {
    name: 'receipts',
    run: (text) => {
      let results;
      try {
        results = core.parseNdjson(text);
      } catch (e) {
        throw new Finding(`parseNdjson threw ${e?.constructor?.name}: ${e?.message}`);
      }
      if (!Array.isArray(results)) throw new Finding('parseNdjson did not return an array');
      let last = 0;
      let valid = 0;
      for (const { line, result } of results) {
        if (!Number.isInteger(line) || line <= last) throw new Finding(`bad line number ${line}`);
        last = line;
        if (result.ok === true) {
          let again;
          try {
            again = core.validateReceipt(JSON.parse(JSON.stringify(result.receipt)));
          } catch (e) {
            throw new Finding(`validateReceipt threw on an accepted receipt: ${e?.message}`);
          }
          if (!again.ok) throw new Finding(`an accepted receipt does not validate again: ${again.error}`);
          if (core.receiptCanon(again.receipt) !== core.receiptCanon(result.receipt)) throw new Finding('an accepted receipt changes canon on re-validation');
          valid++;
        } else if (result.ok !== false || typeof result.error !== 'string' || result.error.length === 0) throw new Finding('a refused line without an error');
      }
      if (results.length === 0) return 'valid (no lines)';
      return valid === results.length ? 'valid' : valid > 0 ? 'valid+ReceiptParse{ok:false}' : 'ReceiptParse{ok:false}';
    },
    strategies: [
      { name: 'random text', weight: 3, arb: fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), fc.string({ unit: syntaxChar, maxLength: 60 })), input: (v) => v },
      { name: 'random JSON lines', weight: 3, arb: fc.array(fc.json({ maxDepth: 3 }), { maxLength: 4 }), input: (v) => v.join('\n') },
      { name: 'receipt-shaped random objects', weight: 8, arb: fc.array(receiptLike, { minLength: 1, maxLength: 3 }), input: (v) => v.join('\n') },
      { name: 'real lines with a field replaced, removed or added', weight: 9, arb: fc.array(lineMutation, { minLength: 1, maxLength: 3 }), input: (ms) => ms.map(mutateLine).join('\n') },
      { name: 'the real file with characters edited', weight: 6, arb: fc.array(charEdit, { minLength: 1, maxLength: 4 }), input: (edits) => applyCharEdits(ndjson, edits) },
      {
        name: 'deep nesting and long lines',
        weight: 1,
        arb: fc.record({ depth: fc.integer({ min: 1, max: 20000 }), kind: fc.constantFrom('array', 'object'), field: fc.constantFrom(...keys) }),
        input: ({ depth, kind, field }) => `${deepText(depth, kind)}\n${JSON.stringify({ ...docs[0], [field]: deeplyNested(Math.min(depth, 3000), kind, 'x') })}\n${JSON.stringify({ ...docs[1], run: 'r'.repeat(depth) })}`,
      },
    ],
  };
}

function contractsTarget(core) {
  const dir = join(ROOT, 'contracts');
  const files = readdirSync(dir).filter((n) => n.endsWith('.yaml')).sort().map((n) => ({ name: n, text: readFileSync(join(dir, n), 'utf8') }));
  const docs = files.map((f) => parseYaml(f.text));
  const paths = docs.map((d) => jsonPaths(d));
  const agentNames = [...new Set(docs.flatMap((d) => d.agents))];
  const fileIndex = fc.nat(files.length - 1);
  const run = ({ text, file }) => {
    let c;
    try {
      c = core.parseContract(text, file);
    } catch (e) {
      if (e instanceof core.ContractError) {
        if (!Array.isArray(e.issues) || e.issues.length === 0) throw new Finding('ContractError without issues');
        for (const i of e.issues) if (!(i.line >= 1 && i.col >= 1) || typeof i.message !== 'string') throw new Finding(`badly located issue ${JSON.stringify(i)}`);
        return 'ContractError';
      }
      throw new Finding(`parseContract threw ${e?.constructor?.name}: ${e?.message}`);
    }
    if (!/^[0-9a-f]{64}$/.test(c.hash) || typeof c.contract !== 'string' || typeof c.version !== 'string' || c.phases.length === 0) throw new Finding('invalid contract');
    let again;
    try {
      again = core.contractFromCanonical(c.canonical);
    } catch (e) {
      throw new Finding(`a valid contract's canonical content does not parse again: ${e?.message}`);
    }
    if (again.hash !== c.hash) throw new Finding("a valid contract's canonical content re-parses to another hash");
    return 'valid';
  };
  const asYaml = (f) => ({ text: f, file: 'fuzz.yaml' });
  const swapIdentity = fc.record({ file: fileIndex, from: fc.constantFrom(...agentNames), to: fc.oneof(fc.constantFrom(...agentNames), fc.constantFrom('ghost', 'a b', '', 'x:y')) });
  return {
    name: 'contracts',
    run,
    strategies: [
      { name: 'random text', weight: 2, arb: fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), fc.string({ unit: syntaxChar, maxLength: 80 })), input: (v) => asYaml(v) },
      {
        name: 'random YAML and JSON documents',
        weight: 3,
        arb: fc.tuple(fc.jsonValue({ maxDepth: 4 }), fc.boolean()),
        input: ([v, json]) => (json ? { text: JSON.stringify(v) ?? 'null', file: 'fuzz.json' } : asYaml(stringifyYaml(v))),
      },
      { name: 'real files with characters edited', weight: 6, arb: fc.tuple(fileIndex, fc.array(charEdit, { minLength: 1, maxLength: 4 })), input: ([i, e]) => asYaml(applyCharEdits(files[i].text, e)) },
      { name: 'real files with lines deleted, duplicated, swapped or re-indented', weight: 5, arb: fc.tuple(fileIndex, fc.array(lineEdit, { minLength: 1, maxLength: 3 })), input: ([i, e]) => asYaml(applyLineEdits(files[i].text, e)) },
      {
        name: 'real documents with one subtree replaced or removed (as YAML or JSON)',
        weight: 6,
        arb: fc.tuple(fileIndex, fc.nat(), fc.option(fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(...agentNames), fc.constantFrom('a -> b : return', 'orchestrator -> [researcher, verifier] : delegate', '5m', '10x')), { freq: 4 }), fc.boolean()),
        input: ([i, p, v, json]) => {
          const path = paths[i][p % paths[i].length];
          const d = v === null ? deleteAt(docs[i], path) : replaceAt(docs[i], path, v);
          return json ? { text: JSON.stringify(d) ?? 'null', file: 'fuzz.json' } : asYaml(stringifyYaml(d ?? null));
        },
      },
      {
        name: 'identity swaps in real files',
        weight: 2,
        arb: fc.array(swapIdentity, { minLength: 1, maxLength: 3 }),
        input: (swaps) => asYaml(swaps.reduce((t, s) => t.split(s.from).join(s.to), files[swaps[0].file].text)),
      },
      {
        name: 'deep nesting, alias bombs, long ids',
        weight: 1,
        arb: fc.record({ depth: fc.integer({ min: 1, max: 20000 }), kind: fc.constantFrom('flow', 'block', 'json', 'alias', 'long') }),
        input: ({ depth, kind }) => {
          if (kind === 'flow') return asYaml(`contract: ${'['.repeat(depth)}${']'.repeat(depth)}\n`);
          if (kind === 'block') return asYaml(Array.from({ length: Math.min(depth, 2000) }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n') + ' 1\n');
          if (kind === 'json') return { text: deepText(depth, 'array'), file: 'fuzz.json' };
          if (kind === 'alias') {
            const levels = Math.min(2 + (depth % 9), 10);
            let y = 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n';
            for (let l = 1; l < levels; l++) y += `a${l}: &a${l} [${Array(10).fill(`*a${l - 1}`).join(', ')}]\n`;
            return asYaml(y + files[0].text);
          }
          return asYaml(files[0].text.replace(/contract: .*/, `contract: ${'c'.repeat(depth)}`));
        },
      },
    ],
  };
}

// ----------------------------------------------------------------------------------------------------------------
// Worker: runs one target, counting cases in shared memory for the watchdog.
// ----------------------------------------------------------------------------------------------------------------

const preview = (input) => {
  const s = typeof input === 'string' ? JSON.stringify(input) : input instanceof Uint8Array ? `bytes(${input.length}):${Buffer.from(input.subarray(0, 96)).toString('hex')}` : JSON.stringify(input);
  return s.length > 400 ? `${s.slice(0, 400)}... (${s.length} chars)` : s;
};
const sizeOf = (input) => (typeof input === 'string' ? input.length : input instanceof Uint8Array ? input.length : input.text.length);

/** A finding's kind, without the input-dependent part of the message (so repeats group together). */
const findingKind = (message) => message.replace(/^(.*?threw \w+: [^:("]*|[^:("]*).*$/s, '$1').trim();

async function runTarget({ target: name, cases, seed, counter }) {
  const progress = new Int32Array(counter);
  // Library warnings (e.g. yaml's "Keys with collection values will be stringified") are counted, not printed.
  let warnings = 0;
  process.removeAllListeners('warning');
  process.on('warning', () => warnings++);
  const otlp = await import('../dist/otlp/index.js');
  const core = await import('../dist/core/index.js');
  const target = { 'otlp-protobuf': otlpProtobufTarget, 'otlp-json': otlpJsonTarget, receipts: receiptsTarget, contracts: contractsTarget }[name](name.startsWith('otlp') ? otlp : core);
  const totalWeight = target.strategies.reduce((n, s) => n + s.weight, 0);
  const outcomes = {};
  const strategies = [];
  const findings = new Map(); // kind -> { count, strategies, smallest input }
  const times = new Float64Array(cases + 64);
  let maxMs = 0;
  let maxAt = null;
  let totalMs = 0;
  let n = 0;
  for (const [k, s] of target.strategies.entries()) {
    let strategyMs = 0;
    let strategyMax = 0;
    const numRuns = Math.max(1, Math.round((cases * s.weight) / totalWeight));
    // A finding is recorded and the run goes on, so that one defect does not hide the others; the smallest input
    // of each kind of finding is kept as its example.
    const result = fc.check(
      fc.property(s.arb, (value) => {
        const input = s.input(value);
        Atomics.add(progress, 0, 1);
        const t = performance.now();
        let outcome;
        try {
          outcome = target.run(input);
        } catch (e) {
          if (!(e instanceof Finding)) throw e;
          outcome = 'FINDING';
          const kind = findingKind(e.message);
          const f = findings.get(kind) ?? { kind, count: 0, strategies: new Set(), size: Infinity };
          f.count++;
          f.strategies.add(s.name);
          if (sizeOf(input) < f.size) Object.assign(f, { size: sizeOf(input), error: e.message, example: preview(input), seed: seed + k });
          findings.set(kind, f);
        } finally {
          const ms = performance.now() - t;
          totalMs += ms;
          strategyMs += ms;
          if (ms > strategyMax) strategyMax = ms;
          if (n < times.length) times[n] = ms;
          n++;
          if (ms > maxMs) {
            maxMs = ms;
            maxAt = { strategy: s.name, size: sizeOf(input), input };
          }
        }
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }),
      { numRuns, seed: seed + k },
    );
    strategies.push({ name: s.name, cases: numRuns, maxMs: strategyMax, meanUs: (strategyMs / numRuns) * 1000 });
    if (result.failed) throw new Error(`harness error in ${s.name}: ${result.errorInstance?.message ?? result.error}`);
  }
  await new Promise((resolve) => setImmediate(resolve)); // let queued warning events arrive
  if (maxAt) maxAt = { strategy: maxAt.strategy, size: maxAt.size, example: preview(maxAt.input) };
  const sorted = times.slice(0, Math.min(n, times.length)).sort();
  const p99Ms = sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] : 0;
  return {
    target: name,
    cases: n,
    outcomes,
    maxMs,
    maxAt,
    p99Ms,
    meanUs: n ? (totalMs / n) * 1000 : 0,
    strategies,
    warnings,
    findings: [...findings.values()].map(({ kind, count, strategies: st, error, example, seed: fseed }) => ({ kind, count, strategies: [...st], seed: fseed, error, example })),
  };
}

if (!isMainThread) {
  runTarget(workerData).then(
    (r) => parentPort.postMessage(r),
    (e) => parentPort.postMessage({ target: workerData.target, cases: 0, outcomes: {}, crashed: `${e?.constructor?.name}: ${e?.message}` }),
  );
}

// ----------------------------------------------------------------------------------------------------------------
// Main: one worker per target, in turn, under a watchdog.
// ----------------------------------------------------------------------------------------------------------------

const SHARE = { 'otlp-protobuf': 0.3, 'otlp-json': 0.25, receipts: 0.25, contracts: 0.2 };

function runInWorker(target, cases, seed, hangMs) {
  const counter = new SharedArrayBuffer(4);
  const progress = new Int32Array(counter);
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { target, cases, seed, counter } });
  const started = performance.now();
  return new Promise((resolve) => {
    let last = -1;
    let lastChange = performance.now();
    const watch = setInterval(() => {
      const now = Atomics.load(progress, 0);
      if (now !== last) {
        last = now;
        lastChange = performance.now();
      } else if (performance.now() - lastChange > hangMs) {
        clearInterval(watch);
        worker.terminate();
        resolve({ target, cases: now, outcomes: {}, hang: { caseIndex: now, seed, stuckMs: Math.round(performance.now() - lastChange) }, seconds: (performance.now() - started) / 1000 });
      }
    }, 250);
    worker.once('message', (r) => {
      clearInterval(watch);
      resolve({ ...r, seconds: (performance.now() - started) / 1000 });
    });
    worker.once('error', (e) => {
      clearInterval(watch);
      resolve({ target, cases: Atomics.load(progress, 0), outcomes: {}, crashed: `${e?.constructor?.name}: ${e?.message}`, seconds: (performance.now() - started) / 1000 });
    });
  });
}

async function main() {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string', default: '120000' },
      seed: { type: 'string', default: String(Date.now() % 2 ** 31) },
      'hang-ms': { type: 'string', default: '10000' },
      only: { type: 'string' },
    },
  });
  const total = Number(values.cases);
  const seed = Number(values.seed);
  const hangMs = Number(values['hang-ms']);
  const targets = values.only ? values.only.split(',') : Object.keys(SHARE);
  const share = targets.reduce((n, t) => n + SHARE[t], 0);
  const results = [];
  for (const t of targets) {
    if (!(t in SHARE)) throw new Error(`unknown target ${t} (${Object.keys(SHARE).join(', ')})`);
    const r = await runInWorker(t, Math.round((total * SHARE[t]) / share), seed, hangMs);
    results.push(r);
    const outcomes = Object.entries(r.outcomes).map(([k, v]) => `${k} ${v}`).join(', ');
    process.stdout.write(
      `${t.padEnd(14)} ${String(r.cases).padStart(7)} cases  ${outcomes}\n` +
        (r.maxMs !== undefined ? `${''.padEnd(14)} per case: max ${r.maxMs.toFixed(2)} ms (${r.maxAt?.strategy}, ${r.maxAt?.size} bytes/chars), p99 ${r.p99Ms.toFixed(3)} ms, mean ${r.meanUs.toFixed(1)} µs; ${r.seconds.toFixed(1)} s${r.warnings ? `; ${r.warnings} process warning(s) from libraries` : ''}\n` : '') +
        (r.findings ?? []).map((f) => `${''.padEnd(14)} FINDING x${f.count} [${f.strategies.join('; ')}]: ${f.error}\n${''.padEnd(14)}   smallest input: ${f.example}\n`).join('') +
        (r.hang ? `${''.padEnd(14)} HANG: case ${r.hang.caseIndex} ran over ${hangMs} ms (seed ${seed})\n` : '') +
        (r.crashed ? `${''.padEnd(14)} WORKER CRASHED: ${r.crashed}\n` : ''),
    );
  }
  const cases = results.reduce((n, r) => n + r.cases, 0);
  const findings = results.reduce((n, r) => n + (r.findings?.length ?? 0) + (r.hang ? 1 : 0) + (r.crashed ? 1 : 0), 0);
  process.stdout.write(`total          ${String(cases).padStart(7)} cases, ${findings} finding(s) (seed ${seed})\n`);
  process.stdout.write(
    JSON.stringify({
      bench: 'fuzz',
      seed,
      cases,
      findings,
      maxMs: Math.max(0, ...results.map((r) => r.maxMs ?? 0)),
      targets: results.map((r) => ({ target: r.target, cases: r.cases, outcomes: r.outcomes, maxMs: r.maxMs, maxAt: r.maxAt ?? null, p99Ms: r.p99Ms, meanUs: r.meanUs, seconds: r.seconds, warnings: r.warnings ?? 0, strategies: r.strategies, findings: r.findings ?? [], hang: r.hang ?? null, crashed: r.crashed ?? null })),
    }) + '\n',
  );
  process.exitCode = findings ? 1 : 0;
}

if (isMainThread) await main();
