/**
 * `contract diff A@V1 B@V2 [--contracts DIR] [--json]`: what changed between two contract versions (agents, allowed
 * edges, multiplicities, plan, deadlines), with the web view's version comparison (src/render/contract-diff.ts).
 * Exit codes as diff(1): 0 same content, 1 differences, 2 usage or bad input.
 */
import { parseFlags } from './spec.js';
import { CONTRACT_SPEC } from './specs.js';
import { packagedContractsDir } from './paths.js';
import { ContractRegistry } from '../core/registry.js';
import { parseShadowRef } from '../core/shadow.js';
import type { Contract } from '../core/contract.js';
import { contractVersionMermaid, diffContracts, type ContractChanges } from '../render/contract-diff.js';
import { mdCell, toMarkdown } from '../render/markdown.js';
import type { Report, ReportFinding } from '../render/report.js';
import { type Io, UsageError } from './io.js';
import { loadContractDir } from '../audit/contracts-dir.js';
import { annotationPath, contractLines, outputFormat, reportText } from './ci-format.js';

export const CONTRACT_USAGE = `usage: topology-audit contract diff A@V1 B@V2 [--contracts DIR] [--format text|json|junit|github|markdown]

Shows what changed from version V1 of contract A to version V2 of contract B (usually the same contract):
owner, agents, allowed edges and their max, plan steps per phase (after, dependency, within) and outcome.
--format markdown draws both versions' allowed edges (Mermaid) with the added and removed ones marked, for a
pull-request comment; junit and github report the differences as a failing test case and notices (docs/ci.md).
--json is --format json. Exit 0 when the contents are the same, 1 when they differ, 2 on bad input.
`;

function lookup(registry: ContractRegistry, text: string, dir: string): Contract {
  let ref;
  try {
    ref = parseShadowRef(text);
  } catch {
    throw new UsageError(`contract diff: expected CONTRACT@VERSION, got ${JSON.stringify(text)}`);
  }
  const c = registry.get(ref.contract, ref.version);
  if (!c) {
    const versions = registry.versions(ref.contract).map((v) => v.version);
    throw new UsageError(`contract diff: ${text}: not in ${dir}${versions.length ? ` (versions of ${ref.contract}: ${versions.join(', ')})` : ` (no contract ${ref.contract})`}`);
  }
  return c;
}

const marks = (c: Contract) => [c.retired ? 'retired' : '', c.candidate ? 'candidate' : ''].filter(Boolean).join(', ');

/** The changes as text, one change a line (+ added, - removed, ~ changed). */
export function changesText(ch: ContractChanges, a: Contract, b: Contract): string {
  const out: string[] = [];
  const tag = (c: Contract) => `${c.contract}@${c.version}${marks(c) ? ` (${marks(c)})` : ''}`;
  out.push(`${tag(a)} -> ${tag(b)}`);
  if (ch.same) {
    out.push('same content apart from the version');
    return out.join('\n') + '\n';
  }
  if (ch.owner) out.push(`~ owner ${ch.owner.from} -> ${ch.owner.to}`);
  for (const x of ch.agents.added) out.push(`+ agent ${x}`);
  for (const x of ch.agents.removed) out.push(`- agent ${x}`);
  for (const x of ch.allow.added) out.push(`+ allow ${x}`);
  for (const x of ch.allow.removed) out.push(`- allow ${x}`);
  for (const x of ch.allow.changed) out.push(`~ allow ${x.item}: ${x.what.join(', ')}`);
  for (const p of ch.phases) {
    if (p.status === 'unchanged') continue;
    if (p.status === 'added' || p.status === 'removed') {
      out.push(`${p.status === 'added' ? '+' : '-'} phase ${p.phase}`);
      for (const s of p.status === 'added' ? p.steps.added : p.steps.removed) out.push(`    ${p.status === 'added' ? '+' : '-'} ${s}`);
      continue;
    }
    out.push(`~ phase ${p.phase}`);
    if (p.outcome) out.push(`    ~ outcome ${p.outcome.from} -> ${p.outcome.to}`);
    for (const s of p.steps.added) out.push(`    + expect ${s}`);
    for (const s of p.steps.removed) out.push(`    - expect ${s}`);
    for (const s of p.steps.changed) out.push(`    ~ expect ${s.item}: ${s.what.join(', ').replaceAll('→', '->')}`);
  }
  return out.map((l) => l.replaceAll('→', '->')).join('\n') + '\n';
}

