/**
 * One table-driven help mechanism for every subcommand. A command registers a `CommandSpec` (usage lines, flags
 * with their defaults, examples, exit codes) with `registerSpec`; `topology-audit CMD --help` (or `-h`) renders it,
 * and `parseCommandArgs` turns the same flag table into `node:util` parseArgs options, so help and parser agree.
 */
import { parseArgs } from 'node:util';
import { parseDuration } from '../core/edge.js';
import { UsageError } from './io.js';
import { editDistance } from '../core/suggest.js';

export interface FlagSpec {
  /** Long name without dashes, e.g. "timeout". */
  name: string;
  /** One-letter short flag, e.g. "t". Only where conventional. */
  short?: string;
  type: 'string' | 'boolean';
  /** May be given several times (values collected in a list). */
  multiple?: boolean;
  /** Placeholder shown in help, e.g. "DUR". */
  value?: string;
  /** Default value (parsed); for display see `shown`. */
  default?: string | boolean;
  /** How the default is shown in help when it is not literal (e.g. "the package's contracts/ examples"). */
  shown?: string;
  /** An environment variable that, when set, replaces the default (read at parse time; shown as "$ENV or DEFAULT"). */
  env?: string;
  help: string;
}

export interface CommandSpec {
  /** e.g. "gate" or "experiment diff". */
  name: string;
  summary: string;
  /** Usage lines after "topology-audit ". */
  usage: string[];
  flags: FlagSpec[];
  examples: string[];
  /** Exit codes this command uses (code -> meaning); the common table is in EXIT_CODES. */
  exits?: [number, string][];
  /** Extra paragraphs shown after the flags. */
  notes?: string[];
  /** False when the command takes no positional arguments (one given is a usage error). */
  positionals?: false;
}

/** The one exit-code table (also in docs/cli.md; test/cli.test.ts keeps the two equal). */
export const EXIT_CODES: [number, string][] = [
  [0, 'success: healthy verdict, valid input, expectations met'],
  [1, 'a check failed: a settled non-healthy verdict (gate, replay), an invalid contract (validate), an unmet expectation (replay --expect), a denied handoff'],
  [2, 'usage error, bad input, or the server cannot be used (unreachable, not an auditor API, token refused)'],
  [66, 'gate: the run was never seen by the timeout (no receipts arrived)'],
  [75, 'gate: the run was seen but is still working, waiting or uncertain at the timeout (retry later)'],
];

const specs = new Map<string, CommandSpec>();

export function registerSpec(spec: CommandSpec): CommandSpec {
  specs.set(spec.name, spec);
  return spec;
}

export function specFor(name: string): CommandSpec | undefined {
  return specs.get(name);
}

export function allSpecs(): CommandSpec[] {
  return [...specs.values()];
}

export const HELP_FLAG: FlagSpec = { name: 'help', short: 'h', type: 'boolean', shown: '', help: 'show this help and exit' };

function defaultText(f: FlagSpec): string {
  if (f.shown !== undefined) return f.shown;
  if (f.env !== undefined) return f.default === undefined ? `$${f.env}` : `$${f.env} or ${String(f.default)}`;
  if (f.type === 'boolean') return f.default === true ? 'on' : 'off';
  return f.default === undefined ? '' : String(f.default);
}

