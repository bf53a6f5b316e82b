/** Operators' acknowledgements in the embedded store: each committed at once, on its own, before the API answers. */
import type { AckRecord, Verdict } from '../../core/types.js';
import { StoreCommitError } from '../types.js';
import type { AckRow, Statements } from './statements.js';

const ackOf = (row: AckRow): AckRecord => ({ verdict: row.verdict as Verdict, by: row.by, at: Number(row.acked_at), reason: row.reason });

/**
 * Records an acknowledgement (the run's latest replaces an earlier one). Committed at once, on its own, before the
 * API answers: an acknowledgement is an operator's action and outlives a restart.
 */
export function putAck(stmt: Statements, run: string, ack: AckRecord): void {
  try {
    stmt.putAck.run(run, ack.verdict, ack.by, ack.at, ack.reason);
  } catch (e) {
    throw new StoreCommitError(e);
  }
}

export function getAck(stmt: Statements, run: string): AckRecord | null {
  const row = stmt.getAck.get(run);
  return row ? ackOf(row) : null;
}

/** Every stored acknowledgement (restored at start). */
export function allAcks(stmt: Statements): { run: string; ack: AckRecord }[] {
  return stmt.allAcks.all().map((row) => ({ run: row.run, ack: ackOf(row) }));
}
