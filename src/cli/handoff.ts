/**
 * `topology-audit handoff admit|return|aggregate|audit|schema`.
 *
 *   handoff admit HANDOFF.json --parent ENVELOPE.json --state STATE.json [--json]
 *   handoff return RESULT.json --handoff HANDOFF.json --state STATE.json [--json]
 *   handoff aggregate RESULT.json... [--json]
 *   handoff audit RECEIPTS.ndjson... [--now RFC3339] [--json]
 *   handoff schema [handoff|parent|state|result|handoff-receipt]
 *   handoff board RUN [--server URL] [--token T] [--json]
 *
 * Exit codes: admit/return 0 admitted, 1 denied; aggregate 0 aggregated, 1 conflict escalated;
 * audit 0 no handoff finding, 1 findings; board 0 shown, 2 unknown run; all: 2 bad input, usage or
 * (board) a server that is unreachable, refuses the token or is not an auditor.
 * Output is content-free: identities, names, codes, times and counts; never a task slice,
 * completion text or passage.
 */
import { readFile } from 'node:fs/promises';
import { parseFlags, type Parsed } from './spec.js';
import { HANDOFF_SPEC } from './specs.js';
import type { z } from 'zod';
import type { Finding, Receipt } from '../core/types.js';
import type { Admission } from '../handoff/admit.js';
import { admitHandoff } from '../handoff/admit.js';
import { admitReturn } from '../handoff/return.js';
import { aggregateEvidence } from '../handoff/aggregate.js';
import { auditRun, runIdError } from '../core/index.js';
import { sortFindings } from '../core/index.js';
import { runLedger } from '../core/index.js';
import type { LedgerSummary, Units } from '../core/index.js';
import { runFunnel } from '../handoff/funnel.js';
import type { Funnel } from '../handoff/funnel.js';
import { traceRuns } from '../core/index.js';
import { renderBoard } from '../handoff/board-text.js';
import type { HandoffBoard } from '../handoff/board.js';
import { ReceiptLineError, parseReceiptLines } from '../handoff/ndjson.js';
import type { HandoffSchemaName } from '../handoff/schema.js';
import {
  HANDOFF_SCHEMAS,
  fieldPath,
  handoffJsonSchemas,
  handoffResultSchema,
  handoffSchema,
  handoffStateDocSchema,
  parentEnvelopeSchema,
} from '../handoff/schema.js';
import { instantTextError, laterOf, parseInstant, type Instant } from '../core/time.js';

export interface CliIO {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

export const USAGE = `usage:
  topology-audit handoff admit HANDOFF.json --parent ENVELOPE.json --state STATE.json [--json]
  topology-audit handoff return RESULT.json --handoff HANDOFF.json --state STATE.json [--json]
  topology-audit handoff aggregate RESULT.json... [--json]
  topology-audit handoff audit RECEIPTS.ndjson... [--now RFC3339] [--json]
  topology-audit handoff schema [${Object.keys(HANDOFF_SCHEMAS).join('|')}]
  topology-audit handoff board RUN [--server URL] [--token TOKEN] [--json]
`;

/** Bad input: an unreadable file, bad JSON, or a document that fails its schema. Exit 2. */
export class BadInput extends Error {
  constructor(readonly lines: string[]) {
    super(lines.join('\n'));
  }
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    throw new BadInput([`${file}: cannot read (${code})`]);
  }
}

/** Reads and validates one JSON document; errors name the file and each failing field path. */
export async function readDocument<S extends z.ZodType>(file: string, schema: S): Promise<z.infer<S>> {
  const text = await readText(file);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    // JSON.parse messages can quote the document; keep only the position.
    const pos = /position (\d+)/.exec(String((e as Error).message));
    throw new BadInput([`${file}: not valid JSON${pos ? ` (at position ${pos[1]})` : ''}`]);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new BadInput(parsed.error.issues.flatMap((i) =>
      i.code === 'unrecognized_keys'
        ? i.keys.map((k) => `${file}: ${fieldPath([...i.path, k])}: unknown field (documents are strict)`)
        : [`${file}: ${fieldPath(i.path)}: ${i.message}`],
    ));
  }
  return parsed.data;
}

function printAdmission(io: CliIO, json: boolean, decision: Admission, subject: string): number {
  if (json) {
    io.stdout(`${JSON.stringify(decision)}\n`);
  } else if (decision.admitted) {
    io.stdout(`admitted: ${subject}\n`);
  } else {
    const n = decision.denials.length;
    io.stdout(`denied: ${subject}, ${n} reason${n === 1 ? '' : 's'}\n`);
    const w1 = Math.max(...decision.denials.map((d) => d.code.length));
    const w2 = Math.max(...decision.denials.map((d) => d.field.length));
    for (const d of decision.denials) io.stdout(`  ${d.code.padEnd(w1)}  ${d.field.padEnd(w2)}  ${d.message}\n`);
  }
  return decision.admitted ? 0 : 1;
}

