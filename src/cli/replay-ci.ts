/**
 * `replay --format junit|github|markdown`: one test suite per receipts file (a run belongs to the first file holding
 * its receipts) with one case per run; with --expect, one suite for the expectations file with one case per
 * expectation. Markdown: the summary table and, per non-healthy run, the graph `diff` draws.
 */
import type { ContractRegistry } from '../core/registry.js';
import { formatInstant } from '../core/time.js';
import type { Receipt, RunVerdict } from '../core/types.js';
import { mdCode, toMarkdown, type MarkdownSection } from '../render/markdown.js';
import type { Report, ReportSuite } from '../render/report.js';
import { reportText } from './ci-format.js';
import { ContractLocator, expectationCase, expectationTable, receiptsByRun, runCase, verdictsMarkdown, type ExpectationResult } from './ci-report.js';
import { renderDiff } from './diff.js';
import { checkExpectation, type Expectation } from './replay-core.js';

export interface ReplayCiInput {
  /** The receipts files in command-line order, each with the runs first seen in it. */
  files: { file: string; runs: ReadonlySet<string> }[];
  receipts: Receipt[];
  verdicts: RunVerdict[];
  now: number;
  nowNs: number;
  registry: ContractRegistry;
  expect: { file: string; entries: Map<string, Expectation> } | null;
}

function expectationResults(input: ReplayCiInput): ExpectationResult[] {
  const byRun = new Map(input.verdicts.map((v) => [v.run, v]));
  return [...(input.expect?.entries ?? [])].map(([run, e]) => ({
    run,
    expected: [e.verdict ?? 'any verdict', ...(e.codes ?? []).map((c) => `with ${c}`)].join(' '),
    problems: checkExpectation(run, e, byRun),
  }));
}

export function replayReport(input: ReplayCiInput): Report {
  const where = new ContractLocator(input.registry);
  const byRun = new Map(input.verdicts.map((v) => [v.run, v]));
  let suites: ReportSuite[];
  if (input.expect) {
    const cases = expectationResults(input).map((x) => expectationCase(x, byRun.get(x.run), input.now, where));
    suites = [{ name: input.expect.file, cases }];
  } else {
    suites = input.files.map(({ file, runs }) => ({ name: file, cases: input.verdicts.filter((v) => runs.has(v.run)).map((v) => runCase(v, input.now, where)) }));
  }
  return { name: 'topology-audit replay', suites, timestamp: Number.isFinite(input.now) ? new Date(input.now).toISOString().slice(0, 19) : undefined };
}

async function graphs(input: ReplayCiInput): Promise<Map<string, { mermaid?: string; missing?: string }>> {
  const byRun = receiptsByRun(input.receipts);
  const out = new Map<string, { mermaid?: string; missing?: string }>();
  for (const v of input.verdicts) {
    if (v.verdict === 'healthy') continue;
    const contract = v.pin ? input.registry.get(v.pin.contract, v.pin.version) : undefined;
    if (!v.pin || !contract) {
      out.set(v.run, { missing: `no pinned contract (${v.findings.map((f) => f.message).join('; ') || 'none named'})` });
      continue;
    }
    out.set(v.run, { mermaid: await renderDiff({ verdict: v, receipts: byRun.get(v.run) ?? [], contract, now: input.now }, 'mermaid') });
  }
  return out;
}

export async function replayMarkdown(input: ReplayCiInput): Promise<string> {
  const at = Number.isFinite(input.now) ? formatInstant(input.now, input.nowNs) : '-';
  const counts = new Map<string, number>();
  for (const v of input.verdicts) counts.set(v.verdict, (counts.get(v.verdict) ?? 0) + 1);
  const lead = [`${input.verdicts.length} run(s) from ${input.files.map((f) => mdCode(f.file)).join(', ')}, audited as of ${at}: ${[...counts].map(([k, n]) => `${k} ${n}`).join(', ') || 'no runs'}.`];
  const extra: MarkdownSection[] = [];
  if (input.expect) {
    const results = expectationResults(input);
    const unmet = results.filter((x) => x.problems.length).length;
    lead.push('', `Expectations (${mdCode(input.expect.file)}): ${results.length - unmet} of ${results.length} met.`);
    extra.push({ heading: 'Expectations', text: expectationTable(results) });
  }
  return toMarkdown(verdictsMarkdown('topology-audit replay', lead, input.verdicts, input.now, await graphs(input), extra));
}

export async function replayCiOutput(input: ReplayCiInput, format: 'junit' | 'github' | 'markdown'): Promise<string> {
  return format === 'markdown' ? replayMarkdown(input) : reportText(replayReport(input), format);
}
