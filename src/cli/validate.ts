import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ContractError, ContractRegistry, formatIssue, parseContract, type Contract } from '../core/index.js';
import { type Io, UsageError } from './io.js';

export async function validateCommand(argv: string[], io: Io): Promise<number> {
  const args = argv.filter((a) => !a.startsWith('--'));
  if (args.length === 0) throw new UsageError('validate: give at least one contract file or directory; see topology-audit validate --help');
  // A directory stands for its *.yaml / *.yml files (as serve --contracts reads them).
  const files: string[] = [];
  for (const a of args) {
    let isDir = false;
    try {
      isDir = statSync(a).isDirectory();
    } catch {
      /* reported as unreadable below */
    }
    if (!isDir) {
      files.push(a);
      continue;
    }
    const inDir = readdirSync(a).filter((f) => /\.(ya?ml|json)$/i.test(f)).sort().map((f) => join(a, f));
    if (inDir.length === 0) {
      io.stderr(`${a}: no contract files (*.yaml, *.yml, *.json) in this directory\n`);
      return 1;
    }
    files.push(...inDir);
  }
  let bad = 0;
  const ok: Contract[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      io.stderr(`${file}:1:1: (file): ${(e as Error).message}\n`);
      bad++;
      continue;
    }
    try {
      const c = parseContract(text, file);
      ok.push(c);
      io.stdout(`${file}: ok (${c.contract}@${c.version}${c.retired ? ', retired' : ''}, ${c.agents.length} agents, ${c.allow.length} allow entries, phases ${c.phases.map((p) => p.name).join(', ')})\n`);
      // warnings do not fail validation (exit 0)
      for (const w of c.warnings ?? []) io.stderr(`${w.file}:${w.line}:${w.col}: ${w.field || '(root)'}: warning: ${w.message}\n`);
    } catch (e) {
      if (!(e instanceof ContractError)) throw e;
      for (const i of e.issues) io.stderr(formatIssue(i) + '\n');
      bad++;
    }
  }
  try {
    ContractRegistry.fromContracts(ok);
  } catch (e) {
    if (!(e instanceof ContractError)) throw e;
    for (const i of e.issues) io.stderr(formatIssue(i) + '\n');
    bad++;
  }
  return bad ? 1 : 0;
}
