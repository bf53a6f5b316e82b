import { sha256Hex } from './sha256.js';
import { closestName } from './suggest.js';
import { LineCounter, parseDocument, isMap, isPair, isScalar, isSeq, type Document, type Node as YamlNode } from 'yaml';
import { z } from 'zod';
import { EDGE_KINDS, type EdgeKind } from './types.js';
import { AgentId } from './receipt.js';
import { EdgeSyntaxError, compactKey, parseDuration, parseEdge, specKey, tripleKey, type EdgeSpec } from './edge.js';

// ---------------------------------------------------------------------------------------------
// Schema: the canonical (JSON) form of a contract file. YAML shorthand entries (`- a -> b : kind`)
// are rewritten to `{edge: "a -> b : kind", ...}` before validation, keeping their position.
// ---------------------------------------------------------------------------------------------

const Id = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.:@\/-]+$/, 'an identity: letters, digits, _ . : @ / -');
/** Agents appear in edge strings and receipts: the receipts' agent id rule. */
const Agent = AgentId;
const EdgeText = z.string().min(1).describe('"from -> to : kind", or "from -> [to1, to2] : kind" for a bounded choice');
const Max = z.number().int().min(1).describe('how many observations (distinct event ids) the entry allows; default 1');
/** A bare number (`within: 10`) has no unit: say which texts would do instead of zod's "expected string". */
const durationTypeError = (iss: { input?: unknown }) =>
  typeof iss.input === 'number'
    ? `a duration needs a unit: write "${iss.input}s" (seconds) or "${iss.input}ms", "${iss.input}m", "${iss.input}h", "${iss.input}d"; a bare number is not a duration`
    : undefined;
const Duration = z.string({ error: durationTypeError }).regex(/^\d+(ms|s|m|h|d)$/, 'a duration: an integer with ms, s, m, h or d (e.g. 30s, 10m, 2h)');

const AllowEntrySchema = z.union([
  EdgeText,
  z.strictObject({ edge: EdgeText, max: Max.optional() }),
  z.strictObject({ from: Agent, to: z.union([Agent, z.array(Agent).min(1)]), kind: z.enum(EDGE_KINDS), max: Max.optional() }),
]);

const ExpectOptions = {
  after: z.array(EdgeText).optional().describe('edges (as written in this plan) that must be observed first; [] starts a parallel branch'),
  dependency: Agent.optional().describe('the agent being waited on; needs `within`'),
  within: Duration.optional().describe('deadline, counted from the edge becoming due'),
};
const ExpectEntrySchema = z.union([
  EdgeText,
  z.strictObject({ edge: EdgeText, ...ExpectOptions }),
  z.strictObject({ from: Agent, to: z.union([Agent, z.array(Agent).min(1)]), kind: z.enum(EDGE_KINDS), ...ExpectOptions }),
]);

const PhaseSchema = z.strictObject({
  outcome: z.enum(['required', 'optional']).default('required'),
  expect: z.array(ExpectEntrySchema).default([]),
  progress_within: Duration.optional().describe('run-level stall limit: the plan must advance (start or a first observation of an expected edge) within this window, else `incomplete` (no_progress)'),
  max_duration: Duration.optional().describe('run-level limit: a run still unfinished this long after its start is `incomplete` (max_duration_exceeded)'),
});

export const ContractFileSchema = z
  .strictObject({
    contract: Id.describe('contract id'),
    version: z
      .union([z.string().min(1), z.number()])
      .transform((v) => String(v))
      .describe('(contract, version) names exactly one content; quote it in YAML'),
    retired: z.boolean().default(false),
    candidate: z.boolean().default(false).describe('a draft under review (e.g. from `propose`): never pinned, only shadow-evaluated'),
    owner: Agent.describe('the final accountable owner (the run\'s parent)'),
    agents: z.array(Agent).min(1),
    allow: z.array(AllowEntrySchema).default([]),
    phases: z.record(Id, PhaseSchema).refine((p) => Object.keys(p).length > 0, 'at least one phase is required'),
  })
  .describe('topology-audit contract');

