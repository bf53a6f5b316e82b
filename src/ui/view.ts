/**
 * View models of the web view: what its JSON endpoints answer. Built from the engine's verdicts (the one pure
 * classifier) and the overlay; nothing here judges a run.
 */
import type { Contract } from '../core/contract.js';
import { OPERATOR_MEANING, firstFinding, verdictJson } from '../core/meaning.js';
import { shadowJson } from '../core/shadow.js';
import { instant } from '../core/receipt.js';
import { isoOrNull } from '../core/time.js';
import type { ContractRegistry } from '../core/registry.js';
import { VERDICTS, type Receipt, type RunVerdict, type Verdict } from '../core/types.js';
import type { AuditEngine } from '../audit/engine.js';
import { matchesAlertFilter, type ListedRun } from '../audit/listing.js';
import type { SilenceView } from '../alerting/silences.js';
import { diffContracts, type ContractChanges } from '../render/contract-diff.js';
import { LOOKS, edgeLabelLines, edgeLook, type EdgeLook } from '../render/labels.js';
import { layoutOverlay } from '../render/layout.js';
import { contractGraph, overlay, type Overlay } from '../render/overlay.js';
import { legendLooks, renderSvg } from '../render/svg.js';

export interface RunRow {
  run: string;
  pin: RunVerdict['pin'];
  verdict: Verdict;
  naive: RunVerdict['naive'];
  settled: boolean;
  findings: number;
  firstFinding: string | null;
  startedAt: string | null;
  updatedAt: string;
  /** When the run entered its current verdict ("since when"); null for a run another instance holds. */
  verdictSince: string | null;
  /** Its alert state (acknowledged, in the alerting series), null for a run another instance holds. */
  acked: boolean | null;
  alerting: boolean | null;
  /** An Alertmanager silence covers its alert; null without serve --alertmanager-url (or in a live update). */
  silenced: boolean | null;
}

/** What a row knows beyond the verdict: when it entered it, its alert state, a silence. */
export interface RowState {
  enteredAt?: number | null;
  alert?: { acked: boolean; alerting: boolean } | null;
  silenced?: boolean | null;
}

export function runRow(v: RunVerdict, firstAt: number, updatedAt: number, st: RowState = {}): RunRow {
  return {
    run: v.run,
    pin: v.pin,
    verdict: v.verdict,
    naive: v.naive,
    settled: v.settled,
    findings: v.findings.length,
    firstFinding: firstFinding(v)?.message ?? null,
    startedAt: isoOrNull(firstAt),
    updatedAt: new Date(updatedAt).toISOString(),
    verdictSince: st.enteredAt == null ? null : isoOrNull(st.enteredAt),
    acked: st.alert ? st.alert.acked : null,
    alerting: st.alert ? st.alert.alerting : null,
    silenced: st.silenced ?? null,
  };
}

/** The row of one run, or null when the engine does not hold it. */
/** The row of a run this instance holds live (the event stream's runs), or null. */
export function rowOf(engine: AuditEngine, run: string): RunRow | null {
  const state = { enteredAt: engine.enteredAtOf(run), alert: engine.alertStateOf(run, Date.now()) };
  if (!engine.synchronousReads) {
    // A store read only asynchronously (cluster mode): the held run's summary, its first receipt time from its live state.
    const h = engine.heldSummary(run);
    return h ? runRow(h.verdict, h.firstAt, h.updatedAt, state) : null;
  }
  const r = engine.get(run);
  if (!r) return null;
  let first = Infinity;
  for (const x of r.receipts) first = Math.min(first, instant(x.at));
  return runRow(r.verdict, first, r.updatedAt, state);
}

export interface RunList {
  runs: RunRow[];
  /** The cursor of the next page (`after`); null on the last page. */
  next: string | null;
  /** Runs per verdict under the contract filter (all verdicts, zeros included). */
  counts: Record<Verdict, number>;
  total: number;
  contracts: string[];
  verdicts: readonly Verdict[];
  meanings: Record<Verdict, string>;
  /** Silences are known (serve --alertmanager-url): the silenced filter applies. */
  silences?: boolean;
}

/** The run list's filters: verdict, contract, and the alert state (acknowledged, alerting, silenced). */
export interface RunListFilter {
  verdict?: string;
  contract?: string;
  limit?: number;
  acked?: boolean;
  alerting?: boolean;
  /** Needs silenceOf (serve --alertmanager-url); ignored without it. */
  silenced?: boolean;
  /** The cursor of the page (a previous answer's `next`). */
  after?: string;
}

/** The rows of listed runs, each with its silence looked up (the silence cache answers from memory). */
async function rowsOf(list: readonly ListedRun[], filter: RunListFilter, silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>): Promise<RunRow[]> {
  const out: RunRow[] = [];
  for (const r of list) {
    const silenced = silenceOf ? (await silenceOf(r.verdict)) !== null : null;
    if (filter.silenced !== undefined && silenced !== null && silenced !== filter.silenced) continue;
    out.push(runRow(r.verdict, r.firstAt, r.updatedAt, { enteredAt: r.enteredAt, alert: r.alert, silenced }));
  }
  return out;
}

