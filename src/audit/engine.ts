/**
 * The live auditor, in four steps per batch: append (the store commits the receipts, and the first pin of each new
 * run with them) -> fold (RunState.add) -> pin (the run's pinning: the stored pin, or a later run.start's) ->
 * evaluate (the pure `evaluate` of src/core, which reads and writes no store). Keeps one RunState per live run in
 * memory (rebuilt from the store on start), re-evaluates only the runs a batch touched, and moves verdicts with time
 * through a deadline heap fed by each verdict's nextChangeAt. Verdicts, receipts and every change of a live run are
 * published on its event bus (events.ts: `engine.events`), which the gauges, metrics, logs, API and UI subscribe to.
 *
 * Each job has a module of its own, over the one map of live runs (live-runs.ts): the append step (append-step.ts),
 * the fold step and the cluster's folds (fold-step.ts), the pin and evaluate steps (evaluate-step.ts), loading a run's
 * history ahead of a step (read-ahead.ts), leaving live memory and the retention prune (retirement.ts), the restart
 * (restore.ts), the run list (run-list.ts), admission and the live limits (admission.ts), pins (pinning.ts), the
 * gauges (gauges.ts), acknowledgements (acks.ts), which runs are held here (ownership.ts) and the cluster reads of
 * runs held elsewhere (cluster-reads.ts). AuditEngine composes them and keeps the surface the server, CLI and UI use.
 */
import type { Contract } from '../core/contract.js';
import type { Pinning, RunState } from '../core/classify.js';
import type { ContractRegistry } from '../core/registry.js';
import { isRunId } from '../core/receipt.js';
import { summarizeShadows } from '../core/shadow.js';
import type { AckRecord, Receipt, RunVerdict } from '../core/types.js';
import type { PinRecord, Slicer as StoreSlicer, SpanLogEntry, StoredReceipt, LiveRun as StoredRun } from '../store/index.js';
import { DeliveredDigests, type Digest } from './delivered.js';
import { Admission } from './admission.js';
import { ackLeft, ackOf, ackRun, ackedAtOf, applyAck, type AckWho } from './acks.js';
import { AppendStep, type PerType } from './append-step.js';
import { ClusterReads, viewReceipts, type RunView } from './cluster-reads.js';
import { EvaluateStep } from './evaluate-step.js';
import { FoldStep } from './fold-step.js';
import { RunGauges, type AlertRow, type GaugeRow, type StallRow } from './gauges.js';
import { alertState, type LiveRun } from './live-run.js';
import { LiveRuns } from './live-runs.js';
import { EventBus, type AuditEvents } from './events.js';
import type { ListFilter, ListedRun } from './listing.js';
import { SINGLE_OWNER, type Ownership } from './ownership.js';
import { Pinner } from './pinning.js';
import { ReadAhead } from './read-ahead.js';
import { Restorer } from './restore.js';
import { Retirement } from './retirement.js';
import { RunList } from './run-list.js';
import type { DetachedRun, EngineStore, RemoteRuns } from './store.js';

export { RestoreError } from './restore.js';
export { ListCursorError } from './run-list.js';
export { LiveLimitError } from './admission.js';
export { SINGLE_OWNER, SingleOwner, type Ownership } from './ownership.js';
export { ALERT_VERDICTS, type LiveRun, type RunListener } from './live-run.js';
export { EventBus, type AuditEvents, type EventSource } from './events.js';
export type { ListFilter, ListedRun } from './listing.js';
export type { DetachedRun, EngineStore, RemoteRuns, ReceiptAppender, ReceiptReader, PinStore, RunRows, SpanLogStore } from './store.js';

