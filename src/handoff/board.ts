/**
 * The operator's handoff board (interfaces.md, `GET /api/v1/runs/{run}/handoffs`): who owns the run,
 * which branches are live, what state version each observed, what authority each holds, when leases
 * expire, whether cancellation propagated, which artifacts were admitted, which conflicts remain,
 * what effects may have occurred and what terminal predicate remains.
 *
 * Pure: a function of (receipts, now). It reads the same run facts (lifecycle.ts `runFacts`) and ledger
 * walk (ledger.ts `ledgerWalk`) the handoff findings are made from, and carries those findings, tagged
 * with their branches, so the board and the verdict cannot disagree.
 */
import type { EffectStatus, HandoffState, Receipt, Verdict } from '../core/types.js';
import type { Funnel } from './funnel.js';
import { runFunnel } from './funnel.js';
import type { LedgerSummary, Units } from '../core/index.js';
import { attemptId, zeroUnits } from '../core/index.js';
import type { AttemptFacts, RunFacts } from '../core/index.js';
import { factFindings, runFacts } from '../core/index.js';
import { sameStateVersion } from './schema.js';
import { compareInstants, instantText, toInstant, type Instant } from '../core/time.js';
import type { RunTrace } from '../core/index.js';
import { traceRuns } from '../core/index.js';

export interface BoardBranch {
  /** `handoff#attempt`. */
  branch: string;
  handoff: string;
  attempt: number;
  from: string | null;
  to: string | null;
  /** Where the lifecycle state machine stands (a terminal state never moves). */
  state: HandoffState;
  stateAt: string;
  /** Not in a terminal state. */
  live: boolean;
  /** The version the branch observed (its RETURNED receipt), else the version it was granted. */
  stateVersion: string | null;
  stateVersionSource: 'observed' | 'granted' | null;
  /** The branch's version differs from the run's current version. */
  stale: boolean;
  /** The lease in force (renewals count only when made before it ran out). */
  leaseExpiresAt: string | null;
  /** Live, and the lease in force has run out at `now`. */
  leaseExpired: boolean;
  duplicateKey: string | null;
  /** Capability names granted (receipt field `capabilities`); null when no receipt recorded them. */
  capabilities: string[] | null;
  /** A cancellation applies (the attempt's CANCELLED or the run's cancelled end). */
  cancelled: boolean;
  cancelledAt: string | null;
  /** Cancelled and the branch reached a terminal state; null when no cancellation applies. */
  cancelPropagated: boolean | null;
  /** The parent accepted the branch's artifact (an ACCEPTED record). */
  admitted: boolean;
  /** Returned or worked after its lease or a cancellation (ledger). */
  late: boolean;
  /** Started while another attempt held an active lease on its work key (ledger). */
  duplicate: boolean;
  reserved: Units;
  consumed: Units;
  released: Units;
  rejected: Units;
  /** Codes of the handoff findings that name this branch. */
  findings: string[];
}

export interface BoardEffect {
  branch: string;
  /** The effect id from the receipt's `effects`; null when known only from the ledger's effect units. */
  effect: string | null;
  status: EffectStatus;
  /** `receipt`: an effect id and status recorded; `ledger`: effect units consumed, rejected or still reserved. */
  evidence: 'receipt' | 'ledger';
  /** Effect units behind a ledger-derived entry. */
  units?: number;
  /** Every status but `failed`: the effect may have happened and must be reconciled. */
  mayHaveOccurred: boolean;
}

export interface BoardConflict {
  duplicateKey: string;
  /** Branches whose active leases on this key overlapped. */
  branches: string[];
  /** Some of those branches is still live. */
  open: boolean;
}

export interface BoardFinding {
  code: string;
  verdict: Verdict;
  branches: string[];
  events: string[];
  message: string;
}

export interface HandoffBoard {
  run: string;
  now: string;
  /** The run owner: the root budget's holder, else the run.start sender, else the final owner. */
  owner: string | null;
  finalOwner: string | null;
  finalOwners: string[];
  /** The state version of the latest parent-side record (not a RETURNED): opaque, so never the "highest" text. */
  currentStateVersion: string | null;
  branches: BoardBranch[];
  conflicts: BoardConflict[];
  budget: Pick<LedgerSummary, 'root' | 'reserved' | 'consumed' | 'released' | 'rejected' | 'outstanding' | 'peakCommitted'>;
  effects: BoardEffect[];
  terminal: { predicate: string; met: boolean; remaining: string[]; result: 'completed' | 'failed' | 'cancelled' | null };
  /** The artifact admission funnel (funnel.ts), counting attempts. */
  funnel: Funnel;
  /** The run's handoff findings (the same ones the verdict holds), tagged with branches. */
  findings: BoardFinding[];
}