export async function listRuns(engine: AuditEngine, filter: RunListFilter, now: number, silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>): Promise<RunList> {
  const limit = Math.min(Math.max(filter.limit ?? 200, 1), 5000);
  const alertFilter = { acked: filter.acked, alerting: filter.alerting };
  const counts = Object.fromEntries(VERDICTS.map((v) => [v, 0])) as Record<Verdict, number>;
  // A page of the stored runs (cursor paging) with the counts by the store: a single instance's store, or a cluster's
  // shared store (rows of runs held elsewhere as their owners last wrote them, runs.listed; the counts the verdicts
  // their owners last stored, counted by the database: the page evaluates no run held elsewhere).
  const remote = engine.remote;
  const stored = remote ? await remote.counts({ contract: filter.contract }) : engine.verdictCounts({ contract: filter.contract });
  if (stored) {
    let total = 0;
    for (const [v, n] of Object.entries(stored)) {
      if (v in counts) counts[v as Verdict] = n;
      total += n;
    }
    const page = await engine.listPage({ verdict: filter.verdict, contract: filter.contract, limit, after: filter.after, ...alertFilter }, now);
    return { runs: await rowsOf(page.runs, filter, silenceOf), next: page.next, counts, total, contracts: engine.registry.ids(), verdicts: VERDICTS, meanings: OPERATOR_MEANING };
  }
  const all = engine.list({ contract: filter.contract, limit: Number.MAX_SAFE_INTEGER, now });
  for (const r of all) counts[r.verdict.verdict]++;
  const rows = all.filter((r) => (!filter.verdict || r.verdict.verdict === filter.verdict) && matchesAlertFilter(r.alert, alertFilter)).slice(0, limit);
  return {
    runs: await rowsOf(rows, filter, silenceOf),
    next: null,
    counts,
    total: all.length,
    contracts: engine.registry.ids(),
    verdicts: VERDICTS,
    meanings: OPERATOR_MEANING,
  };
}

export interface EdgeRow {
  id: string;
  from: string;
  to: string;
  kind: string;
  look: EdgeLook;
  states: string[];
  label: [string, string];
  count: number;
  max?: number;
  deadline?: string;
  dependency?: string;
  findings: string[];
  events: string[];
}

export interface LegendEntry {
  /** An edge look, or `unknown_agent` for the node style of an agent not in the contract. */
  look: EdgeLook | 'unknown_agent';
  color: string;
  width: number;
  dash: string;
  text: string;
}

export interface GraphView {
  svg: string;
  edges: EdgeRow[];
  nodes: Overlay['nodes'];
  legend: LegendEntry[];
}

const legendOf = (o: Overlay | null): LegendEntry[] => [
  ...legendLooks(o).map((look) => ({ look, color: LOOKS[look].color, width: LOOKS[look].width, dash: LOOKS[look].dash, text: LOOKS[look].legend })),
  ...(o?.nodes.some((x) => !x.known) ? [{ look: 'unknown_agent' as const, color: '#c81e1e', width: 1.5, dash: '5 3', text: 'unknown agent: not in the contract' }] : []),
];

async function graphView(o: Overlay, now: number | undefined, idPrefix: string, title?: string): Promise<GraphView> {
  const layout = await layoutOverlay(o, now);
  return {
    svg: renderSvg(o, layout, { now, idPrefix, title }),
    edges: o.edges.map((e) => ({
      id: e.id,
      from: e.from,
      to: e.to,
      kind: e.kind,
      look: edgeLook(e),
      states: e.states,
      label: edgeLabelLines(e, now),
      count: e.count,
      ...(e.max !== undefined ? { max: e.max } : {}),
      ...(e.deadline !== undefined ? { deadline: new Date(e.deadline).toISOString() } : {}),
      ...(e.dependency ? { dependency: e.dependency } : {}),
      findings: e.findings,
      events: e.events,
    })),
    nodes: o.nodes,
    legend: legendOf(o),
  };
}

export interface RunView {
  run: ReturnType<typeof verdictJson> & { receipts: Receipt[]; updatedAt: string; startedAt: string | null; shadow?: ReturnType<typeof shadowJson>[] };
  meaning: string;
  naiveMeaning: string;
  nextChangeAt: string | null;
  /** When the run entered its verdict, and its alert state; null for a run another instance holds. */
  verdictSince: string | null;
  alerting: boolean | null;
  /** The run's latest acknowledgement (`current`: it covers the verdict now). */
  ack: { verdict: string; by: string | null; at: string; reason: string | null; current: boolean } | null;
  graph: GraphView | null;
  /** Why there is no graph. */
  graphMissing?: string;
  /** The Alertmanager silence that matches the run's alert (null: none; absent: no Alertmanager configured). */
  silence?: SilenceView | null;
  now: string;
}

const byTime = (a: Receipt, b: Receipt) => instant(a.at) - instant(b.at) || (a.event < b.event ? -1 : a.event > b.event ? 1 : 0);