export interface EngineOptions {
  defaultContract?: string;
  /** Settled runs idle for longer than this are pruned from store and memory. */
  retentionMs: number;
  /** Where the engine publishes its events (events.ts); default: a bus of its own. Subscribe before `restore`. */
  events?: EventBus<AuditEvents>;
  /** Candidate versions every run of their contract is also evaluated against (never changes the pinned verdict). */
  shadow?: Contract[];
  /** Live runs held in memory beyond which receipts of new runs are refused (LiveLimitError). */
  maxLiveRuns?: number;
  /**
   * Receipts held in memory by live runs beyond which receipts of new runs are refused; receipts of runs already
   * live are refused too once 10% above it (so running runs can finish, but memory stays bounded).
   */
  maxLiveReceipts?: number;
  /**
   * With ingest tokens: a receipt never masks, replaces or conflicts with another source's receipt under the same
   * (run, event); the later one is stored under a source-scoped event id (`event@<token hash prefix>`, both stores).
   */
  sourceScopedEvents?: boolean;
  /**
   * Runs that received no receipt for this long may leave live memory when a live cap needs room (oldest idle first);
   * they stay in the store and are loaded again on their next receipt. Undefined: never (the caps then refuse).
   */
  idleEvictMs?: number;
  /** Bound of the redelivery digests kept for live runs (see DeliveredDigests). */
  maxDeliveredDigests?: number;
  /**
   * Which runs this instance holds live, and how runs held elsewhere are read (ownership.ts): SingleOwner (the
   * default: the embedded store, every run), or a cluster's leased ownership (src/cluster/leased-ownership.ts). Receipts of
   * runs it does not own are stored and acknowledged, and folded by their owner (foldStored).
   */
  ownership?: Ownership;
  /**
   * The alert window (serve's --alert-window, default 1h): a settled run in an alerting verdict stays in live memory
   * until it passes (the alerting gauge and acknowledgements need it), then leaves like any settled run.
   */
  alertWindowMs?: number;
  /** Fair live cap per source (with ingest tokens; see Admission.reserve). */
  fairSources?: boolean;
}

