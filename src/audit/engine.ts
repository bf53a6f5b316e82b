/**
 * The live auditor, in four steps per batch: append (the store commits the receipts, and the first pin of each new
 * run with them) -> fold (RunState.add) -> pin (the run's pinning: the stored pin, or a later run.start's) ->
 * evaluate (the pure `evaluate` of src/core, which reads and writes no store). Keeps one RunState per live run in memory (rebuilt from the store on start),
 * re-evaluates only the runs a batch touched, and moves verdicts with time through a deadline heap fed by each
 * verdict's nextChangeAt. Verdicts, receipts and every change of a live run are published on its event bus
 * (events.ts: `engine.events`), which the gauges, metrics, logs, API and UI subscribe to.
 *
 * The jobs around the live runs live in their own modules: admission and the live limits (admission.ts), the pin
 * step (pinning.ts), the gauges that listen (gauges.ts), acknowledgements (acks.ts), the cluster reads of runs held
 * elsewhere (cluster-reads.ts); AuditEngine composes them and keeps the surface the server, CLI and UI use.
 */
import type { Contract } from '../core/contract.js';
import { RunState, evaluate, evaluateSteps, type AddResult, type Pinning, type ReceiptSource } from '../core/classify.js';
import type { ContractRegistry } from '../core/registry.js';
import { isRunId } from '../core/receipt.js';
import { millisOf } from '../core/time.js';
import { shadowEvaluate, summarizeShadows, type ShadowVerdict } from '../core/shadow.js';
import type { AckRecord, Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import type { AppendPin, AppendResult, PrunableRun, Slicer as StoreSlicer, SpanLogEntry, StoredReceipt, LiveRun as StoredRun } from '../store/index.js';
import { DeadlineHeap } from './heap.js';
import { DeliveredDigests, type Digest } from './delivered.js';
import { compactReceiptJson } from '../core/canonical.js';
import { Admission, LiveLimitError } from './admission.js';
import { ackOf, ackRun, ackedAtOf, applyAck, type AckWho } from './acks.js';
import { ClusterReads, viewReceipts, type RunView } from './cluster-reads.js';
import { RunGauges, type AlertRow, type GaugeRow, type StallRow } from './gauges.js';
import { ALERT_VERDICTS, alertState, nextChange, verdictKey, type LiveRun } from './live-run.js';
import { EventBus, type AuditEvents } from './events.js';
import type { ListFilter, ListedRun } from './listing.js';
import { listOrder, matchesAlertFilter, sameListed } from './listing.js';
import { Pinner } from './pinning.js';
import { ReadAhead, ReadBackMissing } from './read-ahead.js';
import type { DetachedRun, EngineStore, RemoteRuns } from './store.js';
import { SINGLE_OWNER, type Ownership } from './ownership.js';

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
   * default: the embedded store, every run), or a cluster's leased ownership (src/cluster/ownership.ts). Receipts of
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

/** serve's default --alert-window. */
const DEFAULT_ALERT_WINDOW_MS = 60 * 60_000;

/** A row of the store that cannot be read back, named by table and row. */
export class RestoreError extends Error {}


/** A source's tag in a source-scoped event id: the token's hash prefix (`token-3-ab12cd34` -> `ab12cd34`), id characters only. */
export function sourceTag(source: string): string {
  return source.replace(/^token-\d+-/, '').replace(/[^A-Za-z0-9_.:#+=-]/g, '-').slice(0, 40) || 'source';
}

/** The run list's cursor: the last row's first receipt time and run id, base64url (opaque to clients). */
/** A page of the run list yields to the event loop after this much work (ms). */
const LIST_SLICE_MS = 20;

function cursorOf(c: { firstAt: number; run: string }): string {
  return Buffer.from(JSON.stringify([c.firstAt, c.run])).toString('base64url');
}

/** A cursor back; a malformed one is the client's error (ListCursorError). */
function parseCursor(s: string): { firstAt: number; run: string } {
  try {
    const v = JSON.parse(Buffer.from(s, 'base64url').toString()) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'number' && Number.isFinite(v[0]) && typeof v[1] === 'string') return { firstAt: v[0], run: v[1] };
  } catch {
    // below
  }
  throw new ListCursorError('after: not a cursor of this list (use the `next` of the page before)');
}

/** A run list cursor that is not one (`?after=`): the client's error. */
export class ListCursorError extends Error {}

/** A batch of more receipts is committed in chunks of this many (see AuditEngine.appendInChunks). */
const APPEND_CHUNK = 2048;

/** What ingest holds once a batch's stored forms and digests are let go (never written to). */
const NONE_STORED: StoredReceipt[] = [];
const NONE_BODIES: string[] = [];
const NONE_DIGESTS: Digest[] = [];

/** Yields to the event loop once ~8 ms of synchronous work passed since the last yield (see AuditEngine.fold). */
class Slicer {
  private since = performance.now();
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.since < 8) return;
    await new Promise<void>((r) => setImmediate(r));
    this.since = performance.now();
  }
}

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

type PerType = Map<string, { accepted: number; duplicate: number; conflict: number }>;

