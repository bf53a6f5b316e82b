/**
 * A deliberately simple reference implementation of the verdict, written from semantics.md sections
 * 1, 2 and 2a alone. It shares no code with src/core/classify.ts or src/core/registry.ts: only the
 * types, the edge text helpers and the parsed contract; its duplicate check and its time arithmetic
 * (BigInt nanoseconds) are its own. It re-scans the receipt list for every question and favours obviousness over speed.
 *
 * Finding codes follow the product's vocabulary so the two can be compared finding by finding.
 */
import type { Contract, Phase, PlanStep } from '../../src/core/contract.js';
import { edgeKey, parseEdge, specKey, type EdgeSpec } from '../../src/core/edge.js';
import { VERDICTS, type NaiveVerdict, type Pin, type Verdict } from '../../src/core/types.js';
// A reference reads receipts field by field, without narrowing on `type`: the flat view of test/helpers/receipt.ts.
import type { LooseReceipt as Receipt } from '../helpers/receipt.js';

export interface RefFinding {
  verdict: Verdict;
  code: string;
  edge?: string;
  events: string[];
  settled: boolean;
}

export interface RefResult {
  pin: Pin | null;
  verdict: Verdict;
  naive: NaiveVerdict;
  findings: RefFinding[];
  /** Settled for the gate. */
  settled: boolean;
}

/**
 * Nanoseconds since the epoch of an RFC 3339 time, as a BigInt: the whole seconds (with the offset) from
 * Date.parse of the text without its fraction, plus the fraction's digits padded to nine. Deliberately a
 * different representation from the product's (whole ms plus a sub-ms remainder).
 */
const time = (t: string): bigint => {
  const m = /^(.{19})(?:\.(\d{1,9}))?(.*)$/.exec(t);
  if (!m) throw new Error(`not a time: ${t}`);
  return BigInt(Date.parse(m[1] + m[3])) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
};
/** `now`: milliseconds since the epoch, or an RFC 3339 text exact to the nanosecond. */
const nowOf = (now: number | string): bigint => (typeof now === 'string' ? time(now) : BigInt(now) * 1_000_000n);
const maxOf = (a: bigint, b: bigint) => (a > b ? a : b);

/** Code point order of two strings (not UTF-16 code units). */
const byCodePoint = (a: string, b: string): number => {
  const x = [...a].map((c) => c.codePointAt(0)!);
  const y = [...b].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
};

/** Sort by observation time, then event id (by code point). */
const byTimeThenEvent = (a: Receipt, b: Receipt) => {
  const d = time(a.at) - time(b.at);
  return d < 0n ? -1 : d > 0n ? 1 : byCodePoint(a.event, b.event);
};

/**
 * Duplicate comparison (semantics 2a): `status` defaulted to ok (nothing else), times as instants, versions as text
 * (validated receipts already hold text), edge strings without spaces; keys sorted.
 */
function canon(r: Receipt): string {
  const o: Record<string, unknown> = { status: 'ok' };
  for (const [k, v] of Object.entries(r)) {
    if (v === undefined) continue;
    if (k === 'at' || k === 'deadline' || k === 'leaseExpiresAt') o[k] = String(time(v as string));
    else if (k === 'edge') o[k] = (v as string).replace(/\s+/g, '');
    else o[k] = v;
  }
  return JSON.stringify(Object.keys(o).sort().map((k) => [k, o[k]]));
}

