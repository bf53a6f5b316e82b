/**
 * Shadow evaluation: a run pinned to one version of a contract is also evaluated against a candidate version of
 * the same contract, with the same verdict function. The shadow never changes the pinned verdict; it only reports
 * what the candidate would have said.
 *
 * The candidate is judged as the design the run was pinned to: receipts that carry a version and later run.start
 * receipts are compared with the run's actual pin (the emitter acted under that version), so a shadow verdict
 * differs from the pinned one only where the candidate's topology (agents, allowed edges, multiplicities, plan,
 * deadlines, outcome) differs.
 */
import type { Contract } from './contract.js';
import { evaluate, evaluationReadsBack, type EvaluateOptions, type Pinning } from './classify.js';
import type { RunState } from './state.js';
import type { ContractRegistry } from './registry.js';
import type { Finding, RunVerdict, Verdict } from './types.js';
import type { Instant } from './time.js';

export interface ShadowRef {
  contract: string;
  version: string;
}

export interface ShadowVerdict {
  contract: string;
  version: string;
  verdict: Verdict;
  findings: Finding[];
  /** The shadow verdict differs from the pinned one. */
  disagrees: boolean;
  /** When the shadow verdict may next change with time alone (not in JSON). */
  nextChangeAt: number | null;
}

/** `CONTRACT@VERSION` (the last `@` splits, so a contract id may hold one). */
export function parseShadowRef(text: string): ShadowRef {
  const i = text.lastIndexOf('@');
  if (i <= 0 || i === text.length - 1) throw new Error(`--shadow: expected CONTRACT@VERSION, got ${JSON.stringify(text)}`);
  return { contract: text.slice(0, i), version: text.slice(i + 1) };
}

/** Resolve shadow references against a registry: each must name an existing version. */
export function resolveShadows(registry: ContractRegistry, refs: string[]): Contract[] {
  const out: Contract[] = [];
  for (const text of refs) {
    const ref = parseShadowRef(text);
    const c = registry.get(ref.contract, ref.version);
    if (!c) {
      const known = registry.versions(ref.contract).map((v) => v.version);
      throw new Error(`--shadow ${text}: no such contract version${known.length ? ` (versions of ${ref.contract}: ${known.join(', ')})` : ` (no contract ${ref.contract})`}`);
    }
    if (!out.includes(c)) out.push(c);
  }
  return out;
}

/**
 * The shadow verdicts of one run: for every candidate of the run's pinned contract (other than the pinned version
 * itself). Runs without a resolvable pin have none.
 */
export function shadowEvaluate(state: RunState, pinning: Pinning, pinned: RunVerdict, candidates: readonly Contract[], now: number | Instant, opts: EvaluateOptions = {}): ShadowVerdict[] {
  if (!pinning.ok || candidates.length === 0) return [];
  const out: ShadowVerdict[] = [];
  for (const c of candidates) {
    if (c.contract !== pinning.pin.contract || c.version === pinning.pin.version) continue;
    const phase = c.phases.some((p) => p.name === pinning.pin.phase) ? pinning.pin.phase : c.phases[0].name;
    // The pin keeps the run's version (see the header); the content is the candidate's.
    const v = evaluate(state, { ok: true, pin: { ...pinning.pin, phase }, contract: c }, now, opts);
    out.push({ contract: c.contract, version: c.version, verdict: v.verdict, findings: v.findings, disagrees: v.verdict !== pinned.verdict, nextChangeAt: v.nextChangeAt });
  }
  return out;
}

/** Whether shadowEvaluate reads the run's receipts back (evaluationReadsBack under a candidate's content). */
export function shadowReadsBack(state: RunState, pinning: Pinning, candidates: readonly Contract[]): boolean {
  if (!pinning.ok) return false;
  for (const c of candidates) {
    if (c.contract !== pinning.pin.contract || c.version === pinning.pin.version) continue;
    if (evaluationReadsBack(state, { ok: true, pin: pinning.pin, contract: c })) return true;
  }
  return false;
}