/** A subcommand's flags: those of the handoff spec (src/cli/specs.ts) it names. */
function parse(args: string[], flags: readonly string[]): Parsed {
  try {
    return parseFlags(HANDOFF_SPEC, args, flags);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

class UsageError extends Error {}

function need(values: Parsed['values'], name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} FILE is required`);
  return v;
}

function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected one ${what}, got ${positionals.length}`);
  return positionals[0];
}

async function admit(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, ['parent', 'state', 'json']);
  const file = one(positionals, 'HANDOFF.json');
  const [h, parent, state] = await Promise.all([
    readDocument(file, handoffSchema),
    readDocument(need(values, 'parent'), parentEnvelopeSchema),
    readDocument(need(values, 'state'), handoffStateDocSchema),
  ]);
  return printAdmission(io, values.json === true, admitHandoff(h, parent, state), `${h.handoffId} attempt ${h.attempt} (${h.source} -> ${h.target})`);
}

async function returned(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, ['handoff', 'state', 'json']);
  const file = one(positionals, 'RESULT.json');
  const [r, h, state] = await Promise.all([
    readDocument(file, handoffResultSchema),
    readDocument(need(values, 'handoff'), handoffSchema),
    readDocument(need(values, 'state'), handoffStateDocSchema),
  ]);
  return printAdmission(io, values.json === true, admitReturn(r, h, state), `result of ${r.handoffId} attempt ${r.attempt} from ${r.target}`);
}

async function aggregate(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, ['json']);
  if (positionals.length === 0) throw new UsageError('expected at least one RESULT.json');
  const results = await Promise.all(positionals.map((f) => readDocument(f, handoffResultSchema)));
  const agg = aggregateEvidence(results);
  // Passages stay out of the output: counts, sources, editions and provenance only.
  const summary = { decision: agg.decision, citations: agg.citations.length, conflicts: agg.conflicts };
  if (values.json === true) io.stdout(`${JSON.stringify(summary)}\n`);
  else {
    io.stdout(`${agg.decision}: ${agg.citations.length} distinct citation${agg.citations.length === 1 ? '' : 's'} from ${results.length} result${results.length === 1 ? '' : 's'}, ${agg.conflicts.length} conflict${agg.conflicts.length === 1 ? '' : 's'}\n`);
    for (const c of agg.conflicts) {
      io.stdout(`  ${c.code}  ${c.source}  editions ${c.editions.join(' vs ')}  from ${c.provenance.map((p) => `${p.handoffId}#${p.attempt} (${p.target})`).join(', ')}\n`);
    }
  }
  return agg.decision === 'escalate' ? 1 : 0;
}

const units = (u: Units): string => `${u.actions}a/${u.contextUnits}c/${u.effects}e`;

function printRun(io: CliIO, run: string, findings: Finding[], l: LedgerSummary, f: Funnel): void {
  io.stdout(`run ${run}: ${findings.length === 0 ? 'no handoff findings' : findings.map((x) => `${x.code} (${x.verdict})`).join(', ')}\n`);
  for (const x of findings) io.stdout(`  ${x.code}: ${x.message} [events ${x.events.join(', ')}]\n`);
  io.stdout(`  ledger (actions/context/effects): root ${l.root ? units(l.root) : 'none'}; reserved ${units(l.reserved)}, consumed ${units(l.consumed)}, released ${units(l.released)}, rejected ${units(l.rejected)}, peak committed ${units(l.peakCommitted)}\n`);
  io.stdout(`  attempts: ${l.attempts.length}; timed out ${l.timedOut.attempts} (${units(l.timedOut.units)}), late ${l.late.attempts} (${units(l.late.units)}), duplicate ${l.duplicate.attempts} (${units(l.duplicate.units)})\n`);
  io.stdout(`  funnel: dispatched ${f.dispatched} > completed before lease ${f.completedBeforeLease} > structurally valid ${f.structurallyValid} > in scope and current ${f.inScopeAndCurrent} > non-duplicate ${f.nonDuplicate} > admitted ${f.admitted}\n`);
}