const PARENT_SIDE: ReadonlySet<HandoffState> = new Set(['PROPOSED', 'ADMITTED', 'ACCEPTED', 'REJECTED', 'CANCELLED', 'TIMED_OUT', 'FAILED']);

/**
 * The parent's current state version: the one its latest record names (parent-side states, by time then event id).
 * State versions are opaque (semantics 5), so the latest record decides, never the text of the version.
 */
function currentVersion(trace: RunTrace): string | null {
  let current: string | null = null;
  for (const r of trace.receipts) {
    if (r.type !== 'handoff' || r.handoff === undefined || r.state === undefined || r.stateVersion === undefined || !PARENT_SIDE.has(r.state)) continue;
    current = r.stateVersion; // receipts are in (time, event id) order: the last one is the latest
  }
  return current;
}

function firstOf<R, T>(rs: readonly R[], f: (r: R) => T | undefined): T | undefined {
  for (const r of rs) {
    const v = f(r);
    if (v !== undefined) return v;
  }
  return undefined;
}

function branchOf(x: AttemptFacts, facts: RunFacts, current: string | null, codes: Map<string, string[]>): BoardBranch {
  const a = x.trace;
  const row = facts.ledger.summary.attempts.find((l) => l.handoff === a.handoff && l.attempt === a.attempt)!;
  const observed = a.returned?.stateVersion;
  const granted = firstOf(a.receipts, (r) => (r.state !== 'RETURNED' ? r.stateVersion : undefined));
  const version = observed ?? granted ?? null;
  const live = x.terminal === null;
  const logical = facts.trace.attempts.filter((b) => b.handoff === a.handoff).flatMap((b) => b.receipts);
  const capabilities = firstOf(a.receipts, (r) => r.capabilities) ?? firstOf(logical, (r) => r.capabilities) ?? null;
  return {
    branch: x.id,
    handoff: a.handoff,
    attempt: a.attempt,
    from: a.source ?? null,
    to: a.target ?? null,
    state: x.state,
    stateAt: instantText(x.stateAt),
    live,
    stateVersion: version,
    stateVersionSource: observed !== undefined ? 'observed' : granted !== undefined ? 'granted' : null,
    stale: version !== null && current !== null && !sameStateVersion(version, current),
    leaseExpiresAt: a.lease === null ? null : instantText(a.lease),
    leaseExpired: live && a.lease !== null && compareInstants(facts.now, a.lease) >= 0,
    duplicateKey: a.duplicateKey ?? null,
    capabilities: capabilities === null ? null : [...capabilities],
    cancelled: a.cancelAt !== null,
    cancelledAt: a.cancelAt === null ? null : instantText(a.cancelAt),
    cancelPropagated: a.cancelAt === null ? null : !live,
    admitted: a.accepted !== null,
    late: row.late,
    duplicate: row.duplicate,
    reserved: row.reserved,
    consumed: row.consumed,
    released: row.released,
    rejected: row.rejected,
    findings: [...new Set(codes.get(x.id) ?? [])].sort(),
  };
}

function effectsOf(facts: RunFacts, branches: BoardBranch[]): BoardEffect[] {
  const out: BoardEffect[] = [];
  for (const x of facts.attempts) {
    const recorded = new Map<string, EffectStatus>();
    for (const r of x.trace.receipts) for (const e of r.effects ?? []) recorded.set(e.id, e.status); // the latest status wins
    for (const [effect, status] of [...recorded].sort((p, q) => (p[0] < q[0] ? -1 : p[0] > q[0] ? 1 : 0))) {
      out.push({ branch: x.id, effect, status, evidence: 'receipt', mayHaveOccurred: status !== 'failed' });
    }
    if (recorded.size > 0) continue;
    const b = branches.find((y) => y.branch === x.id)!;
    const ledgerEntry = (status: EffectStatus, units: number): void => {
      if (units > 0) out.push({ branch: x.id, effect: null, status, evidence: 'ledger', units, mayHaveOccurred: true });
    };
    ledgerEntry('committed', b.consumed.effects);
    ledgerEntry('attempted', b.rejected.effects);
    ledgerEntry('unknown', Math.max(b.reserved.effects - b.released.effects - b.consumed.effects, 0));
  }
  return out;
}

