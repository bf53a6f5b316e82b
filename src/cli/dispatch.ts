/**
 * The dispatcher behind `topology-audit CMD ...`: help, version, a command table, exit 2 for usage and input errors.
 * Its own module so that the CI bundle (src/cli/ci-main.ts) dispatches a smaller table without importing the rest.
 */
import { type Io, processIo, UsageError } from './io.js';
import { closestFlag, renderHelp, specFor, allSpecs, wantsHelp } from './spec.js';
import { topUsage } from './specs.js';
import { VERSION } from './version.js';

export type Command = (argv: string[], io: Io) => Promise<number>;
export type CommandTable = Record<string, () => Promise<Command>>;

/** For an unknown option: the nearest flag of the command ("did you mean --contracts?"), else where to look. */
export function flagHint(name: string, argv: string[], e: unknown): string {
  if ((e as { code?: string }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return '';
  const m = /Unknown option '(-{1,2}[^']+)'/.exec((e as Error).message);
  const spec = specFor(argv[0] && specFor(`${name} ${argv[0]}`) ? `${name} ${argv[0]}` : name);
  if (!m || !spec) return '';
  const near = closestFlag(m[1].replace(/^-+/, '').replace(/=.*$/, ''), spec.flags.map((f) => f.name));
  return near ? `; did you mean --${near}?` : `; see topology-audit ${spec.name} --help`;
}

/** Strip a leading "cmd: " the message already carries, so errors read "topology-audit gate: ...", never "gate: gate: ...". */
export function errorLine(name: string, message: string): string {
  let m = message;
  for (const p of [`topology-audit ${name}: `, `${name}: `]) if (m.startsWith(p)) m = m.slice(p.length);
  // A subcommand's own prefix ("contract diff: ...") names the command once: "topology-audit contract diff: ...".
  const sub = new RegExp(`^(?:topology-audit )?${name} ([a-z-]+): `).exec(m);
  if (sub) return `topology-audit ${name} ${sub[1]}: ${m.slice(sub[0].length)}\n`;
  return `topology-audit ${name}: ${m}\n`;
}

export async function dispatch(commands: CommandTable, argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv;
  const usage = () => topUsage(allSpecs().filter((s) => !s.name.includes(' ') && s.name in commands));
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    if (name === 'help' && rest[0] && specFor(rest[0])) {
      io.stdout(renderHelp(specFor(rest[0])!));
      return 0;
    }
    io.stdout(usage());
    return name ? 0 : 2;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    io.stdout(`topology-audit ${VERSION}\n`);
    return 0;
  }
  const load = commands[name];
  if (!load) {
    io.stderr(`topology-audit: unknown command "${name}"\n${usage()}`);
    return 2;
  }
  try {
    const command = await load();
    // A command module may register its own spec when loaded; help is rendered from the table.
    if (wantsHelp(rest) && specFor(name)) {
      io.stdout(renderHelp(specFor(name)!));
      return 0;
    }
    return await command(rest, io);
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') || (await import('./replay.js')).isInputError(e)) {
      io.stderr(errorLine(name, (e as Error).message + flagHint(name, rest, e)));
      return 2;
    }
    throw e;
  }
}
