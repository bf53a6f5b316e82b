/**
 * Drafting a contract from observed receipts (`topology-audit propose`). Pure: receipts in, YAML text out.
 *
 * The draft is a review artifact, never a blessing of drift: it is marked `candidate: true` (never pinned), and
 * every entry carries its evidence as a comment. Content-free by construction: it reads only receipts (agent ids,
 * edges, times, the pin named by run.start, verified outcomes).
 */
import { groupByRun, type RunState } from '../core/classify.js';
import { compareContractVersions } from '../core/contract.js';
import { edgeKey, formatDuration, tripleKey } from '../core/edge.js';
import { instant } from '../core/receipt.js';
import type { Receipt } from '../core/types.js';

export interface ProposeOptions {
  /** Edges seen in fewer than this share of runs are commented out; the plan holds what all but this share show. */
  minShare?: number;
  contractId?: string;
  version?: string;
  phase?: string;
  /** Percentile of observed delays for `within` (default 99). */
  percentile?: number;
  /** Versions of a contract already known (loaded by the auditor or in --contracts): the draft takes the next one. */
  knownVersions?: (contract: string) => readonly string[];
  /** Edges that made runs forbidden_edge under the version in force: marked in the draft, kept out of it. */
  forbidden?: readonly ForbiddenObservation[];
  /** Edges that made runs ambiguous_route (seen more often than their max) under the version in force: drafted from the other runs' counts, and marked. */
  ambiguous?: readonly ForbiddenObservation[];
}

/** One run's forbidden_edge finding: the edge key "a -> b : kind" and the pin it was judged under ("c@v"). */
export interface ForbiddenObservation {
  run: string;
  edge: string;
  under: string;
}

/** An observed edge the version in force forbids: commented out of the draft with its pin and run count. */
export interface ForbiddenEdge extends DraftEdge {
  under: string[];
  forbiddenRuns: number;
}

export interface DraftEdge {
  from: string;
  /** One target, or several for a bounded choice. */
  to: string[];
  kind: string;
  /** Most observations of the entry in one run. */
  max: number;
  /** Runs showing the entry (any of its targets). */
  runs: number;
  /** Runs per target, for a bounded choice. */
  perTarget: number[];
  /** Runs judged ambiguous_route on this entry under the version in force: left out of `max`, marked for review. */
  ambiguous?: { under: string[]; runs: number; max: number };
}

export interface DraftStep {
  edge: DraftEdge;
  key: string;
  after: string[];
  withinMs: number;
  /** The observed delay at the percentile, before rounding up. */
  observedMs: number;
  /** Runs the delay was measured in. */
  measured: number;
}

export interface Draft {
  contract: string;
  version: string;
  phase: string;
  runs: number;
  minShare: number;
  owner: string;
  ownerRuns: number;
  agents: string[];
  allow: DraftEdge[];
  /** Edges below --min-share: left out, shown as commented lines with their counts. */
  rare: DraftEdge[];
  /** Edges that made runs forbidden_edge under the version in force: left out, marked for review. */
  forbidden: ForbiddenEdge[];
  plan: DraftStep[];
  outcome: 'required' | 'optional';
  outcomeRuns: number;
  percentile: number;
}

export class ProposeError extends Error {}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const specText = (e: { from: string; to: string[]; kind: string }) => (e.to.length === 1 ? edgeKey(e.from, e.to[0], e.kind) : `${e.from} -> [${e.to.join(', ')}] : ${e.kind}`);

/** A duration rounded up to a readable unit: whole seconds under a minute, whole minutes under an hour, else hours. */
export function roundUpDuration(ms: number): number {
  const x = Math.max(1, Math.ceil(ms));
  if (x <= 60_000) return Math.ceil(x / 1000) * 1000;
  if (x <= 3_600_000) return Math.ceil(x / 60_000) * 60_000;
  return Math.ceil(x / 3_600_000) * 3_600_000;
}

/** Nearest-rank percentile of a non-empty list. */
export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1];
}

function mostCommon(m: Map<string, number>): [string, number] | null {
  let best: [string, number] | null = null;
  for (const [k, n] of m) if (!best || n > best[1] || (n === best[1] && k < best[0])) best = [k, n];
  return best;
}

