/**
 * Case records: one JSON object per line (NDJSON), one file per design. A record may name the
 * receipts of its run (`receipts`, relative to the record file, and `run`); the measures it leaves
 * out are then derived from them, and the ones it gives must agree with them.
 */
import { z } from 'zod';
import { ExperimentInputError, fieldPath, type InputIssue } from './errors.js';
import { Name } from './manifest.js';
import type { RunMeasures } from './receipts.js';

const Count = z.number().int().nonnegative();

export const CaseRecordLineSchema = z
  .strictObject({
    case: Name,
    repeat: z.number().int().min(1).default(1),
    expected: Name.optional().describe('the expected disposition code; must match between the designs'),
    taskHash: Name.optional().describe('the hash of the frozen task input; must match between the designs'),
    correct: z.boolean().optional(),
    forbiddenEffects: Count.optional(),
    duplicateEffects: Count.optional(),
    parentActions: Count.optional(),
    totalActions: Count.optional(),
    parentContextUnits: Count.optional(),
    totalContextUnits: Count.optional(),
    handoffMessages: Count.optional(),
    coordinationUnits: Count.optional(),
    elapsedSteps: Count.optional(),
    traceComplete: z.boolean().optional(),
    finalOwners: z.array(Name).optional(),
    receipts: z.string().min(1).optional().describe('NDJSON receipts of the run, relative to this file'),
    run: Name.optional().describe('the run id inside the receipts file (needed when it holds several runs)'),
  })
  .superRefine((r, ctx) => {
    if (r.run !== undefined && r.receipts === undefined) ctx.addIssue({ code: 'custom', path: ['run'], message: 'run needs receipts' });
  });
export type CaseRecordLine = z.output<typeof CaseRecordLineSchema>;

/** A complete case record: every measure present. */
export interface CaseRecord {
  case: string;
  repeat: number;
  expected?: string;
  taskHash?: string;
  correct: boolean;
  forbiddenEffects: number;
  duplicateEffects: number;
  parentActions: number;
  totalActions: number;
  parentContextUnits: number;
  totalContextUnits: number;
  handoffMessages: number;
  coordinationUnits: number;
  elapsedSteps: number;
  traceComplete: boolean;
  finalOwners: string[];
}

const REQUIRED: (keyof CaseRecord)[] = [
  'correct',
  'forbiddenEffects',
  'duplicateEffects',
  'parentActions',
  'totalActions',
  'parentContextUnits',
  'totalContextUnits',
  'handoffMessages',
  'coordinationUnits',
  'elapsedSteps',
  'traceComplete',
  'finalOwners',
];
const DERIVABLE = ['parentActions', 'totalActions', 'handoffMessages', 'traceComplete', 'finalOwners'] as const;

export interface NumberedRecord {
  line: number;
  record: CaseRecordLine;
}

/** Parse NDJSON case records; every invalid line is reported with file, line and field. */
export function parseCaseRecordLines(text: string, file: string): NumberedRecord[] {
  const out: NumberedRecord[] = [];
  const issues: InputIssue[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      issues.push({ file, line: i + 1, field: '', message: `invalid JSON: ${(e as Error).message}` });
      return;
    }
    const r = CaseRecordLineSchema.safeParse(value);
    if (r.success) out.push({ line: i + 1, record: r.data });
    else
      for (const iss of r.error.issues)
        issues.push({
          file,
          line: i + 1,
          field: fieldPath(iss.path),
          message: iss.code === 'unrecognized_keys' ? `unknown field(s) ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}` : iss.message,
        });
  });
  if (issues.length > 0) throw new ExperimentInputError(issues);
  if (out.length === 0) throw new ExperimentInputError([{ file, field: '', message: 'no case records' }]);
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Fill a record's missing measures from its run's derived measures; a given measure that disagrees
 * with the receipts is an issue (the record is not silently preferred).
 */
export function completeCaseRecord(n: NumberedRecord, file: string, derived?: RunMeasures): { record?: CaseRecord; issues: InputIssue[] } {
  const issues: InputIssue[] = [];
  const merged: Record<string, unknown> = { ...n.record };
  delete merged.receipts;
  delete merged.run;
  if (derived) {
    for (const k of DERIVABLE) {
      const d = k === 'finalOwners' ? derived.finalOwners : derived[k];
      const given = k === 'finalOwners' && Array.isArray(merged[k]) ? [...(merged[k] as string[])].sort() : merged[k];
      if (given === undefined) merged[k] = d;
      else if (!same(given, d))
        issues.push({ file, line: n.line, field: k, message: `${JSON.stringify(merged[k])} disagrees with ${JSON.stringify(d)} derived from the run's receipts` });
    }
  }
  for (const k of REQUIRED)
    if (merged[k] === undefined)
      issues.push({
        file,
        line: n.line,
        field: k,
        message: (DERIVABLE as readonly string[]).includes(k) ? 'required (or name the run\'s receipts to derive it)' : 'required',
      });
  if (issues.length > 0) return { issues };
  return { record: merged as unknown as CaseRecord, issues };
}