async function ackView(engine: AuditEngine, run: string, now: number): Promise<RunView['ack']> {
  const a = await engine.fetchAck(run, now);
  return a ? { verdict: a.verdict, by: a.by, at: new Date(a.at).toISOString(), reason: a.reason, current: a.current } : null;
}

/** Everything the run page shows. */
export async function runView(engine: AuditEngine, run: string, now: number, silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>): Promise<RunView | null> {
  const r = await engine.fetch(run, now);
  if (!r) return null;
  const v = r.verdict;
  const silence = silenceOf ? { silence: await silenceOf(v) } : {};
  const receipts = [...r.receipts].sort(byTime);
  const contract = v.pin ? engine.registry.get(v.pin.contract, v.pin.version) : undefined;
  let graph: GraphView | null = null;
  let graphMissing: string | undefined;
  if (!v.pin) graphMissing = 'The run has no resolvable pinned contract, so there is no intended graph to draw.';
  else if (!contract) graphMissing = `The pinned contract ${v.pin.contract}@${v.pin.version} is not in the loaded contracts directory.`;
  else graph = await graphView(overlay(contract, v.pin.phase, v, receipts, now), now, 'run-', `Topology of ${v.pin.contract}@${v.pin.version} phase ${v.pin.phase} with run ${v.run} laid over it`);
  return {
    run: {
      ...verdictJson(v),
      receipts,
      updatedAt: new Date(r.updatedAt).toISOString(),
      startedAt: receipts.length ? receipts[0].at : null,
      ...(r.shadow ? { shadow: r.shadow.map(shadowJson) } : {}),
    },
    meaning: OPERATOR_MEANING[v.verdict],
    naiveMeaning:
      v.naive === 'green'
        ? 'The naive rule (at least one event, every local status ok, parent not failed) calls this run green.'
        : 'The naive rule (at least one event, every local status ok, parent not failed) calls this run red.',
    nextChangeAt: v.nextChangeAt !== null ? new Date(v.nextChangeAt).toISOString() : null,
    verdictSince: isoOrNull(engine.enteredAtOf(run)),
    alerting: engine.alertStateOf(run, now)?.alerting ?? null,
    ack: await ackView(engine, run, now),
    graph,
    ...(graphMissing ? { graphMissing } : {}),
    ...silence,
    now: new Date(now).toISOString(),
  };
}

export interface ContractSummary {
  contract: string;
  versions: { version: string; retired: boolean; hash: string; owner: string; agents: number; allow: number; phases: string[] }[];
}

export function contractsSummary(registry: ContractRegistry): ContractSummary[] {
  return registry.ids().map((id) => ({
    contract: id,
    versions: registry.versions(id).map((c) => ({ version: c.version, retired: c.retired, hash: c.hash, owner: c.owner, agents: c.agents.length, allow: c.allow.length, phases: c.phases.map((p) => p.name) })),
  }));
}

export interface ContractVersionView {
  version: string;
  retired: boolean;
  /** A draft under review: never pinned (optional so older answers still type-check). */
  candidate?: boolean;
  hash: string;
  owner: string;
  agents: string[];
  allow: { edge: string; max: number }[];
  phases: { name: string; outcome: string; plan: { edge: string; after: string[]; dependency?: string; within?: string }[]; graph: GraphView }[];
  /** Changes from the previous version (null for the first). */
  changes: ContractChanges | null;
}

export interface ContractView {
  contract: string;
  versions: ContractVersionView[];
  legend: LegendEntry[];
}

const human = (ms: number) => {
  for (const [u, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) if (ms % size === 0 && ms >= size) return `${ms / size}${u}`;
  return `${ms}ms`;
};

async function versionView(c: Contract, prev: Contract | null): Promise<ContractVersionView> {
  return {
    version: c.version,
    retired: c.retired,
    ...(c.candidate ? { candidate: true } : {}),
    hash: c.hash,
    owner: c.owner,
    agents: c.agents,
    allow: c.allow.map((r) => ({ edge: r.key, max: r.max })),
    phases: await Promise.all(
      c.phases.map(async (p) => ({
        name: p.name,
        outcome: p.outcome,
        plan: p.plan.map((s) => ({
          edge: s.key,
          after: s.after.map((i) => p.plan[i].key),
          ...(s.dependency ? { dependency: s.dependency } : {}),
          ...(s.withinMs !== undefined ? { within: human(s.withinMs) } : {}),
        })),
        graph: await graphView(contractGraph(c, p.name), undefined, `c-${c.version}-${p.name}-`.replace(/[^A-Za-z0-9_-]/g, '_'), `Topology of ${c.contract}@${c.version} phase ${p.name}`),
      })),
    ),
    changes: prev ? diffContracts(prev, c) : null,
  };
}

/** The contract page: every version side by side, each with what changed from the one before. */
export async function contractView(registry: ContractRegistry, id: string): Promise<ContractView | null> {
  const versions = registry.versions(id);
  if (!versions.length) return null;
  const out: ContractVersionView[] = [];
  for (let i = 0; i < versions.length; i++) out.push(await versionView(versions[i], i ? versions[i - 1] : null));
  return { contract: id, versions: out, legend: legendOf(null).filter((l) => l.look === 'expected' || l.look === 'allowed') };
}
