/**
 * A quick sample of bench/fuzz.mjs for the receipt and contract parsers (the OTLP decoders have
 * test/otlp.fuzz.test.ts): random and mutated inputs, built from the real fixtures, end in a valid result or the
 * parser's own clean error (a ReceiptParse {ok:false}, a ContractError), never another exception.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ContractError, contractFromCanonical, parseContract, parseNdjson, receiptCanon, validateReceipt } from '../src/core/index.js';
import { ROOT } from './helpers/server.js';

// ---------------------------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------------------------

const syntaxChar = fc.constantFrom('{', '}', '[', ']', ':', ',', '"', "'", '\\', '\n', '\r', '\t', ' ', '-', '#', '&', '*', '!', '|', '>', '?', '\u0000', '\u2028', '\ud800', 'null', '->');
const charEdit = fc.record({ at: fc.nat(), drop: fc.nat(4), insert: fc.oneof(fc.string({ maxLength: 3 }), syntaxChar, fc.string({ unit: syntaxChar, maxLength: 5 })) });
type CharEdit = { at: number; drop: number; insert: string };

function applyCharEdits(text: string, edits: CharEdit[]): string {
  return edits.reduce((t, e) => {
    const i = e.at % (t.length + 1);
    return t.slice(0, i) + e.insert + t.slice(i + e.drop);
  }, text);
}

const lineEdit = fc.record({ op: fc.constantFrom('delete', 'duplicate', 'swap', 'indent', 'dedent'), at: fc.nat(), other: fc.nat() });
type LineEdit = { op: 'delete' | 'duplicate' | 'swap' | 'indent' | 'dedent'; at: number; other: number };

function applyLineEdits(text: string, edits: LineEdit[]): string {
  const lines = text.split('\n');
  for (const e of edits) {
    const i = e.at % lines.length;
    const j = e.other % lines.length;
    if (e.op === 'delete') lines.splice(i, 1);
    else if (e.op === 'duplicate') lines.splice(j, 0, lines[i]);
    else if (e.op === 'swap') [lines[i], lines[j]] = [lines[j], lines[i]];
    else if (e.op === 'indent') lines[i] = `  ${lines[i]}`;
    else lines[i] = lines[i].replace(/^ {1,2}/, '');
  }
  return lines.join('\n');
}

type Path = (string | number)[];
function jsonPaths(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => jsonPaths(v, [...prefix, i], out));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) jsonPaths(v, [...prefix, k], out);
  return out;
}

function replaceAt(doc: unknown, path: Path, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const copy = structuredClone(doc) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]] = replacement;
  return copy;
}

// ---------------------------------------------------------------------------------------------------------------
// Receipts
// ---------------------------------------------------------------------------------------------------------------

const ndjson = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8');
const driftDocs: Record<string, unknown>[] = ndjson.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const receiptKeys = [...new Set(driftDocs.flatMap((d) => Object.keys(d)))].concat(['handoff', 'attempt', 'state', 'leaseExpiresAt', 'units', 'budgetOp']);
const receiptTypes = ['run.start', 'edge', 'wait', 'outcome', 'run.end', 'gap', 'handoff', 'bogus'];
const fieldValue = fc.oneof(
  fc.constantFrom('orchestrator', 'has space', '../etc/passwd', 'x'.repeat(201), 'a -> b : return', '2026-02-30T00:00:00Z', '2026-01-01T00:00:00Z', 3, -1, 1.5, true, null),
  fc.string({ maxLength: 10 }),
  fc.jsonValue({ maxDepth: 2 }),
);

/** Each line parses to a receipt that validates again to the same canon, or to a refusal with a reason. */
function expectCleanNdjson(text: string): void {
  const results = parseNdjson(text);
  let last = 0;
  for (const { line, result } of results) {
    expect(line).toBeGreaterThan(last);
    last = line;
    if (result.ok) {
      const again = validateReceipt(JSON.parse(JSON.stringify(result.receipt)));
      expect(again.ok).toBe(true);
      if (again.ok) expect(receiptCanon(again.receipt)).toBe(receiptCanon(result.receipt));
    } else {
      expect(result.error.length).toBeGreaterThan(0);
    }
  }
}

