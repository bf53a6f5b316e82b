import { type Io, processIo, UsageError } from './io.js';
import { renderHelp, specFor, allSpecs, wantsHelp } from './spec.js';
import { topUsage } from './specs.js';
import { VERSION } from './version.js';

type Command = (argv: string[], io: Io) => Promise<number>;

const commands: Record<string, () => Promise<Command>> = {
  // Every command loads lazily, so `gate` in CI does not pay for the audit engine at start-up.
  replay: async () => (await import('./replay.js')).replayCommand,
  validate: async () => (await import('./validate.js')).validateCommand,
  schema: async () => schemaCommand,
  serve: async () => (await import('./serve.js')).serveCommand,
  gate: async () => (await import('./gate.js')).gateCommand,
  experiment: async () => (await import('./experiment.js')).experimentCommand,
  handoff: async () => (await import('./handoff.js')).handoffCommand,
  diff: async () => (await import('./diff.js')).diffCommand,
  propose: async () => (await import('./propose.js')).proposeCommand,
  contract: async () => (await import('./contract.js')).contractCommand,
  ack: async () => (await import('./ack.js')).ackCommand,
  runs: async () => (await import('./runs.js')).runsCommand,
  explain: async () => (await import('./explain.js')).explainCommand,
};

async function schemaCommand(argv: string[], io: Io): Promise<number> {
  const which = argv[0] ?? 'contract';
  let schema: unknown;
  const { contractJsonSchema, receiptJsonSchema } = await import('../core/index.js');
  if (which === 'contract') schema = contractJsonSchema();
  else if (which === 'receipt') schema = receiptJsonSchema();
  else if (which === 'handoff') schema = (await import('../handoff/schema.js')).handoffJsonSchemas();
  else if (which === 'experiment') schema = (await import('../experiment/manifest.js')).manifestJsonSchema();
  else throw new UsageError(`schema: unknown format "${which}" (contract, receipt, handoff, experiment)`);
  io.stdout(JSON.stringify(schema, null, 2) + '\n');
  return 0;
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

export async function main(argv: string[], io: Io = processIo): Promise<number> {
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
      io.stderr(errorLine(name, (e as Error).message));
      return 2;
    }
    throw e;
  }
}
