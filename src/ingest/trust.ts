/**
 * Trust at the ingest boundary (docs/security.md): one id rule for every receipt however it was made, the
 * source binding of derived receipts, and the run scope of run-level receipts. Pure functions; the server
 * supplies which agents each source is bound to and which contract a run is pinned to.
 */
import { isAgentId, isRunId, validateReceipt } from '../core/receipt.js';
import type { Receipt } from '../core/types.js';

/**
 * Why a span or receipt was refused at the boundary: a small fixed set, the label values of
 * `topology_ingest_rejected_total{reason}`. Never the offending value (it may be content).
 */
export const REJECT_REASONS = ['run_id_invalid', 'event_id_invalid', 'agent_id_invalid', 'receipt_invalid', 'source_not_bound', 'run_scope', 'handoff_party'] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

/** The agents a source may speak for: a set (bound), null (unbound: every agent), undefined (unknown source). */
export type SourceAgents = (source: string) => ReadonlySet<string> | null | undefined;

/** The auditor's own receipts (replay of its span log, timer gaps) and unauthenticated servers. */
export const UNBOUND: SourceAgents = () => null;

/** The lookup for a token table (entries of `--ingest-tokens`); 'anonymous' and 'auditor' are unbound. */
export function sourceAgentsOf(entries: readonly { source: string; agents: ReadonlySet<string> | null }[] | undefined): SourceAgents {
  if (!entries) return UNBOUND;
  const bySource = new Map(entries.map((e) => [e.source, e.agents] as const));
  return (source) => (source === 'auditor' ? null : bySource.get(source));
}

/**
 * The id rule applied to a finished receipt (derived ones included): the receipt schema of src/core, with the
 * failing field reduced to a reason. The offending value is never echoed.
 */
export function idReason(r: Receipt): RejectReason | null {
  if (!isRunId(r.run)) return 'run_id_invalid';
  if (!isRunId(r.event)) return 'event_id_invalid';
  const named = [r.from, 'to' in r ? r.to : undefined, 'on' in r ? r.on : undefined, 'finalOwner' in r ? r.finalOwner : undefined];
  for (const a of named) if (a !== undefined && !isAgentId(a)) return 'agent_id_invalid';
  return validateReceipt(r).ok ? null : 'receipt_invalid';
}

/**
 * Which source sent the evidence for each end of a derived receipt (interfaces.md "Sources and binding"):
 * `from` the source of the span that establishes the `from` agent (the caller's span), `to` that of the span
 * establishing `to` (the callee's span), `span` the source of the span the receipt was made from (run scope of gaps).
 */
export interface Evidence {
  from?: readonly string[];
  to?: readonly string[];
  span?: string;
}

/** Evidence of derived receipts, attached by the resolver and dialects without widening their return types. */
const evidence = new WeakMap<Receipt, Evidence>();
export function withEvidence<R extends Receipt>(r: R, e: Evidence): R {
  evidence.set(r, e);
  return r;
}
export function evidenceOf(r: Receipt): Evidence | undefined {
  return evidence.get(r);
}

const bound = (agents: ReadonlySet<string> | null | undefined, agent: string) => agents === null || (agents !== undefined && agents.has(agent));

/**
 * A derived receipt's ends must each be vouched for by the source that sent their evidence: whichever request
 * or restart completes the resolution. Returns a clear, content-free reason, or null.
 */
export function derivedBinding(r: Receipt, ev: Evidence | undefined, sources: SourceAgents): string | null {
  if (!ev || r.type === 'gap') return null; // a gap names no agent's act; run scope covers it
  if (r.from !== undefined) for (const s of ev.from ?? []) if (!bound(sources(s), r.from)) return `source ${s} may not speak for agent "${r.from}" (span naming the caller)`;
  if ('to' in r && r.to !== undefined) for (const s of ev.to ?? []) if (!bound(sources(s), r.to)) return `source ${s} may not speak for agent "${r.to}" (span naming the callee)`;
  return null;
}

/** The part of a pinned contract the run-scope rule reads. */
export interface ScopeContract {
  contract: string;
  owner: string;
  agents: readonly string[];
}

/**
 * Run scope: from a bound source, `run.start`, `run.end` and `outcome` need a source bound to the pinned
 * contract's owner, and `gap` one bound to an agent of the pinned contract. `contract` is the pinned contract
 * (or, before any pin, the contract the run will be pinned to), looked up only for these types; null when none can be known yet.
 */
export function runScope(r: Receipt, agents: ReadonlySet<string> | null | undefined, source: string, contractOf: () => ScopeContract | null): string | null {
  if (agents === null) return null;
  if (r.type !== 'run.start' && r.type !== 'run.end' && r.type !== 'outcome' && r.type !== 'gap') return null;
  if (agents === undefined) return `source ${source} is not a known ingest source`;
  const contract = contractOf();
  if (contract === null) return `a ${r.type} from bound source ${source} needs the run's contract to be known (send the run.start first, or configure --contract)`;
  if (r.type === 'gap') {
    for (const a of agents) if (contract.agents.includes(a)) return null;
    return `source ${source} is bound to no agent of contract ${contract.contract}; it may not report a gap for this run`;
  }
  if (agents.has(contract.owner)) return null;
  return `a ${r.type} needs a source bound to contract ${contract.contract}'s owner "${contract.owner}"; source ${source} is not`;
}