export type ContractFile = z.output<typeof ContractFileSchema>;

export function contractJsonSchema(): unknown {
  return z.toJSONSchema(ContractFileSchema, { io: 'input', target: 'draft-2020-12' });
}

// ---------------------------------------------------------------------------------------------
// The normalised, validated contract.
// ---------------------------------------------------------------------------------------------

export interface AllowRule {
  index: number;
  spec: EdgeSpec;
  /** As written, canonical spacing. */
  key: string;
  max: number;
}

export interface PlanStep {
  index: number;
  spec: EdgeSpec;
  key: string;
  /** Indexes of the steps this one comes after. */
  after: number[];
  dependency?: string;
  withinMs?: number;
}

export interface Phase {
  name: string;
  outcome: 'required' | 'optional';
  plan: PlanStep[];
  /** `progress_within` in ms: the plan must advance within this window (semantics 2 rule 9). */
  progressWithinMs?: number;
  /** `max_duration` in ms: a run unfinished this long after its start is incomplete. */
  maxDurationMs?: number;
}

export interface Contract {
  contract: string;
  version: string;
  retired: boolean;
  /** A draft under review: never a pin (default or by run.start), only shadow-evaluated. */
  candidate: boolean;
  owner: string;
  agents: string[];
  agentSet: ReadonlySet<string>;
  allow: AllowRule[];
  /** tripleKey(from,to,kind) -> allow rule */
  allowByEdge: ReadonlyMap<string, AllowRule>;
  phases: Phase[];
  /** sha256 of the canonical content. */
  hash: string;
  /** Canonical JSON content (what the hash covers). */
  canonical: string;
  file?: string;
  /** Problems that do not refuse the contract (e.g. a plan that can stay `working` forever), located like issues. */
  warnings?: ContractIssue[];
}

export interface ContractIssue {
  file: string;
  line: number;
  col: number;
  /** Field path, e.g. `allow[2].to`. */
  field: string;
  message: string;
}

export class ContractError extends Error {
  constructor(public readonly issues: ContractIssue[]) {
    super(issues.map(formatIssue).join('\n'));
  }
}

export function formatIssue(i: ContractIssue): string {
  return `${i.file}:${i.line}:${i.col}: ${i.field || '(root)'}: ${i.message}`;
}

type Path = (string | number)[];

export function fieldPath(path: Path): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** Rewrite YAML shorthand `{ "a -> b": kind, ...options }` into `{ edge: "a -> b : kind", ...options }`. */
function expandShorthand(entry: unknown): unknown {
  if (!entry || typeof entry !== 'object' || Array.isArray(entry)) return entry;
  const obj = entry as Record<string, unknown>;
  const edgeKeys = Object.keys(obj).filter((k) => k.includes('->'));
  if (edgeKeys.length !== 1) return entry;
  const k = edgeKeys[0];
  const kind = obj[k];
  // A kind that is not text (a nested mapping, say) still becomes an edge string, which then fails to parse with a clear error.
  const out: Record<string, unknown> = { edge: `${k} : ${typeof kind === 'string' || typeof kind === 'number' ? kind : JSON.stringify(kind) ?? 'null'}` };
  for (const [key, v] of Object.entries(obj)) if (key !== k) out[key] = v;
  return out;
}

function expandAll(raw: unknown): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const doc = { ...(raw as Record<string, unknown>) };
  if (Array.isArray(doc.allow)) doc.allow = doc.allow.map(expandShorthand);
  if (doc.phases && typeof doc.phases === 'object' && !Array.isArray(doc.phases)) {
    const phases: Record<string, unknown> = {};
    for (const [name, ph] of Object.entries(doc.phases as Record<string, unknown>)) {
      if (ph && typeof ph === 'object' && !Array.isArray(ph) && Array.isArray((ph as any).expect)) {
        phases[name] = { ...(ph as object), expect: (ph as any).expect.map(expandShorthand) };
      } else phases[name] = ph;
    }
    doc.phases = phases;
  }
  return doc;
}

