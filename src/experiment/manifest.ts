/**
 * The experiment manifest: everything a topology experiment decides before results exist
 * (article section 3, "Write the experiment card"; section 5, "Decide with thresholds").
 * One zod schema gives the type, the validation errors and the JSON Schema.
 */
import { z } from 'zod';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import { ExperimentInputError, fieldPath, type InputIssue, type Path } from './errors.js';
import { COUNT_MEASURES, FLAG_MEASURES, MEASURES, TRADEABLE_MEASURES, isFlagMeasure } from './measures.js';
import { isValidPath } from './paths.js';

/** Identities, versions and references are names, not prose. */
const NAME_PATTERN = /^[A-Za-z0-9_.:@#+=-]{1,200}$/;
export const Name = z.string().regex(NAME_PATTERN, 'a name: 1-200 of letters, digits and _ . : @ # + = - (no spaces)');
const Text = z.string().min(1).max(2000);
const VersionText = z
  .union([z.string().regex(/^[A-Za-z0-9_.+-]{1,64}$/), z.number().int().nonnegative()], {
    error: 'a version: a string of letters, digits, _ . + - or an integer (quote versions such as "0.1")',
  })
  .transform((v) => String(v))
  .describe('a version string; an integer is read as its decimal text, any other number is refused (quote versions)');
const Count = z.number().int().nonnegative();
export const DURATION_PATTERN = /^(\d+)(ms|s|m|h|d)$/;
const Duration = z.string().regex(DURATION_PATTERN, 'a duration: an integer with ms, s, m, h or d (e.g. 5m)');
const DATE = /^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?)?$/;

export const HARD_GATES = [
  'zero_forbidden_effects',
  'zero_duplicate_effects',
  'no_authority_widening',
  'no_outcome_regression',
  'complete_traces',
  'one_final_owner',
] as const;
export type HardGate = (typeof HARD_GATES)[number];
/** A topology experiment without these gates is not admissible: one forbidden effect must reject whatever else improves. */
export const REQUIRED_GATES: readonly HardGate[] = [
  'zero_forbidden_effects',
  'zero_duplicate_effects',
  'no_authority_widening',
  'no_outcome_regression',
];

export const CONSEQUENCES = ['read', 'effect'] as const;
export type Consequence = (typeof CONSEQUENCES)[number];

const Versioned = z.strictObject({ id: Name, version: VersionText });
const Budgets = z.strictObject({ actions: Count, contextUnits: Count, effects: Count });
export type Budgets = z.output<typeof Budgets>;

const Envelope = z
  .strictObject({
    tenants: z.array(Name),
    resources: z.array(Name),
    capabilities: z.array(Name),
    expiresAfter: Duration.describe('authority lifetime from the start of a run'),
    budgets: Budgets,
  })
  .describe('the authority one identity holds: the effect budget is budgets.effects');
export type Envelope = z.output<typeof Envelope>;

const HandoffSpec = z.strictObject({
  id: Name,
  source: Name,
  target: Name,
  taskSlice: Name,
  consequence: z.enum(CONSEQUENCES),
  allowedCapabilities: z.array(Name),
  budgets: Budgets,
  lease: Duration,
  duplicateKey: Text,
  cancelRef: Name,
  onTimeout: Text,
  completeWhen: Text,
  aggregation: Text,
  finalOwner: Name,
});
export type HandoffSpec = z.output<typeof HandoffSpec>;

const Topology = z.strictObject({
  agents: z.array(Name).min(1),
  finalOwner: Name,
  handoffs: z.array(HandoffSpec).default([]),
});