/** "Newest": dot-separated numeric parts compared numerically, else as text. */
function versionOrder(a: string, b: string): number {
  const na = a.split('.');
  const nb = b.split('.');
  const allDigits = (p: string[]) => p.every((x) => /^[0-9]+$/.test(x));
  if (allDigits(na) && allDigits(nb)) {
    const n = Math.max(na.length, nb.length);
    for (let i = 0; i < n; i++) {
      const d = Number(na[i] ?? '0') - Number(nb[i] ?? '0');
      if (d !== 0) return d;
    }
    return na.length - nb.length;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Resolve (contract, version?, phase?) against the known contracts; null when nothing resolves. */
function resolve(contracts: Contract[], ref: { contract: string; version?: string; phase?: string }): { contract: Contract; phase: Phase } | null {
  const versions = contracts.filter((c) => c.contract === ref.contract);
  let chosen: Contract | undefined;
  if (ref.version !== undefined) chosen = versions.find((c) => c.version === ref.version);
  else chosen = versions.filter((c) => !c.retired).sort((a, b) => versionOrder(b.version, a.version))[0];
  if (!chosen) return null;
  const phase = ref.phase === undefined ? chosen.phases[0] : chosen.phases.find((p) => p.name === ref.phase);
  if (!phase) return null;
  return { contract: chosen, phase };
}

/** Does a concrete edge receipt match an edge spec (any one of its targets)? */
const matches = (r: Receipt, spec: EdgeSpec) => r.type === 'edge' && r.from === spec.from && r.kind === spec.kind && spec.to.includes(r.to!);

export function referenceClassify(receipts: Receipt[], nowAt: number | string, contracts: Contract[], defaultContract?: string): RefResult {
  const now = nowOf(nowAt);
  const findings: RefFinding[] = [];
  const say = (verdict: Verdict, code: string, events: string[], edge: string | undefined, settled: boolean) =>
    findings.push({ verdict, code, edge, events: [...new Set(events)].sort(), settled });

  // Receipts are a set keyed by event id: equal content is one delivery; different content is a conflict, neither used.
  const contents = new Map<string, Map<string, Receipt>>();
  for (const r of receipts) {
    const m = contents.get(r.event) ?? new Map<string, Receipt>();
    m.set(canon(r), r);
    contents.set(r.event, m);
  }
  const used: Receipt[] = [];
  for (const [event, m] of contents) {
    if (m.size === 1) used.push([...m.values()][0]);
    else say('uncertain', 'conflict', [event], undefined, false);
  }
  const all = [...contents.values()].flatMap((m) => [...m.values()]);

  // The naive rule: some event exists, every status ok, no run.end failed.
  const naive: NaiveVerdict =
    all.length > 0 && all.every((r) => (r.status ?? 'ok') === 'ok') && !all.some((r) => r.type === 'run.end' && r.result === 'failed') ? 'green' : 'red';

  // A gap counts whenever it is timed.
  for (const r of used) if (r.type === 'gap') say('uncertain', 'gap', [r.event], undefined, false);

  // The pin: the earliest run.start, else the default contract.
  const starts = used.filter((r) => r.type === 'run.start').sort(byTimeThenEvent);
  const ref = starts.length > 0 ? { contract: starts[0].contract!, version: starts[0].version, phase: starts[0].phase } : defaultContract ? { contract: defaultContract } : null;
  const pinned = ref ? resolve(contracts, ref) : null;
  if (!pinned) {
    say('uncertain', 'no_pin', [], undefined, false);
    return conclude(null, findings, naive, false);
  }
  const { contract, phase } = pinned;
  const pin: Pin = { contract: contract.contract, version: contract.version, phase: phase.name };

  // 2. stale_contract
  if (contract.retired) say('stale_contract', 'retired_version', [], undefined, true);
  const versions = new Set(used.filter((r) => r.version !== undefined).map((r) => r.version!));
  for (const v of versions) {
    if (v !== pin.version) say('stale_contract', 'version_mismatch', used.filter((r) => r.version === v).map((r) => r.event), undefined, true);
  }
  for (const s of starts.slice(1)) {
    const other = resolve(contracts, { contract: s.contract!, version: s.version, phase: s.phase });
    const same = other !== null && other.contract.contract === pin.contract && other.contract.version === pin.version && other.phase.name === pin.phase;
    if (!same) say('stale_contract', 'repinned', [s.event], undefined, true);
  }

  // 3. unknown_agent: an edge's from and to, any receipt's from, a wait's on.
  const named = new Map<string, string[]>();
  const name = (agent: string | undefined, event: string) => {
    if (agent === undefined) return;
    named.set(agent, [...(named.get(agent) ?? []), event]);
  };
  for (const r of used) {
    name(r.from, r.event);
    if (r.type === 'edge') name(r.to, r.event);
    if (r.type === 'wait') name(r.on, r.event);
  }
  for (const [agent, events] of named) if (!contract.agents.includes(agent)) say('unknown_agent', 'unknown_agent', events, undefined, true);

  // 4. forbidden_edge: no allow entry names the directed edge with its kind.
  const edgeReceipts = used.filter((r) => r.type === 'edge');
  const distinctEdges = new Map<string, Receipt[]>();
  for (const r of edgeReceipts) {
    const k = edgeKey(r.from!, r.to!, r.kind!);
    distinctEdges.set(k, [...(distinctEdges.get(k) ?? []), r]);
  }
  for (const [k, rs] of distinctEdges) {
    if (!contract.allow.some((a) => matches(rs[0], a.spec))) say('forbidden_edge', 'forbidden_edge', rs.map((r) => r.event), k, true);
  }

  // 5. ambiguous_route: an allow entry observed (distinct event ids) more often than its max.
  for (const a of contract.allow) {
    const seen = edgeReceipts.filter((r) => matches(r, a.spec));
    if (seen.length > a.max) say('ambiguous_route', 'multiplicity', seen.map((r) => r.event), specKey(a.spec), true);
  }

  // The run's end: its earliest run.end. Receipts after it satisfy nothing.
  const ends = used.filter((r) => r.type === 'run.end').sort(byTimeThenEvent);
  const end = ends[0];
  const endAt: bigint | null = end ? time(end.at) : null;
  const byEnd = (t: bigint) => endAt === null || t <= endAt;
  const earliestObservation = (spec: EdgeSpec): Receipt | undefined =>
    edgeReceipts.filter((r) => matches(r, spec) && byEnd(time(r.at))).sort(byTimeThenEvent)[0];

  // The plan: due times, deadlines, lateness.
  const runStart: bigint | null = starts.length > 0 ? time(starts[0].at) : used.length > 0 ? used.map((r) => time(r.at)).reduce((a, b) => (a < b ? a : b)) : null;
  const observation = (s: PlanStep) => earliestObservation(s.spec);
  const dueAt = (s: PlanStep): bigint | null => {
    if (s.after.length === 0) return runStart;
    let latest: bigint | null = null;
    for (const i of s.after) {
      const o = observation(phase.plan[i]);
      if (!o) return null;
      latest = latest === null ? time(o.at) : maxOf(latest, time(o.at));
    }
    return latest;
  };
  // an ended run's own end receipt proves time reached its end
  const clock = endAt !== null ? maxOf(now, endAt) : now;
  let everyEdgeObserved = true;
  const missing: string[] = [];
  for (const s of phase.plan) {
    const o = observation(s);
    const due = dueAt(s);
    const deadline = due !== null && s.withinMs !== undefined ? due + BigInt(s.withinMs) * 1_000_000n : null;
    if (o) {
      if (deadline !== null && time(o.at) > deadline) say('incomplete', 'late_edge', [o.event], s.key, true);
      continue;
    }
    everyEdgeObserved = false;
    missing.push(s.key);
    if (due === null) continue; // not due: behind absent edges
    const deadlinePassed = deadline !== null && clock >= deadline;
    // a deadline after the run's end is void
    if (deadlinePassed && byEnd(deadline!)) say('incomplete', 'missed_deadline', [], s.key, true);
    else if (end) continue; // an ended run waits for nothing
    else if (deadline !== null && s.dependency !== undefined) say('waiting', 'waiting', [], s.key, false);
    else say('working', 'pending', [], s.key, false);
  }

  // Waits: void when timed after the end or when their deadline falls after it.
  for (const w of used.filter((r) => r.type === 'wait')) {
    const deadline = time(w.deadline!);
    if (!byEnd(time(w.at)) || !byEnd(deadline)) continue;
    const spec = parseEdge(w.edge!);
    const o = earliestObservation(spec);
    if (o && time(o.at) <= deadline) continue;
    if (o) say('incomplete', 'late_wait', [w.event, o.event], specKey(spec), true);
    else if (clock >= deadline) say('incomplete', 'missed_wait', [w.event], specKey(spec), true);
    else if (!end) say('waiting', 'declared_wait', [w.event], specKey(spec), false);
  }

  // Run-level stall limits (rule 9): a phase's max_duration and progress_within, settled like missed deadlines.
  const ms = (n: number) => BigInt(n) * 1_000_000n;
  if (runStart !== null) {
    const verifiedAt = used.filter((r) => r.type === 'outcome' && r.verified === true && byEnd(time(r.at))).map((r) => time(r.at));
    const finishedBy = (t: bigint) =>
      phase.plan.every((s) => {
        const o = observation(s);
        return o !== undefined && time(o.at) <= t;
      }) && (phase.outcome === 'optional' || verifiedAt.some((v) => v <= t));
    // 2a: a plan finished, or progress made, only by a receipt timed after the cap or the stall is late like an
    // expected edge: the finding holds at any now. "Made after t": an expected edge first observed after t, or the
    // verified outcome that finished the plan coming after t.
    const plannedLater = (t: bigint): boolean => {
      if (phase.plan.some((s) => { const o = observation(s); return o !== undefined && time(o.at) > t; })) return true;
      const finishedByEnd = phase.plan.every((s) => observation(s) !== undefined) && verifiedAt.length > 0;
      return phase.outcome === 'required' && finishedByEnd && verifiedAt.every((v) => v > t);
    };
    if (phase.maxDurationMs !== undefined) {
      const limit = runStart + ms(phase.maxDurationMs);
      if (byEnd(limit) && (clock >= limit || plannedLater(limit)) && !finishedBy(limit)) say('incomplete', 'max_duration_exceeded', [], undefined, true);
    }
    if (phase.progressWithinMs !== undefined) {
      const window = ms(phase.progressWithinMs);
      const progress = [runStart, ...phase.plan.map(observation).filter((o): o is Receipt => o !== undefined).map((o) => time(o.at))];
      // a wait whose deadline falls after the end is void from the end on, yet explained the silence before it
      const waits = used.filter((w) => w.type === 'wait' && byEnd(time(w.at)));
      const deadlines = phase.plan.map((s) => {
        const due = dueAt(s);
        return due !== null && s.withinMs !== undefined ? { s, due, deadline: due + ms(s.withinMs) } : null;
      });
      // stalled at t: unfinished, no progress within the window up to t, no running deadline or declared wait
      const stalledAt = (t: bigint): boolean => {
        if (!byEnd(t) || finishedBy(t)) return false;
        const last = progress.filter((p) => p <= t).reduce<bigint | null>((a, b) => (a === null || b > a ? b : a), null);
        if (last === null || t < last + window) return false;
        const runningDeadline = deadlines.some((d) => {
          if (d === null || d.due > t || d.deadline <= t) return false;
          const o = observation(d.s);
          return o === undefined || time(o.at) > t;
        });
        const runningWait = waits.some((w) => {
          if (time(w.at) > t || time(w.deadline!) <= t) return false;
          const o = earliestObservation(parseEdge(w.edge!));
          return o === undefined || time(o.at) > t;
        });
        return !runningDeadline && !runningWait;
      };
      // every instant where stalling can begin: window ends, deadlines, waited edges observed
      const candidates = [
        ...progress.map((p) => p + window),
        ...deadlines.filter((d) => d !== null).map((d) => d!.deadline),
        ...waits.map((w) => time(w.deadline!)),
        ...waits.map((w) => earliestObservation(parseEdge(w.edge!))).filter((o): o is Receipt => o !== undefined).map((o) => time(o.at)),
      ].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const first = candidates.find(stalledAt);
      if (first !== undefined && (first <= clock || plannedLater(first))) say('incomplete', 'no_progress', [], undefined, true);
    }
  }

  // Outcome, completion.
  const verified = used.some((r) => r.type === 'outcome' && r.verified === true && byEnd(time(r.at)));
  const outcomeOk = phase.outcome === 'optional' || verified;
  const finished = everyEdgeObserved && outcomeOk;
  if (end && end.result === 'completed' && !finished) say('false_complete', 'false_complete', [end.event], missing[0], true);
  if (end && end.result !== 'completed') say('incomplete', `run_${end.result}`, [end.event], undefined, true);
  if (!end && everyEdgeObserved && !outcomeOk) say('working', 'awaiting_outcome', [], undefined, false);

  return conclude(pin, findings, naive, finished);
}

function conclude(pin: Pin | null, findings: RefFinding[], naive: NaiveVerdict, finished: boolean): RefResult {
  let verdict: Verdict = finished ? 'healthy' : 'working';
  for (const f of findings) if (VERDICTS.indexOf(f.verdict) < VERDICTS.indexOf(verdict)) verdict = f.verdict;
  const settledVerdict = !['working', 'waiting', 'uncertain'].includes(verdict);
  return { pin, verdict, naive, findings, settled: settledVerdict || findings.some((f) => f.settled) };
}