/**
 * Handoff transitions the target records (semantics section 5): it acknowledges the work (RUNNING) and hands the
 * result back (RETURNED). Every other transition (PROPOSED, ADMITTED, DISPATCHED, ACCEPTED, REJECTED, CANCELLED,
 * TIMED_OUT, FAILED) is the source's: it proposes, admits, dispatches, decides on the result and applies the
 * cancellation or the timeout disposition. A handoff receipt names the handoff's source as `from` and its target as
 * `to` whichever party records it.
 */
export const TARGET_STATES: ReadonlySet<string> = new Set(['RUNNING', 'RETURNED']);

/** The agent a receipt speaks for (the one a bound token must be bound to): a handoff's target for RUNNING and RETURNED, else `from`. */
export function speakerOf(r: Receipt): string | undefined {
  return r.type === 'handoff' && r.state !== undefined && TARGET_STATES.has(r.state) ? r.to : r.from;
}

/** What earlier receipts of a run established about one handoff: its source, and each attempt's target. */
export interface HandoffParties {
  source?: string;
  targets: Map<number, string>;
}

/** The parties of a run's handoffs as `receipts` name them, first naming wins (source from `from`, target from a source-side `to`). */
export function handoffPartiesOf(receipts: Iterable<Receipt>, into = new Map<string, HandoffParties>()): Map<string, HandoffParties> {
  for (const r of receipts) noteHandoffParties(into, r);
  return into;
}

export function noteHandoffParties(parties: Map<string, HandoffParties>, r: Receipt): void {
  if (r.type !== 'handoff' || r.handoff === undefined) return;
  let p = parties.get(r.handoff);
  if (!p) parties.set(r.handoff, (p = { targets: new Map() }));
  p.source ??= r.from;
  const attempt = r.attempt ?? 1;
  if (r.to !== undefined && r.state !== undefined && !TARGET_STATES.has(r.state) && !p.targets.has(attempt)) p.targets.set(attempt, r.to);
}

/**
 * The handoff party rule (docs/security.md "Handoff parties"), for a handoff receipt from a source bound to `agents`:
 * - the root budget (`budgetOp: "root"`) is the run owner's: the source must be bound to the pinned contract's owner;
 * - RUNNING and RETURNED are the target's (the source must be bound to `to`), every other transition the source's
 *   (bound to `from`); `reserve`, `release` and `reject` are the source's, `consume` either party's;
 * - a handoff keeps the parties its earlier receipts named: a receipt naming another source for it, or (RUNNING,
 *   RETURNED) another target for the attempt, is refused.
 * Returns a content-free reason, or null. Unbound sources are not restricted.
 */
export function handoffParty(r: Receipt, agents: ReadonlySet<string> | null | undefined, source: string, contractOf: () => ScopeContract | null, parties: (handoff: string) => HandoffParties | undefined): string | null {
  if (agents === null || r.type !== 'handoff') return null;
  if (agents === undefined) return `source ${source} is not a known ingest source`;
  if (r.budgetOp === 'root') {
    const contract = contractOf();
    if (contract === null) return `a root budget from bound source ${source} needs the run's contract to be known (send the run.start first, or configure --contract)`;
    return agents.has(contract.owner) ? null : `a root budget is the run owner's: it needs a source bound to contract ${contract.contract}'s owner "${contract.owner}"; source ${source} is not`;
  }
  if (r.state === undefined || r.handoff === undefined) return null; // not a transition: the receipt schema refuses it
  const targetSide = TARGET_STATES.has(r.state);
  const party = targetSide ? r.to : r.from;
  if (party === undefined || !agents.has(party)) {
    return `a ${r.state} transition is the ${targetSide ? 'target' : 'source'}'s: it needs a source bound to ${targetSide ? 'the target ("to")' : 'the source ("from")'}; source ${source} is not`;
  }
  if (targetSide && (r.budgetOp === 'reserve' || r.budgetOp === 'release' || r.budgetOp === 'reject')) {
    return `a ${r.budgetOp} of budget is the handoff source's, not recorded with the target's ${r.state}`;
  }
  const known = parties(r.handoff);
  if (known?.source !== undefined && r.from !== known.source) return `handoff ${r.handoff} was opened by source agent "${known.source}"; a receipt naming "${r.from ?? ''}" as its source is refused`;
  const target = known?.targets.get(r.attempt ?? 1);
  if (targetSide && target !== undefined && r.to !== target) return `handoff ${r.handoff} attempt ${r.attempt ?? 1} targets "${target}"; a ${r.state} from "${r.to ?? ''}" is refused`;
  return null;
}