/** The agent that starts the run: run.start's reporter, else the source of its earliest edge. */
function starter(s: RunState): string | null {
  const start = s.firstStart();
  if (start?.from) return start.from;
  let best: { from: string; at: number; event: string } | null = null;
  for (const e of s.edges.values()) if (!best || e.first.at < best.at || (e.first.at === best.at && e.first.event < best.event)) best = { from: e.from, at: e.first.at, event: e.first.event };
  return best?.from ?? null;
}

/**
 * The draft's version: one above the newest numeric version known for the contract (loaded, or named by the runs'
 * run.start receipts of that contract); "1" for a contract nobody knows yet.
 */
export function nextVersion(known: readonly string[], runs: readonly RunState[], contract: string): string {
  const vs = new Set(known);
  for (const s of runs) {
    const st = s.firstStart();
    if (st?.contract === contract && st.version) vs.add(st.version);
  }
  if (vs.size === 0) return '1';
  const numeric = [...vs].filter((v) => /^\d+$/.test(v)).sort(compareContractVersions);
  if (numeric.length) return String(Number(numeric.at(-1)) + 1);
  let i = 1;
  while (vs.has(`candidate-${i}`)) i++;
  return `candidate-${i}`;
}

function forbiddenByEdge(obs: readonly ForbiddenObservation[], runs: Set<string>): Map<string, { under: Set<string>; runs: Set<string> }> {
  const out = new Map<string, { under: Set<string>; runs: Set<string> }>();
  for (const o of obs) {
    if (!runs.has(o.run)) continue;
    let e = out.get(o.edge);
    if (!e) out.set(o.edge, (e = { under: new Set(), runs: new Set() }));
    e.under.add(o.under);
    e.runs.add(o.run);
  }
  return out;
}

/** The names a draft takes unless given: contract and phase as most run.start receipts name them, the next version, the starter most runs share. */
function draftNames(runs: readonly RunState[], opts: ProposeOptions): { contract: string; phase: string; version: string; owner: string; ownerRuns: number } {
  const contracts = new Map<string, number>();
  const phases = new Map<string, number>();
  const owners = new Map<string, number>();
  for (const s of runs) {
    const st = s.firstStart();
    if (st?.contract) contracts.set(st.contract, (contracts.get(st.contract) ?? 0) + 1);
    if (st?.phase) phases.set(st.phase, (phases.get(st.phase) ?? 0) + 1);
    const o = starter(s);
    if (o) owners.set(o, (owners.get(o) ?? 0) + 1);
  }
  const contract = opts.contractId ?? mostCommon(contracts)?.[0] ?? 'proposed';
  const phase = opts.phase ?? mostCommon(phases)?.[0] ?? 'main';
  const version = opts.version ?? nextVersion(opts.knownVersions?.(contract) ?? [], runs, contract);
  const [owner, ownerRuns] = mostCommon(owners)!;
  return { contract, phase, version, owner, ownerRuns };
}

/** One concrete edge across the runs: the runs showing it (by index) and the most observations in one run. */
interface EdgeObservation {
  from: string;
  to: string;
  kind: string;
  runs: Set<number>;
  max: number;
}

/** Every concrete edge the runs show, most-shown first (then by source, target and kind). */
function observedEdges(runs: readonly RunState[]): EdgeObservation[] {
  const edges = new Map<string, EdgeObservation>();
  runs.forEach((s, i) => {
    for (const [k, e] of s.edges) {
      let o = edges.get(k);
      if (!o) edges.set(k, (o = { from: e.from, to: e.to, kind: e.kind, runs: new Set(), max: 0 }));
      o.runs.add(i);
      o.max = Math.max(o.max, e.count);
    }
  });
  return [...edges.values()].sort((a, b) => b.runs.size - a.runs.size || cmp(a.from, b.from) || cmp(a.to, b.to) || cmp(a.kind, b.kind));
}

/** Observed edges sorted into forbidden (by the version in force), rare (below --min-share) and kept. */
function sortObservedEdges(
  all: readonly EdgeObservation[],
  forbiddenBy: Map<string, { under: Set<string>; runs: Set<string> }>,
  rareBelow: number,
): { forbidden: ForbiddenEdge[]; rare: DraftEdge[]; kept: EdgeObservation[] } {
  const rare: DraftEdge[] = [];
  const kept: EdgeObservation[] = [];
  const forbidden: ForbiddenEdge[] = [];
  for (const o of all) {
    const f = forbiddenBy.get(edgeKey(o.from, o.to, o.kind));
    if (f) forbidden.push({ from: o.from, to: [o.to], kind: o.kind, max: o.max, runs: o.runs.size, perTarget: [o.runs.size], under: [...f.under].sort(), forbiddenRuns: f.runs.size });
    else if (o.runs.size < rareBelow) rare.push({ from: o.from, to: [o.to], kind: o.kind, max: o.max, runs: o.runs.size, perTarget: [o.runs.size] });
    else kept.push(o);
  }
  return { forbidden, rare, kept };
}

