import { contractJsonSchema, receiptJsonSchema } from '../core/index.js';
import { type Io, processIo, UsageError } from './io.js';
import { isInputError, replayCommand } from './replay.js';
import { validateCommand } from './validate.js';

const USAGE = `usage: topology-audit <command> [options]

commands:
  serve [--contracts DIR] [--contract ID] [--data DIR] [--otlp-http-port 4318] [--otlp-grpc-port 4317] [--port 9464] [--host 127.0.0.1]
  replay FILE... --contracts DIR [--contract ID] [--now RFC3339] [--expect FILE] [--json]
  gate RUN [--server URL] [--timeout DUR]
  validate FILE...
  diff RUN|FILE [--contracts DIR] [--format mermaid|dot|svg] [--run ID] [--now RFC3339] [--server URL]
  schema [contract|receipt|handoff|experiment]
  experiment diff|compare MANIFEST [--json|--markdown]
  handoff admit HANDOFF.json --parent ENVELOPE.json --state STATE.json [--json]
  handoff return RESULT.json --handoff HANDOFF.json --state STATE.json [--json]
  propose FILE... | --server URL [--since DUR] [--contract-id ID] [--min-share 0.05]
  contract diff A@V1 B@V2 [--contracts DIR] [--json]
  handoff board RUN --server URL [--json]
`;

type Command = (argv: string[], io: Io) => Promise<number>;

const commands: Record<string, () => Promise<Command>> = {
  replay: async () => replayCommand,
  validate: async () => validateCommand,
  schema: async () => schemaCommand,
  serve: async () => (await import('./serve.js')).serveCommand,
  gate: async () => (await import('./gate.js')).gateCommand,
  experiment: async () => (await import('./experiment.js')).experimentCommand,
  handoff: async () => (await import('./handoff.js')).handoffCommand,
  diff: async () => (await import('./diff.js')).diffCommand,
  propose: async () => (await import('./propose.js')).proposeCommand,
  contract: async () => (await import('./contract.js')).contractCommand,
};

/** Register a lazily-loaded command (keeps start-up cheap). */
export function registerCommand(name: string, load: () => Promise<Command>): void {
  commands[name] = load;
}

async function schemaCommand(argv: string[], io: Io): Promise<number> {
  const which = argv[0] ?? 'contract';
  let schema: unknown;
  if (which === 'contract') schema = contractJsonSchema();
  else if (which === 'receipt') schema = receiptJsonSchema();
  else if (which === 'handoff') schema = (await import('../handoff/schema.js')).handoffJsonSchemas();
  else if (which === 'experiment') schema = (await import('../experiment/manifest.js')).manifestJsonSchema();
  else throw new UsageError(`schema: unknown format "${which}" (contract, receipt, handoff, experiment)`);
  io.stdout(JSON.stringify(schema, null, 2) + '\n');
  return 0;
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(USAGE);
    return name ? 0 : 2;
  }
  const load = commands[name];
  if (!load) {
    io.stderr(`topology-audit: unknown command "${name}"\n${USAGE}`);
    return 2;
  }
  try {
    return await (await load())(rest, io);
  } catch (e) {
    if (isInputError(e) || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr(`topology-audit ${name}: ${(e as Error).message}\n`);
      return 2;
    }
    throw e;
  }
}
