/**
 * LangGraph (JS and Python) as traced by OpenInference's LangChain instrumentation
 * (@arizeai/openinference-instrumentation-langchain, openinference-instrumentation-langchain). No span is an
 * AGENT: every graph and node is a CHAIN span, models are LLM spans, tools TOOL spans. The shapes used:
 * - the graph root: a CHAIN span (`LangGraph`, or the compiled graph's name) whose `metadata` has no
 *   `langgraph_node`;
 * - a graph node: a CHAIN child of the root named after the node, with `metadata.langgraph_node` = its name
 *   (the decoder keeps only that field of the `metadata` JSON; src/otlp/metadata.ts). `__start__`/`__end__`
 *   are LangGraph's own. A node's subgraph (the worker's ReAct agent) runs beneath it;
 * - a transfer: a TOOL span `transfer_to_<agent>` anywhere beneath a node (langgraph-supervisor's and
 *   langgraph-swarm's handoff tools both use that name; the tool returns `Command(goto, graph=PARENT)`).
 *
 * Spans end (and are exported) children first, so the root arrives last: a trace's LangGraph spans wait, as
 * bare ids and flags, until its root arrives, and then the node sequence is read at once, in start order:
 * - the first node is the entry (no edge);
 * - `N -> X` after a `transfer_to_X` beneath N: a `delegate` when X later hands control straight back to N
 *   without a transfer of its own (the supervisor shape: the worker's completion is a `return X -> N`), else a
 *   `handoff` (swarm);
 * - `N -> X` without a transfer: a `return` when X is the node that delegated to N, else a `handoff` (a
 *   `Command(goto=...)` or a graph edge);
 * - nodes that overlap in time (a superstep fanning out with `Send` or parallel edges) are not ordered by
 *   anything on the spans: a gap, never a guessed edge. So is a node or transfer target that is not an id.
 * A root that never arrives (the wait ends) is a gap too.
 *
 * Cluster with spans not routed by trace id (`serve --span-routing any`): the owner of a trace's partition
 * reads its graph, from node spans that reached it directly or were forwarded by other instances through the
 * shared span log. A root is then not read on arrival (`deferRoots`): spans of the trace that another instance
 * acknowledged before the root was sent may still be on their way. It is read by `readRoots(before)` once a read
 * of the shared span log that began after the root arrived is done (src/cluster/coordinator.ts): an exporter
 * sends its batches one after another and the root ends, so is exported, after every node beneath it, so by
 * then every node is here. A root that has no node beneath it by then was not a graph root (it is forgotten).
 *
 * Trust: every kept span remembers the source that sent it. A node span vouches for the agent it is named
 * after, a transfer span for the agent it names; each derived receipt carries those sources as its evidence
 * (src/ingest/trust.ts `withEvidence`), so the ingest's binding check treats a LangGraph edge exactly like one
 * derived from `invoke_agent` spans. A node or transfer name that is not an agent id is kept only as the empty
 * string (never the text itself), so a waiting trace's span log records hold ids only (src/ingest/pipeline.ts).
 */
import { AGENT_ID_PATTERN } from '../../core/receipt.js';
import type { EdgeKind, Receipt } from '../../core/types.js';
import { LANGGRAPH_AGENT_ATTRIBUTE, LANGGRAPH_NODE_ATTRIBUTE, LANGGRAPH_NS_ATTRIBUTE, LANGGRAPH_STEP_ATTRIBUTE, MAX_STEP } from '../../otlp/metadata.js';
import type { SpanRecord } from '../../otlp/types.js';
import { localStatus } from '../extract.js';
import { withEvidence } from '../trust.js';
import { QuietOrder } from '../quiet-order.js';
import { exactIso } from '../../otlp/wire.js';

export const LANGGRAPH_DIALECT = 'langgraph';
const INTERNAL_NODES = new Set(['__start__', '__end__']);
const TRANSFER_PREFIX = 'transfer_to_';

