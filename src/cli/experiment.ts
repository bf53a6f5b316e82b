/**
 * `topology-audit experiment diff|compare MANIFEST`.
 *   diff:    0 only the declared slice changed and no authority widened; 1 otherwise (naming the field paths); 2 bad input.
 *   compare: 0 a disposition was reached; 1 the disposition is one of --fail-on; 2 bad input, unpaired or mismatched cases.
 */
import { parseFlags } from './spec.js';
import { EXPERIMENT_SPEC } from './specs.js';
import { PairingError, compareExperiment } from '../experiment/compare.js';
import { diffConfigs } from '../experiment/diff.js';
import { DISPOSITIONS, type DispositionName } from '../experiment/disposition.js';
import { ExperimentInputError, formatInputIssue } from '../experiment/errors.js';
import { loadExperiment, loadManifest, type LoadOptions } from '../experiment/load.js';
import { renderComparisonMarkdown, renderComparisonText, renderDiffText } from '../experiment/render.js';

export interface ExperimentIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

export const EXPERIMENT_USAGE = `usage:
  topology-audit experiment diff MANIFEST [--json]
  topology-audit experiment compare MANIFEST [--json | --markdown] [--fail-on DISPOSITION[,DISPOSITION]]

diff     the configuration difference between baseline and candidate, with the authority diff;
         exit 0 only the declared slice changed and no authority widened, 1 otherwise, 2 bad input
compare  paired case records: case-level deltas, aggregates, hard gates, disposition
         (retain, separate, retest, reject); exit 0, or 1 when the disposition is in --fail-on,
         2 bad input or unpaired/mismatched cases
`;

function reportError(e: unknown, io: ExperimentIo): number {
  if (e instanceof ExperimentInputError) {
    for (const i of e.issues) io.stderr(`${formatInputIssue(i)}\n`);
    return 2;
  }
  if (e instanceof PairingError) {
    io.stderr(`topology-audit experiment: ${e.message}\n`);
    return 2;
  }
  throw e;
}

export async function experimentCommand(argv: string[], io: ExperimentIo, opts: LoadOptions = {}): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(EXPERIMENT_SPEC, argv);
  } catch (e) {
    io.stderr(`topology-audit experiment: ${(e as Error).message}\n${EXPERIMENT_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout(EXPERIMENT_USAGE);
    return 0;
  }
  const [sub, manifestPath, ...extra] = positionals;
  const usage = (msg: string) => {
    io.stderr(`topology-audit experiment: ${msg}\n${EXPERIMENT_USAGE}`);
    return 2;
  };
  if (sub !== 'diff' && sub !== 'compare') return usage(sub ? `unknown subcommand ${sub}` : 'missing subcommand');
  if (!manifestPath) return usage('missing MANIFEST');
  if (extra.length) return usage(`unexpected argument ${extra[0]}`);
  if (values.json && values.markdown) return usage('--json and --markdown are exclusive');

  if (sub === 'diff') {
    if (values.markdown || values['fail-on'] !== undefined) return usage('diff takes only --json');
    try {
      const d = diffConfigs(await loadManifest(manifestPath, opts));
      io.stdout(values.json ? `${JSON.stringify(d)}\n` : renderDiffText(d));
      for (const c of d.outsideSlice) io.stderr(`${manifestPath}: ${c.path}: ${c.change} outside the declared slice\n`);
      for (const w of d.authority.widening) io.stderr(`${manifestPath}: ${w.path}: ${w.code}: ${w.message}\n`);
      return d.ok ? 0 : 1;
    } catch (e) {
      return reportError(e, io);
    }
  }

  let failOn: DispositionName[] = [];
  if (typeof values['fail-on'] === 'string') {
    failOn = values['fail-on'].split(',').map((s) => s.trim()) as DispositionName[];
    const bad = failOn.filter((d) => !(DISPOSITIONS as readonly string[]).includes(d));
    if (bad.length) return usage(`--fail-on takes ${DISPOSITIONS.join(', ')}; not ${bad.join(', ')}`);
  }
  try {
    const { manifest, baseline, candidate } = await loadExperiment(manifestPath, opts);
    const c = compareExperiment(manifest, baseline, candidate);
    io.stdout(values.json ? `${JSON.stringify(c)}\n` : values.markdown ? renderComparisonMarkdown(c) : renderComparisonText(c));
    return failOn.includes(c.disposition.decision) ? 1 : 0;
  } catch (e) {
    return reportError(e, io);
  }
}