async function audit(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, ['now', 'json']);
  if (positionals.length === 0) throw new UsageError('expected at least one RECEIPTS.ndjson');
  const receipts: Receipt[] = [];
  for (const file of positionals) {
    const text = await readText(file);
    try {
      receipts.push(...parseReceiptLines(text));
    } catch (e) {
      if (e instanceof ReceiptLineError) throw new BadInput([`${file}: ${e.message}`]);
      throw e;
    }
  }
  // `now` exact to the nanosecond (semantics 5): the given time, else the latest receipt's.
  let now: Instant;
  if (typeof values.now === 'string') {
    const error = instantTextError(values.now);
    if (error !== null) throw new UsageError(`--now must be an RFC 3339 time: ${error}`);
    now = parseInstant(values.now);
  } else {
    now = receipts.map((r) => parseInstant(r.at)).reduce(laterOf, { ms: -Infinity, ns: 0 });
  }
  let any = false;
  for (const trace of traceRuns(receipts)) {
    const findings = sortFindings(auditRun(trace, now));
    any ||= findings.length > 0;
    const l = runLedger(trace);
    const f = runFunnel(trace);
    if (values.json === true) io.stdout(`${JSON.stringify({ run: trace.run, findings, ledger: l, funnel: f })}\n`);
    else printRun(io, trace.run, findings, l, f);
  }
  return any ? 1 : 0;
}

function schema(args: string[], io: CliIO): number {
  const { positionals } = parse(args, []);
  const all = handoffJsonSchemas();
  if (positionals.length === 0) {
    io.stdout(`${JSON.stringify(all, null, 2)}\n`);
    return 0;
  }
  const name = one(positionals, 'schema name');
  if (!Object.hasOwn(all, name)) throw new UsageError(`unknown schema '${name}'`);
  io.stdout(`${JSON.stringify(all[name as HandoffSchemaName], null, 2)}\n`);
  return 0;
}

/** `handoff board RUN`: the operator's board from a running auditor (GET /api/v1/runs/{run}/handoffs). */
async function boardCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, ['server', 'token', 'json']);
  const run = one(positionals, 'RUN');
  const badRun = runIdError(run); // no run can have such an id (semantics 2a): refused before any server is asked
  if (badRun !== null) throw new UsageError(`RUN: not a run id: ${badRun}`);
  const base = String(values.server).replace(/\/+$/, '');
  const token = typeof values.token === 'string' ? values.token : undefined;
  let res: Response;
  try {
    res = await fetch(`${base}/api/v1/runs/${encodeURIComponent(run)}/handoffs`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    io.stderr(`topology-audit handoff board: server ${base} unreachable: ${(e as Error).message}\n`);
    return 2;
  }
  if (res.status === 401) {
    io.stderr('topology-audit handoff board: the server refused the token (401)\n');
    return 2;
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (res.status === 404 && body !== null && typeof body === 'object' && /^unknown run /.test(String((body as { error?: unknown }).error))) {
    io.stderr(`topology-audit handoff board: the server has no run ${run}\n`);
    return 2; // as ack and diff do for an unknown run: the input is wrong, no check failed
  }
  const board = body as HandoffBoard | null;
  if (res.status !== 200 || board === null || typeof board !== 'object' || board.run !== run || !Array.isArray(board.branches)) {
    io.stderr(`topology-audit handoff board: ${base} did not answer as a topology auditor (HTTP ${res.status})\n`);
    return 2;
  }
  io.stdout(values.json === true ? `${JSON.stringify(board)}\n` : renderBoard(board));
  return 0;
}

const COMMANDS: Record<string, (args: string[], io: CliIO) => Promise<number> | number> = {
  board: (args, io) => boardCommand(args, io),
  admit,
  return: returned,
  aggregate,
  audit,
  schema,
};

/** Entry point; `argv` may start with `handoff` or directly with the subcommand. */
export async function handoffCommand(argv: string[], io: CliIO): Promise<number> {
  const args = argv[0] === 'handoff' ? argv.slice(1) : argv;
  const [sub, ...rest] = args;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    (sub === undefined ? io.stderr : io.stdout)(USAGE);
    return sub === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, sub) ? COMMANDS[sub] : undefined;
  if (command === undefined) {
    io.stderr(`handoff: unknown command '${sub}'\n${USAGE}`);
    return 2;
  }
  try {
    return await command(rest, io);
  } catch (e) {
    if (e instanceof BadInput) {
      io.stderr(`${e.lines.join('\n')}\n`);
      return 2;
    }
    if (e instanceof UsageError) {
      io.stderr(`handoff ${sub}: ${e.message}\n${USAGE}`);
      return 2;
    }
    throw e;
  }
}