/** Bounded choices: targets of one source and kind that never appear together in a run are alternatives of one entry. */
function boundedChoices(kept: readonly EdgeObservation[]): EdgeObservation[][] {
  const groups: EdgeObservation[][] = [];
  const bySourceKind = new Map<string, EdgeObservation[][]>();
  for (const o of kept) {
    const sk = `${o.from}\u0000${o.kind}`;
    const list = bySourceKind.get(sk) ?? [];
    const g = list.find((grp) => grp.every((m) => ![...m.runs].some((r) => o.runs.has(r))));
    if (g) g.push(o);
    else {
      const ng = [o];
      list.push(ng);
      groups.push(ng);
    }
    bySourceKind.set(sk, list);
  }
  return groups;
}

/**
 * One allow entry from a group of targets. Its max: most observations of the entry in one run (per run, the sum over
 * its targets). Runs judged ambiguous_route on it (more than the max in force) do not raise the drafted max unless no
 * other run shows it; they are marked.
 */
function allowEntry(g: readonly EdgeObservation[], runs: readonly RunState[], ambiguousBy: Map<string, { under: Set<string>; runs: Set<string> }>): DraftEdge {
  const runSet = new Set<number>();
  for (const m of g) for (const r of m.runs) runSet.add(r);
  const amb = g.map((m) => ambiguousBy.get(edgeKey(m.from, m.to, m.kind))).filter((x) => x !== undefined);
  const ambRuns = new Set(amb.flatMap((a) => [...a.runs]));
  let max = 0;
  let ambMax = 0;
  let ambCount = 0;
  for (const r of runSet) {
    let c = 0;
    for (const m of g) c += runs[r].edges.get(tripleKey(m.from, m.to, m.kind))?.count ?? 0;
    if (ambRuns.has(runs[r].run)) {
      ambMax = Math.max(ambMax, c);
      ambCount++;
    } else max = Math.max(max, c);
  }
  if (max === 0) max = ambMax;
  const entry: DraftEdge = { from: g[0].from, to: g.map((m) => m.to), kind: g[0].kind, max, runs: runSet.size, perTarget: g.map((m) => m.runs.size) };
  if (ambCount) entry.ambiguous = { under: [...new Set(amb.flatMap((a) => [...a.under]))].sort(), runs: ambCount, max: ambMax };
  return entry;
}

/** A run's first observation of an entry (any of its targets), or null. */
function firstAt(s: RunState, e: DraftEdge): number | null {
  let t: number | null = null;
  for (const to of e.to) {
    const agg = s.edges.get(tripleKey(e.from, to, e.kind));
    if (agg && (t === null || agg.first.at < t)) t = agg.first.at;
  }
  return t;
}

/** before[a][b]: in every run showing both steps, a came strictly first (and at least one run shows both). */
function stepsBefore(times: readonly (readonly (number | null)[])[], m: number): boolean[][] {
  const before = Array.from({ length: m }, () => new Array<boolean>(m).fill(false));
  for (let a = 0; a < m; a++) {
    for (let b = 0; b < m; b++) {
      if (a === b) continue;
      let both = 0;
      let ok = true;
      for (const t of times) {
        const ta = t[a];
        const tb = t[b];
        if (ta === null || tb === null) continue;
        both++;
        if (!(ta < tb)) {
          ok = false;
          break;
        }
      }
      before[a][b] = ok && both > 0;
    }
  }
  return before;
}

/** A topological order of the steps (by `before`), ready steps by earliest median first observation; breaks cycles in `before`. */
function stepOrder(expected: readonly DraftEdge[], before: boolean[][], medians: readonly number[]): number[] {
  const m = expected.length;
  const order: number[] = [];
  const placed = new Set<number>();
  while (order.length < m) {
    const ready = expected
      .map((_, i) => i)
      .filter((i) => !placed.has(i) && expected.every((_, a) => a === i || placed.has(a) || !before[a][i]));
    if (ready.length === 0) {
      // An order cycle across runs that never show all of its edges together: break it at the earliest step.
      const rest = expected.map((_, i) => i).filter((i) => !placed.has(i));
      rest.sort((a, b) => medians[a] - medians[b]);
      for (const a of rest) before[a][rest[0]] = false;
      ready.push(rest[0]);
    }
    ready.sort((a, b) => medians[a] - medians[b] || cmp(specText(expected[a]), specText(expected[b])));
    order.push(ready[0]);
    placed.add(ready[0]);
  }
  return order;
}