/** A source's tag in a source-scoped event id: the token's hash prefix (`token-3-ab12cd34` -> `ab12cd34`), id characters only. */
export function sourceTag(source: string): string {
  return source.replace(/^token-\d+-/, '').replace(/[^A-Za-z0-9_.:#+=-]/g, '-').slice(0, 40) || 'source';
}

/** What ingest holds once a batch's stored forms and digests are let go (never written to). */
const NONE_STORED: StoredReceipt[] = [];
const NONE_BODIES: string[] = [];
const NONE_DIGESTS: Digest[] = [];

export interface IngestOutcome {
  accepted: number;
  duplicates: number;
  conflicts: number;
  /**
   * Runs refused by the live caps (their receipts were not stored; the rest of the batch was): the partial-success
   * answer of the request. `receipts`: how many receipts that left out.
   */
  refused?: { runs: ReadonlyMap<string, 'runs' | 'receipts'>; receipts: number; message: string; limit: 'runs' | 'receipts' };
}

/**
 * The live auditor: the live runs (live-runs.ts) and the steps that change them, composed: append (append-step.ts)
 * -> fold (fold-step.ts) -> pin and evaluate (evaluate-step.ts); leaving live memory and the retention prune
 * (retirement.ts); the restart (restore.ts); the run list (run-list.ts); admission, pins, gauges, acknowledgements
 * and the cluster reads it also composes. It keeps the surface server/, cli/, ui/ and cluster/ call.
 */
export class AuditEngine {
  /** Verdicts, receipts and run changes, published as they happen (events.ts). */
  readonly events: EventBus<AuditEvents>;
  /** Which runs this instance holds live (ownership.ts). */
  readonly ownership: Ownership;
  private readonly live: LiveRuns;
  /** Settled runs leave live memory and the store reads them back synchronously (a single instance; see Retirement). */
  private readonly readsLeft: boolean;
  private readonly gauges = new RunGauges();
  private readonly admission: Admission;
  private readonly pinner: Pinner;
  private readonly reads: ClusterReads;
  /**
   * Where live RunStates read their receipts back (a conflict's rebuild, the events of an unknown agent or a foreign
   * version): the store, synchronously, or (cluster mode) the run's history loaded ahead of the step (read-ahead.ts).
   */
  private readonly ahead: ReadAhead;
  private readonly appendStep: AppendStep;
  private readonly foldStep: FoldStep;
  private readonly evaluation: EvaluateStep;
  private readonly retirement: Retirement;
  private readonly restorer: Restorer;
  private readonly runList: RunList;

  constructor(
    readonly registry: ContractRegistry,
    readonly store: EngineStore,
    private readonly opts: EngineOptions,
  ) {
    this.ownership = opts.ownership ?? SINGLE_OWNER;
    this.events = opts.events ?? new EventBus<AuditEvents>();
    this.ahead = new ReadAhead(store, (run) => this.live.get(run)?.state.version);
    const counts = { track: (l: LiveRun) => this.admission.track(l), untrack: (l: LiveRun) => this.admission.untrack(l) };
    const live = (this.live = new LiveRuns(this.events, counts, this.ahead.source, opts.maxDeliveredDigests));
    const pinner = (this.pinner = new Pinner(registry, store, opts.defaultContract));
    this.gauges.subscribe(this.events);
    const syncReceipts = (run: string) => this.ahead.receipts(run);
    const retirement = (this.retirement = retirementOf(live, store, this.gauges, pinner, this.ownership, opts, syncReceipts));
    const readsLeft = (this.readsLeft = retirement.retires && store.synchronousReads);
    this.admission = new Admission(
      { get heldReceipts() { return live.heldReceipts; }, has: (run) => live.has(run), evictIdle: (before, runs, receipts) => retirement.evictIdle(before, runs, receipts) },
      // Where settled runs do not leave live memory, they count against the cap (it bounds memory).
      { ...opts, ownership: this.ownership, countSettled: !retirement.retires },
      (runs) => this.events.publish('idleEvicted', { runs }),
    );
    const retireIfSettled = (run: string, l: LiveRun, now: number) => retirement.retireIfSettled(run, l, now);
    const evaluation = (this.evaluation = new EvaluateStep(live, { registry, pinner, store, events: this.events, ahead: this.ahead, shadow: opts.shadow, retireIfSettled }));
    const evaluateRun = (s: RunState, p: Pinning, now: number, into?: LiveRun) => evaluation.evaluate(s, p, now, into);
    this.restorer = new Restorer(live, { store, registry, pinner, gauges: this.gauges, events: this.events, retires: readsLeft, syncReceipts, evaluateRun, retireIfSettled });
    this.appendStep = new AppendStep(live, { store, pinner, ownership: this.ownership });
    this.foldStep = new FoldStep(live, { store, pinner, ownership: this.ownership, ahead: this.ahead, evaluation, retirement });
    const alertStateOf = (run: string, now: number, w?: number, st?: number) => this.alertStateOf(run, now, w, st);
    const cluster = this.ownership.remote
      ? { storedPage: (...a: Parameters<ClusterReads['storedPage']>) => this.reads.storedPage(...a), storedAfter: (...a: Parameters<ClusterReads['storedAfter']>) => this.reads.storedAfter(...a) }
      : null;
    this.runList = new RunList(live, { store, pinner, retires: readsLeft, syncReceipts, alertStateOf, cluster });
    const held = { view: (run: string) => this.view(run), held: (run: string) => live.get(run), list: (f: ListFilter) => this.list(f), ackOf: (run: string) => this.ackOf(run), alertStateOf };
    this.reads = new ClusterReads(held, pinner, this.ownership.remote);
  }

  /** Runs that can still change, held in memory (what --max-live-runs counts). */
  get changeableRuns(): number {
    return this.admission.changeableRuns;
  }

  /** Runs that can still change held for one source (the fair live cap). */
  sourceRuns(source: string): number {
    return this.admission.sourceRuns(source);
  }

  /**
   * Rebuild live state from the store (Restorer.restore); refuses a contract file changed under a version a run is
   * pinned to. A row that cannot be read back stops the start with an error naming its table and row.
   */
  restore(now: number): { runs: number; receipts: number } {
    return this.restorer.restore(now);
  }

  get liveReceipts(): number {
    return this.live.heldReceipts;
  }

  /** Runs that left live memory idle since start (topology_live_runs_evicted_total). */
  get evictedRuns(): number {
    return this.admission.evictedRuns;
  }

  /** At a live limit: no room for a new run (--max-live-runs or --max-live-receipts reached). */
  atLiveLimit(): boolean {
    return this.admission.atLiveLimit();
  }

  /**
   * Durably store receipts, then update the touched runs. Resolves only after the commit (an acknowledged receipt
   * is never lost); rejects when the store cannot commit (nothing is acknowledged then). Cluster mode: the batch's
   * runs held here stay in memory until evaluated, and those that left are looked up first, to be loaded again with
   * their history by the fold (Retirement.checkReturning).
   */
  async ingest(receipts: Receipt[], source: string, now: number, spanLog?: SpanLogEntry[], limits = true): Promise<IngestOutcome> {
    if (receipts.length === 0 && !spanLog?.length) return { accepted: 0, duplicates: 0, conflicts: 0 };
    if (this.store.synchronousReads) return this.ingestHeld(receipts, source, now, spanLog, limits, null);
    const owned = receipts.flatMap((r) => (this.ownership.owns(r.run) ? [r.run] : []));
    return this.retirement.holding(owned, now, (returning) => this.ingestHeld(receipts, source, now, spanLog, limits, returning));
  }

  private async ingestHeld(receipts: Receipt[], source: string, now: number, spanLog: SpanLogEntry[] | undefined, limits: boolean, returning: string[] | null): Promise<IngestOutcome> {
    const perType: PerType = new Map();
    // `let`: the bodies and digests are let go below (see there); no object holding them is kept.
    let { fresh, digests, bodies, known } = await this.appendStep.unseen(receipts, perType);
    receipts = fresh;
    if (limits) await this.admission.refuseForFullOwners(receipts);
    const reservation = limits ? this.admission.reserve(receipts, now, source) : null;
    const release = reservation ? reservation.release : () => {};
    let refused: IngestOutcome['refused'];
    if (reservation?.refused) {
      // Refused per run (the live caps): the receipts of refused runs are not stored; the rest of the batch is.
      const out = reservation.refused;
      const keep = receipts.map((r) => !out.has(r.run));
      const n = keep.filter((k) => !k).length;
      receipts = receipts.filter((_, i) => keep[i]);
      digests = digests.filter((_, i) => keep[i]);
      bodies = bodies.filter((_, i) => keep[i]);
      refused = { runs: out, receipts: n, message: reservation.message, limit: out.values().next().value! };
    }
    this.retirement.markReturning(receipts);
    let res;
    const touched = new Set<string>();
    try {
      const scope = this.opts.sourceScopedEvents && source !== 'auditor' ? sourceTag(source) : undefined;
      let items: StoredReceipt[] = receipts.map((receipt, i) => ({ receipt, source, receivedAt: now, body: bodies[i], scope }));
      let failure: unknown = null;
      ({ res, failure } = await this.appendStep.appendInChunks(items, spanLog, this.appendStep.firstPins(receipts)));
      if (res.results.length < receipts.length) {
        // A later chunk failed: the chunks committed before it are folded (the live state follows the store), and
        // the request fails below (nothing acknowledged; a retry finds them as duplicates).
        receipts = receipts.slice(0, res.results.length);
        digests.length = receipts.length;
      }
      if (scope !== undefined) {
        // Stored under a source-scoped id (another source holds this event id): folded as stored.
        items.forEach((it, i) => {
          if (i >= receipts.length || it.storedAs === undefined) return;
          receipts[i] = { ...receipts[i], event: it.storedAs };
          digests[i] = DeliveredDigests.digest(receipts[i]);
        });
      }
      // The stored forms are in the store now: let them go before the fold and the evaluations allocate (a large
      // batch's bodies kept to the end outlive two scavenges and are promoted: old-space garbage, peak RSS). The
      // arrays are dropped, not emptied: the store was handed them.
      items = NONE_STORED;
      bodies = NONE_BODIES;
      // The reservation holds until the new runs are live: the fold below yields to the event loop in slices. The
      // runs whose fold reads their history back (a stored conflict, a repeat) have it loaded first (cluster mode).
      const results = res.results;
      const needed = this.foldStep.historyNeeded(receipts, results);
      if (returning?.length) needed.push(...returning);
      await this.ahead.around(needed, () => this.foldStep.fold(receipts, results, digests, perType, touched, now, source));
      digests = NONE_DIGESTS;
      if (res.pins) this.foldStep.holdPins(res.pins);
      if (failure !== null) {
        for (const run of touched) this.evaluation.reevaluate(run, now);
        throw failure;
      }
    } finally {
      release();
      // A single instance's marks (a cluster's leave with their batch's release).
      if (this.live.returning.size && !returning) for (const r of receipts) this.live.returning.delete(r.run);
    }
    res.duplicates += known;
    for (const [type, t] of perType) {
      for (const k of ['accepted', 'duplicate', 'conflict'] as const) if (t[k]) this.events.publish('receiptsStored', { type, result: k, n: t[k] });
    }
    await this.evaluation.evaluateTouched(touched, now);
    return { accepted: res.accepted, duplicates: res.duplicates, conflicts: res.conflicts, ...(refused ? { refused } : {}) };
  }

  /** Resolves when the re-evaluations waiting for a read ahead (cluster mode) are done. */
  settled(): Promise<void> {
    return this.evaluation.settled();
  }

  /**
   * Cluster mode: fold receipts that other instances stored for runs this instance owns (read from the shared store
   * in commit order), then re-evaluate the touched runs (FoldStep.foldStored).
   */
  foldStored(receipts: readonly Receipt[], now: number): Promise<number> {
    return this.foldStep.foldStored(receipts, now);
  }

  /** Cluster mode: take over a run from the shared store (its partition was just claimed; FoldStep.adopt). */
  adopt(stored: StoredRun, receipts: readonly Receipt[], contractContent: string | null, now: number): void {
    this.foldStep.adopt(stored, receipts, contractContent, now);
  }

  /** Cluster mode: settled runs' topology_runs counts per partition (a takeover's, retain; a partition gone, dropRetained). */
  get retained(): Pick<RunGauges, 'retain' | 'dropRetained'> {
    return this.gauges;
  }

  /** Cluster mode: forget a live run (its partition went to another instance). Nothing is deleted from the store. */
  drop(run: string): boolean {
    const live = this.live.get(run);
    if (!live) return false;
    this.live.forget(run, live);
    return true;
  }

  /** The ids of the live runs this instance holds. */
  liveRunIds(): string[] {
    return this.live.ids();
  }

  /** The live runs (read-only use: test models, e.g. a walk the incremental gauges must agree with). */
  heldRuns(): IterableIterator<LiveRun> {
    return this.live.values();
  }

  /** Move verdicts with time: re-evaluate the runs whose next deadline passed. */
  tick(now: number): number {
    const due = this.live.deadlines.popDue(now);
    for (const run of due) this.evaluation.reevaluate(run, now);
    this.retirement.retireDue(now);
    return due.length;
  }

  /** Prune settled runs idle for longer than the retention (Retirement.prune). */
  prune(now: number): number {
    return this.retirement.prune(now);
  }

  /** The retention prune as the server runs it, in batches that yield (Retirement.pruneSliced). */
  pruneSliced(now: number, slicer?: StoreSlicer): Promise<number> {
    return this.retirement.pruneSliced(now, slicer);
  }

  /**
   * A live run's verdict and receipts. The receipts are read from the store (live state keeps none): the folded ones
   * in arrival order, then every version of each conflicted event id (conflicts in the order they appeared).
   */
  get(run: string): RunView | null {
    // A store that answers only asynchronously (cluster mode): a run's receipts are read by view() (fetch: any run).
    if (!this.store.synchronousReads) throw new Error('AuditEngine.get reads the store synchronously: a cluster instance answers view() or fetch()');
    const live = this.live.get(run);
    if (!live) return this.readsLeft ? this.runList.getEvicted(run) : null;
    return this.viewOf(live, this.store.runReceipts(run));
  }

  /** A held run's verdict, first receipt time and update time, without its receipts (null: not held, or not evaluated yet). */
  heldSummary(run: string): { verdict: RunVerdict; firstAt: number; updatedAt: number } | null {
    const live = this.live.get(run);
    return live?.verdict ? { verdict: live.verdict, firstAt: live.state.firstAt, updatedAt: live.updatedAt } : null;
  }

  /** Whether the store answers a run's receipts synchronously (get() then does; else view() and fetch() read them). */
  get synchronousReads(): boolean {
    return this.store.synchronousReads;
  }

  /** `get` for any store: a live run's verdict and its receipts read from the store (asynchronously in cluster mode). */
  async view(run: string): Promise<RunView | null> {
    if (this.store.synchronousReads) return this.get(run);
    const live = this.live.get(run);
    if (!live) return null;
    const receipts = await this.store.readReceipts(run);
    const again = this.live.get(run); // forgotten meanwhile: not held here
    return again ? this.viewOf(again, receipts) : null;
  }

  /** When a live run's first receipt was made (null: not held here). */
  firstAtOf(run: string): number | null {
    return this.live.get(run)?.state.firstAt ?? null;
  }

  private viewOf(live: LiveRun, stored: Receipt[]): RunView {
    const receipts = viewReceipts(stored, live.state.conflicts);
    return { verdict: live.verdict, receipts, updatedAt: live.updatedAt, ...(this.opts.shadow?.length ? { shadow: live.shadow ?? [] } : {}) };
  }

  /** A run's verdict: held in memory, else (a run that left it) evaluated from the store. */
  verdictOf(run: string): RunVerdict | null {
    const live = this.live.get(run);
    if (live) return live.verdict ?? null;
    return this.readsLeft ? (this.runList.getEvicted(run)?.verdict ?? null) : null;
  }

  /** The held runs' list (RunList.list). */
  list(filter: ListFilter): ListedRun[] {
    return this.runList.list(filter);
  }

  /** A page of the run list, after the cursor `after` (RunList.page). */
  listPage(filter: ListFilter & { after?: string }, now: number): Promise<{ runs: ListedRun[]; next: string | null }> {
    return this.runList.page(filter, now);
  }

  /** Stored runs per verdict (a single instance; null: the store does not count, see listAll's counts). */
  verdictCounts(filter: { contract?: string }): Record<string, number> | null {
    return this.runList.verdictCounts(filter);
  }

  /** The candidates shadow-evaluated by this engine. */
  get shadowCandidates(): readonly Contract[] {
    return this.opts.shadow ?? [];
  }

  /** Per candidate: shadow verdicts counted over the live runs, disagreements and the edges behind them. */
  shadowSummary(limit = 200) {
    const runs = [...this.live.values()].filter((l) => l.verdict).map((l) => ({ verdict: l.verdict, shadow: l.shadow ?? [] }));
    return summarizeShadows(this.opts.shadow ?? [], runs, limit);
  }

  // --- pins of the run-scope rule (pinning.ts)

  /**
   * The contract the run-scope rule checks a run-level receipt against (src/ingest/trust.ts): the run's pinned
   * contract; before any pin, the one its earliest run.start (stored, or among `batch`) names, else the default.
   */
  scopeContract(run: string, batch: readonly Receipt[] = []): Contract | null {
    const live = this.live.get(run);
    return this.pinner.scopeContract(run, live?.pin, live?.state.firstStart() ?? null, batch);
  }

  /** The stored handoff receipts of a run (the handoff party rule reads which parties its handoffs named). */
  storedHandoffReceipts(run: string): Receipt[] {
    const live = this.live.get(run);
    if (live && !live.state.handoffReceipts().some((r) => r.type === 'handoff')) return [];
    if (!live && !isRunId(run)) return [];
    // A store that answers only asynchronously (cluster mode): the handoffs the live state keeps; for a run held
    // elsewhere, its stored handoff receipts as read before the trust rules ran (prefetchTrust).
    if (!this.store.synchronousReads) return live ? live.state.handoffReceipts().filter((r) => r.type === 'handoff') : this.reads.foreignHandoffReceipts(run);
    return this.store.runReceipts(run).filter((r) => r.type === 'handoff');
  }

  // --- cluster reads (cluster-reads.ts)

  /** Cluster mode: the reader of runs other instances hold (null on a single instance). */
  get remote(): RemoteRuns | null {
    return this.reads.remote;
  }

  fetch(run: string, now: number, maxAgeMs?: number): Promise<RunView | null> {
    return this.reads.fetch(run, now, maxAgeMs);
  }

  fetchVerdict(run: string, now: number, maxAgeMs?: number): Promise<RunVerdict | null> {
    return this.reads.fetchVerdict(run, now, maxAgeMs);
  }

  fetchAck(run: string, now?: number): Promise<(AckRecord & { current: boolean }) | null> {
    return this.reads.fetchAck(run, now);
  }

  /** Cluster mode: the pins (`pinRuns`) and handoff parties (`partyRuns`) of runs held elsewhere, read before the trust rules. */
  prefetchTrust(pinRuns: Iterable<string>, partyRuns?: Iterable<string>): Promise<void> {
    return this.reads.prefetchTrust(pinRuns, partyRuns);
  }

  /** The pure verdict of a run read from the shared store (its stored pin, else the pin its receipts resolve to). */
  evaluateDetached(d: DetachedRun, now: number): RunVerdict {
    return this.pinner.evaluateDetached(d, now);
  }

  // --- acknowledgements (acks.ts); the gauges hear of them (runAcked)

  /** Acknowledge a run's current verdict: it leaves the alerting series until it enters another verdict. */
  ack(run: string, now: number, who: AckWho = {}): { acked: boolean; at: string; record: AckRecord } | null {
    const live = this.live.get(run);
    // A run that left live memory (settled): its verdict from the store, its acknowledgement stored by the caller.
    if (!live && this.readsLeft) return ackLeft(this.verdictOf(run)?.verdict, this.store.getAck!(run), now, who);
    const res = live ? ackRun(live, now, who) : null;
    if (res?.acked) this.events.publish('runAcked', { live: live! });
    return res;
  }

  /** The latest acknowledgement of a live run (null when none); `current` when it covers the run's verdict now. */
  ackOf(run: string): (AckRecord & { current: boolean }) | null {
    const live = this.live.get(run);
    if (!live && this.readsLeft) {
      const stored = this.store.getAck!(run);
      return stored ? { ...stored, current: stored.verdict === this.verdictOf(run)?.verdict } : null;
    }
    return ackOf(live);
  }

  /** Cluster mode: an acknowledgement recorded in the shared store (at any instance), applied by the run's owner. */
  applyAck(run: string, verdict: string, at: number, who: AckWho = {}): boolean {
    const live = this.live.get(run);
    if (!applyAck(live, verdict, at, who)) return false;
    this.events.publish('runAcked', { live: live! });
    return true;
  }

  ackedOf(run: string): string | null {
    return ackedAtOf(this.live.get(run));
  }

  // --- gauges (gauges.ts)

  /** Runs per (contract, version, verdict), for the topology_runs gauge (rows with at least one run). */
  gauge(): GaugeRow[] {
    return this.gauges.gauge();
  }

  /** Alerting rows (within `windowMs`, unacknowledged) and stalled rows (latest receipt older than `stallMs`). */
  alerting(now: number, windowMs: number, stallMs: number): { alerting: AlertRow[]; stalled: StallRow[] } {
    return this.gauges.alerting(now, windowMs, stallMs, () => this.live.values(), (run) => this.live.get(run));
  }

  /** The runs counted by the last `alerting` call (per-run alerts, src/alerting). */
  alertingRuns(): Iterable<{ verdict: RunVerdict; enteredAt: number; inWindow: boolean; stalledAt: number | null; lastAt: number }> {
    return this.gauges.alertingRuns();
  }

  /** One run of alertingRuns by id, undefined when it is not among them. */
  alertingRun(run: string): { verdict: RunVerdict; enteredAt: number; inWindow: boolean; stalledAt: number | null; lastAt: number } | undefined {
    return this.gauges.alertingRun(run);
  }

  /** The runs that entered, left or changed among alertingRuns since the last call; null: not known run by run (look at all). */
  alertChanges(): Set<string> | null {
    return this.gauges.alertChanges();
  }

  /** When a held run entered its current verdict (ms since epoch), or null for a run this instance does not hold. */
  enteredAtOf(run: string): number | null {
    const live = this.live.get(run);
    return live ? (live.enteredAt ?? live.updatedAt) : null;
  }

  /** Whether a live run counts in the alerting / stalled gauges at `now` (the window and stall time last used, or the ones given). */
  alertStateOf(run: string, now: number, windowMs?: number, stallMs?: number): { acked: boolean; alerting: boolean; stalled: boolean } | null {
    const live = this.live.get(run);
    return live ? alertState(live, now, windowMs ?? this.gauges.windowMs, stallMs ?? this.gauges.stallMs) : null;
  }

  get liveRuns(): number {
    return this.live.size;
  }

  /** Runs retired or evicted are looked up in the store (tests: nothing per run is kept for them). */
  get returningRuns(): number {
    return this.live.returning.size;
  }

  get scheduledDeadlines(): number {
    return this.live.deadlines.size;
  }
}

/**
 * Leaving live memory (retirement.ts), as this engine's store and ownership allow: settled runs leave memory but with
 * shadow candidates (the shadow summary counts them; an evaluation mode, not a soak), on a single instance (read back
 * from its store synchronously) and in a cluster (read from the shared store like another instance's run, loaded
 * again asynchronously by its next receipt: storedRuns, the read ahead, its pin remembered and its contract learnt).
 */
function retirementOf(live: LiveRuns, store: EngineStore, gauges: RunGauges, pinner: Pinner, ownership: Ownership, opts: EngineOptions, syncReceipts: (run: string) => Receipt[]): Retirement {
  const retires = !opts.shadow?.length && (store.synchronousReads ? ownership.single : ownership.remote !== null);
  if (ownership.partitionOf) gauges.groupOf = (run) => ownership.partitionOf!(run);
  const rememberPin = (run: string, record: PinRecord, content = store.getContractContent(record.contractHash)) => {
    store.rememberPin?.(run, record);
    if (content) pinner.learn(record.contractHash, content, `pinned ${record.pin.contract}@${record.pin.version}`);
  };
  const storedRuns = store.storedRuns?.bind(store);
  return new Retirement(live, { store, gauges, retires, retentionMs: opts.retentionMs, alertWindowMs: opts.alertWindowMs, syncReceipts, storedRuns, rememberPin });
}