describe('receipt NDJSON parser under random and mutated input', () => {
  it('random text and random JSON lines', () => {
    fc.assert(fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), fc.string({ unit: syntaxChar, maxLength: 60 })), expectCleanNdjson), { numRuns: 400 });
    fc.assert(fc.property(fc.array(fc.json({ maxDepth: 3 }), { maxLength: 4 }), (lines) => expectCleanNdjson(lines.join('\n'))), { numRuns: 300 });
  });

  it('receipt-shaped objects with random fields', () => {
    const receiptLike = fc.record({ type: fc.constantFrom(...receiptTypes), fields: fc.dictionary(fc.oneof(fc.constantFrom(...receiptKeys), fc.string({ maxLength: 5 })), fieldValue, { maxKeys: 8 }) });
    fc.assert(fc.property(fc.array(receiptLike, { minLength: 1, maxLength: 3 }), (rs) => expectCleanNdjson(rs.map(({ type, fields }) => JSON.stringify({ type, ...fields })).join('\n'))), { numRuns: 500 });
  });

  it('real receipts with one field replaced, removed or added', () => {
    const mutation = fc.record({ line: fc.nat(driftDocs.length - 1), op: fc.constantFrom('replace', 'delete', 'add'), key: fc.constantFrom(...receiptKeys), value: fieldValue });
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (ms) => {
        const lines = ms.map((m) => {
          const d = { ...driftDocs[m.line] };
          if (m.op === 'delete') delete d[m.key];
          else d[m.key] = m.value;
          return JSON.stringify(d);
        });
        expectCleanNdjson(lines.join('\n'));
      }),
      { numRuns: 500 },
    );
  });

  it('the real file with characters edited', () => {
    fc.assert(fc.property(fc.array(charEdit, { minLength: 1, maxLength: 4 }), (edits) => expectCleanNdjson(applyCharEdits(ndjson, edits))), { numRuns: 300 });
  });

  it('validateReceipt takes any value', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const r = validateReceipt(v);
        expect(typeof r.ok).toBe('boolean');
      }),
      { numRuns: 500 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------------------------------------------

const contractFiles = readdirSync(join(ROOT, 'contracts'))
  .filter((n) => n.endsWith('.yaml'))
  .sort()
  .map((n) => readFileSync(join(ROOT, 'contracts', n), 'utf8'));
const contractDocs: unknown[] = contractFiles.map((t) => parseYaml(t));
const contractPaths = contractDocs.map((d) => jsonPaths(d));
const fileIndex = fc.nat(contractFiles.length - 1);

/** A valid contract whose canonical content round-trips to the same hash, or a ContractError with located issues. */
function expectCleanContract(text: string, file = 'fuzz.yaml'): void {
  let contract;
  try {
    contract = parseContract(text, file);
  } catch (e) {
    if (!(e instanceof ContractError)) throw new Error(`parseContract threw ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`);
    expect(e.issues.length).toBeGreaterThan(0);
    for (const i of e.issues) {
      expect(i.line).toBeGreaterThanOrEqual(1);
      expect(i.col).toBeGreaterThanOrEqual(1);
    }
    return;
  }
  expect(contract.hash).toMatch(/^[0-9a-f]{64}$/);
  expect(contractFromCanonical(contract.canonical).hash).toBe(contract.hash);
}

describe('contract parser under random and mutated input', () => {
  it('random text and random YAML / JSON documents', () => {
    fc.assert(fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 120 }), fc.string({ unit: syntaxChar, maxLength: 60 })), (t) => expectCleanContract(t)), { numRuns: 300 });
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.boolean(), (v, json) => (json ? expectCleanContract(JSON.stringify(v), 'fuzz.json') : expectCleanContract(stringifyYaml(v)))),
      { numRuns: 200 },
    );
  });

  it('real contract files with characters or lines edited', () => {
    fc.assert(fc.property(fileIndex, fc.array(charEdit, { minLength: 1, maxLength: 3 }), (i, edits) => expectCleanContract(applyCharEdits(contractFiles[i], edits))), { numRuns: 300 });
    fc.assert(fc.property(fileIndex, fc.array(lineEdit, { minLength: 1, maxLength: 3 }), (i, edits) => expectCleanContract(applyLineEdits(contractFiles[i], edits))), { numRuns: 300 });
  });

  it('real contract documents with one subtree replaced', () => {
    fc.assert(
      fc.property(fileIndex, fc.nat(), fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('orchestrator', 'ghost', 'a -> b : return', '5m', '10x')), (i, p, v) => {
        const paths = contractPaths[i];
        expectCleanContract(stringifyYaml(replaceAt(contractDocs[i], paths[p % paths.length], v)));
      }),
      { numRuns: 300 },
    );
  });

  // Inputs bench/fuzz.mjs found; each must be a clean ContractError (or, for an id, a contract that round-trips).
  it('a YAML alias without its anchor is a ContractError', () => {
    expectCleanContract('*a\n');
    expectCleanContract(contractFiles[0].replace(/^owner: .*$/m, 'owner: *owner'));
  });

  it('a YAML alias bomb is a ContractError', () => {
    let y = 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n';
    for (let l = 1; l < 6; l++) y += `a${l}: &a${l} [${Array(10).fill(`*a${l - 1}`).join(', ')}]\n`;
    expectCleanContract(y + contractFiles[0]);
  });

  it('an agent id that edge text cannot spell is refused at load, or its pinned content round-trips', () => {
    for (const agent of ['svc:a', '-lead']) {
      const text = `contract: c\nversion: "1"\nowner: o\nagents: [o, "${agent}"]\nallow:\n  - { from: o, to: "${agent}", kind: delegate }\nphases:\n  p:\n    expect:\n      - { from: o, to: "${agent}", kind: delegate }\n`;
      expectCleanContract(text);
    }
  });
});
