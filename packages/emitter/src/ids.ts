/**
 * Branded identities: the only things a receipt names. Each is a string that passed its constructor's check
 * (`agentId('researcher')`), so code that holds a plain string (a prompt, a model answer, a file path) cannot
 * pass it where an id is expected: the type checker refuses it, and the constructor refuses free text at run
 * time. Errors describe the input (its length, the first offending position) without ever quoting it.
 */
import { randomBytes } from 'node:crypto';
import { AGENT_ID_PATTERN, ID_PATTERN } from '@topology-audit/receipt';

declare const brand: unique symbol;
type Branded<B extends string> = string & { readonly [brand]: B };

export type AgentId = Branded<'AgentId'>;
export type RunId = Branded<'RunId'>;
export type ContractId = Branded<'ContractId'>;
export type PhaseId = Branded<'PhaseId'>;
export type ContractVersion = Branded<'ContractVersion'>;

/** Versions as the receipt schema reads them: letters, digits and _ . + - (1-64), or a non-negative integer. */
const VERSION_PATTERN = /^[A-Za-z0-9_.+-]{1,64}$/;
const ID_CHAR = /[A-Za-z0-9_.:@#+=-]/;
const VERSION_CHAR = /[A-Za-z0-9_.+-]/;

/** A value refused where an id is expected. The message never contains the value. */
export class NotAnIdError extends TypeError {
  constructor(what: string, value: unknown, rule: string, allowed: RegExp, max: number) {
    super(`${what}: ${describeRefused(value, allowed, max)}; expected ${rule}`);
    this.name = 'NotAnIdError';
  }
}

function describeRefused(value: unknown, allowed: RegExp, max: number): string {
  if (typeof value !== 'string') return `got ${value === null ? 'null' : typeof value}`;
  if (value.length === 0) return 'got an empty string';
  if (value.length > max) return `got ${value.length} characters (at most ${max})`;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (!allowed.test(c)) {
      const what = c === '\n' || c === '\r' ? 'a line break' : /\s/.test(c) ? 'whitespace' : c === '/' || c === '\\' ? 'a path separator' : 'a character outside the id alphabet';
      return `got ${value.length} characters with ${what} at position ${i}`;
    }
  }
  return 'got a string that is not an id';
}

const ID_RULE = 'an id: 1-200 of letters, digits and _ . : @ # + = - (no spaces, no line breaks, no paths)';

function checkId<T extends string>(what: string, value: unknown, pattern: RegExp = ID_PATTERN): T {
  if (typeof value !== 'string' || !pattern.test(value)) throw new NotAnIdError(what, value, pattern === ID_PATTERN ? ID_RULE : AGENT_ID_RULE, ID_CHAR, 200);
  return value as T;
}

const AGENT_ID_RULE = 'an id of an agent: 1-200 of letters, digits and _ . @ # + = - (no ":", no leading "-", no spaces, no line breaks, no paths)';

export const agentId = (value: string): AgentId => checkId<AgentId>('agentId', value, AGENT_ID_PATTERN);
export const runId = (value: string): RunId => checkId<RunId>('runId', value);
export const contractId = (value: string): ContractId => checkId<ContractId>('contractId', value);
export const phaseId = (value: string): PhaseId => checkId<PhaseId>('phaseId', value);

/** A contract version: its text, or a non-negative integer read as its decimal text. */
export function contractVersion(value: string | number): ContractVersion {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return String(value) as ContractVersion;
  if (typeof value !== 'string' || !VERSION_PATTERN.test(value)) {
    throw new NotAnIdError('contractVersion', value, 'a version: 1-64 of letters, digits and _ . + -, or a non-negative integer', VERSION_CHAR, 64);
  }
  return value as ContractVersion;
}

/** A fresh run id: `{prefix}-{base36 time}-{random hex}`. */
export function newRunId(prefix = 'run'): RunId {
  checkId('newRunId prefix', prefix);
  return runId(`${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`);
}