/** One notice per change, on the line of the newer version (the older one for what it removed) that holds it. */
export function changeFindings(ch: ContractChanges, a: Contract, b: Contract): ReportFinding[] {
  const at = (c: Contract, key: string, entry?: string) => {
    if (!c.file) return {};
    const lines = contractLines(c.file);
    const i = entry === undefined ? -1 : c.allow.findIndex((r) => r.key === entry);
    const line = i >= 0 ? lines.allowEntry(i) : lines.key(key);
    return line === undefined ? { file: annotationPath(c.file) } : { file: annotationPath(c.file), line };
  };
  const title = `${b.contract}@${a.version} -> ${b.version}`;
  const notice = (message: string, where: { file?: string; line?: number }): ReportFinding => ({ severity: 'notice', title, message, ...where });
  const out: ReportFinding[] = [];
  if (ch.owner) out.push(notice(`owner ${ch.owner.from} -> ${ch.owner.to}`, at(b, 'owner')));
  for (const x of ch.agents.added) out.push(notice(`agent added: ${x}`, at(b, 'agents')));
  for (const x of ch.agents.removed) out.push(notice(`agent removed: ${x}`, at(a, 'agents')));
  for (const x of ch.allow.added) out.push(notice(`allow added: ${x}`, at(b, 'allow', x)));
  for (const x of ch.allow.removed) out.push(notice(`allow removed: ${x}`, at(a, 'allow', x)));
  for (const x of ch.allow.changed) out.push(notice(`allow changed: ${x.item}: ${x.what.join(', ').replaceAll('→', '->')}`, at(b, 'allow', x.item)));
  for (const p of ch.phases) if (p.status !== 'unchanged') out.push(notice(`phase ${p.phase} ${p.status}`, at(p.status === 'removed' ? a : b, 'phases')));
  return out;
}

export function contractDiffReport(ch: ContractChanges, a: Contract, b: Contract): Report {
  const findings = changeFindings(ch, a, b);
  const name = `${a.contract}@${a.version} -> ${b.contract}@${b.version}`;
  const c = ch.same
    ? { name: 'same content', status: 'passed' as const, summary: '', findings: [] }
    : { name: 'same content', status: 'failed' as const, summary: `${findings.length} change(s)`, type: 'changed', findings };
  return { name: 'topology-audit contract diff', suites: [{ name, cases: [c] }] };
}

const CHANGE_WORD: Record<string, string> = { '+': 'added', '-': 'removed', '~': 'changed' };

/** Both versions' graphs with the added and removed edges marked, and every change in a table. */
export function contractDiffMarkdown(ch: ContractChanges, a: Contract, b: Contract): string {
  const lines = changesText(ch, a, b).split('\n').slice(1).filter((l) => /^\s*[+~-] /.test(l));
  const rows = lines.map((l) => [CHANGE_WORD[l.trim()[0]], `${l.startsWith(' ') ? '&nbsp;&nbsp;' : ''}${mdCell(l.trim().slice(2))}`]);
  const tag = (c: Contract) => `${c.contract}@${c.version}${marks(c) ? ` (${marks(c)})` : ''}`;
  return toMarkdown({
    title: `contract diff ${tag(a)} -> ${tag(b)}`,
    lead: [ch.same ? 'Same content apart from the version.' : `${rows.length} change(s). Thick green edges are added, dashed red ones removed, amber ones changed their max.`],
    ...(rows.length ? { table: { header: ['Change', 'What'], rows } } : {}),
    sections: [
      { heading: `From ${tag(a)}`, mermaid: [contractVersionMermaid(a, b, 'from')] },
      { heading: `To ${tag(b)}`, mermaid: [contractVersionMermaid(b, a, 'to')] },
    ],
  });
}

export async function contractCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    io.stdout(CONTRACT_USAGE);
    return 0;
  }
  if (sub !== 'diff') throw new UsageError(`contract: unknown subcommand ${JSON.stringify(sub ?? '')}\n${CONTRACT_USAGE}`);
  const { values, positionals } = parseFlags(CONTRACT_SPEC, rest);
  const contractsDir = typeof values.contracts === 'string' ? values.contracts : packagedContractsDir();
  if (values.help) {
    io.stdout(CONTRACT_USAGE);
    return 0;
  }
  const format = outputFormat(values, 'contract diff');
  if (positionals.length !== 2) throw new UsageError('contract diff: give two versions, A@V1 B@V2');
  const registry = loadContractDir(contractsDir);
  const a = lookup(registry, positionals[0], contractsDir);
  const b = lookup(registry, positionals[1], contractsDir);
  const ch = diffContracts(a, b);
  if (format === 'markdown') io.stdout(contractDiffMarkdown(ch, a, b));
  else if (format === 'junit' || format === 'github') io.stdout(reportText(contractDiffReport(ch, a, b), format));
  else if (format === 'json') {
    io.stdout(JSON.stringify({ from: { contract: a.contract, version: a.version, retired: a.retired, candidate: a.candidate, hash: a.hash }, to: { contract: b.contract, version: b.version, retired: b.retired, candidate: b.candidate, hash: b.hash }, changes: ch }) + '\n');
  } else io.stdout(changesText(ch, a, b));
  return ch.same ? 0 : 1;
}
