/**
 * `contract diff A@V1 B@V2 [--contracts DIR] [--json]`: what changed between two contract versions (agents, allowed
 * edges, multiplicities, plan, deadlines), with the web view's version comparison (src/render/contract-diff.ts).
 * Exit codes as diff(1): 0 same content, 1 differences, 2 usage or bad input.
 */
import { parseArgs } from 'node:util';
import { packagedContractsDir } from './paths.js';
import { ContractRegistry } from '../core/registry.js';
import { parseShadowRef } from '../core/shadow.js';
import type { Contract } from '../core/contract.js';
import { diffContracts, type ContractChanges } from '../render/contract-diff.js';
import { type Io, UsageError } from './io.js';
import { loadContractDir } from '../audit/contracts-dir.js';

export const CONTRACT_USAGE = `usage: topology-audit contract diff A@V1 B@V2 [--contracts DIR] [--json]

Shows what changed from version V1 of contract A to version V2 of contract B (usually the same contract):
owner, agents, allowed edges and their max, plan steps per phase (after, dependency, within) and outcome.
Exit 0 when the contents are the same, 1 when they differ, 2 on bad input.
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

export async function contractCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    io.stdout(CONTRACT_USAGE);
    return 0;
  }
  if (sub !== 'diff') throw new UsageError(`contract: unknown subcommand ${JSON.stringify(sub ?? '')}\n${CONTRACT_USAGE}`);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      contracts: { type: 'string', short: 'c', default: packagedContractsDir() },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    io.stdout(CONTRACT_USAGE);
    return 0;
  }
  if (positionals.length !== 2) throw new UsageError('contract diff: give two versions, A@V1 B@V2');
  const registry = loadContractDir(values.contracts!);
  const a = lookup(registry, positionals[0], values.contracts!);
  const b = lookup(registry, positionals[1], values.contracts!);
  const ch = diffContracts(a, b);
  if (values.json) {
    io.stdout(JSON.stringify({ from: { contract: a.contract, version: a.version, retired: a.retired, candidate: a.candidate, hash: a.hash }, to: { contract: b.contract, version: b.version, retired: b.retired, candidate: b.candidate, hash: b.hash }, changes: ch }) + '\n');
  } else io.stdout(changesText(ch, a, b));
  return ch.same ? 0 : 1;
}
