import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ContractError, ContractRegistry, formatIssue, parseContract, type Contract, type ContractIssue } from '../core/index.js';
import { type Io, UsageError } from './io.js';
import { parseCommandArgs, specFor } from './spec.js';
import './specs.js';
import { annotationPath, outputFormat, reportText } from './ci-format.js';
import { markdownTable, mdCell, mdCode, toMarkdown } from '../render/markdown.js';
import type { Report, ReportCase, ReportFinding } from '../render/report.js';

/** One contract file's result: the contract when it parsed, else its issues; warnings never fail validation. */
export interface FileResult {
  file: string;
  contract?: Contract;
  issues: ContractIssue[];
  warnings: ContractIssue[];
}

export interface ValidateResult {
  files: FileResult[];
  /** Problems of the versions together (e.g. one version with two contents). */
  together: ContractIssue[];
}

/** A directory stands for its *.yaml / *.yml / *.json files (as serve --contracts reads them). */
function expandInputs(args: string[], io: Io): string[] | null {
  const files: string[] = [];
  for (const a of args) {
    let isDir = false;
    try {
      isDir = statSync(a).isDirectory();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new UsageError(`${a}: ${code === 'ENOENT' ? 'no such file or directory' : code === 'EACCES' ? 'permission denied' : (e as Error).message}`);
    }
    if (!isDir) {
      files.push(a);
      continue;
    }
    const inDir = readdirSync(a).filter((f) => /\.(ya?ml|json)$/i.test(f)).sort().map((f) => join(a, f));
    if (inDir.length === 0) {
      io.stderr(`${a}: no contract files (*.yaml, *.yml, *.json) in this directory\n`);
      return null;
    }
    files.push(...inDir);
  }
  return files;
}

function validateFile(file: string): FileResult {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    return { file, issues: [{ file, line: 1, col: 1, field: '(file)', message: (e as Error).message }], warnings: [] };
  }
  try {
    const contract = parseContract(text, file);
    return { file, contract, issues: [], warnings: contract.warnings ?? [] };
  } catch (e) {
    if (!(e instanceof ContractError)) throw e;
    return { file, issues: e.issues, warnings: [] };
  }
}

export function validateFiles(files: string[]): ValidateResult {
  const results = files.map(validateFile);
  try {
    ContractRegistry.fromContracts(results.flatMap((r) => (r.contract ? [r.contract] : [])));
    return { files: results, together: [] };
  } catch (e) {
    if (!(e instanceof ContractError)) throw e;
    return { files: results, together: e.issues };
  }
}

const describe = (c: Contract) => `${c.contract}@${c.version}${c.retired ? ', retired' : ''}, ${c.agents.length} agents, ${c.allow.length} allow entries, phases ${c.phases.map((p) => p.name).join(', ')}`;

function issueFinding(i: ContractIssue, severity: 'error' | 'warning'): ReportFinding {
  return { severity, title: `${i.field || '(root)'}${severity === 'warning' ? ' (warning)' : ''}`, message: i.message, file: annotationPath(i.file), line: i.line, col: i.col };
}

export function validateReport(r: ValidateResult): Report {
  const suites = r.files.map((f) => {
    const findings = [...f.issues.map((i) => issueFinding(i, 'error')), ...f.warnings.map((w) => issueFinding(w, 'warning'))];
    const c: ReportCase = f.issues.length
      ? { name: 'valid contract', status: 'failed', summary: `${f.issues.length} issue(s): ${formatIssue(f.issues[0])}`, type: 'invalid', findings }
      : { name: `valid contract ${f.contract!.contract}@${f.contract!.version}`, status: 'passed', summary: '', findings };
    return { name: f.file, cases: [c] };
  });
  if (r.together.length) {
    const findings = r.together.map((i) => issueFinding(i, 'error'));
    suites.push({ name: 'versions together', cases: [{ name: 'one content per version', status: 'failed', summary: formatIssue(r.together[0]), type: 'invalid', findings }] });
  }
  return { name: 'topology-audit validate', suites };
}

export function validateMarkdown(r: ValidateResult): string {
  const bad = r.files.filter((f) => f.issues.length);
  const rows = r.files.map((f) => [mdCode(f.file), f.contract ? mdCell(describe(f.contract)) : '-', f.issues.length ? `**invalid** (${f.issues.length} issue(s))` : f.warnings.length ? `ok, ${f.warnings.length} warning(s)` : 'ok']);
  const issueLines = (list: ContractIssue[]) => list.map((i) => `- ${mdCode(`${i.file}:${i.line}:${i.col}`)} ${mdCode(i.field || '(root)')}: ${mdCell(i.message)}`);
  const sections = [
    ...bad.map((f) => ({ heading: `${f.file}: invalid`, text: issueLines(f.issues) })),
    ...r.files.filter((f) => f.warnings.length).map((f) => ({ heading: `${f.file}: warnings`, text: issueLines(f.warnings) })),
    ...(r.together.length ? [{ heading: 'Versions together', text: issueLines(r.together) }] : []),
  ];
  const ok = !bad.length && !r.together.length;
  return toMarkdown({ title: 'topology-audit validate', lead: [`${r.files.length} contract file(s): ${ok ? 'all valid' : `${bad.length} invalid${r.together.length ? ', versions conflict' : ''}`}.`], table: { header: ['File', 'Contract', 'Result'], rows }, sections });
}

export function validateJson(r: ValidateResult): string {
  const files = r.files.map((f) => ({
    file: f.file,
    ok: f.issues.length === 0,
    ...(f.contract ? { contract: f.contract.contract, version: f.contract.version, retired: f.contract.retired, candidate: f.contract.candidate, hash: f.contract.hash } : {}),
    issues: f.issues,
    warnings: f.warnings,
  }));
  return JSON.stringify({ ok: files.every((f) => f.ok) && !r.together.length, files, together: r.together }) + '\n';
}

function validateText(r: ValidateResult, io: Io): void {
  for (const f of r.files) {
    if (f.contract) io.stdout(`${f.file}: ok (${describe(f.contract)})\n`);
    for (const i of f.issues) io.stderr(formatIssue(i) + '\n');
    // warnings do not fail validation (exit 0)
    for (const w of f.warnings) io.stderr(`${w.file}:${w.line}:${w.col}: ${w.field || '(root)'}: warning: ${w.message}\n`);
  }
  for (const i of r.together) io.stderr(formatIssue(i) + '\n');
}

export async function validateCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(specFor('validate')!, argv);
  const format = outputFormat(values, 'validate');
  if (positionals.length === 0) throw new UsageError('validate: give at least one contract file or directory; see topology-audit validate --help');
  const files = expandInputs(positionals, io);
  if (!files) return 1;
  const r = validateFiles(files);
  if (format === 'text') validateText(r, io);
  else if (format === 'json') io.stdout(validateJson(r));
  else if (format === 'markdown') io.stdout(validateMarkdown(r));
  else io.stdout(reportText(validateReport(r), format));
  // Invalid files are also said on stderr in every format, so a CI log shows them whatever the report.
  if (format !== 'text') for (const i of [...r.files.flatMap((f) => f.issues), ...r.together]) io.stderr(formatIssue(i) + '\n');
  return r.files.some((f) => f.issues.length) || r.together.length ? 1 : 0;
}
