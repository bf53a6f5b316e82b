/**
 * Contracts from a directory: the file reading that src/core leaves to its callers (core parses texts only).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ContractError, parseContract, type Contract, type ContractIssue } from '../core/contract.js';
import { ContractRegistry } from '../core/registry.js';

/** Load every *.yaml, *.yml and *.json file of a directory. Any invalid file stops the load with every issue. */
export function loadContractDir(dir: string): ContractRegistry {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /\.(ya?ml|json)$/i.test(n)).sort();
  } catch (e) {
    throw new ContractError([{ file: dir, line: 1, col: 1, field: '', message: `cannot read contracts directory: ${(e as Error).message}` }]);
  }
  const contracts: Contract[] = [];
  const issues: ContractIssue[] = [];
  for (const n of names) {
    const file = join(dir, n);
    if (!statSync(file).isFile()) continue;
    try {
      contracts.push(parseContract(readFileSync(file, 'utf8'), file));
    } catch (e) {
      if (e instanceof ContractError) issues.push(...e.issues);
      else throw e;
    }
  }
  if (issues.length) throw new ContractError(issues);
  return ContractRegistry.fromContracts(contracts);
}