/** The run's start: its first run.start, else its first receipt. */
const startOf = (s: RunState) => {
  const st = s.firstStart();
  return st ? instant(st.at) : s.firstAt;
};

/** The plan: entries (nearly) every run shows, ordered, each after its direct predecessors, within the observed delay at the percentile. */
function draftPlan(runs: readonly RunState[], allow: readonly DraftEdge[], common: number, pct: number): DraftStep[] {
  const expected = allow.filter((e) => e.runs >= common);
  const times = runs.map((s) => expected.map((e) => firstAt(s, e)));
  const before = stepsBefore(times, expected.length);
  const median = (i: number) => {
    const v = times.map((t) => t[i]).filter((x): x is number => x !== null);
    return v.length ? percentile(v, 50) : Infinity;
  };
  const order = stepOrder(expected, before, expected.map((_, i) => median(i)));
  const direct = (b: number) => {
    const preds = order.filter((a) => before[a][b]);
    return preds.filter((a) => !preds.some((c) => c !== a && before[a][c]));
  };
  return order.map((i) => {
    const after = direct(i);
    const delays: number[] = [];
    runs.forEach((s, r) => {
      const t = times[r][i];
      if (t === null) return;
      let due = after.length === 0 ? startOf(s) : -Infinity;
      for (const a of after) {
        const ta = times[r][a];
        if (ta === null) return;
        due = Math.max(due, ta);
      }
      delays.push(Math.max(0, t - due));
    });
    const observedMs = delays.length ? percentile(delays, pct) : 0;
    return { edge: expected[i], key: specText(expected[i]), after: after.map((a) => specText(expected[a])), withinMs: roundUpDuration(observedMs), observedMs, measured: delays.length };
  });
}

/**
 * Draft a contract from receipts. Throws ProposeError when there is nothing to draft from. Steps: names, observed
 * edges sorted into forbidden / rare / kept, bounded choices, allow entries, the plan, the agents declared.
 */
export function proposeDraft(receipts: Iterable<Receipt>, opts: ProposeOptions = {}): Draft {
  const minShare = opts.minShare ?? 0.05;
  if (!(minShare >= 0 && minShare < 1)) throw new ProposeError(`--min-share must be at least 0 and below 1, got ${minShare}`);
  const runs = [...groupByRun(receipts).values()].filter((s) => s.edges.size > 0);
  const n = runs.length;
  if (n === 0) throw new ProposeError('no run with an edge receipt to draft from');
  const common = n * (1 - minShare); // "nearly every run"
  const rareBelow = n * minShare;
  const { contract, phase, version, owner, ownerRuns } = draftNames(runs, opts);
  const runIds = new Set(runs.map((s) => s.run));
  const { forbidden, rare, kept } = sortObservedEdges(observedEdges(runs), forbiddenByEdge(opts.forbidden ?? [], runIds), rareBelow);
  const ambiguousBy = forbiddenByEdge(opts.ambiguous ?? [], runIds);
  const allow = boundedChoices(kept).map((g) => allowEntry(g, runs, ambiguousBy));
  const pct = opts.percentile ?? 99;
  const plan = draftPlan(runs, allow, common, pct);
  const outcomeRuns = runs.filter((s) => s.verifiedOutcome !== null).length;
  // Agents named only by kept entries are declared; an agent seen only on a rare edge is listed in its comment.
  const declared = new Set<string>([owner]);
  for (const e of allow) {
    declared.add(e.from);
    for (const t of e.to) declared.add(t);
  }
  return {
    contract,
    version,
    phase,
    runs: n,
    minShare,
    owner,
    ownerRuns,
    agents: [owner, ...[...declared].filter((a) => a !== owner).sort()],
    allow,
    rare,
    forbidden,
    plan,
    outcome: outcomeRuns * 2 > n ? 'required' : 'optional',
    outcomeRuns,
    percentile: pct,
  };
}

const q = (s: string) => JSON.stringify(s);