/** Phase names in source order: a JS object would put integer-like names ("2") first. */
function phaseOrder(doc: Document): string[] {
  const phases = isMap(doc.contents) ? doc.contents.get('phases', true) : undefined;
  return isMap(phases) ? phases.items.map((p) => String(isScalar(p.key) ? p.key.value : p.key)) : [];
}

/** Locates a field path in the source text, for line:col in errors. */
type Locator = (path: Path) => { line: number; col: number };

function yamlLocator(doc: Document, lc: LineCounter): Locator {
  return (path) => {
    let node: unknown = doc.contents;
    let offset = (doc.contents as YamlNode | null)?.range?.[0] ?? 0;
    for (const seg of path) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
        if (pair) {
          offset = (pair.key as YamlNode).range?.[0] ?? offset;
          node = pair.value;
          continue;
        }
        if (seg === 'edge') {
          // shorthand entry: the edge is the key containing "->"
          const sh = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value).includes('->'));
          if (sh) offset = (sh.key as YamlNode).range?.[0] ?? offset;
        }
        break;
      } else if (isSeq(node) && typeof seg === 'number' && seg < node.items.length) {
        node = node.items[seg];
        offset = (node as YamlNode | null)?.range?.[0] ?? offset;
      } else break;
    }
    const pos = lc.linePos(offset);
    return { line: pos.line, col: pos.col };
  };
}

/** JSON is YAML 1.2 flow syntax: locate paths in it with the YAML document's node ranges. */
function jsonLocator(text: string): Locator {
  const lc = new LineCounter();
  return yamlLocator(parseDocument(text, { lineCounter: lc }), lc);
}

/** Parse contract text (YAML or JSON) into a validated contract, or throw ContractError with every issue. */
export function parseContract(text: string, file = '<contract>'): Contract {
  const isJson = /\.json$/i.test(file) || /^\s*\{/.test(text);
  let raw: unknown;
  let locate: Locator;
  let phaseNames: string[];
  if (isJson) {
    try {
      raw = JSON.parse(text);
    } catch (e) {
      const m = /position (\d+)/.exec(String((e as Error).message));
      const pos = m ? Number(m[1]) : 0;
      const before = text.slice(0, pos);
      throw new ContractError([
        { file, line: before.split('\n').length, col: pos - before.lastIndexOf('\n'), field: '', message: `invalid JSON: ${(e as Error).message}` },
      ]);
    }
    locate = jsonLocator(text);
    phaseNames = phaseOrder(parseDocument(text));
  } else {
    const lc = new LineCounter();
    const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
    if (doc.errors.length > 0) {
      throw new ContractError(
        doc.errors.map((e) => {
          const pos = lc.linePos(e.pos[0]);
          return { file, line: pos.line, col: pos.col, field: '', message: `invalid YAML: ${e.message.split('\n')[0]}` };
        }),
      );
    }
    try {
      raw = doc.toJS();
    } catch (e) {
      // e.g. an alias without an anchor, or an alias bomb stopped by the YAML library's alias-count guard
      throw new ContractError([{ file, line: 1, col: 1, field: '', message: `invalid YAML: ${(e as Error).message.split('\n')[0]}` }]);
    }
    locate = yamlLocator(doc, lc);
    phaseNames = phaseOrder(doc);
  }
  const issues: ContractIssue[] = [];
  const add = (path: Path, message: string) => {
    const { line, col } = locate(path);
    issues.push({ file, line, col, field: fieldPath(path), message });
  };
  const expanded = expandAll(raw);
  const parsed = ContractFileSchema.safeParse(expanded);
  if (!parsed.success) {
    const schemaPaths = parsed.error.issues.flatMap((iss) => {
      // An unknown field is said at its own line, one issue per field, with the nearest known field (top level).
      if (iss.code === 'unrecognized_keys' && iss.path.length === 0) {
        return iss.keys.map((k) => {
          const near = closestName(k, Object.keys(ContractFileSchema.shape));
          add([k], `unknown field "${k}"${near ? `: did you mean "${near}"?` : ''}`);
          return [k] as Path;
        });
      }
      const leaf = specificIssue(iss);
      add(leaf.path, leaf.message);
      return [leaf.path];
    });
    for (const s of semanticIssuesBeside(expanded, schemaPaths, phaseNames)) add(s.path, s.message);
    throw new ContractError(dedupeIssues(issues).sort((a, b) => a.line - b.line || a.col - b.col));
  }
  const warnings: ContractIssue[] = [];
  const warn = (path: Path, message: string) => {
    const { line, col } = locate(path);
    warnings.push({ file, line, col, field: fieldPath(path), message });
  };
  const contract = buildContract(parsed.data, add, phaseNames, warn);
  if (issues.length > 0) throw new ContractError(issues);
  contract.file = file;
  if (warnings.length > 0) contract.warnings = warnings;
  return contract;
}

// ---------------------------------------------------------------------------------------------
// Semantic checks beside schema errors: the parts that fail the schema are left out (the field, or its
// whole entry when the entry cannot stand without it) and the rest is checked as usual, so one `validate`
// names every problem. A semantic check that would depend on a left-out part is not reported.
// ---------------------------------------------------------------------------------------------

const pathKey = (path: Path) => JSON.stringify(path);

/** The document without the values at `pruned` (original paths); arrays are compacted, `toOriginal` maps paths back. */
function pruneDoc(doc: unknown, pruned: ReadonlySet<string>): { doc: unknown; toOriginal: (path: Path) => Path } {
  const indexMaps = new Map<string, number[]>();
  const SKIP = Symbol('pruned');
  const copy = (v: unknown, at: Path): unknown => {
    if (pruned.has(pathKey(at))) return SKIP;
    if (Array.isArray(v)) {
      const kept: number[] = [];
      const out: unknown[] = [];
      v.forEach((item, i) => {
        const c = copy(item, [...at, i]);
        if (c === SKIP) return;
        out.push(c);
        kept.push(i);
      });
      indexMaps.set(pathKey(at), kept);
      return out;
    }
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, item] of Object.entries(v)) {
        const c = copy(item, [...at, k]);
        if (c !== SKIP) out[k] = c;
      }
      return out;
    }
    return v;
  };
  const toOriginal = (path: Path): Path => {
    const out: Path = [];
    for (const seg of path) {
      const map = typeof seg === 'number' ? indexMaps.get(pathKey(out)) : undefined;
      out.push(map && typeof seg === 'number' && map[seg] !== undefined ? map[seg] : seg);
    }
    return out;
  };
  return { doc: copy(doc, []), toOriginal };
}

