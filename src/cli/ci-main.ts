/**
 * The entry of the self-contained CI bundle (ci/bundle/topology-audit.mjs, built by scripts/build-ci-bundle.mjs): the
 * commands a CI job runs (replay, gate, diff, validate, contract), with every dependency inlined, so the GitHub Action
 * and the GitLab template run it with `node` alone: no registry package, no development install. The other commands
 * (serve, handoff, ack, ...) need the full package.
 */
import { dispatch, type CommandTable } from './dispatch.js';
import { processIo } from './io.js';

export const CI_COMMANDS: CommandTable = {
  replay: async () => (await import('./replay.js')).replayCommand,
  gate: async () => (await import('./gate.js')).gateCommand,
  diff: async () => (await import('./diff.js')).diffCommand,
  validate: async () => (await import('./validate.js')).validateCommand,
  contract: async () => (await import('./contract.js')).contractCommand,
};

export function ciMain(argv: string[]): Promise<number> {
  return dispatch(CI_COMMANDS, argv, processIo);
}

ciMain(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`topology-audit: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  },
);
