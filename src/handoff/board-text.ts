/** The handoff board as a readable table for `topology-audit handoff board RUN` (pure; ids, states, times and counts only). */
import type { BoardBranch, HandoffBoard } from './board.js';
import { humanDuration } from '../core/edge.js';
import { millisOf } from '../core/time.js';
import type { Units } from '../core/index.js';

const units = (u: Units | null): string => (u === null ? 'none' : `${u.actions}/${u.contextUnits}/${u.effects}`);
const hms = (iso: string): string => iso.slice(11, 19) + (iso.slice(19, 23) !== '.000' && iso.length > 20 ? iso.slice(19, 23) : '');

/** A duration to whole seconds ("2m30s"); under half a second in ms. */
function dur(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  return s === 0 ? `${Math.abs(Math.round(ms))}ms` : humanDuration(s * 1000);
}

function lease(b: BoardBranch, now: number): string {
  if (b.leaseExpiresAt === null) return '-';
  const t = millisOf(b.leaseExpiresAt);
  if (!b.live) return hms(b.leaseExpiresAt);
  // expired or not as the audit decided it (to the nanosecond); the distance in words is display only
  return !b.leaseExpired ? `${hms(b.leaseExpiresAt)} (in ${dur(t - now)})` : `${hms(b.leaseExpiresAt)} (EXPIRED ${dur(now - t)} ago)`;
}

function cancel(b: BoardBranch): string {
  if (!b.cancelled) return '-';
  const late = b.late ? ', late work' : '';
  return b.cancelPropagated ? `cancelled ${hms(b.cancelledAt!)}${late}` : `cancel ${hms(b.cancelledAt!)} NOT propagated${late}`;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => `  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')}`.trimEnd()).join('\n') + '\n';
}

export function renderBoard(b: HandoffBoard): string {
  const now = millisOf(b.now);
  const live = b.branches.filter((x) => x.live).length;
  let out = `run ${b.run}  owner ${b.owner ?? '(none named)'}  final owner ${b.finalOwners.length ? b.finalOwners.join(', ') : '(none named)'}  current state version ${b.currentStateVersion ?? '-'}  at ${b.now}\n`;
  out += `branches: ${b.branches.length}, ${live} live\n`;
  if (b.branches.length > 0) {
    out += table([
      ['BRANCH', 'FROM -> TO', 'STATE', 'SINCE', 'VERSION', 'LEASE', 'DUPLICATE KEY', 'CAPABILITIES', 'CANCEL', 'ADMITTED', 'FINDINGS'],
      ...b.branches.map((x) => [
        `${x.live ? '*' : ' '}${x.branch}`,
        `${x.from ?? '?'} -> ${x.to ?? '?'}`,
        x.state,
        hms(x.stateAt),
        x.stateVersion === null ? '-' : `${x.stateVersion}${x.stateVersionSource === 'observed' ? ' obs' : ' granted'}${x.stale ? ' STALE' : ''}`,
        lease(x, now),
        x.duplicateKey ?? '-',
        x.capabilities === null ? '(not recorded)' : x.capabilities.join(',') || '(none)',
        cancel(x),
        x.admitted ? 'yes' : 'no',
        x.findings.join(',') || '-',
      ]),
    ]);
    out += '  (* live; versions against the current one; times UTC)\n';
  }
  out += `conflicts: ${b.conflicts.length === 0 ? 'none' : ''}\n`;
  for (const c of b.conflicts) out += `  ${c.duplicateKey}: ${c.branches.join(', ')} (${c.open ? 'OPEN' : 'closed'})\n`;
  const g = b.budget;
  out += `budget (actions/context units/effects): root ${units(g.root)}; reserved ${units(g.reserved)}, consumed ${units(g.consumed)}, released ${units(g.released)}, rejected ${units(g.rejected)}; outstanding ${units(g.outstanding)}, peak committed ${units(g.peakCommitted)}\n`;
  out += `effects: ${b.effects.length === 0 ? 'none recorded or counted' : ''}\n`;
  for (const e of b.effects) {
    out += `  ${e.branch}  ${e.effect ?? `(${e.units} effect unit${e.units === 1 ? '' : 's'}, from the ledger)`}  ${e.status}${e.mayHaveOccurred ? '  may have occurred: reconcile' : ''}\n`;
  }
  const f = b.funnel;
  out += `artifact funnel: dispatched ${f.dispatched} > completed before lease ${f.completedBeforeLease} > structurally valid ${f.structurallyValid} > in scope and current ${f.inScopeAndCurrent} > non-duplicate ${f.nonDuplicate} > admitted ${f.admitted}\n`;
  out += `terminal: ${b.terminal.met ? 'met' : 'NOT met'} (${b.terminal.predicate})\n`;
  for (const r of b.terminal.remaining) out += `  remaining: ${r}\n`;
  out += `findings: ${b.findings.length === 0 ? 'none' : ''}\n`;
  for (const f of b.findings) out += `  ${f.code} (${f.verdict}) [${f.branches.join(', ')}]: ${f.message}\n`;
  return out;
}