function valueAt(doc: unknown, path: Path): unknown {
  let v: unknown = doc;
  for (const seg of path) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[String(seg)] : undefined;
  return v;
}

/** The entry a path belongs to: up to its deepest list element (`allow[2]`, `phases.main.expect[0]`), else the path. */
function entryOf(path: Path): Path {
  const last = path.map((s) => typeof s === 'number').lastIndexOf(true);
  return last >= 0 ? path.slice(0, last + 1) : path;
}

/** Checks that read a list other than the entry they report on (agents, allow, a phase's plan). */
function dependsOnLeftOut(message: string, leftOut: Path[], path: Path): boolean {
  const under = (top: string) => leftOut.some((p) => p[0] === top);
  if (/not declared in agents/.test(message) && under('agents')) return true;
  if (/not allowed by any allow entry|already allowed by/.test(message) && under('allow')) return true;
  if (path[0] === 'phases' && leftOut.some((p) => p[0] === 'phases' && p[1] === path[1])) return /is not an edge of phase|forms a cycle|after itself/.test(message);
  return false;
}

function semanticIssuesBeside(expanded: unknown, schemaPaths: Path[], phaseNames: string[]): { path: Path; message: string }[] {
  const leftOut = new Set<string>();
  const leftOutPaths: Path[] = [];
  let paths = schemaPaths;
  for (let round = 0; round < 4; round++) {
    for (const p of paths) {
      // a missing field (required) leaves out the value that lacks it
      let at = p;
      while (at.length > 0 && valueAt(expanded, at) === undefined) at = at.slice(0, -1);
      if (at.length === 0 || leftOut.has(pathKey(at))) at = entryOf(p).length < p.length ? entryOf(p) : at;
      if (at.length === 0 || leftOut.has(pathKey(at))) return [];
      leftOut.add(pathKey(at));
      leftOutPaths.push(at);
    }
    const { doc, toOriginal } = pruneDoc(expanded, leftOut);
    const parsed = ContractFileSchema.safeParse(doc);
    if (!parsed.success) {
      paths = parsed.error.issues.map((iss) => toOriginal(specificIssue(iss).path));
      continue;
    }
    const found: { path: Path; message: string }[] = [];
    buildContract(parsed.data, (path, message) => void found.push({ path: toOriginal(path), message }), phaseNames);
    const entries = leftOutPaths.map(entryOf);
    return found.filter((f) => !entries.some((e) => pathKey(f.path.slice(0, e.length)) === pathKey(e)) && !dependsOnLeftOut(f.message, leftOutPaths, f.path));
  }
  return [];
}