/** A kept LangGraph span: ids, validated names, times, status and the sending source; no other text. */
export interface LgSpan {
  parent: string | null;
  /**
   * The node name when the span is named after its `langgraph_node` (a node or a subgraph), else null; the
   * empty string when that name is not an agent id (the text itself is never kept).
   */
  node: string | null;
  /** `transfer_to_<agent>` TOOL span: the agent ('' when not an id), else null. */
  transferTo: string | null;
  /**
   * The checkpoint namespace of the node's task (`node:taskid|node:taskid`, every name an id, see isTaskPath), or
   * null: which node's task this one ran inside (a functional-API task inside its entrypoint, a subgraph's node
   * inside the outer node).
   */
  ns?: string | null;
  startMs: number;
  endMs: number;
  /** Exact nanoseconds below the millisecond (from the decoder; not kept in the span log, like agent spans). */
  startNs?: number;
  endNs?: number;
  /**
   * The node's superstep (`metadata.langgraph_step`), when the metadata held one: nodes of one graph run in different
   * supersteps ran one after the other whatever their span times say (an end recorded late by a background callback
   * may overlap the next node's start); nodes of one superstep ran in parallel.
   */
  step?: number;
  /**
   * The prebuilt agent whose loop the span ran in (`metadata.lc_agent_name`, set by LangChain's `createAgent({ name })`),
   * when it is an id: names the agent of a level made only of loop nodes.
   */
  agentName?: string;
  status: number;
  /** The source that sent the span (binding evidence for the agent it names). */
  source: string;
}

/** Stands for a node or transfer name that is not an agent id. */
export const INVALID_NAME = '';

interface LgTrace {
  spans: Map<string, LgSpan>;
  lastSeen: number;
}

export interface LangGraphOptions {
  waitMs: number;
  /** Bound on traces waiting for their root. */
  maxTraces?: number;
  /** Bound on spans kept per trace. */
  maxSpansPerTrace?: number;
  /** Roots wait for readRoots instead of being read on arrival (cluster, `--span-routing any`). */
  deferRoots?: boolean;
}

/** A root candidate waiting for readRoots (deferRoots): its trace, run and when it arrived. */
interface DeferredRoot {
  traceId: string;
  spanId: string;
  run: string;
  at: number;
  /** The root span's name when it is an id (a root restored from the span log has none). */
  name?: string;
}

/** What became of a trace's LangGraph spans, for explain and the unmapped report. */
export interface LangGraphOutcome {
  traceId: string;
  run: string;
  receipts: Receipt[];
  /** Node span id -> agent, in order (for explain). */
  nodes: { spanId: string; agent: string }[];
  reason?: string;
}

const iso = (ms: number) => new Date(ms).toISOString();
const isId = (s: string) => AGENT_ID_PATTERN.test(s);