/** Render a spec as help text. */
export function renderHelp(spec: CommandSpec): string {
  const out: string[] = [];
  out.push(`topology-audit ${spec.name}: ${spec.summary}`, '', 'usage:');
  for (const u of spec.usage) out.push(`  topology-audit ${u}`);
  const flags = [...spec.flags, HELP_FLAG];
  out.push('', 'options:');
  const left = flags.map((f) => `${f.short ? `-${f.short}, ` : '    '}--${f.name}${f.type === 'string' ? ` ${f.value ?? 'VALUE'}` : ''}`);
  const width = Math.max(...left.map((l) => l.length));
  flags.forEach((f, i) => {
    const d = defaultText(f);
    out.push(`  ${left[i].padEnd(width)}  ${f.help}${d ? ` (default: ${d})` : ''}`);
  });
  for (const n of spec.notes ?? []) out.push('', ...n.split('\n'));
  out.push('', 'examples:');
  for (const e of spec.examples) out.push(`  ${e}`);
  const exits = spec.exits ?? EXIT_CODES.filter(([c]) => c <= 2);
  out.push('', 'exit codes:');
  for (const [c, m] of exits) out.push(`  ${String(c).padStart(3)}  ${m}`);
  return out.join('\n') + '\n';
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** The default of a flag at parse time: its environment variable when set, else its default. */
export function flagDefault(f: FlagSpec, env: NodeJS.ProcessEnv = process.env): string | boolean | undefined {
  const fromEnv = f.env === undefined ? undefined : env[f.env];
  return fromEnv !== undefined ? fromEnv : f.default;
}

/**
 * Parse argv with the spec's flag table (plus -h/--help, handled by main before this), or with the flags of it named
 * in `only` (a subcommand's share); a bad flag throws node's parseArgs error (with its ERR_PARSE_ARGS code: the
 * dispatcher adds "did you mean --x?").
 */
export function parseFlags(spec: CommandSpec, argv: string[], only?: readonly string[]): Parsed {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean; default?: string | boolean | string[] }> = {};
  for (const f of [...spec.flags.filter((g) => only === undefined || only.includes(g.name)), HELP_FLAG]) {
    const def = flagDefault(f);
    options[f.name] = { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true, default: [] } : def !== undefined ? { default: def } : {}) };
  }
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: spec.positionals !== false, strict: true });
  return { values: values as Parsed['values'], positionals };
}

/** parseFlags, with a bad flag turned into a usage error naming the nearest flag and the command's --help. */
export function parseCommandArgs(spec: CommandSpec, argv: string[]): Parsed {
  try {
    return parseFlags(spec, argv);
  } catch (e) {
    const message = (e as Error).message.replace(/\. To specify a positional.*$/s, '');
    const unknown = /^Unknown option '--([^'=]+)'/.exec(message)?.[1];
    const near = unknown ? closestFlag(unknown, [...spec.flags, HELP_FLAG].map((f) => f.name)) : null;
    throw new UsageError(`${message}${near ? `; did you mean --${near}?` : ''}; see topology-audit ${spec.name} --help`);
  }
}

export { editDistance };

/** The known flag nearest to a mistyped one (at most 2 edits, or a unique prefix), or null. */
export function closestFlag(typed: string, names: readonly string[]): string | null {
  const prefixed = names.filter((n) => n.startsWith(typed));
  if (prefixed.length === 1) return prefixed[0];
  let best: string | null = null;
  let bestD = 3;
  for (const n of names) {
    const dist = editDistance(typed, n);
    if (dist < bestD) [best, bestD] = [n, dist];
  }
  return best;
}

/** A duration flag; the error names the valid units. */
export function durationFlag(flag: string, v: string): number {
  const ms = parseDuration(v);
  if (ms === null) throw new UsageError(`--${flag}: "${v}" is not a duration; use a whole number with ms, s, m, h or d (e.g. 30s, 5m, 2h)`);
  return ms;
}

/** True when `argv` asks for help (before a `--`). */
export function wantsHelp(argv: string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

/** Colour only on a terminal, never with NO_COLOR (https://no-color.org), forced by FORCE_COLOR. */
export function colorEnabled(stream: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return !!stream.isTTY && env.TERM !== 'dumb';
}

const VERDICT_COLOR: Record<string, number> = { healthy: 32, working: 36, waiting: 36, uncertain: 33, incomplete: 33 };

/** Colour a verdict word (green healthy, cyan in progress, yellow incomplete/uncertain, red unsafe/false complete). */
export function paintVerdict(v: string, on: boolean): string {
  if (!on) return v;
  return `\x1b[${VERDICT_COLOR[v] ?? 31}m${v}\x1b[0m`;
}
