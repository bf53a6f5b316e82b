/**
 * The CI reports of `replay` and `gate`: a run is a test case (an expectation is one with --expect); its findings are
 * annotations (error when settled and not healthy, warning while waiting or uncertain, notice while working), pointed
 * at the pinned contract's file and line where the finding comes from the contract; the Markdown summary draws each
 * non-healthy run's intended-versus-observed graph (the overlay of `diff`).
 */
import type { Contract } from '../core/contract.js';
import { compactKey, edgeKey, parseEdge } from '../core/edge.js';
import { displayMessage, firstFinding, OPERATOR_MEANING } from '../core/meaning.js';
import type { ContractRegistry } from '../core/registry.js';
import type { Finding, Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import { markdownTable, mdCell, mdCode, type MarkdownDoc, type MarkdownSection } from '../render/markdown.js';
import type { ReportCase, ReportFinding, Severity } from '../render/report.js';
import { annotationPath, contractLines, type ContractLines } from './ci-format.js';

/** A verdict as replay computes it or as the run API returns it. */
export interface VerdictLike {
  run: string;
  verdict: string;
  settled: boolean;
  pin?: Pin | null;
  findings: (Pick<Finding, 'code' | 'message' | 'settled' | 'deadline' | 'edge'> & { verdict: string })[];
}

/** error: settled and not healthy; notice: useful work still going on; warning: anything else not settled yet. */
export function findingSeverity(f: { verdict: string; settled: boolean }): Severity {
  if (f.settled && f.verdict !== 'healthy' && f.verdict !== 'working') return 'error';
  return f.verdict === 'working' ? 'notice' : 'warning';
}

/** Contract line look-ups, one parse per file. */
export class ContractLocator {
  private readonly files = new Map<string, ContractLines>();
  constructor(private readonly registry?: ContractRegistry) {}

  contractOf(pin: Pin | null | undefined): Contract | undefined {
    return pin ? this.registry?.get(pin.contract, pin.version) : undefined;
  }

  lines(file: string): ContractLines {
    let l = this.files.get(file);
    if (!l) this.files.set(file, (l = contractLines(file)));
    return l;
  }

  /**
   * Where a finding points in the pinned contract: a forbidden edge at the `allow:` key (the entry it lacks), an
   * edge over its max at its allow entry, an unknown agent at `agents:`. Nothing for findings about the receipts.
   */
  locate(f: { code: string; edge?: string }, pin: Pin | null | undefined): { file?: string; line?: number } {
    const c = this.contractOf(pin);
    if (!c?.file) return {};
    const lines = this.lines(c.file);
    let line: number | undefined;
    if (f.code === 'forbidden_edge') line = lines.key('allow');
    else if (f.code === 'unknown_agent') line = lines.key('agents');
    else if (f.code === 'multiplicity' && f.edge) {
      const rule = allowRuleOf(c, f.edge);
      line = rule === undefined ? lines.key('allow') : lines.allowEntry(rule);
    }
    return line === undefined ? {} : { file: annotationPath(c.file), line };
  }
}

/** Index of the allow entry covering a concrete edge. */
function allowRuleOf(c: Contract, edge: string): number | undefined {
  try {
    const e = parseEdge(edge);
    const keys = new Set(e.to.map((to) => compactKey(edgeKey(e.from, to, e.kind))));
    const i = c.allow.findIndex((r) => r.spec.to.some((to) => keys.has(compactKey(edgeKey(r.spec.from, to, r.spec.kind)))));
    return i < 0 ? undefined : i;
  } catch {
    return undefined;
  }
}

export function runFindings(v: VerdictLike, now: number, where: ContractLocator): ReportFinding[] {
  if (v.verdict === 'healthy') return [];
  return v.findings.map((f) => ({ severity: findingSeverity(f), title: `${v.run}: ${f.code}`, message: displayMessage(f, v, now), ...where.locate(f, v.pin) }));
}

/** A run as a test case: healthy passes, settled and not healthy fails, not settled yet is skipped (not decided). */
export function runCase(v: VerdictLike, now: number, where: ContractLocator): ReportCase {
  const findings = runFindings(v, now, where);
  const first = v.findings.find((f) => f.verdict === v.verdict) ?? v.findings[0];
  const why = `${v.verdict}${first ? `: ${displayMessage(first, v, now)}` : ''}`;
  if (v.verdict === 'healthy') return { name: v.run, status: 'passed', summary: '', findings };
  if (v.settled) return { name: v.run, status: 'failed', summary: why, type: v.verdict, findings };
  return { name: v.run, status: 'skipped', summary: `not settled yet: ${why}`, type: v.verdict, findings };
}

/** The summary table's row of a run. */
export function runRow(v: VerdictLike, now: number): string[] {
  const f = firstFinding(v as RunVerdict);
  const codes = [...new Set(v.findings.map((x) => x.code))].map(mdCode).join(', ');
  const meaning = OPERATOR_MEANING[v.verdict as Verdict] ?? '';
  return [mdCell(v.run), `**${mdCell(v.verdict)}**${v.settled ? '' : ' (not settled)'}`, v.findings.length ? `${codes}: ${mdCell(displayMessage(f!, v, now))}` : mdCell(meaning || '-')];
}

export const RUN_TABLE_HEADER = ['Run', 'Verdict', 'Findings'];

/** A non-healthy run's section: its findings as a list, and the graph when there is one. */
export function runSection(v: VerdictLike, now: number, graph: { mermaid?: string; missing?: string }): MarkdownSection {
  const text = v.findings.map((f) => `- ${mdCode(f.code)}${f.settled ? '' : ' (not settled)'}: ${mdCell(displayMessage(f, v, now))}`);
  if (graph.missing) text.push('', `_No graph: ${mdCell(graph.missing)}_`);
  else text.push('', 'The pinned contract (intended) with what the run did laid over it (observed):');
  return { heading: `${v.run}: ${v.verdict}`, text, mermaid: graph.mermaid ? [graph.mermaid] : [] };
}

export interface ExpectationResult {
  run: string;
  expected: string;
  problems: string[];
}

export function expectationCase(x: ExpectationResult, v: VerdictLike | undefined, now: number, where: ContractLocator): ReportCase {
  const name = `${x.run} is ${x.expected}`;
  if (!x.problems.length) return { name, status: 'passed', summary: '', findings: [] };
  const unmet: ReportFinding[] = x.problems.map((p) => ({ severity: 'error', title: `${x.run}: expectation not met`, message: p }));
  return { name, status: 'failed', summary: x.problems.join('; '), type: 'expectation', findings: [...unmet, ...(v ? runFindings(v, now, where) : [])] };
}

export function expectationTable(results: ExpectationResult[]): string[] {
  return markdownTable(
    ['Expectation', 'Met'],
    results.map((x) => [mdCell(`${x.run} is ${x.expected}`), x.problems.length ? `no: ${mdCell(x.problems.join('; '))}` : 'yes']),
  );
}

/** The Markdown summary of verdicts: the table, then one section per non-healthy run with its graph. */
export function verdictsMarkdown(
  title: string,
  lead: string[],
  verdicts: VerdictLike[],
  now: number,
  graphs: Map<string, { mermaid?: string; missing?: string }>,
  extra: MarkdownSection[] = [],
): MarkdownDoc {
  const bad = verdicts.filter((v) => v.verdict !== 'healthy');
  return {
    title,
    lead,
    table: { header: RUN_TABLE_HEADER, rows: verdicts.map((v) => runRow(v, now)) },
    sections: [...extra, ...bad.map((v) => runSection(v, now, graphs.get(v.run) ?? { missing: 'no pinned contract' }))],
  };
}

/** Receipts by run (file order kept). */
export function receiptsByRun(receipts: Receipt[]): Map<string, Receipt[]> {
  const out = new Map<string, Receipt[]>();
  for (const r of receipts) {
    let list = out.get(r.run);
    if (!list) out.set(r.run, (list = []));
    list.push(r);
  }
  return out;
}
