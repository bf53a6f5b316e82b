import { readFileSync } from 'node:fs';
import { packagedContractsDir } from './paths.js';
import { parseCommandArgs, specFor } from './spec.js';
import './specs.js';
import { ContractError, ContractRegistry, resolveShadows, shadowEvaluate, shadowJson, summarizeShadows, type Contract, type ShadowVerdict, OPERATOR_MEANING, displayMessage, ReceiptFileError, evaluate, firstFinding, groupByRun, resolvePin, verdictJson, VERDICTS, type Receipt, type RunVerdict, type Verdict } from '../core/index.js';
import { type Io, UsageError, parseInstantArg, readReceiptFiles, table } from './io.js';
import { loadContractsFor, outputFormat } from './ci-format.js';
import { formatInstant, toInstant, type Instant } from '../core/time.js';

export { checkExpectation, checkExpectations, failingRuns, parseExpectFile, parseFailOn, replayReceipts, type Expectation, type FailOn, type ReplayResult } from './replay-core.js';
import { checkExpectations, failingRuns, parseExpectFile, parseFailOn, replayReceipts } from './replay-core.js';

export async function replayCommand(argv: string[], io: Io): Promise<number> {
  const parsed = parseCommandArgs(specFor('replay')!, argv);
  const values = parsed.values as { contracts?: string; contract?: string; now?: string; expect?: string; 'fail-on'?: string; json?: boolean; format?: string; shadow?: string[] };
  const positionals = parsed.positionals;
  const format = outputFormat(values, 'replay');
  if (positionals.length === 0) throw new UsageError('replay: give at least one NDJSON receipts file; see topology-audit replay --help');
  values.contracts ??= packagedContractsDir();
  const registry = loadContractsFor(values.contracts, format, io);
  if (values.contract && registry.versions(values.contract).length === 0) throw new UsageError(`replay: --contract ${values.contract}: no such contract in ${values.contracts}`);
  let shadow: Contract[] = [];
  try {
    shadow = resolveShadows(registry, values.shadow!);
  } catch (e) {
    throw new UsageError(`replay: ${(e as Error).message}`);
  }
  const now = values.now !== undefined ? parseInstantArg('--now', values.now) : undefined;
  const expect = values.expect ? parseExpectFile(readFileSync(values.expect, 'utf8'), values.expect) : null;
  // With --expect the expectations decide, unless --fail-on is given too; without, settled non-healthy runs fail.
  const failOn = expect && values['fail-on'] === undefined ? null : parseFailOn(values['fail-on']);
  // One file at a time, so a CI report can say which input each run came from.
  const receipts: Receipt[] = [];
  const files = positionals.map((file) => {
    const runs = new Set<string>();
    for (const r of readReceiptFiles([file])) {
      receipts.push(r);
      runs.add(r.run);
    }
    return { file, runs };
  });
  for (const [i, f] of files.entries()) for (const run of f.runs) if (files.slice(0, i).some((g) => g.runs.has(run))) f.runs.delete(run);
  const { verdicts, now: at, nowNs: atNs, shadows } = replayReceipts(receipts, registry, { now, defaultContract: values.contract, shadow });
  if (format === 'junit' || format === 'github' || format === 'markdown') {
    const { replayCiOutput } = await import('./replay-ci.js');
    io.stdout(await replayCiOutput({ files, receipts, verdicts, now: at, nowNs: atNs, registry, expect: expect && { file: values.expect!, entries: expect } }, format));
  } else if (format === 'json') {
    for (const v of verdicts) io.stdout(JSON.stringify(shadow.length ? { ...verdictJson(v), shadow: (shadows.get(v.run) ?? []).map(shadowJson) } : verdictJson(v)) + '\n');
  } else {
    const rows = verdicts.map((v) => {
      const f = firstFinding(v);
      return [v.run, v.naive, v.verdict, OPERATOR_MEANING[v.verdict], f ? displayMessage(f, v, at) : '-'];
    });
    io.stdout(`now ${Number.isFinite(at) ? formatInstant(at, atNs) : '-'}, ${verdicts.length} run(s)\n`);
    io.stdout(table(['RUN', 'NAIVE', 'VERDICT', 'OPERATOR MEANING', 'FIRST FINDING'], rows));
    for (const s of summarizeShadows(shadow, verdicts.map((v) => ({ verdict: v, shadow: shadows.get(v.run) ?? [] })))) {
      const counts = Object.entries(s.verdicts).map(([k, n]) => `${k} ${n}`).join(', ') || 'no runs';
      io.stdout(`\nshadow ${s.contract}@${s.version}: ${s.runs} run(s) (${counts}); ${s.disagreements} disagree with the pinned verdict\n`);
      if (s.disagreeing.length) io.stdout(table(['RUN', 'PINNED', 'SHADOW', 'EDGES'], s.disagreeing.map((d) => [d.run, d.pinned, d.shadow, d.edges.join('; ')])));
    }
  }
  let code = 0;
  if (expect) {
    const problems = checkExpectations(verdicts, expect);
    if (problems.length) {
      // One line each: a line break in a problem would start a line a CI runner reads as a command (`::error::…`).
      for (const p of problems) io.stderr(`expectation failed: ${p.replace(/[\r\n\u2028\u2029]+/g, ' ')}\n`);
      code = 1;
    } else io.stderr(`all ${expect.size} expectation(s) met\n`);
  }
  if (failOn) {
    const failing = failingRuns(verdicts, failOn);
    if (failing.length) {
      const counts = new Map<string, number>();
      for (const v of failing) counts.set(v.verdict, (counts.get(v.verdict) ?? 0) + 1);
      const what = values['fail-on'] === undefined ? 'settled and not healthy' : `--fail-on ${values['fail-on']}`;
      io.stderr(`${failing.length} of ${verdicts.length} run(s) fail (${what}): ${[...counts].map(([k, n]) => `${k} ${n}`).join(', ')}; --fail-on none to only report\n`);
      code = 1;
    }
  }
  return code;
}

export function isInputError(e: unknown): boolean {
  return e instanceof ReceiptFileError || e instanceof ContractError || e instanceof UsageError;
}
