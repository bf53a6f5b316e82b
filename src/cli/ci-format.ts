/**
 * `--format text|json|junit|github|markdown` for the commands CI runs (replay, gate, validate, contract diff), and
 * where in a contract file a finding points (for GitHub annotations).
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, relative } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Io } from './io.js';
import { loadContractDir } from '../audit/contracts-dir.js';
import { ContractError } from '../core/contract.js';
import type { ContractRegistry } from '../core/registry.js';
import { toJunit } from '../render/junit.js';
import { toWorkflowCommands } from '../render/workflow-commands.js';
import type { Report } from '../render/report.js';

export { OUTPUT_FORMATS, outputFormat, type OutputFormat } from './output-format.js';
import type { OutputFormat } from './output-format.js';

/** The report in one of the CI formats that render a Report. */
export function reportText(report: Report, format: 'junit' | 'github'): string {
  return format === 'junit' ? toJunit(report) : toWorkflowCommands(report);
}

/** A path as GitHub wants it in an annotation: relative to the workspace when inside it. */
export function annotationPath(file: string, env: NodeJS.ProcessEnv = process.env): string {
  const ws = env.GITHUB_WORKSPACE;
  if (!ws || !isAbsolute(file)) return file;
  const rel = relative(ws, file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

export interface ContractLines {
  /** Line of a top-level key (`allow:`, `agents:`, `phases:`). */
  key(name: string): number | undefined;
  /** Line of the i-th entry of the `allow` list. */
  allowEntry(i: number): number | undefined;
}

/** Where the keys of a contract file are (1-based lines); nothing when the file cannot be read or parsed. */
export function contractLines(file: string): ContractLines {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    /* no lines to point at */
  }
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc });
  const root = isMap(doc.contents) ? doc.contents : null;
  const pair = (name: string) => root?.items.find((p) => isScalar(p.key) && p.key.value === name);
  const lineAt = (offset: number | undefined) => (offset === undefined ? undefined : lc.linePos(offset).line);
  return {
    key: (name) => {
      const p = pair(name);
      return lineAt(isScalar(p?.key) ? p.key.range?.[0] : undefined);
    },
    allowEntry: (i) => {
      const seq = pair('allow')?.value;
      return isSeq(seq) ? lineAt((seq.items[i] as { range?: [number, number, number] } | undefined)?.range?.[0]) : undefined;
    },
  };
}

/**
 * The contracts of a directory for a command with --format: an invalid one stays a bad input (exit 2, said on
 * stderr), and with --format github each of its issues is also an ::error at its file, line and column.
 */
export function loadContractsFor(dir: string, format: OutputFormat, io: Io): ContractRegistry {
  try {
    return loadContractDir(dir);
  } catch (e) {
    if (e instanceof ContractError && format === 'github') {
      const findings = e.issues.map((i) => ({ severity: 'error' as const, title: `invalid contract: ${i.field || '(root)'}`, message: i.message, file: annotationPath(i.file), line: i.line, col: i.col }));
      io.stdout(toWorkflowCommands({ name: 'contracts', suites: [{ name: dir, cases: [{ name: dir, status: 'error', summary: '', findings }] }] }));
    }
    throw e;
  }
}