/** A task path segment: a node name (an id) and optionally its task id. */
const NS_SEGMENT = /^([A-Za-z0-9_.@#+=][A-Za-z0-9_.@#+=-]{0,199})(?::[A-Za-z0-9-]{1,64})?$/;

/**
 * A checkpoint namespace the reading trusts: 1-32 `|`-separated segments, each `node` or `node:taskid` with the
 * node name an agent id (LangGraph's own ids and node names only; at most 1024 characters).
 */
export function isTaskPath(v: unknown): v is string {
  if (typeof v !== 'string' || v.length === 0 || v.length > 1024) return false;
  const parts = v.split('|');
  return parts.length <= 32 && parts.every((p) => NS_SEGMENT.test(p));
}

/** A span that belongs to a LangGraph run: it carries `metadata.langgraph_node`. */
export function isLangGraphSpan(span: SpanRecord): boolean {
  return typeof span.attrs[LANGGRAPH_NODE_ATTRIBUTE] === 'string';
}

/** A candidate graph root: an OpenInference CHAIN span without `langgraph_node`. */
export function isRootCandidate(span: SpanRecord): boolean {
  return span.attrs['openinference.span.kind'] === 'CHAIN' && span.attrs[LANGGRAPH_NODE_ATTRIBUTE] === undefined;
}

/** What is kept of a LangGraph span (isLangGraphSpan): ids, the node or transfer name when it is an id, times, status, source. */
export function lgSpanOf(s: SpanRecord, source: string): LgSpan {
  const node = s.attrs[LANGGRAPH_NODE_ATTRIBUTE] as string;
  const transferTo =
    s.attrs['openinference.span.kind'] === 'TOOL' && s.name.startsWith(TRANSFER_PREFIX) && s.name.length > TRANSFER_PREFIX.length ? s.name.slice(TRANSFER_PREFIX.length) : null;
  const lg: LgSpan = {
    parent: s.parentSpanId,
    node: s.name === node ? (isId(node) ? node : INVALID_NAME) : null,
    transferTo: transferTo === null ? null : isId(transferTo) ? transferTo : INVALID_NAME,
    ns: isTaskPath(s.attrs[LANGGRAPH_NS_ATTRIBUTE]) ? (s.attrs[LANGGRAPH_NS_ATTRIBUTE] as string) : null,
    startMs: s.startMs,
    endMs: s.endMs,
    status: s.statusCode,
    source,
  };
  if (s.startNs !== undefined) lg.startNs = s.startNs;
  if (s.endNs !== undefined) lg.endNs = s.endNs;
  const step = s.attrs[LANGGRAPH_STEP_ATTRIBUTE];
  if (isStep(step)) lg.step = step;
  const agentName = s.attrs[LANGGRAPH_AGENT_ATTRIBUTE];
  if (typeof agentName === 'string' && isId(agentName)) lg.agentName = agentName;
  return lg;
}

/** A superstep as the decoder keeps it: an integer in [0, MAX_STEP]. */
export function isStep(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_STEP;
}

/**
 * Do the nodes' supersteps order them? Every node (sorted by start) carries one and they never go back: one run of
 * one graph. A graph run twice beneath the same task starts its steps again: then only the span times order them.
 */
export function orderedBySteps(nodes: readonly { s: { step?: number } }[]): boolean {
  if (nodes.length < 2) return false;
  for (let i = 0; i < nodes.length; i++) {
    const step = nodes[i].s.step;
    if (step === undefined || (i > 0 && step < nodes[i - 1].s.step!)) return false;
  }
  return true;
}

/** Does the trace hold a node span right beneath `spanId` (is `spanId` its graph root)? */
function hasNodeBeneath(t: LgTrace, spanId: string): boolean {
  for (const x of t.spans.values()) if (x.parent === spanId && x.node !== null) return true;
  return false;
}

export class LangGraphAssembler {
  private readonly traces = new Map<string, LgTrace>();
  /** The waiting traces by last-seen time: expiry looks at those whose wait ran out, not at every trace. */
  readonly quietOrder = new QuietOrder<string, LgTrace>(this.traces);
  /** deferRoots: root candidates by span id, in arrival order (bounded by maxTraces). */
  private readonly roots = new Map<string, DeferredRoot>();
  private readonly maxTraces: number;
  private readonly maxSpansPerTrace: number;
  /** Outcomes of the last batch and expiry, for explain (bounded by the batch). */
  lastOutcomes: LangGraphOutcome[] = [];
  evicted = 0;

  constructor(private readonly opts: LangGraphOptions) {
    this.maxTraces = opts.maxTraces ?? 10_000;
    this.maxSpansPerTrace = opts.maxSpansPerTrace ?? 20_000;
  }

  /** Are roots read by readRoots rather than on arrival? */
  get deferring(): boolean {
    return this.opts.deferRoots === true;
  }

  get waiting(): number {
    return this.traces.size;
  }

  has(traceId: string): boolean {
    return this.traces.has(traceId);
  }

  traceIds(): Set<string> {
    return new Set(this.traces.keys());
  }

  /**
   * Take a batch: keeps its LangGraph spans and reads every trace whose root arrived. Returns the spans it
   * claimed and the receipts (`run` is the run of the root span, decided by the caller's run key).
   */
  addBatch(
    spans: SpanRecord[],
    now: number,
    runOf: (root: SpanRecord) => string,
    source = 'auditor',
  ): { claimed: Set<SpanRecord>; kept: Map<SpanRecord, LgSpan>; receipts: Receipt[] } {
    const claimed = new Set<SpanRecord>();
    const kept = new Map<SpanRecord, LgSpan>();
    const receipts: Receipt[] = [];
    this.lastOutcomes = [];
    for (const s of spans) {
      if (!isLangGraphSpan(s)) continue;
      claimed.add(s);
      const lg = lgSpanOf(s, source);
      if (this.keep(s.traceId, s.spanId, lg, now)) kept.set(s, lg);
    }
    for (const s of spans) {
      if (!isRootCandidate(s)) continue;
      const t = this.traces.get(s.traceId);
      if (this.opts.deferRoots) {
        // Read later (readRoots); claimed now when the trace already waits for it.
        this.deferRoot(s.traceId, s.spanId, runOf(s), now, isId(s.name) ? s.name : undefined);
        if (t && hasNodeBeneath(t, s.spanId)) claimed.add(s);
        continue;
      }
      if (!t || !hasNodeBeneath(t, s.spanId)) continue;
      claimed.add(s);
      this.traces.delete(s.traceId);
      const outcome = readGraph({ traceId: s.traceId, spanId: s.spanId, status: s.statusCode, ...(isId(s.name) ? { name: s.name } : {}) }, t, runOf(s));
      this.lastOutcomes.push(outcome);
      receipts.push(...outcome.receipts);
    }
    return { claimed, kept, receipts };
  }

  /** deferRoots: a root candidate that arrived (directly, or forwarded by another instance) at `now`. */
  deferRoot(traceId: string, spanId: string, run: string, now: number, name?: string): void {
    if (this.roots.size >= this.maxTraces) {
      const first = this.roots.keys().next();
      if (!first.done) this.roots.delete(first.value);
    }
    this.roots.delete(spanId); // a repeat moves to the end
    this.roots.set(spanId, { traceId, spanId, run, at: now, ...(name !== undefined ? { name } : {}) });
  }

  /** Root candidates waiting for readRoots. */
  get deferredRoots(): number {
    return this.roots.size;
  }

  /**
   * deferRoots: reads the graph of every root that arrived before `before` (the start of a completed read of the
   * shared span log), in arrival order; a root with no node beneath it is forgotten. Outcomes in lastOutcomes.
   */
  readRoots(before: number): Receipt[] {
    this.lastOutcomes = [];
    const receipts: Receipt[] = [];
    for (const r of this.roots.values()) {
      if (r.at >= before) break; // arrival order: the rest came later
      this.roots.delete(r.spanId);
      const t = this.traces.get(r.traceId);
      if (!t || !hasNodeBeneath(t, r.spanId)) continue;
      this.traces.delete(r.traceId);
      const outcome = readGraph(r, t, r.run);
      this.lastOutcomes.push(outcome);
      receipts.push(...outcome.receipts);
    }
    return receipts;
  }

  /** Keep one span of a trace waiting for its root (also used to restore a logged span after a restart). */
  keep(traceId: string, spanId: string, lg: LgSpan, now: number): boolean {
    let t = this.traces.get(traceId);
    if (!t) {
      if (this.traces.size >= this.maxTraces) this.evictOldest();
      this.traces.set(traceId, (t = { spans: new Map(), lastSeen: now }));
      this.quietOrder.added(traceId, t);
    }
    t.lastSeen = now;
    this.quietOrder.noteTime(now);
    if (t.spans.size >= this.maxSpansPerTrace) return false;
    t.spans.set(spanId, lg);
    return true;
  }

  /** Traces whose root did not arrive within the wait: a gap each, in arrival order (O(expired + touched): quietOrder). */
  expire(now: number, runOfTrace: (traceId: string) => string = (id) => id): Receipt[] {
    const out: Receipt[] = [];
    this.lastOutcomes = [];
    // Deferred roots never read (no read of the span log completed since, e.g. the partition moved): forgotten.
    for (const r of this.roots.values()) {
      if (now - r.at < this.opts.waitMs) break;
      this.roots.delete(r.spanId);
    }
    for (const traceId of this.quietOrder.quiet(now, this.opts.waitMs)) {
      const t = this.traces.get(traceId)!;
      this.traces.delete(traceId);
      let first: [string, LgSpan] | null = null;
      for (const e of t.spans) if (!first || e[1].startMs < first[1].startMs) first = e;
      const run = runOfTrace(traceId);
      const gap: Receipt = withEvidence(
        { run, event: `${first ? first[0] : traceId}:langgraph.gap`, type: 'gap', at: iso(first ? first[1].startMs : now), reason: 'langgraph_root_unseen' },
        { span: first ? first[1].source : undefined },
      );
      out.push(gap);
      this.lastOutcomes.push({ traceId, run, receipts: [gap], nodes: [], reason: 'langgraph_root_unseen' });
    }
    return out;
  }

  private evictOldest(): void {
    const first = this.traces.keys().next();
    if (!first.done) {
      this.traces.delete(first.value);
      this.evicted++;
    }
  }
}

/**
 * Node names of a prebuilt agent's own loop (createReactAgent: `agent`, `tools`; createAgent: `model_request`,
 * `model`, hooks): a subgraph made only of these is one agent's steps, never agents of their own.
 */
const AGENT_LOOP_NODES = new Set(['agent', 'tools', 'model', 'model_request', 'pre_model_hook', 'post_model_hook', 'generate_structured_response']);

/** One node's task: its outermost span (a subgraph's own span beneath it is the same task), its place and agent. */
interface Task {
  spanId: string;
  s: LgSpan;
  agent: string;
  /** The task it ran inside (its checkpoint namespace's prefix, else the nearest enclosing node span); null: the graph's own node. */
  parent: Task | null;
  /** True when its span is beneath its parent's (a subgraph's node); false: a task the parent invoked (functional API). */
  inner: boolean;
  /** Part of its parent agent's own loop (see AGENT_LOOP_NODES): read as the parent. */
  loop: boolean;
}

/** Depth of a task among tasks (0: a node of the root graph). */
function depthOf(x: Task | null): number {
  let d = 0;
  for (let p = x; p !== null && d < 10_000; p = p.parent) d++;
  return d;
}

/**
 * Prebuilt agent loops named by their agent (LangChain's `createAgent({ name })`, whose graph holds only loop nodes such
 * as `model_request` and `tools`): each run of such a loop (its nodes beneath one graph span) whose nodes all carry one
 * `lc_agent_name`, or, at the top level with no name on any node, the graph root's name (when it is an id), becomes a
 * task of that agent standing for the graph span. Inside another agent's loop (a sub-agent called from its `tools`
 * node, i.e. an agent used as a tool) it is a call: `caller -> agent : delegate` at its start and `agent -> caller :
 * return` at its end; at the top level it is the entry agent. Outer loops are named first. A loop named like the agent
 * around it (LangChain metadata is inherited, so an unnamed sub-agent carries its caller's name), with no name, or with
 * two, stays folded into the agent around it, as before.
 */
function namedLoops(
  root: { spanId: string; name?: string; status?: number },
  t: LgTrace,
  children: Map<Task | null, Task[]>,
  virtualOf: Map<Task, Task>,
  agentOf: (x: Task | null) => Task | null,
): Task[] {
  const out: Task[] = [];
  const levels = [...children].filter(([, list]) => list.some((x) => x.loop)).sort((a, b) => depthOf(a[0]) - depthOf(b[0]));
  for (const [parent, list] of levels) {
    const runs = new Map<string | null, Task[]>(); // by graph span
    for (const x of list) {
      if (!x.loop) continue;
      const g = runs.get(x.s.parent);
      if (g) g.push(x);
      else runs.set(x.s.parent, [x]);
    }
    for (const [graph, loop] of runs) {
      const names = new Set<string>();
      for (const x of loop) if (x.s.agentName !== undefined) names.add(x.s.agentName);
      const agent = names.size === 1 ? [...names][0] : names.size === 0 && parent === null ? root.name : undefined;
      if (agent === undefined) continue;
      const owner = agentOf(parent);
      // The caller's own name (metadata is inherited: an unnamed sub-agent run from a tool carries its caller's): folded.
      if (owner !== null && owner.agent === agent) continue;
      const g = graph !== null ? t.spans.get(graph) : undefined;
      const spanId = graph === root.spanId ? root.spanId : g !== undefined && g.node === null && graph !== null ? graph : loop[0].spanId;
      const first = loop.reduce((a, b) => (b.s.startMs < a.s.startMs ? b : a));
      const s: LgSpan = {
        parent: graph,
        node: agent,
        transferTo: null,
        startMs: g?.startMs ?? Math.min(...loop.map((x) => x.s.startMs)),
        endMs: g?.endMs ?? Math.max(...loop.map((x) => x.s.endMs)),
        status: g?.status ?? (graph === root.spanId ? (root.status ?? 0) : 0),
        source: first.s.source,
      };
      if (g?.startNs !== undefined) s.startNs = g.startNs;
      if (g?.endNs !== undefined) s.endNs = g.endNs;
      const v: Task = { spanId, s, agent, parent: owner, inner: owner === null, loop: false };
      for (const x of loop) virtualOf.set(x, v);
      out.push(v);
    }
  }
  return out;
}

type GraphRoot = { traceId: string; spanId: string; name?: string; status?: number };

/** Whether `spanId` sits beneath `ancestor` by span parentage. */
function beneath(t: LgTrace, spanId: string, ancestor: string): boolean {
  let p = t.spans.get(spanId)?.parent ?? null;
  for (let hops = 0; p !== null && hops < 10_000; hops++) {
    if (p === ancestor) return true;
    p = t.spans.get(p)?.parent ?? null;
  }
  return false;
}

/**
 * The tasks of the graph under `root`: node spans beneath it (a node span right beneath a span of the same task is
 * that task's subgraph), each with the task it ran inside (checkpoint namespace, else span parentage), the tasks
 * by parent, and `enclosing`: the nearest task at or above a span (below the root), or null.
 */
function graphTasks(root: GraphRoot, t: LgTrace): { tasks: Task[]; children: Map<Task | null, Task[]>; enclosing: (spanId: string | null) => Task | null } {
  const tasks: Task[] = [];
  const taskOfSpan = new Map<string, Task>();
  const byNs = new Map<string, Task>();
  for (const [spanId, s] of t.spans) {
    if (s.node === null || INTERNAL_NODES.has(s.node) || !beneath(t, spanId, root.spanId)) continue;
    const p = s.parent !== null ? t.spans.get(s.parent) : undefined;
    const wrapper = p !== undefined && p.node === s.node && (s.ns ? p.ns === s.ns : !p.ns);
    if (wrapper) continue;
    const task: Task = { spanId, s, agent: s.node, parent: null, inner: true, loop: false };
    tasks.push(task);
    taskOfSpan.set(spanId, task);
    if (s.ns) byNs.set(s.ns, task);
  }
  const enclosing = (spanId: string | null): Task | null => {
    let p = spanId;
    for (let hops = 0; p !== null && p !== root.spanId && hops < 10_000; hops++) {
      const task = taskOfSpan.get(p);
      if (task) return task;
      p = t.spans.get(p)?.parent ?? null;
    }
    return null;
  };
  for (const task of tasks) {
    const ns = task.s.ns;
    const cut = ns ? ns.lastIndexOf('|') : -1;
    const byPath = ns && cut > 0 ? byNs.get(ns.slice(0, cut)) : undefined;
    task.parent = byPath ?? enclosing(task.s.parent);
    task.inner = task.parent === null || beneath(t, task.spanId, task.parent.spanId);
  }
  // A level made only of agent-loop nodes is its parent agent's own loop.
  const children = groupByParent(tasks);
  for (const list of children.values()) {
    const inner = list.filter((x) => x.inner);
    if (inner.length > 0 && inner.every((x) => AGENT_LOOP_NODES.has(x.agent))) for (const x of inner) x.loop = true;
  }
  return { tasks, children, enclosing };
}

/** Tasks by the task they ran inside (null: the root graph), in order. */
function groupByParent(tasks: readonly Task[]): Map<Task | null, Task[]> {
  const out = new Map<Task | null, Task[]>();
  for (const task of tasks) {
    const list = out.get(task.parent);
    if (list) list.push(task);
    else out.set(task.parent, [task]);
  }
  return out;
}

/**
 * The agents of the graph: a prebuilt agent's loop that names its agent (createAgent's `lc_agent_name` on its nodes,
 * else, at the top level, the graph root's name) is that agent, a task of its own standing for the loop's graph span
 * (see namedLoops); `agentOf` maps a task to the agent task it counts for; `read`: the tasks that are agents.
 */
function graphAgents(root: GraphRoot, t: LgTrace, tasks: readonly Task[], children: Map<Task | null, Task[]>): { agentOf: (task: Task | null) => Task | null; read: Task[] } {
  const virtualOf = new Map<Task, Task>();
  const isLoopDescendant = (x: Task): boolean => {
    for (let p = x.parent, hops = 0; p !== null && hops < 10_000; p = p.parent, hops++) if (p.loop) return true;
    return false;
  };
  const agentOf = (task: Task | null): Task | null => {
    let x = task;
    for (let hops = 0; x !== null && hops < 10_000; hops++) {
      const v = virtualOf.get(x);
      if (v !== undefined) return v;
      if (!(x.loop || isLoopDescendant(x))) return x;
      x = x.parent;
    }
    return x;
  };
  const virtuals = namedLoops(root, t, children, virtualOf, agentOf);
  return { agentOf, read: [...tasks, ...virtuals].filter((x) => agentOf(x) === x) };
}

/** Transfers, by the agent task they sit beneath, and the sources of the transfer spans naming each target. */
interface GraphTransfers {
  byTask: Map<Task, string[]>;
  /** `${task span id} ${target}` -> sources of the transfer spans naming it */
  sources: Map<string, string[]>;
}

function graphTransfers(t: LgTrace, agentOf: (task: Task | null) => Task | null, enclosing: (spanId: string | null) => Task | null): GraphTransfers {
  const byTask = new Map<Task, string[]>();
  const sources = new Map<string, string[]>();
  for (const [spanId, s] of t.spans) {
    if (s.transferTo === null) continue;
    const n = agentOf(enclosing(spanId));
    if (n === null) continue;
    const list = byTask.get(n);
    if (list) list.push(s.transferTo);
    else byTask.set(n, [s.transferTo]);
    const k = `${n.spanId} ${s.transferTo}`;
    const srcs = sources.get(k);
    if (srcs) srcs.push(s.source);
    else sources.set(k, [s.source]);
  }
  return { byTask, sources };
}

/** The receipts of one graph as they are written: gaps (numbered per span) and edges with their evidence. */
interface GraphWriter {
  gap(spanId: string, atMs: number, reason: string, source: string, ends?: { from?: string; to?: string }): void;
  edge(spanId: string, suffix: string, at: string, from: Task, to: Task, kind: EdgeKind, status: number, transferred?: boolean): void;
}

function graphWriter(run: string, outcome: LangGraphOutcome, transfers: GraphTransfers): GraphWriter {
  const gapCount = new Map<string, number>();
  return {
    gap(spanId, atMs, reason, source, ends = {}) {
      const k = gapCount.get(spanId) ?? 0;
      gapCount.set(spanId, k + 1);
      const r: Receipt = { run, event: k === 0 ? `${spanId}:gap` : `${spanId}:gap.${k}`, type: 'gap', at: iso(atMs), reason };
      if (ends.from && isId(ends.from)) r.from = ends.from;
      if (ends.to && isId(ends.to)) r.to = ends.to;
      outcome.receipts.push(withEvidence(r, { span: source }));
      outcome.reason ??= reason;
    },
    // Evidence: the node span of each end vouches for its agent, and a transfer span for the agent it names.
    edge(spanId, suffix, at, from, to, kind, status, transferred = false) {
      if (!isId(from.agent) || !isId(to.agent)) return;
      const r: Receipt = { run, event: `${spanId}:${suffix}`, type: 'edge', at, from: from.agent, to: to.agent, kind };
      if (localStatus(status) === 'error') r.status = 'error';
      const toSources = [to.s.source, ...(transferred ? (transfers.sources.get(`${from.spanId} ${to.agent}`) ?? []) : [])];
      outcome.receipts.push(withEvidence(r, { from: [from.s.source], to: [...new Set(toSources)], span: spanId === from.spanId ? from.s.source : to.s.source }));
    },
  };
}

const taskStart = (x: Task) => exactIso(x.s.startMs, x.s.startNs);
const taskEnd = (x: Task) => exactIso(x.s.endMs, x.s.endNs);

/** One step of a sequence: `from` ran, then `to`; `transfer`: `from` transferred control to `to`'s agent. */
interface SequenceStep {
  from: Task;
  to: Task;
  transfer: boolean;
}

/**
 * The steps of one level's nodes, in order. Groups of nodes that ran in parallel: one superstep's nodes where
 * LangGraph's steps order them (see orderedBySteps), else nodes that overlap in time. The first of a group follows the
 * node before it; the others are not ordered by anything (a gap each), nor is whatever follows the group.
 */
function sequenceSteps(nodes: readonly Task[], transfers: GraphTransfers, w: GraphWriter): { steps: SequenceStep[]; overlapped: Set<Task> } {
  const bySteps = orderedBySteps(nodes);
  const overlapped = new Set<Task>();
  const steps: SequenceStep[] = [];
  let prev: Task | null = null;
  let broken = false;
  for (let i = 0; i < nodes.length; ) {
    let j = i + 1;
    let end = nodes[i].s.endMs;
    if (bySteps) while (j < nodes.length && nodes[j].s.step === nodes[i].s.step) j++;
    else while (j < nodes.length && nodes[j].s.startMs < end) end = Math.max(end, nodes[j++].s.endMs);
    const cur = nodes[i];
    if (prev !== null && !broken) steps.push({ from: prev, to: cur, transfer: (transfers.byTask.get(prev) ?? []).includes(cur.agent) });
    for (let k = i + 1; k < j; k++) {
      overlapped.add(nodes[k]);
      w.gap(nodes[k].spanId, nodes[k].s.startMs, 'langgraph_parallel_nodes', nodes[k].s.source, { to: nodes[k].agent });
    }
    if (j > i + 1) overlapped.add(cur);
    broken = j > i + 1;
    prev = cur;
    i = j;
  }
  return { steps, overlapped };
}

/** The nodes of one graph level in sequence: its edges (transfers, returns of control, graph edges) and gaps. */
function readSequence(owner: Task | null, nodes: readonly Task[], transfers: GraphTransfers, w: GraphWriter): void {
  if (nodes.length === 0) return;
  const { steps, overlapped } = sequenceSteps(nodes, transfers, w);
  // A subgraph beneath a node: the node enters it at its first node and gets control back from its last.
  const first = nodes[0];
  const last = nodes[nodes.length - 1];
  if (owner !== null && first.agent !== owner.agent) w.edge(first.spanId, 'delegate', taskStart(first), owner, first, 'delegate', first.s.status);
  const callers: string[] = []; // delegation stack of agents
  for (let i = 0; i < steps.length; i++) {
    const st = steps[i];
    if (st.transfer) {
      const next = steps[i + 1];
      const returns = next !== undefined && next.from === st.to && next.to.agent === st.from.agent && !next.transfer;
      if (returns) callers.push(st.from.agent);
      w.edge(st.to.spanId, returns ? 'delegate' : 'handoff', taskStart(st.to), st.from, st.to, returns ? 'delegate' : 'handoff', st.to.s.status, true);
    } else if (callers.length > 0 && callers[callers.length - 1] === st.to.agent) {
      callers.pop();
      w.edge(st.from.spanId, 'return', taskEnd(st.from), st.from, st.to, 'return', st.from.s.status);
    } else {
      w.edge(st.to.spanId, 'handoff', taskStart(st.to), st.from, st.to, 'handoff', st.to.s.status);
    }
  }
  if (owner !== null && !overlapped.has(last) && last.agent !== owner.agent && localStatus(last.s.status) !== 'error') w.edge(last.spanId, 'return', taskEnd(last), last, owner, 'return', last.s.status);
  // A transfer whose target never ran (the graph stopped, or the target is not a node): a gap.
  for (const n of nodes) {
    for (const target of transfers.byTask.get(n) ?? []) {
      const ran = steps.some((st) => st.from === n && st.to.agent === target);
      if (!ran) w.gap(n.spanId, n.s.endMs, 'handoff_target_unresolved', n.s.source, { from: n.agent, to: target });
    }
  }
}

/**
 * The graph under `root` -> receipts, read level by level. The evidence used, and nothing else:
 * - a node's task and the task it ran inside: the checkpoint namespace (`supervisor:…|researcher:…`: the
 *   researcher task ran inside the supervisor's), else span parentage (graphTasks);
 * - a task the node invoked (a functional-API `task` inside its `entrypoint`, not beneath the node's span):
 *   `node -> task : delegate` and `task -> node : return`; siblings imply nothing about each other;
 * - the nodes of a graph (the root graph, or a subgraph beneath a node): their sequence (readSequence: a transfer
 *   beneath a node, a return of control, a graph edge); a subgraph is entered by `node -> entry : delegate` and
 *   left by `last -> node : return`, so inner routes are the inner agents' edges under the outer node;
 * - nodes that overlap in time at one level are not ordered by anything: a gap, and no edge into or out of them.
 */
function readGraph(root: GraphRoot, t: LgTrace, run: string): LangGraphOutcome {
  const { tasks, children, enclosing } = graphTasks(root, t);
  const { agentOf, read } = graphAgents(root, t, tasks, children);
  const outcome: LangGraphOutcome = { traceId: root.traceId, run, receipts: [], nodes: read.map((n) => ({ spanId: n.spanId, agent: n.agent })) };
  if (read.length === 0) {
    outcome.reason = 'langgraph_no_nodes';
    return outcome;
  }
  const transfers = graphTransfers(t, agentOf, enclosing);
  const w = graphWriter(run, outcome, transfers);
  for (const n of read) if (!isId(n.agent)) w.gap(n.spanId, n.s.startMs, 'agent_id_invalid', n.s.source);
  for (const [owner, list] of groupByParent(read)) {
    // Tasks the owner invoked: a call each, with its return.
    for (const c of list) {
      if (c.inner || owner === null) continue;
      w.edge(c.spanId, 'delegate', taskStart(c), owner, c, 'delegate', c.s.status);
      if (localStatus(c.s.status) !== 'error') w.edge(c.spanId, 'return', taskEnd(c), c, owner, 'return', c.s.status);
    }
    const nodes = list.filter((x) => x.inner).sort((a, b) => a.s.startMs - b.s.startMs || (a.spanId < b.spanId ? -1 : 1));
    readSequence(owner, nodes, transfers, w);
  }
  return outcome;
}