/** What a finding is about, to compare two verdicts' findings: its code and edge. */
const findingKey = (f: Finding) => `${f.code}\u0000${f.edge ?? ''}`;

/** Edges (or codes, for findings without an edge) whose findings differ between the pinned and the shadow verdict. */
export function differingEdges(pinned: RunVerdict, shadow: ShadowVerdict): string[] {
  const a = new Set(pinned.findings.map(findingKey));
  const b = new Set(shadow.findings.map(findingKey));
  const out = new Set<string>();
  for (const f of shadow.findings) if (!a.has(findingKey(f))) out.add(f.edge ?? f.code);
  for (const f of pinned.findings) if (!b.has(findingKey(f))) out.add(f.edge ?? f.code);
  return [...out].sort();
}

export interface ShadowSummary {
  contract: string;
  version: string;
  /** Runs of the contract evaluated against the candidate. */
  runs: number;
  disagreements: number;
  /** Shadow verdicts, counted. */
  verdicts: Partial<Record<Verdict, number>>;
  /** Pinned -> shadow verdict pairs of the disagreeing runs, counted. */
  changes: { pinned: Verdict; shadow: Verdict; runs: number }[];
  /** Edges behind the disagreements, with how many disagreeing runs each explains. */
  edges: { edge: string; runs: number }[];
  /** Disagreeing runs (at most `limit`). */
  disagreeing: { run: string; pinned: Verdict; shadow: Verdict; edges: string[] }[];
}

/** Summarise shadow verdicts per candidate. `candidates` lists every candidate, even those with no run yet. */
export function summarizeShadows(candidates: readonly Contract[], runs: Iterable<{ verdict: RunVerdict; shadow: readonly ShadowVerdict[] }>, limit = 200): ShadowSummary[] {
  const byKey = new Map<string, { s: ShadowSummary; changes: Map<string, number>; edges: Map<string, number> }>();
  for (const c of candidates) {
    byKey.set(`${c.contract}\u0000${c.version}`, { s: { contract: c.contract, version: c.version, runs: 0, disagreements: 0, verdicts: {}, changes: [], edges: [], disagreeing: [] }, changes: new Map(), edges: new Map() });
  }
  for (const { verdict, shadow } of runs) {
    for (const sv of shadow) {
      const e = byKey.get(`${sv.contract}\u0000${sv.version}`);
      if (!e) continue;
      e.s.runs++;
      e.s.verdicts[sv.verdict] = (e.s.verdicts[sv.verdict] ?? 0) + 1;
      if (!sv.disagrees) continue;
      e.s.disagreements++;
      const ck = `${verdict.verdict}\u0000${sv.verdict}`;
      e.changes.set(ck, (e.changes.get(ck) ?? 0) + 1);
      const edges = differingEdges(verdict, sv);
      for (const x of edges) e.edges.set(x, (e.edges.get(x) ?? 0) + 1);
      if (e.s.disagreeing.length < limit) e.s.disagreeing.push({ run: verdict.run, pinned: verdict.verdict, shadow: sv.verdict, edges });
    }
  }
  return [...byKey.values()].map(({ s, changes, edges }) => {
    s.changes = [...changes].map(([k, runs]) => {
      const [pinned, shadow] = k.split('\u0000') as [Verdict, Verdict];
      return { pinned, shadow, runs };
    });
    s.edges = [...edges].map(([edge, runs]) => ({ edge, runs })).sort((a, b) => b.runs - a.runs || (a.edge < b.edge ? -1 : 1));
    s.disagreeing.sort((a, b) => (a.run < b.run ? -1 : a.run > b.run ? 1 : 0));
    return s;
  });
}

/** JSON of a shadow verdict, as the run API and `replay --json` carry it. */
export function shadowJson(s: ShadowVerdict) {
  return { contract: s.contract, version: s.version, verdict: s.verdict, findings: s.findings, disagrees: s.disagrees };
}