export const ArmConfigSchema = z
  .strictObject({
    taskSet: z.strictObject({ id: Name, hash: Name }),
    policy: Versioned.describe('policy or policy-double version'),
    model: Versioned.describe('model or model-double version'),
    graders: z.array(Versioned).min(1),
    seed: z.union([z.number().int(), Name], { error: 'an integer or a name' }),
    budgets: Budgets.describe('the root budget of one case run'),
    capabilities: z.record(Name, z.enum(CONSEQUENCES)).describe('capability schemas and their consequence class'),
    pinned: z.record(Name, z.unknown()).optional().describe('other held-constant inputs: tool fixtures, assembler, clock, retry rules'),
    topology: Topology,
    authority: z.record(Name, Envelope).describe('one envelope per agent identity'),
  })
  .superRefine((c, ctx) => {
    const issue = (path: PropertyKey[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const agents = new Set(c.topology.agents);
    if (agents.size !== c.topology.agents.length) issue(['topology', 'agents'], 'agents must be distinct');
    if (!agents.has(c.topology.finalOwner)) issue(['topology', 'finalOwner'], `final owner ${c.topology.finalOwner} is not one of the agents`);
    for (const a of agents) if (!(a in c.authority)) issue(['authority'], `agent ${a} has no authority envelope`);
    for (const [id, env] of Object.entries(c.authority)) {
      if (!agents.has(id)) issue(['authority', id], `identity ${id} is not one of the topology's agents`);
      env.capabilities.forEach((cap, i) => {
        if (!(cap in c.capabilities)) issue(['authority', id, 'capabilities', i], `unknown capability ${cap}`);
      });
    }
    const ids = new Set<string>();
    c.topology.handoffs.forEach((h, i) => {
      if (ids.has(h.id)) issue(['topology', 'handoffs', i, 'id'], `duplicate handoff id ${h.id}`);
      ids.add(h.id);
      if (!agents.has(h.source)) issue(['topology', 'handoffs', i, 'source'], `unknown agent ${h.source}`);
      if (!agents.has(h.target)) issue(['topology', 'handoffs', i, 'target'], `unknown agent ${h.target}`);
      h.allowedCapabilities.forEach((cap, j) => {
        if (!(cap in c.capabilities)) issue(['topology', 'handoffs', i, 'allowedCapabilities', j], `unknown capability ${cap}`);
      });
    });
  });
export type ArmConfig = z.output<typeof ArmConfigSchema>;

const Arm = z.strictObject({
  label: Name,
  records: z.string().min(1).describe('NDJSON case records, relative to the manifest file'),
  config: ArmConfigSchema,
});

const FailureRule = z
  .strictObject({
    id: Name,
    description: Text,
    measure: z.enum(MEASURES),
    above: z.number().optional(),
    below: z.number().optional(),
    is: z.boolean().optional(),
    minRepaired: z.number().int().min(1).default(1).describe('repaired pairs needed for the repair to count as a gain'),
  })
  .superRefine((r, ctx) => {
    const given = (['above', 'below', 'is'] as const).filter((k) => r[k] !== undefined);
    if (given.length !== 1) ctx.addIssue({ code: 'custom', path: [], message: 'give exactly one of above, below or is' });
    else if (isFlagMeasure(r.measure) !== (given[0] === 'is'))
      ctx.addIssue({
        code: 'custom',
        path: [given[0]],
        message: isFlagMeasure(r.measure) ? `${r.measure} is a flag: use is: true|false` : `${r.measure} is a count: use above or below`,
      });
  });
export type FailureRule = z.output<typeof FailureRule>;

const Tradeable = z.strictObject({
  measure: z.enum(TRADEABLE_MEASURES),
  better: z.enum(['lower', 'higher']),
  material: z.number().nonnegative().describe('smallest change per case set that counts as material'),
  maxRegression: z.number().nonnegative().optional().describe('largest adverse change per case set the owner accepts for adoption'),
});
export type Tradeable = z.output<typeof Tradeable>;

export const ManifestSchema = z
  .strictObject({
    experiment: Name,
    title: Text.optional(),
    owner: Name.describe('who owns the decision'),
    declaredAt: z.string().regex(DATE, 'a date (YYYY-MM-DD) or RFC 3339 time').describe('when the manifest was fixed, before results'),
    hypothesis: z.strictObject({
      baselineDefect: Text,
      changedSegment: Text,
      heldConstant: Text,
      predictedGain: Text,
      addedSurface: Text,
      rejectionRule: Text,
    }),
    cases: z.array(Name).min(1).optional().describe('the frozen case ids; records must cover exactly these'),
    evidence: z.strictObject({
      minCases: z.number().int().min(1),
      minRepeats: z.number().int().min(1).default(1),
    }),
    baseline: Arm,
    candidate: Arm,
    changedSlice: z.strictObject({
      description: Text,
      consequence: z.enum(CONSEQUENCES).describe('read: added identities and handoffs may hold no effect capability or budget'),
      paths: z.array(z.string().refine(isValidPath, 'a field path such as topology.handoffs or authority.manual-specialist')).min(1),
    }),
    hardGates: z.array(z.enum(HARD_GATES)).min(1),
    baselineFailures: z.array(FailureRule).default([]),
    tradeable: z.array(Tradeable).default([]),
    reopenWhen: z.array(Text).min(1),
  })
  .superRefine((m, ctx) => {
    for (const g of REQUIRED_GATES)
      if (!m.hardGates.includes(g)) ctx.addIssue({ code: 'custom', path: ['hardGates'], message: `the hard gate ${g} is required` });
    const seen = new Set<string>();
    m.tradeable.forEach((t, i) => {
      if (seen.has(t.measure)) ctx.addIssue({ code: 'custom', path: ['tradeable', i, 'measure'], message: `${t.measure} listed twice` });
      seen.add(t.measure);
    });
    const fids = new Set<string>();
    m.baselineFailures.forEach((f, i) => {
      if (fids.has(f.id)) ctx.addIssue({ code: 'custom', path: ['baselineFailures', i, 'id'], message: `duplicate failure id ${f.id}` });
      fids.add(f.id);
    });
    if (m.cases && new Set(m.cases).size !== m.cases.length) ctx.addIssue({ code: 'custom', path: ['cases'], message: 'case ids must be distinct' });
  });
export type Manifest = z.output<typeof ManifestSchema>;
export type ArmName = 'baseline' | 'candidate';

export function manifestJsonSchema(): unknown {
  return z.toJSONSchema(ManifestSchema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' });
}

/** Locate a field path in the YAML source: the deepest existing node on the path. */
function locate(doc: Document, lc: LineCounter, path: Path): { line: number; col: number } {
  let node: unknown = doc.contents;
  let offset = (node as { range?: [number, number, number] } | null)?.range?.[0] ?? 0;
  for (const seg of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
      if (!pair) break;
      offset = (pair.key as { range?: [number, number, number] }).range?.[0] ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === 'number' && seg < node.items.length) {
      node = node.items[seg];
      offset = (node as { range?: [number, number, number] } | null)?.range?.[0] ?? offset;
    } else break;
  }
  const pos = lc.linePos(offset);
  return { line: pos.line, col: pos.col };
}

function describeIssue(i: z.core.$ZodIssue): string {
  if (i.code === 'unrecognized_keys') return `unknown field(s) ${i.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  if (i.code === 'invalid_type' && i.message.endsWith('received undefined')) return `required (${i.message.replace(/^Invalid input: /, '').replace(/, received undefined$/, '')})`;
  return i.message;
}

/**
 * Parse manifest text (YAML, or JSON which is YAML) into a validated manifest,
 * or throw ExperimentInputError naming file, line, column and field path for every issue.
 * YAML merge keys (`<<: *baseline`) are honoured, so a candidate can repeat the baseline explicitly.
 */
export function parseManifest(text: string, file = '<manifest>'): Manifest {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, merge: true, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ExperimentInputError(
      doc.errors.map((e) => {
        const pos = lc.linePos(e.pos[0]);
        return { file, line: pos.line, col: pos.col, field: '', message: e.message.split('\n')[0] };
      }),
    );
  }
  const value = doc.toJS({ maxAliasCount: 1000 });
  const r = ManifestSchema.safeParse(value);
  if (r.success) return r.data;
  const issues: InputIssue[] = r.error.issues.map((i) => ({
    file,
    ...locate(doc, lc, i.code === 'unrecognized_keys' ? [...i.path, i.keys[0]] : i.path),
    field: fieldPath(i.path),
    message: describeIssue(i),
  }));
  throw new ExperimentInputError(issues);
}
