/**
 * Builders for test receipts. Every receipt goes through the real ingest validation (validateReceipt),
 * so a test can only ever hold receipts the product would accept.
 */
import { ContractRegistry, classify, parseContract, validateReceipt, type Contract, type Receipt, type RunVerdict } from '../../src/core/index.js';
import type { LooseReceipt } from './receipt.js';

/** The time origin of test runs: minute 0. */
export const T0 = Date.parse('2026-01-15T10:00:00Z');

/** RFC 3339 text of `minutes` after T0 (fractions allowed: 0.5 is 30 s). */
export function at(minutes: number): string {
  return new Date(T0 + Math.round(minutes * 60_000)).toISOString();
}

/** Milliseconds since the epoch of `minutes` after T0. */
export function ms(minutes: number): number {
  return T0 + Math.round(minutes * 60_000);
}

type Extra = Partial<Omit<LooseReceipt, 'type' | 'event' | 'at'>>;

/** Validate a plain object as a receipt, exactly as ingest does; throws when the product would refuse it. */
export function receipt(value: Record<string, unknown>): Receipt {
  const r = validateReceipt(value);
  if (!r.ok) throw new Error(`test receipt refused by the product: ${r.error}: ${JSON.stringify(value)}`);
  return r.receipt;
}

const base = (event: string, t: number, extra: Extra) => ({ run: 'r1', event, at: at(t), ...extra });

export function start(event: string, t: number, extra: Extra = {}): Receipt {
  return receipt({ ...base(event, t, {}), type: 'run.start', contract: 't', ...extra });
}

/** An edge receipt from `"a -> b : kind"`. */
export function edge(event: string, t: number, text: string, extra: Extra = {}): Receipt {
  const m = /^\s*(\S+)\s*->\s*(\S+)\s*:\s*(\S+)\s*$/.exec(text);
  if (!m) throw new Error(`test edge must be "a -> b : kind": ${text}`);
  return receipt({ ...base(event, t, extra), type: 'edge', from: m[1], to: m[2], kind: m[3] });
}

export function wait(event: string, t: number, on: string, edgeText: string, deadline: number, extra: Extra = {}): Receipt {
  return receipt({ ...base(event, t, extra), type: 'wait', on, edge: edgeText, deadline: at(deadline) });
}

export function outcome(event: string, t: number, verified = true, extra: Extra = {}): Receipt {
  return receipt({ ...base(event, t, extra), type: 'outcome', verified });
}

export function end(event: string, t: number, result: 'completed' | 'failed' | 'cancelled' = 'completed', extra: Extra = {}): Receipt {
  return receipt({ ...base(event, t, extra), type: 'run.end', result });
}

export function gap(event: string, t: number, reason = 'caller_unresolved', extra: Extra = {}): Receipt {
  return receipt({ ...base(event, t, extra), type: 'gap', reason });
}

/** The smallest contract `t` (o delegates to r) at a version (retired or not): the pin tests tell versions apart by it. */
export const tinyContract = (version: string, retired = false): string => `
contract: t
version: "${version}"${retired ? '\nretired: true' : ''}
owner: o
agents: [o, r]
allow:
  - o -> r : delegate
phases:
  main:
    outcome: optional
    expect:
      - o -> r : delegate
`;

/** Parse contract texts (YAML or JSON) into a registry, refusing anything the loader refuses. */
export function registryOf(...texts: string[]): ContractRegistry {
  return ContractRegistry.fromContracts(texts.map((t, i): Contract => parseContract(t, `test-${i}.yaml`)));
}

/** The verdict of one run at `now` (minutes after T0). */
export function verdictAt(registry: ContractRegistry, receipts: Receipt[], now: number, defaultContract?: string): RunVerdict {
  return classify(receipts, ms(now), registry, defaultContract);
}

/** Findings as `code edge` lines, for compact assertions. */
export function codes(v: RunVerdict): string[] {
  return v.findings.map((f) => (f.edge ? `${f.code} ${f.edge}` : f.code));
}

/** The first finding with `code`, or a failure naming what was found. */
export function finding(v: RunVerdict, code: string, edgeKey?: string) {
  const f = v.findings.find((x) => x.code === code && (edgeKey === undefined || x.edge === edgeKey));
  if (!f) throw new Error(`no finding ${code}${edgeKey ? ` on ${edgeKey}` : ''}; found: ${codes(v).join('; ') || 'none'}`);
  return f;
}
