import { type Io, processIo, UsageError } from './io.js';
import { dispatch, type CommandTable } from './dispatch.js';

export { errorLine } from './dispatch.js';

const commands: CommandTable = {
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

export function main(argv: string[], io: Io = processIo): Promise<number> {
  return dispatch(commands, argv, io);
}