function terminalOf(facts: RunFacts, branches: BoardBranch[], owner: string | null): HandoffBoard['terminal'] {
  const owners = facts.finalOwners.length > 0 ? facts.finalOwners : owner !== null ? [owner] : [];
  const who = owners.length > 0 ? owners.join(' or ') : 'the final owner';
  const predicate = `every branch terminal; the run ended by ${who}; if it ended completed, a verified outcome from ${who}`;
  const remaining: string[] = [];
  for (const b of branches) if (b.live) remaining.push(`branch ${b.branch} is ${b.state}`);
  const rs = facts.trace.receipts;
  const end = rs.find((r) => r.type === 'run.end') ?? null;
  const byOwner = (r: Receipt): boolean => r.from !== undefined && owners.includes(r.from);
  if (end === null) remaining.push(`no run.end from ${who}`);
  else if (!byOwner(end)) remaining.push(`the run.end came from ${end.from ?? 'an unnamed sender'}, not ${who}`);
  if (end === null || end.result === 'completed') {
    if (!rs.some((r) => r.type === 'outcome' && r.verified === true && byOwner(r))) remaining.push(`no verified outcome from ${who}`);
  }
  return { predicate, met: remaining.length === 0, remaining, result: end?.result ?? null };
}

/** The board of one run's trace at `now` (ms since the epoch, or an Instant exact to the nanosecond). */
export function runBoard(trace: RunTrace, nowAt: number | Instant): HandoffBoard {
  const now = toInstant(nowAt);
  const facts = runFacts(trace, now);
  const tagged = factFindings(facts);
  const codes = new Map<string, string[]>();
  for (const t of tagged) for (const id of t.attempts) codes.set(id, [...(codes.get(id) ?? []), t.finding.code]);
  const current = currentVersion(trace);
  const branches = facts.attempts.map((x) => branchOf(x, facts, current, codes));
  const byKey = new Map<string, Set<string>>();
  for (const [a, b] of facts.overlaps) {
    const set = byKey.get(a.duplicateKey!) ?? new Set<string>();
    set.add(attemptId(a)).add(attemptId(b));
    byKey.set(a.duplicateKey!, set);
  }
  const conflicts = [...byKey]
    .sort((p, q) => (p[0] < q[0] ? -1 : 1))
    .map(([duplicateKey, set]) => {
      const ids = [...set].sort();
      return { duplicateKey, branches: ids, open: ids.some((id) => branches.find((b) => b.branch === id)!.live) };
    });
  const l = facts.ledger.summary;
  const start = trace.receipts.find((r) => r.type === 'run.start');
  const owner = trace.root?.from ?? start?.from ?? facts.finalOwners[0] ?? null;
  return {
    run: trace.run,
    now: instantText(now),
    owner,
    finalOwner: facts.finalOwners[0] ?? null,
    finalOwners: facts.finalOwners,
    currentStateVersion: current,
    branches,
    conflicts,
    budget: { root: l.root, reserved: l.reserved, consumed: l.consumed, released: l.released, rejected: l.rejected, outstanding: l.outstanding, peakCommitted: l.peakCommitted },
    effects: effectsOf(facts, branches),
    terminal: terminalOf(facts, branches, owner),
    funnel: runFunnel(trace),
    findings: tagged
      .map((t) => ({ code: t.finding.code, verdict: t.finding.verdict, branches: [...t.attempts].sort(), events: t.finding.events, message: t.finding.message }))
      .sort((p, q) => (p.code < q.code ? -1 : p.code > q.code ? 1 : p.message < q.message ? -1 : p.message > q.message ? 1 : 0)),
  };
}

/** The board of one run's receipts (any other run's receipts are ignored); an empty board when it has none. */
export function handoffBoard(run: string, receipts: readonly Receipt[], now: number | Instant): HandoffBoard {
  const trace = traceRuns(receipts.filter((r) => r.run === run))[0];
  if (trace !== undefined) return runBoard(trace, now);
  const z = zeroUnits;
  return {
    run, now: instantText(toInstant(now)), owner: null, finalOwner: null, finalOwners: [], currentStateVersion: null, branches: [], conflicts: [],
    budget: { root: null, reserved: z(), consumed: z(), released: z(), rejected: z(), outstanding: z(), peakCommitted: z() },
    effects: [],
    terminal: { predicate: 'every branch terminal; the run ended by the final owner; if it ended completed, a verified outcome from the final owner', met: false, remaining: ['no receipts'], result: null },
    funnel: { dispatched: 0, completedBeforeLease: 0, structurallyValid: 0, inScopeAndCurrent: 0, nonDuplicate: 0, admitted: 0 },
    findings: [],
  };
}