function dedupeIssues(issues: ContractIssue[]): ContractIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.field}|${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * An edge entry is a union of forms (string, {edge}, {from, to, kind}). Report the issue of the form
 * the input fits best, at its full path (e.g. `allow[0].kind`): forms whose type does not match the
 * input at all (a string form for an object) are not candidates.
 */
function specificIssue(iss: z.core.$ZodIssue): { path: Path; message: string } {
  if (iss.code === 'invalid_union') {
    const branches = ((iss as any).errors as z.core.$ZodIssue[][] | undefined) ?? [];
    const fitting = branches.filter((b) => !(b.length === 1 && b[0].code === 'invalid_type' && b[0].path.length === 0));
    const best = fitting.sort((a, b) => a.length - b.length)[0];
    if (best && best[0]) {
      const inner = specificIssue(best[0]);
      return { path: [...(iss.path as Path), ...inner.path], message: inner.message };
    }
  }
  return { path: iss.path as Path, message: describeZodIssue(iss) };
}

function describeZodIssue(iss: z.core.$ZodIssue): string {
  if (iss.code === 'unrecognized_keys') return `unknown field(s): ${iss.keys.join(', ')}`;
  if (iss.code === 'invalid_union') {
    // Prefer the most specific branch error.
    const branches = (iss as any).errors as z.core.$ZodIssue[][] | undefined;
    if (branches && branches.length) {
      const best = branches.slice().sort((a, b) => a.length - b.length)[0];
      if (best && best[0]) return `${best[0].path.length ? fieldPath(best[0].path as Path) + ': ' : ''}${describeZodIssue(best[0])}`;
    }
    return 'expected an edge: "from -> to : kind", {edge: ...}, or {from, to, kind}';
  }
  // zod says "Invalid input: expected string, received undefined" for a field that is not there.
  if (iss.code === 'invalid_type' && / received undefined$/.test(iss.message)) return 'required field is missing';
  return iss.message;
}

type Report = (path: Path, message: string) => void;
/** An edge entry read into its spec and its other fields (max, after, dependency, within), or null when it does not parse. */
type EntryReader = (entry: unknown, path: Path) => { spec: EdgeSpec; extra: Record<string, unknown> } | null;

/** The reader of edge entries (string, {edge}, {from, to, kind}): reports an unparsable edge, undeclared agents, a target twice. */
function edgeEntryReader(agentSet: ReadonlySet<string>, add: Report): EntryReader {
  return (entry, path) => {
    let spec: EdgeSpec;
    let extra: Record<string, unknown> = {};
    if (typeof entry === 'string') {
      try {
        spec = parseEdge(entry);
      } catch (e) {
        add(path, (e as Error).message);
        return null;
      }
    } else {
      const o = entry as Record<string, unknown>;
      if (typeof o.edge === 'string') {
        try {
          spec = parseEdge(o.edge);
        } catch (e) {
          add([...path, 'edge'], (e as Error).message);
          return null;
        }
      } else {
        spec = { from: o.from as string, to: Array.isArray(o.to) ? (o.to as string[]) : [o.to as string], kind: o.kind as EdgeKind };
      }
      extra = o;
    }
    const fieldOf = (which: 'from' | 'to') => (typeof entry === 'string' ? path : typeof (entry as any).edge === 'string' ? [...path, 'edge'] : [...path, which]);
    if (!agentSet.has(spec.from)) add(fieldOf('from'), `agent "${spec.from}" is not declared in agents`);
    for (const t of spec.to) if (!agentSet.has(t)) add(fieldOf('to'), `agent "${t}" is not declared in agents`);
    if (new Set(spec.to).size !== spec.to.length) add(fieldOf('to'), `a target is listed twice in ${specKey(spec)}`);
    return { spec, extra };
  };
}

/** The allow rules, and each concrete edge's rule (an edge may be allowed by one entry only). */
function allowRules(f: ContractFile, read: EntryReader, add: Report): { allow: AllowRule[]; allowByEdge: Map<string, AllowRule> } {
  const allow: AllowRule[] = [];
  const allowByEdge = new Map<string, AllowRule>();
  f.allow.forEach((entry, i) => {
    const r = read(entry, ['allow', i]);
    if (!r) return;
    const rule: AllowRule = { index: i, spec: r.spec, key: specKey(r.spec), max: (r.extra.max as number | undefined) ?? 1 };
    allow.push(rule);
    for (const t of r.spec.to) {
      const k = tripleKey(r.spec.from, t, r.spec.kind);
      const prev = allowByEdge.get(k);
      if (prev) add(['allow', i], `edge "${r.spec.from} -> ${t} : ${r.spec.kind}" is already allowed by allow[${prev.index}] (an edge may be allowed by one entry only)`);
      else allowByEdge.set(k, rule);
    }
  });
  return { allow, allowByEdge };
}

type PhaseFile = ContractFile['phases'][string];
/** What the plan of a phase is read against: the declared agents, the allow rules by edge, the entry reader, the report. */
interface PlanScope {
  agentSet: ReadonlySet<string>;
  allowByEdge: ReadonlyMap<string, AllowRule>;
  read: EntryReader;
  add: Report;
}

/** A phase's plan steps as written (`after` not yet resolved), with each step's `after` text and its index in the file. */
function planSteps(name: string, ph: PhaseFile, scope: PlanScope): { plan: PlanStep[]; rawAfter: (string[] | undefined)[]; origIndex: number[] } {
  const { agentSet, allowByEdge, read, add } = scope;
  const plan: PlanStep[] = [];
  const seenEdges = new Map<string, number>();
  const rawAfter: (string[] | undefined)[] = [];
  const origIndex: number[] = [];
  ph.expect.forEach((entry, i) => {
    const path: Path = ['phases', name, 'expect', i];
    const r = read(entry, path);
    if (!r) return;
    const step: PlanStep = { index: plan.length, spec: r.spec, key: specKey(r.spec), after: [] };
    for (const t of r.spec.to) {
      const k = tripleKey(r.spec.from, t, r.spec.kind);
      if (!allowByEdge.has(k) && agentSet.has(r.spec.from) && agentSet.has(t)) add(path, `expected edge "${r.spec.from} -> ${t} : ${r.spec.kind}" is not allowed by any allow entry`);
      const prev = seenEdges.get(k);
      if (prev !== undefined) add(path, `edge "${r.spec.from} -> ${t} : ${r.spec.kind}" appears twice in the plan (repeated work is a max on its allow entry)`);
      else seenEdges.set(k, i);
    }
    const dep = r.extra.dependency as string | undefined;
    const within = r.extra.within as string | undefined;
    if (dep !== undefined) {
      if (!agentSet.has(dep)) add([...path, 'dependency'], `agent "${dep}" is not declared in agents`);
      if (within === undefined) add([...path, 'dependency'], 'a dependency needs a deadline (`within`): an unbounded wait is an ownership defect');
      step.dependency = dep;
    }
    if (within !== undefined) {
      const ms = parseDuration(within);
      if (ms === null) add([...path, 'within'], `invalid duration "${within}"`);
      else step.withinMs = ms;
    }
    rawAfter.push(r.extra.after as string[] | undefined);
    origIndex.push(i);
    plan.push(step);
  });
  return { plan, rawAfter, origIndex };
}

/** Resolves each step's `after` (named as written in the plan; unset: the step before it) and reports a cycle. */
function resolveAfter(name: string, plan: PlanStep[], rawAfter: readonly (string[] | undefined)[], origIndex: readonly number[], add: Report): void {
  const byCompact = new Map<string, number>();
  plan.forEach((step, si) => byCompact.set(compactKey(step.key), si));
  plan.forEach((step, si) => {
    const after = rawAfter[si];
    const path: Path = ['phases', name, 'expect', origIndex[si]];
    if (after === undefined) {
      step.after = si === 0 ? [] : [si - 1];
      return;
    }
    after.forEach((a, ai) => {
      const idx = byCompact.get(compactKey(a));
      if (idx === undefined) add([...path, 'after', ai], `"${a}" is not an edge of phase "${name}" (name it as written in the plan)`);
      else if (idx === si) add([...path, 'after', ai], 'an edge cannot come after itself');
      else step.after.push(idx);
    });
  });
  const cycle = findCycle(plan);
  if (cycle) add(['phases', name, 'expect'], `\`after\` forms a cycle: ${cycle.map((i) => plan[i].key).join(' -> ')}`);
}

/** One phase: its plan, its stall limit (progress_within) and duration limit; warns when nothing bounds a run's wait. */
function buildPhase(name: string, ph: PhaseFile, scope: PlanScope, warn: Report): Phase {
  const { add } = scope;
  const { plan, rawAfter, origIndex } = planSteps(name, ph, scope);
  resolveAfter(name, plan, rawAfter, origIndex, add);
  const phase: Phase = { name, outcome: ph.outcome, plan };
  const limit = (key: 'progress_within' | 'max_duration'): number | undefined => {
    const text = ph[key];
    if (text === undefined) return undefined;
    const ms = parseDuration(text);
    if (ms === null) add(['phases', name, key], `invalid duration "${text}"`);
    return ms ?? undefined;
  };
  const progressWithinMs = limit('progress_within');
  const maxDurationMs = limit('max_duration');
  if (progressWithinMs !== undefined) phase.progressWithinMs = progressWithinMs;
  if (maxDurationMs !== undefined) phase.maxDurationMs = maxDurationMs;
  if (progressWithinMs === undefined && maxDurationMs === undefined) {
    plan.forEach((step, si) => {
      if (step.withinMs === undefined) {
        warn(['phases', name, 'expect', origIndex[si]], `${step.key} has no \`within\` and phase "${name}" has neither progress_within nor max_duration: a run can stay working forever`);
      }
    });
  }
  return phase;
}

/** The canonical text of a contract (its content hash is over this). */
function canonicalText(f: ContractFile, allow: readonly AllowRule[], phases: readonly Phase[]): string {
  return JSON.stringify({
    contract: f.contract,
    version: f.version,
    retired: f.retired,
    // Only when set, so the hashes of existing contracts do not change.
    ...(f.candidate ? { candidate: true } : {}),
    owner: f.owner,
    agents: f.agents,
    allow: allow.map((r) => ({ edge: r.key, max: r.max })),
    phases: phases.map((p) => ({
      name: p.name,
      outcome: p.outcome,
      expect: p.plan.map((s) => ({ edge: s.key, after: s.after.map((i) => p.plan[i].key), dependency: s.dependency ?? null, withinMs: s.withinMs ?? null })),
      // present only when declared, so contracts without them keep their content hash
      ...(p.progressWithinMs !== undefined ? { progressWithinMs: p.progressWithinMs } : {}),
      ...(p.maxDurationMs !== undefined ? { maxDurationMs: p.maxDurationMs } : {}),
    })),
  });
}

/**
 * Semantic validation and normalisation (section 2a), reporting through `add`: the one ordered walk of a contract
 * file, section by section (agents, allow, phases in source order), each check reporting at its path.
 */
function buildContract(f: ContractFile, add: Report, phaseNames: string[], warn: Report = () => {}): Contract {
  const agentSet = new Set(f.agents);
  const dupAgents = f.agents.filter((a, i) => f.agents.indexOf(a) !== i);
  for (const a of new Set(dupAgents)) add(['agents'], `agent "${a}" is listed twice`);
  if (!agentSet.has(f.owner)) add(['owner'], `owner "${f.owner}" is not declared in agents`);
  const read = edgeEntryReader(agentSet, add);
  const { allow, allowByEdge } = allowRules(f, read, add);
  const rank = (name: string) => (phaseNames.includes(name) ? phaseNames.indexOf(name) : Infinity);
  const inSourceOrder = Object.entries(f.phases).sort(([a], [b]) => rank(a) - rank(b));
  const phases = inSourceOrder.map(([name, ph]) => buildPhase(name, ph, { agentSet, allowByEdge, read, add }, warn));
  const canonical = canonicalText(f, allow, phases);
  return {
    contract: f.contract,
    version: f.version,
    retired: f.retired,
    candidate: f.candidate,
    owner: f.owner,
    agents: f.agents,
    agentSet,
    allow,
    allowByEdge,
    phases,
    canonical,
    hash: sha256Hex(canonical),
  };
}

function findCycle(plan: PlanStep[]): number[] | null {
  const state = new Array<number>(plan.length).fill(0);
  const stack: number[] = [];
  const visit = (i: number): number[] | null => {
    if (state[i] === 1) return [...stack.slice(stack.indexOf(i)), i];
    if (state[i] === 2) return null;
    state[i] = 1;
    stack.push(i);
    for (const a of plan[i].after) {
      const c = visit(a);
      if (c) return c;
    }
    stack.pop();
    state[i] = 2;
    return null;
  };
  for (let i = 0; i < plan.length; i++) {
    const c = visit(i);
    if (c) return c;
  }
  return null;
}

/**
 * The order of two contract versions (semantics 2a "newest"): dot-separated numeric parts numerically ("10" after
 * "9"; "1" before "1.0"), else as text. The one ordering of contract versions; handoff state versions do not order
 * (they are opaque, `sameStateVersion` in src/core/rules/handoff/version.ts).
 */
export function compareContractVersions(a: string, b: string): number {
  const pa = a.split('.');
  const pb = b.split('.');
  const numeric = (p: string[]) => p.every((x) => /^\d+$/.test(x));
  if (numeric(pa) && numeric(pb)) {
    for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
      const d = Number(pa[i] ?? 0) - Number(pb[i] ?? 0);
      if (d !== 0) return d;
    }
    return pa.length - pb.length;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Re-create a contract from its canonical content (e.g. a pinned copy from the store). */
export function contractFromCanonical(canonical: string, file = '<pinned>'): Contract {
  const d = JSON.parse(canonical);
  const head = JSON.stringify({
    contract: d.contract,
    version: d.version,
    retired: d.retired,
    ...(d.candidate ? { candidate: true } : {}),
    owner: d.owner,
    agents: d.agents,
    allow: d.allow.map((a: any) => ({ edge: a.edge, max: a.max })),
  });
  // Phases are written out in their canonical order: an object built in JS would list integer-like names first.
  const phases = d.phases.map((p: any) => {
    const body = {
      outcome: p.outcome,
      expect: p.expect.map((s: any) => {
        const o: Record<string, unknown> = { edge: s.edge, after: s.after };
        if (s.dependency) o.dependency = s.dependency;
        if (s.withinMs !== null) o.within = `${s.withinMs}ms`;
        return o;
      }),
      ...(p.progressWithinMs !== undefined ? { progress_within: `${p.progressWithinMs}ms` } : {}),
      ...(p.maxDurationMs !== undefined ? { max_duration: `${p.maxDurationMs}ms` } : {}),
    };
    return `${JSON.stringify(p.name)}:${JSON.stringify(body)}`;
  });
  const text = `${head.slice(0, -1)},"phases":{${phases.join(',')}}}`;
  return parseContract(text, file.endsWith('.json') ? file : `${file}.json`);
}

export { EdgeSyntaxError };