function allowLine(e: DraftEdge): string {
  if (e.to.length === 1) return `{ edge: ${q(specText(e))}, max: ${e.max} }`;
  return `{ from: ${q(e.from)}, to: [${e.to.map(q).join(', ')}], kind: ${e.kind}, max: ${e.max} }`;
}

function evidence(e: DraftEdge, n: number): string {
  const base = `seen in ${e.runs} of ${n} runs`;
  const others = e.ambiguous && e.ambiguous.runs < e.runs ? ` in the ${e.runs - e.ambiguous.runs} others` : '';
  const most = `at most ${e.max} per run${others}`;
  if (e.to.length === 1) return `${base}, ${most}`;
  return `${base}, ${most}; bounded choice: ${e.to.map((t, i) => `${t} in ${e.perTarget[i]}`).join(', ')}`;
}

/** The review mark of an entry some runs were judged ambiguous_route on. */
function ambiguityMark(e: DraftEdge): string {
  const a = e.ambiguous;
  if (!a) return '';
  return `; REVIEW: ambiguous_route under ${a.under.join(', ')} in ${a.runs} run${a.runs === 1 ? '' : 's'} (up to ${a.max} per run): raise max only if the repeats are intended`;
}

/** An observed delay for a comment: milliseconds under a second, else seconds with one decimal. */
const readable = (ms: number) => (ms < 1000 ? `${Math.ceil(ms)}ms` : `${(Math.ceil(ms / 100) / 10).toFixed(1)}s`);

/** The draft as contract YAML, every entry with its evidence as a comment. */
export function draftYaml(d: Draft): string {
  const out: string[] = [];
  const n = d.runs;
  out.push(`# Draft contract proposed by \`topology-audit propose\` from ${n} observed run(s) (receipts only).`);
  out.push('# Observed behaviour is not intended behaviour: check every edge against the intended design,');
  out.push('# then shadow-evaluate it (serve/replay --shadow CONTRACT@VERSION) before removing `candidate: true`.');
  out.push(`contract: ${q(d.contract)}`);
  out.push(`version: ${q(d.version)}`);
  out.push('candidate: true   # never pinned while marked: remove this line and publish the version to adopt it');
  out.push(`owner: ${q(d.owner)}   # starts ${d.ownerRuns} of ${n} runs`);
  out.push(`agents: [${d.agents.map(q).join(', ')}]`);
  out.push('allow:');
  for (const e of d.allow) out.push(`  - ${allowLine(e)}   # ${evidence(e, n)}${ambiguityMark(e)}`);
  const declared = new Set(d.agents);
  for (const e of d.rare) {
    const missing = [e.from, ...e.to].filter((a) => !declared.has(a));
    const note = missing.length ? `; ${missing.join(', ')} would need adding to agents` : '';
    out.push(`  # - ${allowLine(e)}   # seen in ${e.runs} of ${n} runs (below --min-share ${d.minShare}): left out${note}`);
  }
  for (const e of d.forbidden) {
    out.push(`  # - ${allowLine(e)}   # forbidden under ${e.under.join(', ')} in ${e.forbiddenRuns} run${e.forbiddenRuns === 1 ? '' : 's'}: review (seen in ${e.runs} of ${n} runs)`);
  }
  out.push('phases:');
  out.push(`  ${q(d.phase)}:`);
  out.push(`    outcome: ${d.outcome}   # verified outcome in ${d.outcomeRuns} of ${n} runs`);
  if (d.plan.length === 0) out.push('    expect: []   # no edge is shown by (nearly) every run');
  else out.push('    expect:');
  d.plan.forEach((s, i) => {
    const parts = [`edge: ${q(s.key)}`];
    const defaultAfter = i > 0 && s.after.length === 1 && s.after[0] === d.plan[i - 1].key;
    const firstDefault = i === 0 && s.after.length === 0;
    if (!defaultAfter && !firstDefault) parts.push(`after: [${s.after.map(q).join(', ')}]`);
    parts.push(`within: ${formatDuration(s.withinMs)}`);
    const order = s.after.length === 0 ? (i === 0 ? 'first' : 'parallel branch, order varies') : `after ${s.after.length === 1 ? 'its predecessor' : `${s.after.length} predecessors`} in every run`;
    out.push(`      - { ${parts.join(', ')} }   # seen in ${s.edge.runs} of ${n} runs; ${order}; p${d.percentile} delay ${readable(s.observedMs)} over ${s.measured} runs`);
  });
  return out.join('\n') + '\n';
}