function countType(perType: PerType, type: string, result: 'accepted' | 'duplicate' | 'conflict'): void {
  const t = perType.get(type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
  t[result]++;
  perType.set(type, t);
}

// AuditEngine is over ~450 lines (~830) because it is the one owner of the live-run map and keeps, besides the live
// runs' own job (restore, ingest -> fold -> pin -> evaluate with the first pins and the chunked, sliced ingest of
// large batches, takeovers, deadlines, prune, ~570 lines), ~40 short delegations to the admission, pinning, gauges,
// acks and cluster reads it composes: the surface server/, cli/, ui/ and cluster/ call. Splitting the live runs' job further would hand the map's invariants (held receipts, digests,
// deadlines, events published) to several owners.
export class AuditEngine {
  /** Verdicts, receipts and run changes, published as they happen (events.ts). */
  readonly events: EventBus<AuditEvents>;
  private readonly runs = new Map<string, LiveRun>();
  private readonly deadlines = new DeadlineHeap();
  private heldReceipts = 0;
  /**
   * Runs of the batch being folded that are in the store but not in live memory (settled and retired, or left idle):
   * loaded again from the store by their fold. Transient: a run is in it only between its batch's check and fold.
   */
  private readonly returning = new Set<string>();
  /** Live runs by the server time of their latest receipt: idle eviction takes the longest idle first (no walk). */
  private readonly idle = new DeadlineHeap();
  /** Settled runs in an alerting verdict, by the end of their alert window: then they leave live memory. */
  private readonly retireAt = new DeadlineHeap();
  /**
   * Whether settled runs leave live memory (see retireIfSettled): a single instance whose store reads synchronously
   * and lists runs. A cluster's instance keeps its owned runs (the other instances read them through the store).
   */
  private readonly retires: boolean;
  /** Digests of stored receipts of live runs: a redelivery is recognised without the store (see DeliveredDigests). */
  private readonly delivered: DeliveredDigests;
  private readonly gauges = new RunGauges();
  private readonly admission: Admission;
  private readonly pinner: Pinner;
  private readonly reads: ClusterReads;
  /**
   * Where live RunStates read their receipts back (a conflict's rebuild, the events of an unknown agent or a foreign
   * version): the store, synchronously, or (cluster mode) what is read ahead for the step (read-ahead.ts). A RunState
   * holds aggregates and a digest per event, not the receipts.
   */
  private readonly ahead: ReadAhead;
  private readonly receiptSource: ReceiptSource;
  /** Re-evaluations waiting for a read ahead (cluster mode), by run. */
  private readonly deferred = new Map<string, Promise<void>>();

  /** Which runs this instance holds live (ownership.ts). */
  readonly ownership: Ownership;

  constructor(
    readonly registry: ContractRegistry,
    readonly store: EngineStore,
    private readonly opts: EngineOptions,
  ) {
    this.ownership = opts.ownership ?? SINGLE_OWNER;
    this.events = opts.events ?? new EventBus<AuditEvents>();
    this.delivered = new DeliveredDigests(opts.maxDeliveredDigests);
    this.ahead = new ReadAhead(store, (run) => this.runs.get(run)?.state.version);
    this.receiptSource = this.ahead.source;
    this.pinner = new Pinner(registry, store, opts.defaultContract);
    this.gauges.subscribe(this.events);
    // With shadow candidates, settled runs stay (the shadow summary counts them; an evaluation mode, not a soak).
    this.retires = this.ownership.single && !opts.shadow?.length && store.synchronousReads;
    const runs = this.runs;
    const engine = this;
    this.admission = new Admission(
      {
        get heldReceipts() {
          return engine.heldReceipts;
        },
        has: (run) => runs.has(run),
        evictIdle: (before, wantRuns, wantReceipts) => this.evictIdle(before, wantRuns, wantReceipts),
      },
      // Where settled runs do not leave live memory, they count against the cap (it bounds memory).
      { ...opts, ownership: this.ownership, countSettled: !this.retires },
      (runs) => this.events.publish('idleEvicted', { runs }),
    );
    this.reads = new ClusterReads(
      {
        view: (run) => this.view(run),
        held: (run) => runs.get(run),
        list: (f) => this.list(f),
        ackOf: (run) => this.ackOf(run),
        alertStateOf: (run, now, w, s) => this.alertStateOf(run, now, w, s),
      },
      this.pinner,
      this.ownership.remote,
    );
  }

  private runChanged(live: LiveRun): void {
    this.events.publish('runChanged', { live });
  }

  /**
   * Takes a run out of live memory (pruned, evicted, dropped, retired): its held receipts, digests, deadline, idle
   * entry and gauge rows (`retired`: a settled run stays counted in topology_runs, see RunGauges.runRetired).
   */
  private forget(run: string, live: LiveRun, retired = false): void {
    this.runs.delete(run);
    this.events.publish('runForgotten', { live, retired });
    this.heldReceipts -= live.held;
    this.delivered.forget(run);
    this.deadlines.set(run, null);
    this.idle.set(run, null);
    this.retireAt.set(run, null);
    this.admission.untrack(live);
  }

  /** A new live run (not evaluated yet); `source`: whose receipt brought it (the fair live cap counts per source). */
  private newLive(run: string, at: number, entered?: number, source?: string): LiveRun {
    const live: LiveRun = { state: new RunState(run, this.receiptSource), verdict: null as unknown as RunVerdict, updatedAt: at, held: 0 };
    if (entered !== undefined) live.enteredAt = entered;
    if (source !== undefined) live.source = source;
    this.runs.set(run, live);
    this.admission.track(live);
    return live;
  }

  /** A live run received a receipt at server time `at` (idle eviction orders by it). */
  private received(live: LiveRun, at: number): void {
    live.receivedAt = at;
    this.idle.set(live.state.run, at);
  }

  /**
   * Idle eviction (Admission): runs with no receipt since `before` leave live memory, the longest idle first, popped
   * from the time-ordered `idle` heap (O(log n) each, no walk), until `wantRuns` runs that could still change and
   * `wantReceipts` held receipts are freed. A settled one is retired (it stays counted in topology_runs). They stay
   * in the store; their next receipt (or a read) loads them again.
   */
  private evictIdle(before: number, wantRuns: number, wantReceipts: number): number {
    if (!this.retires) return 0;
    let n = 0;
    let runs = 0;
    let receipts = 0;
    while (runs < wantRuns || receipts < wantReceipts) {
      const [run] = this.idle.popDue(before, 1);
      if (run === undefined) break;
      const live = this.runs.get(run);
      if (!live || !live.verdict) continue;
      if (live.counted) runs++;
      receipts += live.held;
      this.forget(run, live, live.verdict.settled);
      n++;
    }
    return n;
  }

  /**
   * Memory holds what can still change: a settled run whose verdict no time can move (no next change) leaves live
   * memory at once, and is loaded again on its next receipt; one in an alerting verdict, unacknowledged, stays until
   * its alert window passed (the alerting gauge counts it meanwhile). It stays counted in topology_runs until pruned.
   */
  private retireIfSettled(run: string, live: LiveRun, now: number): void {
    if (!this.retires || !live.verdict?.settled || nextChange(live) !== null) return;
    const v = live.verdict.verdict;
    if (ALERT_VERDICTS.has(v) && live.ackedVerdict !== v) {
      const end = (live.enteredAt ?? live.updatedAt) + (this.opts.alertWindowMs ?? DEFAULT_ALERT_WINDOW_MS);
      if (now <= end) {
        this.retireAt.set(run, end + 1);
        return;
      }
    }
    this.forget(run, live, true);
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
   * Rebuild live state from the store; refuses a contract file changed under a version a run is pinned to.
   * Streams the runs page by page (never every row at once). A row that cannot be read back stops the start with
   * an error naming its table and row.
   */
  restore(now: number): { runs: number; receipts: number } {
    let receipts = 0;
    const changed: string[] = [];
    // Settled runs stay in the store (loaded on their next receipt): a store that can count them and name their pinned
    // contents is read for the runs that can still change only, so a restart costs those, not what is stored.
    const changeableOnly = this.retires && this.restoreSettled(changed);
    for (const lr of this.store.iterateLiveRuns(undefined, changeableOnly)) {
      try {
        if (lr.pin && lr.contractHash) {
          const current = this.registry.get(lr.pin.contract, lr.pin.version);
          if (current && current.hash !== lr.contractHash) changed.push(`${lr.pin.contract}@${lr.pin.version} (pinned by run ${lr.run})`);
          this.restoreContract(lr);
        }
        if (this.retires && lr.settled && lr.verdict !== null && !ALERT_VERDICTS.has(lr.verdict)) {
          // Settled: it stays in the store only (counted in topology_runs until pruned; loaded on its next receipt).
          this.gauges.retain(lr.pin?.contract ?? '', lr.pin?.version ?? '', lr.verdict);
          continue;
        }
        receipts += this.restoreRun(lr, now);
      } catch (e) {
        if (e instanceof RestoreError || (e as Error).name === 'StoreRowError') throw e;
        throw new RestoreError(`store tables runs/receipts, run ${JSON.stringify(lr.run)}: ${(e as Error).message}`);
      }
    }
    if (changed.length) {
      throw new Error(`contract file changed under an existing version: ${[...new Set(changed)].join(', ')}; publish a new version instead (running runs keep their pinned content)`);
    }
    return { runs: this.runs.size, receipts };
  }

  /**
   * The settled runs of a restart without reading them: counted for topology_runs, and their pinned contents checked
   * against the contract files (a content the registry lacks and a stored run pins is learned; under a version the
   * registry has, it is a changed file). False when the store cannot (every run is then read).
   */
  private restoreSettled(changed: string[]): boolean {
    const { settledRunCounts, pinnedContents, runPinnedTo } = this.store;
    if (!settledRunCounts || !pinnedContents || !runPinnedTo) return false;
    for (const row of pinnedContents.call(this.store)) {
      if (this.pinner.contract(row.hash)) continue; // the registry's own content
      const run = runPinnedTo.call(this.store, row.hash);
      if (run === null) continue; // pinned only by runs already pruned
      if (this.registry.get(row.contract, row.version)) changed.push(`${row.contract}@${row.version} (pinned by run ${run})`);
      try {
        this.pinner.learn(row.hash, row.content, `pinned ${row.contract}@${row.version}`);
      } catch (e) {
        throw new RestoreError(`store table contracts, row hash ${row.hash} (pinned by run ${run}): ${(e as Error).message}`);
      }
    }
    for (const c of settledRunCounts.call(this.store)) this.gauges.retain(c.contract, c.version, c.verdict, c.runs);
    return true;
  }

  /** The pinned content of a stored run's contract, read back from the store unless known. */
  private restoreContract(lr: StoredRun): void {
    if (!lr.pin || !lr.contractHash || this.pinner.contract(lr.contractHash)) return;
    const content = this.store.getContractContent(lr.contractHash);
    if (!content) return;
    try {
      this.pinner.learn(lr.contractHash, content, `pinned ${lr.pin.contract}@${lr.pin.version}`);
    } catch (e) {
      throw new RestoreError(`store table contracts, row hash ${lr.contractHash} (pinned by run ${lr.run}): ${(e as Error).message}`);
    }
  }

  /** One stored run back into live memory, evaluated now; returns how many receipts were read. */
  private restoreRun(lr: StoredRun, now: number): number {
    const state = new RunState(lr.run, this.receiptSource);
    let held = 0;
    let receipts = 0;
    for (const r of this.syncReceipts(lr.run)) {
      if (state.add(r) !== 'duplicate') held++;
      receipts++;
    }
    if (state.size === 0 && state.conflicts.size === 0) return receipts;
    const restored: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: lr.updatedAt, enteredAt: lr.updatedAt, held, receivedAt: lr.updatedAt };
    restored.verdict = this.evaluateRun(state, this.pinner.pin(state, undefined), now, restored);
    const replaced = this.runs.get(lr.run);
    if (replaced) {
      this.events.publish('runForgotten', { live: replaced, retired: false });
      this.admission.untrack(replaced);
    }
    this.runs.set(lr.run, restored);
    this.runChanged(restored);
    this.heldReceipts += held;
    this.deadlines.set(lr.run, nextChange(restored));
    this.admission.track(restored);
    this.idle.set(lr.run, lr.updatedAt);
    if (lr.verdict && lr.verdict !== restored.verdict.verdict) {
      restored.enteredAt = now;
      this.restoredChange(lr, restored.verdict, now);
    }
    this.retireIfSettled(lr.run, restored, now);
    return receipts;
  }

  /**
   * A run that left live memory (settled, or idle), loaded again from the store (its receipts, stored pin and
   * verdict). A settled one leaves the count topology_runs kept for it (it is counted as live again).
   */
  private reload(run: string, now: number, source?: string): LiveRun {
    this.returning.delete(run);
    const stored = this.store.runVerdict?.(run);
    const pin = stored?.verdict ? this.store.getPin(run)?.pin : undefined;
    if (stored?.settled && stored.verdict) this.gauges.unretain(pin?.contract ?? '', pin?.version ?? '', stored.verdict);
    const state = new RunState(run, this.receiptSource);
    let held = 0;
    for (const r of this.syncReceipts(run)) if (state.add(r) !== 'duplicate') held++;
    const live: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: now, held, receivedAt: now };
    // Its stored verdict stands for the previous one: loading a run again is no transition unless evaluation moves it.
    if (stored?.verdict) live.previous = { contract: pin?.contract ?? '', version: pin?.version ?? '', verdict: stored.verdict };
    this.idle.set(run, now);
    if (source !== undefined) live.source = source;
    this.runs.set(run, live);
    this.heldReceipts += held;
    this.admission.track(live);
    return live;
  }

  /**
   * The runs of a batch that are stored but not in live memory (retired or left idle): marked to be loaded again by
   * their fold. One indexed store read per run new to memory.
   */
  private markReturning(receipts: readonly Receipt[]): void {
    if (!this.retires) return;
    let seen: Set<string> | undefined;
    for (const r of receipts) {
      if (this.runs.has(r.run) || this.returning.has(r.run) || seen?.has(r.run)) continue;
      (seen ??= new Set()).add(r.run);
      if (this.store.runVerdict!(r.run) !== null) this.returning.add(r.run);
    }
  }

  /**
   * A run's stored receipts read synchronously: restores and idle eviction, which only a store with synchronous reads
   * has (a cluster's instance takes runs over by adopt and never evicts).
   */
  private syncReceipts(run: string): Receipt[] {
    if (!this.ahead.synchronous) throw new Error(`run ${run}: the store answers only asynchronously`);
    return this.ahead.receipts(run);
  }

  get liveReceipts(): number {
    return this.heldReceipts;
  }

  /** Runs that left live memory idle since start (topology_live_runs_evicted_total). */
  get evictedRuns(): number {
    return this.admission.evictedRuns;
  }

  /** At a live limit: no room for a new run (--max-live-runs or --max-live-receipts reached). */
  atLiveLimit(): boolean {
    return this.admission.atLiveLimit();
  }

  /** The pin step for a live run: its pinning (the first pin persisted), the pin record kept on the run. */
  private pinRun(live: LiveRun): Pinning {
    return this.pinner.pin(live.state, live.pin, (record) => (live.pin = record));
  }

  /** The evaluate step: the one verdict function; with candidates configured, also the shadow verdicts, kept on `shadowInto`. */
  private evaluateRun(state: RunState, pinning: Pinning, now: number, shadowInto?: LiveRun): RunVerdict {
    const opts = { registry: this.registry };
    const verdict = evaluate(state, pinning, now, opts);
    if (this.opts.shadow?.length && shadowInto) shadowInto.shadow = shadowEvaluate(state, pinning, verdict, this.opts.shadow, now, opts);
    return verdict;
  }

  /**
   * Durably store receipts, then update the touched runs. Resolves only after the commit (an acknowledged receipt
   * is never lost); rejects when the store cannot commit (nothing is acknowledged then).
   */
  async ingest(receipts: Receipt[], source: string, now: number, spanLog?: SpanLogEntry[], limits = true): Promise<IngestOutcome> {
    if (receipts.length === 0 && !spanLog?.length) return { accepted: 0, duplicates: 0, conflicts: 0 };
    const perType: PerType = new Map();
    // `let`: the bodies and digests are let go below (see there); no object holding them is kept.
    let { fresh, digests, bodies, known } = await this.unseen(receipts, perType);
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
    this.markReturning(receipts);
    let res;
    const touched = new Set<string>();
    try {
      const scope = this.opts.sourceScopedEvents && source !== 'auditor' ? sourceTag(source) : undefined;
      let items: StoredReceipt[] = receipts.map((receipt, i) => ({ receipt, source, receivedAt: now, body: bodies[i], scope }));
      let failure: unknown = null;
      ({ res, failure } = await this.appendInChunks(items, spanLog, this.firstPins(receipts)));
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
      // The reservation holds until the new runs are live: the fold below yields to the event loop in slices. A run
      // with a stored conflict is read back by its fold (cluster mode: read ahead).
      const results = res.results;
      const conflicted = receipts.filter((r, i) => results[i] === 'conflict' && this.ownership.owns(r.run)).map((r) => r.run);
      await this.ahead.around(conflicted, () => this.fold(receipts, results, digests, perType, touched, now, source));
      digests = NONE_DIGESTS;
      // The pins the append wrote (or found in force): held by their live runs, so the pin step persists nothing.
      if (res.pins) {
        for (const [run, record] of res.pins) {
          const live = this.runs.get(run);
          if (live && !live.pin) live.pin = record;
        }
      }
      if (failure !== null) {
        for (const run of touched) this.reevaluate(run, now);
        throw failure;
      }
    } finally {
      release();
      if (this.returning.size) for (const r of receipts) this.returning.delete(r.run);
    }
    res.duplicates += known;
    for (const [type, t] of perType) {
      for (const k of ['accepted', 'duplicate', 'conflict'] as const) if (t[k]) this.events.publish('receiptsStored', { type, result: k, n: t[k] });
    }
    const slice = new Slicer();
    let waiting: Promise<void>[] | undefined;
    for (const run of touched) {
      await this.evaluateInSlices(run, now, slice);
      const pending = this.reevaluate(run, now);
      if (pending) (waiting ??= []).push(pending);
      await slice.yieldIfDue();
    }
    if (waiting) await Promise.all(waiting);
    return { accepted: res.accepted, duplicates: res.duplicates, conflicts: res.conflicts, ...(refused ? { refused } : {}) };
  }

  /**
   * The first pins of the runs of a batch that this instance folds and that have no pin record (held by the live run
   * or stored), resolved as the pin step would resolve them (Pinner.firstPin): written by the append, in its
   * transaction. A run that left live memory idle is left to its pin step (its fold reloads every stored receipt).
   */
  private firstPins(receipts: readonly Receipt[]): AppendPin[] | undefined {
    let starts: Map<string, Receipt[]> | undefined;
    let pinned: Set<string> | undefined;
    for (const r of receipts) {
      const listed = starts?.get(r.run);
      if (listed) {
        if (r.type === 'run.start') listed.push(r);
      } else if (!pinned?.has(r.run)) {
        if (this.needsFirstPin(r.run)) (starts ??= new Map()).set(r.run, r.type === 'run.start' ? [r] : []);
        else (pinned ??= new Set()).add(r.run);
      }
    }
    if (!starts) return undefined;
    const pins: AppendPin[] = [];
    for (const [run, list] of starts) {
      const p = this.pinner.firstPin(run, this.runs.get(run)?.state.firstStart() ?? null, list);
      if (p) pins.push(p);
    }
    return pins;
  }

  /** Whether a run of a batch gets its first pin with the append (see firstPins). */
  private needsFirstPin(run: string): boolean {
    if (!this.ownership.owns(run) || this.returning.has(run)) return false;
    const live = this.runs.get(run);
    if (!live) return true;
    if (live.pin) return false;
    const stored = this.store.getPin(run);
    if (stored) live.pin = stored;
    return !stored;
  }

  /**
   * store.append, in chunks of APPEND_CHUNK receipts for a larger batch, yielding to the event loop between them
   * (one transaction of 20,000 receipts held the loop ~80-150 ms of CPU). Each chunk is committed before the next is
   * queued; a run's first pin goes with the chunk that holds the run's first receipt of the batch (in its COMMIT). The
   * results of the chunks committed, in input order, with the pins in force; `failure`: the error of the first chunk
   * that failed after at least one committed (the first chunk's failure is thrown, as store.append's).
   */
  private async appendInChunks(items: StoredReceipt[], spanLog?: SpanLogEntry[], pins?: AppendPin[]): Promise<{ res: AppendResult; failure: unknown }> {
    if (items.length <= APPEND_CHUNK) return { res: await this.store.append(items, spanLog, pins), failure: null };
    const res: AppendResult = { accepted: 0, duplicates: 0, conflicts: 0, results: [] };
    const unsent = new Map((pins ?? []).map((p) => [p.run, p]));
    const slice = new Slicer();
    for (let lo = 0; lo < items.length; lo += APPEND_CHUNK) {
      const hi = Math.min(lo + APPEND_CHUNK, items.length);
      const chunk = items.slice(lo, hi);
      let chunkPins: AppendPin[] | undefined;
      if (unsent.size) {
        for (const it of chunk) {
          const p = unsent.get(it.receipt.run);
          if (p === undefined) continue;
          (chunkPins ??= []).push(p);
          unsent.delete(it.receipt.run);
        }
      }
      let part: AppendResult;
      try {
        // the span log with the last chunk: logged only with the commit that completes the batch
        part = await this.store.append(chunk, hi === items.length ? spanLog : undefined, chunkPins);
      } catch (e) {
        if (lo === 0) throw e;
        return { res, failure: e };
      }
      res.accepted += part.accepted;
      res.duplicates += part.duplicates;
      res.conflicts += part.conflicts;
      for (let i = 0; i < part.results.length; i++) res.results.push(part.results[i]);
      if (part.pins) for (const [run, record] of part.pins) (res.pins ??= new Map()).set(run, record);
      // storedAs (a source-scoped id) is set on the chunk's items, which are the batch's own objects
      await slice.yieldIfDue();
    }
    return { res, failure: null };
  }

  /**
   * The receipts not delivered before: a redelivery of stored content of a live run is a duplicate without a store
   * round trip (see DeliveredDigests). The stored form is made once here and handed to the store with the receipt.
   * A large batch is digested in slices that yield to the event loop.
   */
  private async unseen(incoming: readonly Receipt[], perType: PerType): Promise<{ fresh: Receipt[]; digests: Digest[]; bodies: string[]; known: number }> {
    const fresh: Receipt[] = [];
    const digests: Digest[] = [];
    const bodies: string[] = [];
    let known = 0;
    const slice = new Slicer();
    for (let i = 0; i < incoming.length; i++) {
      if ((i & 255) === 255) await slice.yieldIfDue();
      const r = incoming[i];
      const body = compactReceiptJson(r);
      const d = DeliveredDigests.digestOfJson(body);
      if (this.runs.has(r.run) && this.delivered.has(r.run, r.event, d)) {
        known++;
        countType(perType, r.type, 'duplicate');
      } else {
        fresh.push(r);
        digests.push(d);
        bodies.push(body);
      }
    }
    return { fresh, digests, bodies, known };
  }

  /**
   * The fold step of ingest: each committed receipt into its run's state. A large batch (a post naming 20,000 agents,
   * or 100,000 new runs) is folded in slices of at most ~8 ms that yield to the event loop, so health checks and
   * other clients are answered meanwhile.
   */
  private async fold(receipts: readonly Receipt[], results: readonly ('accepted' | 'duplicate' | 'conflict')[], digests: readonly Digest[], perType: PerType, touched: Set<string>, now: number, source?: string): Promise<void> {
    const ownership = this.ownership;
    const slice = new Slicer();
    let reloaded: Set<string> | undefined;
    for (let i = 0; i < receipts.length; i++) {
      if ((i & 255) === 255) await slice.yieldIfDue();
      const r = receipts[i];
      if (!ownership.owns(r.run)) {
        // Stored and acknowledged; its owner folds it from the shared store.
        countType(perType, r.type, results[i]);
        continue;
      }
      let live = this.runs.get(r.run);
      // Marked before the append, or retired while this batch was being committed (its state is in the store).
      if (!live && (this.returning.has(r.run) || (this.retires && this.store.runVerdict!(r.run)?.verdict != null))) {
        // Back from the store with everything stored, this batch's receipts of the run included.
        live = this.reload(r.run, now, source);
        (reloaded ??= new Set()).add(r.run);
      }
      live ??= this.newLive(r.run, now, undefined, source);
      if (live.receivedAt !== now) this.received(live, now);
      if (reloaded?.has(r.run)) {
        countType(perType, r.type, results[i]);
        touched.add(r.run); // evaluated again (and, settled, it leaves memory again)
        continue;
      }
      let result = this.add(live, r, results[i]);
      if (typeof result !== 'string') result = await result;
      if (result !== 'duplicate') {
        live.held++;
        this.heldReceipts++;
      }
      const outcome = results[i] === 'conflict' || result === 'conflict' ? 'conflict' : result;
      if (outcome !== 'duplicate') touched.add(r.run);
      if (outcome !== 'conflict') this.delivered.record(r.run, r.event, digests[i]);
      countType(perType, r.type, outcome);
    }
  }

  /**
   * Re-evaluates a live run. When the evaluation needs the run's receipts back and the store answers only
   * asynchronously, it is done again once they are read ahead: the returned promise resolves then.
   */
  /** RunState.add, the run read ahead when it needs its receipts back (thrown before the state changed). */
  private add(live: LiveRun, r: Receipt, known?: 'accepted' | 'duplicate' | 'conflict'): AddResult | Promise<AddResult> {
    try {
      return live.state.add(r, known);
    } catch (e) {
      if (!(e instanceof ReadBackMissing)) throw e;
      return this.ahead.around([r.run], () => live.state.add(r, known));
    }
  }

  private reevaluate(run: string, now: number): Promise<void> | undefined {
    const live = this.runs.get(run);
    if (!live) return;
    const before = live.verdict;
    const shadowBefore = live.shadow;
    let after: RunVerdict;
    try {
      after = this.evaluateRun(live.state, this.pinRun(live), now, live);
    } catch (e) {
      if (!(e instanceof ReadBackMissing)) throw e;
      return this.deferReevaluate(run, now);
    }
    live.verdict = after;
    this.runChanged(live);
    live.updatedAt = now;
    this.deadlines.set(run, nextChange(live));
    if (live.shadow && this.events.has('shadowEntered')) {
      for (const sv of live.shadow) {
        const prev = shadowBefore?.find((x) => x.contract === sv.contract && x.version === sv.version);
        const disagreed = sv.disagrees && !prev?.disagrees;
        if (!prev || prev.verdict !== sv.verdict || disagreed) this.events.publish('shadowEntered', { run, shadow: sv, disagreed });
      }
    }
    const a = verdictKey(after);
    const b = before ? verdictKey(before) : (live.previous ?? null);
    live.previous = undefined;
    if (!b || a.verdict !== b.verdict || a.contract !== b.contract || a.version !== b.version) {
      live.enteredAt = now;
      this.events.publish('verdictEntered', { run, ...a, previous: b, result: after });
    }
    const listed = this.store.listsVerdicts === true;
    if (!before || before.verdict !== after.verdict || before.settled !== after.settled || before.findings.length !== after.findings.length || (listed && (!sameListed(before, after) || live.listedFirstAt !== live.state.firstAt))) {
      // A store that lists verdicts (cluster mode) is told whenever what the list views show changed, findings included.
      if (listed) live.listedFirstAt = live.state.firstAt;
      this.store.setVerdictState(run, after.verdict, after.settled, now, { verdict: after, firstAt: live.state.firstAt });
    }
    this.admission.track(live);
    this.events.publish('runEvaluated', { run, verdict: after });
    this.retireIfSettled(run, live, now);
    return undefined;
  }

  /**
   * Evaluates a live run in steps (`evaluateSteps`), yielding to the event loop every ~8 ms, so that the
   * `reevaluate` that follows finds the verdict cached on the state and does the rest (the events published, the
   * verdict state for the store) at once. A run naming 20,000 agents has 40,001 findings: one synchronous evaluation
   * of it held the event loop 0.2-0.5 s. Nothing else is done here: if the run changes meanwhile (another request
   * folds into it), the state does not keep this verdict and `reevaluate` evaluates again; a read back the
   * evaluation needs (cluster mode) is left to `reevaluate`.
   */
  private async evaluateInSlices(run: string, now: number, slice: Slicer): Promise<void> {
    const live = this.runs.get(run);
    if (!live) return;
    try {
      const steps = evaluateSteps(live.state, this.pinRun(live), now, { registry: this.registry });
      while (!steps.next().done) await slice.yieldIfDue();
    } catch (e) {
      if (!(e instanceof ReadBackMissing)) throw e;
    }
  }

  /** A re-evaluation that needs the run's receipts back (cluster mode): read ahead, then evaluated again. */
  private deferReevaluate(run: string, now: number): Promise<void> {
    const pending = this.deferred.get(run);
    if (pending) return pending;
    const done = this.ahead.around([run], () => void this.reevaluate(run, now)).then(
      () => void this.deferred.delete(run),
      (e: unknown) => {
        this.deferred.delete(run);
        this.events.publish('readBackFailed', { run, error: e });
      },
    );
    this.deferred.set(run, done);
    return done;
  }

  /** Resolves when the re-evaluations waiting for a read ahead (cluster mode) are done. */
  async settled(): Promise<void> {
    while (this.deferred.size) await Promise.all([...this.deferred.values()]);
  }

  /**
   * Cluster mode: fold receipts that other instances stored for runs this instance owns (read from the shared store
   * in commit order), then re-evaluate the touched runs. Counts nothing in the receipts metrics: the instance that
   * received them counted them. Repeats (a row seen again after a takeover) are duplicates of the fold.
   */
  async foldStored(receipts: readonly Receipt[], now: number): Promise<number> {
    const touched = new Set<string>();
    for (const r of receipts) {
      if (!this.ownership.owns(r.run)) continue;
      const live = this.runs.get(r.run) ?? this.newLive(r.run, now);
      let result = this.add(live, r);
      if (typeof result !== 'string') result = await result;
      if (this.counted(live, r, result)) touched.add(r.run);
    }
    const waiting: Promise<void>[] = [];
    for (const run of touched) {
      const pending = this.reevaluate(run, now);
      if (pending) waiting.push(pending);
    }
    await Promise.all(waiting);
    return touched.size;
  }

  /** Counts a stored receipt folded into a live run (no store answer known); whether it changed the run. */
  private counted(live: LiveRun, r: Receipt, result: AddResult): boolean {
    if (result === 'duplicate') return false;
    live.held++;
    this.heldReceipts++;
    if (result === 'accepted') this.delivered.record(r.run, r.event, DeliveredDigests.digest(r));
    return true;
  }

  /**
   * Cluster mode: take over a run from the shared store (its partition was just claimed): fold its receipts and
   * evaluate it. The verdict its previous owner stored counts as the previous verdict, so a takeover that changes
   * nothing is no transition (metrics summed over instances count each transition once).
   */
  adopt(stored: StoredRun, receipts: readonly Receipt[], contractContent: string | null, now: number): void {
    if (stored.pin && stored.contractHash && contractContent) this.pinner.learn(stored.contractHash, contractContent, `pinned ${stored.pin.contract}@${stored.pin.version}`);
    const live = this.runs.get(stored.run) ?? this.newLive(stored.run, stored.updatedAt, stored.updatedAt);
    if (stored.pin && stored.contractHash && !live.pin) live.pin = { pin: stored.pin, contractHash: stored.contractHash };
    // The takeover's read is the run's receipts: what its fold and evaluation read back (cluster mode).
    this.ahead.withRead(stored.run, receipts, () => this.adoptFold(stored, live, receipts, now));
  }

  private adoptFold(stored: StoredRun, live: LiveRun, receipts: readonly Receipt[], now: number): void {
    for (const r of receipts) this.counted(live, r, live.state.add(r));
    if (live.state.size === 0 && live.state.conflicts.size === 0) {
      this.runs.delete(stored.run);
      this.events.publish('runForgotten', { live, retired: false });
      this.admission.untrack(live);
      return;
    }
    if (live.verdict === null && stored.verdict) {
      // The stored verdict stands for the previous one: subscribers see a transition only if evaluation moves it.
      const previous = this.evaluateRun(live.state, this.pinRun(live), now, live);
      if (previous.verdict === stored.verdict) {
        live.verdict = previous;
        this.admission.track(live);
        this.runChanged(live);
        this.deadlines.set(stored.run, nextChange(live));
        // Not a transition; the list views' row is written again (its findings may have moved, or never been written), its
        // update time kept (retention counts from it).
        if (this.store.listsVerdicts) {
          live.listedFirstAt = live.state.firstAt;
          this.store.setVerdictState(stored.run, previous.verdict, previous.settled, stored.updatedAt, { verdict: previous, firstAt: live.state.firstAt });
        }
        return;
      }
    }
    this.reevaluate(stored.run, now);
  }

  /** Cluster mode: forget a live run (its partition went to another instance). Nothing is deleted from the store. */
  drop(run: string): boolean {
    const live = this.runs.get(run);
    if (!live) return false;
    this.forget(run, live);
    return true;
  }

  /** The ids of the live runs this instance holds. */
  liveRunIds(): string[] {
    return [...this.runs.keys()];
  }

  /** The live runs (read-only use: test models, e.g. a walk the incremental gauges must agree with). */
  heldRuns(): IterableIterator<LiveRun> {
    return this.runs.values();
  }

  /** A restored run whose verdict differs from the one stored before the restart (time passed, a contract changed): a transition. */
  private restoredChange(stored: { run: string; verdict: Verdict | null; pin: Pin | null }, now: RunVerdict, at: number): void {
    const previous = { contract: stored.pin?.contract ?? '', version: stored.pin?.version ?? '', verdict: stored.verdict! };
    this.events.publish('verdictEntered', { run: stored.run, ...verdictKey(now), previous, result: now });
    this.store.setVerdictState(stored.run, now.verdict, now.settled, at);
  }

  /** Move verdicts with time: re-evaluate the runs whose next deadline passed. */
  tick(now: number): number {
    const due = this.deadlines.popDue(now);
    for (const run of due) this.reevaluate(run, now);
    for (const run of this.retireAt.popDue(now)) {
      const live = this.runs.get(run);
      if (live) this.retireIfSettled(run, live, now);
    }
    return due.length;
  }

  /**
   * Prune settled runs idle for longer than the retention; memory is bounded by live runs. A run in any state is
   * handled: one created by an ingest's fold and not evaluated yet (verdict null) is not settled, so it stays.
   */
  prune(now: number): number {
    let n = 0;
    if (!this.retires) {
      for (const [run, live] of this.runs) {
        if (live.verdict?.settled && now - live.updatedAt > this.opts.retentionMs) {
          this.forget(run, live);
          n++;
        }
      }
    } else {
      // Retired runs (not in memory) leave the topology_runs count they kept when the store deletes them.
      // A run still held that the store deletes leaves memory with it (the lists read the store).
      // Every batch: a run left in the store would leave its count a second time at the next prune.
      n += this.retireStored(this.store.prunableRuns!(this.opts.retentionMs, now));
      while (this.store.prune(this.opts.retentionMs, now) > 0);
      return n;
    }
    this.store.prune(this.opts.retentionMs, now);
    return n;
  }

  /**
   * The retention prune as the server runs it: a single instance's store deletes the settled runs past the retention
   * in batches that yield (`slicer`), and each batch's runs leave memory and the gauges in the same turn as their
   * deletion (a cost of what passed the retention since the last call, never a scan of what is stored). Any other
   * store: `prune`. Returns the runs that left memory.
   */
  async pruneSliced(now: number, slicer?: StoreSlicer): Promise<number> {
    if (!this.retires || !this.store.pruneSliced) return this.prune(now);
    let n = 0;
    await this.store.pruneSliced(this.opts.retentionMs, now, slicer, (rows) => (n += this.retireStored(rows)));
    return n;
  }

  /** Stored runs the store deletes: a held one leaves memory, the others the topology_runs count they kept. */
  private retireStored(rows: readonly PrunableRun[]): number {
    let n = 0;
    for (const p of rows) {
      const live = this.runs.get(p.run);
      if (live) {
        this.forget(p.run, live);
        n++;
      } else if (p.verdict !== null) this.gauges.unretain(p.contract, p.version, p.verdict);
    }
    return n;
  }

  /**
   * A live run's verdict and receipts. The receipts are read from the store (live state keeps none): the folded ones
   * in arrival order, then every version of each conflicted event id (conflicts in the order they appeared).
   */
  get(run: string): RunView | null {
    // A store that answers only asynchronously (cluster mode): a run's receipts are read by view() (fetch: any run).
    if (!this.store.synchronousReads) throw new Error('AuditEngine.get reads the store synchronously: a cluster instance answers view() or fetch()');
    const live = this.runs.get(run);
    if (!live) return this.retires ? this.getEvicted(run) : null;
    return this.viewOf(live, this.store.runReceipts(run));
  }

  /** A held run's verdict, first receipt time and update time, without its receipts (null: not held, or not evaluated yet). */
  heldSummary(run: string): { verdict: RunVerdict; firstAt: number; updatedAt: number } | null {
    const live = this.runs.get(run);
    return live?.verdict ? { verdict: live.verdict, firstAt: live.state.firstAt, updatedAt: live.updatedAt } : null;
  }

  /** Whether the store answers a run's receipts synchronously (get() then does; else view() and fetch() read them). */
  get synchronousReads(): boolean {
    return this.store.synchronousReads;
  }

  /** `get` for any store: a live run's verdict and its receipts read from the store (asynchronously in cluster mode). */
  async view(run: string): Promise<RunView | null> {
    if (this.store.synchronousReads) return this.get(run);
    const live = this.runs.get(run);
    if (!live) return null;
    const receipts = await this.store.readReceipts(run);
    const again = this.runs.get(run); // forgotten meanwhile: not held here
    return again ? this.viewOf(again, receipts) : null;
  }

  /** When a live run's first receipt was made (null: not held here). */
  firstAtOf(run: string): number | null {
    return this.runs.get(run)?.state.firstAt ?? null;
  }

  private viewOf(live: LiveRun, stored: Receipt[]): RunView {
    const receipts = viewReceipts(stored, live.state.conflicts);
    return { verdict: live.verdict, receipts, updatedAt: live.updatedAt, ...(this.opts.shadow?.length ? { shadow: live.shadow ?? [] } : {}) };
  }

  /** A run that left live memory idle, read from the store and evaluated now (it stays out of live memory). */
  private getEvicted(run: string, now = Date.now(), updatedAt = now): RunView | null {
    const receipts = this.syncReceipts(run);
    if (receipts.length === 0) return null;
    const record = this.store.getPin(run);
    const content = record ? this.store.getContractContent(record.contractHash) : null;
    const d: DetachedRun = { run, pin: record ?? null, contractContent: content ?? null, receipts, updatedAt };
    const judged = this.pinner.judgeDetached(d, now);
    return { verdict: judged.verdict, receipts: viewReceipts(receipts, judged.conflicts), updatedAt };
  }

  /** A run's verdict: held in memory, else (a run that left it) evaluated from the store. */
  verdictOf(run: string): RunVerdict | null {
    const live = this.runs.get(run);
    if (live) return live.verdict ?? null;
    return this.retires ? (this.getEvicted(run)?.verdict ?? null) : null;
  }

  list(filter: ListFilter): ListedRun[] {
    const out: ListedRun[] = [];
    const now = filter.now ?? Date.now();
    for (const live of this.runs.values()) {
      const v = live.verdict;
      if (!v) continue; // created by an ingest's fold, not evaluated yet
      if (filter.verdict && v.verdict !== filter.verdict) continue;
      if (filter.contract && v.pin?.contract !== filter.contract) continue;
      const alert = this.alertStateOf(live.state.run, now, filter.windowMs, filter.stallMs);
      if (!matchesAlertFilter(alert, filter)) continue;
      out.push({ verdict: v, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert, enteredAt: live.enteredAt ?? live.updatedAt });
    }
    out.sort(listOrder(filter));
    return out.slice(0, filter.limit ?? 100);
  }

  /**
   * A page of the run list, after the cursor `after` (the `next` of the page before; null: the last page). A single
   * instance lists the store (settled runs are not in memory) in keyset order, newest first by first receipt (server
   * time); held runs show their live verdict and alert state, the others their verdict evaluated from the store. A
   * filter on an alert state being true lists held runs only (only they can have one). A cluster lists as listAll
   * (one page).
   */
  async listPage(filter: ListFilter & { after?: string }, now: number): Promise<{ runs: ListedRun[]; next: string | null }> {
    const limit = Math.max(1, filter.limit ?? 100);
    const after = filter.after ? parseCursor(filter.after) : undefined;
    if (!this.retires) return { runs: await this.listAll({ ...filter, limit }, now), next: null };
    if (filter.acked || filter.alerting || filter.stalled) return this.heldPage(filter, limit, after, now);
    const out: ListedRun[] = [];
    let cursor = after;
    let sliceStart = performance.now();
    // Rows filtered out by an alert state (false) are skipped: read on, a bounded number of store pages.
    for (let pages = 0; pages < 64 && out.length < limit; pages++) {
      const want = limit - out.length;
      const rows = this.store.listRuns!({ verdict: filter.verdict, contract: filter.contract, oldest: filter.oldest, after: cursor, limit: want });
      for (const row of rows) {
        // A run that left memory is evaluated from the store: a long page yields to the event loop every ~20 ms.
        if (performance.now() - sliceStart > LIST_SLICE_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
        cursor = { firstAt: row.firstAt, run: row.run };
        const listed = this.listedOf(row.run, row.updatedAt, filter, now);
        if (listed) out.push(listed);
      }
      if (rows.length < want) return { runs: out, next: null };
    }
    const more = cursor && this.store.listRuns!({ verdict: filter.verdict, contract: filter.contract, oldest: filter.oldest, after: cursor, limit: 1 }).length > 0;
    return { runs: out, next: more ? cursorOf(cursor!) : null };
  }

  /** A stored run as the run list shows it (null: it does not pass the filter). */
  private listedOf(run: string, updatedAt: number, filter: ListFilter, now: number): ListedRun | null {
    const live = this.runs.get(run);
    let row: ListedRun;
    if (live) {
      if (!live.verdict) return null;
      row = { verdict: live.verdict, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert: this.alertStateOf(run, now, filter.windowMs, filter.stallMs), enteredAt: live.enteredAt ?? live.updatedAt };
    } else {
      const v = this.getEvicted(run, now, updatedAt);
      if (!v) return null;
      let firstAt = Infinity;
      for (const r of v.receipts) {
        const t = millisOf(r.at);
        if (t < firstAt) firstAt = t;
      }
      // Left live memory settled: past its alert window (or never alerting), never stalled.
      const ack = this.store.getAck!(run);
      // The stored verdict state is written when the verdict changes: its time is when the run entered it.
      row = { verdict: v.verdict, updatedAt: v.updatedAt, firstAt, alert: { acked: ack?.verdict === v.verdict.verdict, alerting: false, stalled: false }, enteredAt: v.updatedAt };
    }
    if (filter.verdict && row.verdict.verdict !== filter.verdict) return null;
    if (filter.contract && row.verdict.pin?.contract !== filter.contract) return null;
    return matchesAlertFilter(row.alert, filter) ? row : null;
  }

  /** A page of the held runs (an alert-state filter), in list order, after the cursor. */
  private heldPage(filter: ListFilter, limit: number, after: { firstAt: number; run: string } | undefined, now: number): { runs: ListedRun[]; next: string | null } {
    const order = listOrder(filter);
    let all = this.list({ ...filter, now, limit: Number.MAX_SAFE_INTEGER });
    if (after) {
      const mark: ListedRun = { verdict: { run: after.run } as RunVerdict, firstAt: after.firstAt, updatedAt: 0, alert: null };
      all = all.filter((r) => order(r, mark) > 0);
    }
    const runs = all.slice(0, limit);
    const last = runs[runs.length - 1];
    return { runs, next: all.length > limit && last ? cursorOf({ firstAt: last.firstAt, run: last.verdict.run }) : null };
  }

  /** Stored runs per verdict (a single instance; null: the store does not count, see listAll's counts). */
  verdictCounts(filter: { contract?: string }): Record<string, number> | null {
    return this.retires ? this.store.verdictCounts!(filter) : null;
  }

  /** The candidates shadow-evaluated by this engine. */
  get shadowCandidates(): readonly Contract[] {
    return this.opts.shadow ?? [];
  }

  /** Per candidate: shadow verdicts counted over the live runs, disagreements and the edges behind them. */
  shadowSummary(limit = 200) {
    const runs = [...this.runs.values()].filter((l) => l.verdict).map((l) => ({ verdict: l.verdict, shadow: l.shadow ?? [] }));
    return summarizeShadows(this.opts.shadow ?? [], runs, limit);
  }

  // --- pins of the run-scope rule (pinning.ts)

  /**
   * The contract the run-scope rule checks a run-level receipt against (src/ingest/trust.ts): the run's pinned
   * contract; before any pin, the one its earliest run.start (stored, or among `batch`) names, else the default.
   */
  scopeContract(run: string, batch: readonly Receipt[] = []): Contract | null {
    const live = this.runs.get(run);
    return this.pinner.scopeContract(run, live?.pin, live?.state.firstStart() ?? null, batch);
  }

  /** The stored handoff receipts of a run (the handoff party rule reads which parties its handoffs named). */
  storedHandoffReceipts(run: string): Receipt[] {
    const live = this.runs.get(run);
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

  listAll(filter: ListFilter, now: number): Promise<ListedRun[]> {
    return this.reads.listAll(filter, now);
  }

  /** The pure verdict of a run read from the shared store (its stored pin, else the pin its receipts resolve to). */
  evaluateDetached(d: DetachedRun, now: number): RunVerdict {
    return this.pinner.evaluateDetached(d, now);
  }

  // --- acknowledgements (acks.ts); the gauges hear of them (runAcked)

  /** Acknowledge a run's current verdict: it leaves the alerting series until it enters another verdict. */
  ack(run: string, now: number, who: AckWho = {}): { acked: boolean; at: string; record: AckRecord } | null {
    const live = this.runs.get(run);
    if (!live && this.retires) {
      // A run that left live memory (settled): its verdict from the store, its acknowledgement stored by the caller.
      const v = this.verdictOf(run);
      if (!v) return null;
      const stored = this.store.getAck!(run);
      if (stored?.verdict === v.verdict) return { acked: false, at: new Date(stored.at).toISOString(), record: stored };
      const record: AckRecord = { verdict: v.verdict, by: who.by ?? null, at: now, reason: who.reason ?? null };
      return { acked: true, at: new Date(now).toISOString(), record };
    }
    const res = live ? ackRun(live, now, who) : null;
    if (res?.acked) this.events.publish('runAcked', { live: live! });
    return res;
  }

  /** The latest acknowledgement of a live run (null when none); `current` when it covers the run's verdict now. */
  ackOf(run: string): (AckRecord & { current: boolean }) | null {
    const live = this.runs.get(run);
    if (!live && this.retires) {
      const stored = this.store.getAck!(run);
      return stored ? { ...stored, current: stored.verdict === this.verdictOf(run)?.verdict } : null;
    }
    return ackOf(live);
  }

  /** Cluster mode: an acknowledgement recorded in the shared store (at any instance), applied by the run's owner. */
  applyAck(run: string, verdict: string, at: number, who: AckWho = {}): boolean {
    const live = this.runs.get(run);
    if (!applyAck(live, verdict, at, who)) return false;
    this.events.publish('runAcked', { live: live! });
    return true;
  }

  ackedOf(run: string): string | null {
    return ackedAtOf(this.runs.get(run));
  }

  // --- gauges (gauges.ts)

  /** Runs per (contract, version, verdict), for the topology_runs gauge (rows with at least one run). */
  gauge(): GaugeRow[] {
    return this.gauges.gauge();
  }

  /** Alerting rows (within `windowMs`, unacknowledged) and stalled rows (latest receipt older than `stallMs`). */
  alerting(now: number, windowMs: number, stallMs: number): { alerting: AlertRow[]; stalled: StallRow[] } {
    return this.gauges.alerting(now, windowMs, stallMs, () => this.runs.values(), (run) => this.runs.get(run));
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

  /** Whether a live run counts in the alerting / stalled gauges at `now` (the window and stall time last used, or the ones given). */
  /** When a held run entered its current verdict (ms since epoch), or null for a run this instance does not hold. */
  enteredAtOf(run: string): number | null {
    const live = this.runs.get(run);
    return live ? (live.enteredAt ?? live.updatedAt) : null;
  }

  alertStateOf(run: string, now: number, windowMs?: number, stallMs?: number): { acked: boolean; alerting: boolean; stalled: boolean } | null {
    const live = this.runs.get(run);
    return live ? alertState(live, now, windowMs ?? this.gauges.windowMs, stallMs ?? this.gauges.stallMs) : null;
  }

  get liveRuns(): number {
    return this.runs.size;
  }

  /** Runs retired or evicted are looked up in the store (tests: nothing per run is kept for them). */
  get returningRuns(): number {
    return this.returning.size;
  }

  get scheduledDeadlines(): number {
    return this.deadlines.size;
  }
}
