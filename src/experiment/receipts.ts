/**
 * What a case record can take from its run's receipts (the NDJSON of interfaces.md, type `Receipt`).
 *
 * The parser is a parameter (`defaultReceiptParser`, the core NDJSON parser by default).
 */
import type { Receipt } from '../core/types.js';
import { ReceiptFileError, parseReceiptFile } from '../core/receipt.js';
import { ExperimentInputError } from './errors.js';

/** Parse a whole NDJSON receipt file or throw an error naming file and line. */
export type ReceiptParser = (text: string, file: string) => Receipt[];

/** The core receipt parser, with its first invalid line reported as an experiment input error (file and line). */
export const parseReceiptsCore: ReceiptParser = (text, file) => {
  try {
    return parseReceiptFile(text, file);
  } catch (e) {
    if (e instanceof ReceiptFileError) throw new ExperimentInputError([{ file, line: e.line, field: '', message: e.reason }]);
    throw e;
  }
};

/** The parser the loader uses unless told otherwise. */
export const defaultReceiptParser: ReceiptParser = parseReceiptsCore;

/** Measures derivable from one run's receipts. */
export interface RunMeasures {
  /** Actions of the arm's final owner (the parent). */
  parentActions: number;
  totalActions: number;
  /** Edges (other than handoff-kind edges) originating from each agent. */
  actionsByAgent: Record<string, number>;
  /** `handoff`-kind edge receipts plus `handoff` type receipts. */
  handoffMessages: number;
  /** No `gap` receipt, no conflicting duplicate, and a `run.end` present. */
  traceComplete: boolean;
  /** Distinct agents that ended the run (`run.end` from) or were named final owner by a handoff receipt. */
  finalOwners: string[];
}

/** A receipt delivered twice (same run and event id, same content) counts once; different content is a conflict. */
export function distinctReceipts(receipts: readonly Receipt[]): { receipts: Receipt[]; conflicts: string[] } {
  const byEvent = new Map<string, { receipt: Receipt; canon: string }>();
  const conflicts = new Set<string>();
  for (const r of receipts) {
    const key = `${r.run}\u0000${r.event}`;
    const canon = JSON.stringify(r, Object.keys(r).sort());
    const seen = byEvent.get(key);
    if (!seen) byEvent.set(key, { receipt: r, canon });
    else if (seen.canon !== canon) conflicts.add(r.event);
  }
  return { receipts: [...byEvent.values()].map((v) => v.receipt), conflicts: [...conflicts] };
}

/** The runs present in a receipt list, in first-seen order. */
export function runsOf(receipts: readonly Receipt[]): string[] {
  return [...new Set(receipts.map((r) => r.run))];
}

/**
 * Derive the receipt-backed measures of one run.
 * Actions count edges by their `from`; handoff-kind edges are handoff messages, not actions,
 * so no receipt is counted in both measures.
 */
export function deriveRunMeasures(runReceipts: readonly Receipt[], finalOwner: string): RunMeasures {
  const { receipts, conflicts } = distinctReceipts(runReceipts);
  const actionsByAgent: Record<string, number> = {};
  let handoffMessages = 0;
  let gaps = 0;
  let ended = false;
  const owners = new Set<string>();
  for (const r of receipts) {
    if (r.type === 'edge') {
      if (r.kind === 'handoff') handoffMessages++;
      else if (r.from) actionsByAgent[r.from] = (actionsByAgent[r.from] ?? 0) + 1;
    } else if (r.type === 'handoff') {
      handoffMessages++;
      if (r.finalOwner) owners.add(r.finalOwner);
    } else if (r.type === 'gap') gaps++;
    else if (r.type === 'run.end') {
      ended = true;
      if (r.from) owners.add(r.from);
    }
  }
  const totalActions = Object.values(actionsByAgent).reduce((a, b) => a + b, 0);
  return {
    parentActions: actionsByAgent[finalOwner] ?? 0,
    totalActions,
    actionsByAgent,
    handoffMessages,
    traceComplete: ended && gaps === 0 && conflicts.length === 0,
    finalOwners: [...owners].sort(),
  };
}
