/**
 * The live auditor, in four steps per batch: append (the store commits the receipts) -> fold (RunState.add) ->
 * pin (resolve the run's pin, persist the first one) -> evaluate (the pure `evaluate` of src/core, which reads
 * and writes no store). Keeps one RunState per live run in memory (rebuilt from the store on start),
 * re-evaluates only the runs a batch touched, and moves verdicts with time through a deadline heap fed by each
 * verdict's nextChangeAt.
 */
import { EventEmitter } from 'node:events';
import { contractFromCanonical, type Contract } from '../core/contract.js';
import { RunState, evaluate, resolvePin, type Pinning, type ReceiptSource } from '../core/classify.js';
import type { ContractRegistry } from '../core/registry.js';
import { isRunId } from '../core/receipt.js';
import { shadowEvaluate, summarizeShadows, type ShadowVerdict } from '../core/shadow.js';
import type { AckRecord, Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import type { PinRecord, ReceiptStore, SpanLogEntry, StoredReceipt, LiveRun as StoredRun } from '../store/index.js';
import { DeadlineHeap } from './heap.js';
import { DeliveredDigests, type Digest } from './delivered.js';
import { compactReceiptJson } from '../core/canonical.js';
import { pinGoverns } from '../core/pin.js';

export interface EngineHooks {
  /** A run entered a verdict (also on first evaluation). */
  verdictEntered?: (run: string, contract: string, version: string, verdict: Verdict, previous: { contract: string; version: string; verdict: Verdict } | null) => void;
  receipts?: (type: string, result: 'accepted' | 'duplicate' | 'conflict', n: number) => void;
  /** Runs left live memory idle (see AuditEngine.evictIdle). */
  idleEvicted?: (n: number) => void;
  /** A run's shadow verdict under a candidate changed (also on first evaluation); `disagreed`: it started to disagree. */
  shadowEntered?: (run: string, shadow: ShadowVerdict, disagreed: boolean) => void;
}

/**
 * What the engine needs of a store: the embedded SQLite ReceiptStore, or (with `serve --store postgres://...`) the
 * cluster's view of the shared store (src/cluster/engine-store.ts), whose reads answer from what this instance holds.
 */
export type EngineStore = Pick<
  ReceiptStore,
  'append' | 'getPin' | 'setPin' | 'setVerdictState' | 'putContractContent' | 'getContractContent' | 'runReceipts' | 'iterateLiveRuns' | 'prune' | 'spanLog' | 'deleteSpanLogUpTo' | 'pruneSpanLog'
>;

/** A run this instance does not hold, read from the shared store (cluster mode): what evaluating it needs. */
export interface DetachedRun {
  run: string;
  pin: PinRecord | null;
  /** The pinned contract's canonical content (by pin.contractHash), when pinned. */
  contractContent: string | null;
  receipts: Receipt[];
  updatedAt: number;
}

/** Runs held by other instances of a cluster, read from the shared store on demand (see AuditEngine.fetch). */
/** Runs read from the shared store per query by the list views (listAll). */
const LIST_GROUP = 500;

export interface RemoteRuns {
  /** A run as stored; a cached read no older than `maxAgeMs` (default: the reader's cache time) may answer. */
  load(run: string, maxAgeMs?: number): Promise<DetachedRun | null>;
  /** Many runs in a few queries (the list views), by run; runs not stored are absent. */
  loadMany?(runs: readonly string[]): Promise<Map<string, DetachedRun>>;
  /** The run's stored pin and its contract's content (for the run-scope rule of a run held elsewhere). */
  pin(run: string): Promise<{ record: PinRecord; contractContent: string | null } | null>;
  /** Runs of the whole cluster per verdict, as their owners last stored them (optionally of one pinned contract). */
  counts(filter: { contract?: string }): Promise<Record<string, number>>;
  /** Runs of the whole cluster, newest first, as the shared store lists them (verdict as last stored by the owner). */
  list(filter: { verdict?: string; contract?: string; limit: number }): Promise<{ run: string; firstAt: number; updatedAt: number }[]>;
  /** The run's latest acknowledgement, made at any instance. */
  ack?(run: string): Promise<AckRecord | null>;
}

export interface EngineOptions {
  defaultContract?: string;
  /** Settled runs idle for longer than this are pruned from store and memory. */
  retentionMs: number;
  hooks?: EngineHooks;
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
   * Cluster mode: whether this instance owns a run (holds it live, runs its deadlines, exports its gauges). Receipts
   * of runs it does not own are stored and acknowledged, and folded by their owner (foldStored). Default: every run.
   */
  owns?: (run: string) => boolean;
  /** Cluster mode: runs owned by other instances, evaluated on demand from the shared store (fetch, listAll). */
  remote?: RemoteRuns;
  /**
   * Cluster mode: whether the instance that owns a run is at its live limit (as its last heartbeat said), and which
   * runs the shared store already has. Receipts that would start a new run owned by a full instance are refused
   * (LiveLimitError), as that instance would refuse them itself.
   */
  ownerFull?: { full(run: string): boolean; known(runs: readonly string[]): Promise<Set<string>> };
}

/** Refused because a live-state cap is reached: nothing of the request was stored; retry later. */
export class LiveLimitError extends Error {
  constructor(readonly limit: 'runs' | 'receipts', message: string, readonly retryAfterSeconds = 30) {
    super(message);
  }
}

/** A row of the store that cannot be read back, named by table and row. */
export class RestoreError extends Error {}

interface LiveRun {
  state: RunState;
  verdict: RunVerdict;
  updatedAt: number;
  /** The run's pin record once one exists (a pin never changes once written), so evaluations skip the store. */
  pin?: PinRecord;
  /** The verdict the topology_runs gauge last counted this run under, and its row (see AuditEngine.gauge). */
  gaugeOf?: RunVerdict;
  gaugeId?: string;
  /** The alerting row (`contract\0verdict`) and stalled row (contract) this run is counted in (see alerting). */
  alertId?: string;
  stallId?: string;
  /** Shadow verdicts under the candidates (with `shadow` configured). */
  shadow?: ShadowVerdict[];
  /** When the run entered its current verdict (drives the alert window). */
  enteredAt?: number;
  /** The verdict an operator acknowledged (a new verdict alerts again); the record is stored by serve. */
  ackedVerdict?: Verdict;
  ackedAt?: number;
  /** The latest acknowledgement (who, when, why), also once the run left the acknowledged verdict. */
  ackRecord?: AckRecord;
  /** Receipts this run holds in memory (distinct contents). */
  held: number;
  /** Server time of the run's latest receipt (idle eviction: a sender's `at` cannot make a run look busy). */
  receivedAt?: number;
}

/** A source's tag in a source-scoped event id: the token's hash prefix (`token-3-ab12cd34` -> `ab12cd34`), id characters only. */
export function sourceTag(source: string): string {
  return source.replace(/^token-\d+-/, '').replace(/[^A-Za-z0-9_.:#+=-]/g, '-').slice(0, 40) || 'source';
}

/** Yields to the event loop once ~8 ms of synchronous work passed since the last yield (see AuditEngine.fold). */
class Slicer {
  private since = performance.now();
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.since < 8) return;
    await new Promise<void>((r) => setImmediate(r));
    this.since = performance.now();
  }
}

/** What the run lists filter on: verdict, pinned contract, and (for held runs) the alert state at `now`. */
export interface ListFilter {
  verdict?: string;
  contract?: string;
  limit?: number;
  /** Oldest first (by first receipt) instead of newest first. */
  oldest?: boolean;
  acked?: boolean;
  alerting?: boolean;
  stalled?: boolean;
  now?: number;
  /** The alert window and stall time (serve's --alert-window, --stall-after). */
  windowMs?: number;
  stallMs?: number;
}

export interface ListedRun {
  verdict: RunVerdict;
  updatedAt: number;
  firstAt: number;
  /** Held runs only (a run another instance owns: null). */
  alert: { acked: boolean; alerting: boolean; stalled: boolean } | null;
}

function matchesAlertFilter(alert: ListedRun['alert'], f: ListFilter): boolean {
  for (const k of ['acked', 'alerting', 'stalled'] as const) {
    if (f[k] === undefined) continue;
    if ((alert?.[k] ?? false) !== f[k]) return false;
  }
  return true;
}

function listOrder(f: ListFilter): (a: ListedRun, b: ListedRun) => number {
  const sign = f.oldest ? 1 : -1;
  return (a, b) => sign * (a.firstAt - b.firstAt) || (a.verdict.run < b.verdict.run ? -1 : 1);
}

/** Verdicts that alert: unsafe topology, false completion, incomplete and uncertain. */
export const ALERT_VERDICTS: ReadonlySet<Verdict> = new Set<Verdict>(['stale_contract', 'unknown_agent', 'forbidden_edge', 'ambiguous_route', 'false_complete', 'incomplete', 'uncertain']);

type GaugeRow = { contract: string; version: string; verdict: Verdict; count: number };

export interface IngestOutcome {
  accepted: number;
  duplicates: number;
  conflicts: number;
}

/** The earliest time the run's verdict or a shadow verdict may change with time alone. */
function nextChange(live: LiveRun): number | null {
  let t = live.verdict.nextChangeAt ?? Infinity;
  for (const s of live.shadow ?? []) if (s.nextChangeAt !== null && s.nextChangeAt < t) t = s.nextChangeAt;
  return Number.isFinite(t) ? t : null;
}

const key = (v: RunVerdict) => (v.pin ? { contract: v.pin.contract, version: v.pin.version, verdict: v.verdict } : { contract: '', version: '', verdict: v.verdict });

export class AuditEngine extends EventEmitter {
  private readonly runs = new Map<string, LiveRun>();
  /** topology_runs rows by `contract\0version\0verdict`, and the live runs whose verdict was set since gauge() last ran. */
  private readonly gaugeRows = new Map<string, GaugeRow>();
  private readonly gaugeDirty = new Set<LiveRun>();
  /**
   * The alerting and stalled gauges, counted like topology_runs: rows, the runs changed since alerting() last ran,
   * and per run the time its row may change with time alone (leaving the alert window, becoming stalled). The window
   * and stall they were counted for: other values in a call count again from scratch.
   */
  private readonly alertRows = new Map<string, { contract: string; verdict: Verdict; count: number }>();
  private readonly stallRows = new Map<string, { contract: string; count: number }>();
  private readonly alertDirty = new Set<LiveRun>();
  /** The live runs counted in an alerting or stalled row (what alertingRuns lists). */
  private readonly alertMembers = new Map<string, LiveRun>();
  private alertTimers = new DeadlineHeap();
  private alertWindowMs = NaN;
  private alertStallMs = NaN;
  private readonly deadlines = new DeadlineHeap();
  private readonly pinnedContracts = new Map<string, Contract>(); // by content hash
  private heldReceipts = 0;
  /** Runs that left live memory idle (see evictIdle): loaded again from the store on their next receipt or read. */
  private readonly evicted = new Set<string>();
  /** Runs that left live memory idle since start (topology_live_runs_evicted_total). */
  evictedRuns = 0;
  /** New runs and receipts of ingests that passed the live caps and have not landed yet. */
  private reservedRuns = 0;
  private reservedReceipts = 0;
  /** Cluster mode: pins of runs other instances hold, read for the run-scope rule (bounded, oldest dropped first). */
  private readonly foreignPins = new Map<string, PinRecord>();
  /** Digests of stored receipts of live runs: a redelivery is recognised without the store (see DeliveredDigests). */
  private readonly delivered: DeliveredDigests;
  /**
   * Where live RunStates read their receipts back (a conflict's rebuild, the events of an unknown agent or a foreign
   * version): the store. A RunState holds aggregates and a digest per event, not the receipts.
   */
  private readonly receiptSource: ReceiptSource = (run) => this.store.runReceipts(run);

  constructor(
    readonly registry: ContractRegistry,
    readonly store: EngineStore,
    private readonly opts: EngineOptions,
  ) {
    super();
    this.setMaxListeners(0);
    this.delivered = new DeliveredDigests(opts.maxDeliveredDigests);
    for (const c of registry.all()) this.pinnedContracts.set(c.hash, c);
  }

  /**
   * Rebuild live state from the store; refuses a contract file changed under a version a run is pinned to.
   * Streams the runs page by page (never every row at once). A row that cannot be read back stops the start with
   * an error naming its table and row.
   */
  restore(now: number): { runs: number; receipts: number } {
    let receipts = 0;
    const changed: string[] = [];
    for (const lr of this.store.iterateLiveRuns()) {
      try {
        if (lr.pin && lr.contractHash) {
          const current = this.registry.get(lr.pin.contract, lr.pin.version);
          if (current && current.hash !== lr.contractHash) changed.push(`${lr.pin.contract}@${lr.pin.version} (pinned by run ${lr.run})`);
          if (!this.pinnedContracts.has(lr.contractHash)) {
            const content = this.store.getContractContent(lr.contractHash);
            if (content) {
              try {
                this.pinnedContracts.set(lr.contractHash, contractFromCanonical(content, `pinned ${lr.pin.contract}@${lr.pin.version}`));
              } catch (e) {
                throw new RestoreError(`store table contracts, row hash ${lr.contractHash} (pinned by run ${lr.run}): ${(e as Error).message}`);
              }
            }
          }
        }
        const state = new RunState(lr.run, this.receiptSource);
        let held = 0;
        for (const r of this.store.runReceipts(lr.run)) {
          if (state.add(r) !== 'duplicate') held++;
          receipts++;
        }
        if (state.size === 0 && state.conflicts.size === 0) continue;
        const restored: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: lr.updatedAt, enteredAt: lr.updatedAt, held, receivedAt: lr.updatedAt };
        restored.verdict = this.evaluateRun(state, this.pinRun(state), now, restored);
        const replaced = this.runs.get(lr.run);
        if (replaced) this.uncount(replaced);
        this.runs.set(lr.run, restored);
        this.changed(restored);
        this.heldReceipts += held;
        this.deadlines.set(lr.run, nextChange(restored));
        if (lr.verdict && lr.verdict !== restored.verdict.verdict) {
          restored.enteredAt = now;
          this.restoredChange(lr, restored.verdict, now);
        }
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
   * The live caps: throws LiveLimitError when the receipts would start new runs past --max-live-runs, or hold
   * receipts past --max-live-receipts. Otherwise reserves room until `done` is called (after the ingest landed).
   */
  private reserve(receipts: readonly Receipt[], now: number): () => void {
    const maxRuns = this.opts.maxLiveRuns ?? Infinity;
    const maxReceipts = this.opts.maxLiveReceipts ?? Infinity;
    if (maxRuns === Infinity && maxReceipts === Infinity) return () => {};
    let newRuns = 0;
    let seen: Set<string> | undefined;
    for (const r of receipts) {
      if (this.runs.has(r.run)) continue;
      seen ??= new Set();
      if (!seen.has(r.run)) {
        seen.add(r.run);
        newRuns++;
      }
    }
    if (newRuns > 0) this.evictIdle(now, this.runs.size + this.reservedRuns + newRuns - maxRuns, this.heldReceipts + this.reservedReceipts + receipts.length - maxReceipts);
    const held = this.heldReceipts + this.reservedReceipts;
    if (newRuns > 0 && this.runs.size + this.reservedRuns + newRuns > maxRuns) {
      throw new LiveLimitError('runs', `live-run limit reached (${maxRuns} runs held; --max-live-runs): receipts of new runs are refused until runs are pruned or idle long enough to leave live memory (--idle-evict-after); retry later`);
    }
    if (receipts.length > 0 && held + receipts.length > (newRuns > 0 ? maxReceipts : maxReceipts * 1.1)) {
      throw new LiveLimitError('receipts', `live-receipt limit reached (${maxReceipts} receipts held; --max-live-receipts): retry later`);
    }
    this.reservedRuns += newRuns;
    this.reservedReceipts += receipts.length;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.reservedRuns -= newRuns;
      this.reservedReceipts -= receipts.length;
    };
  }

  /**
   * Makes room under the live caps: runs that received no receipt for --idle-evict-after leave live memory, the
   * longest idle first, until `runs` runs and `receipts` receipts are freed (at least 1/64 of the run cap at once, so
   * a full server does not scan its runs for every new run). They stay in the store; their next receipt (or a read)
   * loads them again. Returns how many left.
   */
  private evictIdle(now: number, runs: number, receipts: number): number {
    const idleMs = this.opts.idleEvictMs;
    if (idleMs === undefined || (runs <= 0 && receipts <= 0) || this.opts.owns) return 0;
    const idle: [number, string, LiveRun][] = [];
    for (const [run, live] of this.runs) {
      const at = live.receivedAt ?? live.updatedAt;
      if (now - at >= idleMs) idle.push([at, run, live]);
    }
    if (idle.length === 0) return 0;
    idle.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1));
    const minRuns = Math.max(runs, Math.ceil((this.opts.maxLiveRuns ?? 0) / 64));
    let n = 0;
    let freed = 0;
    for (const [, run, live] of idle) {
      if (n >= minRuns && freed >= receipts) break;
      this.runs.delete(run);
      this.uncount(live);
      this.heldReceipts -= live.held;
      freed += live.held;
      this.delivered.forget(run);
      this.deadlines.set(run, null);
      this.evicted.add(run);
      n++;
    }
    this.evictedRuns += n;
    if (n) this.opts.hooks?.idleEvicted?.(n);
    return n;
  }

  /** A run that left live memory idle, loaded again from the store (its receipts, stored pin and verdict). */
  private reload(run: string, now: number): LiveRun {
    this.evicted.delete(run);
    const state = new RunState(run, this.receiptSource);
    let held = 0;
    for (const r of this.store.runReceipts(run)) if (state.add(r) !== 'duplicate') held++;
    const live: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: now, held, receivedAt: now };
    this.runs.set(run, live);
    this.heldReceipts += held;
    return live;
  }

  /** Whether a run left live memory idle (it is in the store; see evictIdle). */
  isEvicted(run: string): boolean {
    return this.evicted.has(run);
  }

  get liveReceipts(): number {
    return this.heldReceipts;
  }

  /** At a live limit: no room for a new run (--max-live-runs or --max-live-receipts reached). */
  atLiveLimit(): boolean {
    return this.runs.size >= (this.opts.maxLiveRuns ?? Infinity) || this.heldReceipts >= (this.opts.maxLiveReceipts ?? Infinity);
  }

  /** Cluster mode: refuses receipts that would start new runs owned by an instance at its live limit (see ownerFull). */
  private async refuseForFullOwners(receipts: readonly Receipt[]): Promise<void> {
    const full = this.opts.ownerFull;
    const owns = this.opts.owns;
    if (!full || !owns) return;
    let candidates: Set<string> | undefined;
    for (const r of receipts) if (!owns(r.run) && full.full(r.run)) (candidates ??= new Set()).add(r.run);
    if (!candidates) return;
    const known = await full.known([...candidates]);
    for (const run of candidates) {
      if (!known.has(run)) {
        throw new LiveLimitError('runs', 'the instance that owns this run\'s partition is at its live limit (--max-live-runs or --max-live-receipts): receipts of new runs in its partitions are refused until it has room; retry later');
      }
    }
  }

  /**
   * The pin step of append -> fold -> pin -> evaluate: the run's pinning, and its first pin persisted (the contract
   * content, then the pin row). Evaluation itself (evaluateRun) reads no store and writes none.
   */
  private pinRun(state: RunState, live?: LiveRun): Pinning {
    const { pinning, persist } = this.resolvePinning(state, live);
    if (persist && pinning.ok) {
      this.store.putContractContent(pinning.contract.hash, pinning.contract.contract, pinning.contract.version, pinning.contract.canonical);
      const pinned = this.store.setPin(state.run, pinning.pin, pinning.contract.hash);
      if (live) live.pin = pinned;
    }
    return pinning;
  }

  /** The run's pinning from its stored pin (held in memory once read) and its receipts; `persist`: no pin is stored yet. */
  private resolvePinning(state: RunState, live?: LiveRun): { pinning: Pinning; persist: boolean } {
    const record = live?.pin ?? this.store.getPin(state.run);
    if (live && record) live.pin = record;
    const start = state.firstStart();
    // A stored pin is never changed: it holds while no run.start names another pin (a run.start that does governs,
    // e.g. over a default pin taken before it arrived). Its content comes from the store even if the file is gone.
    if (record && pinGoverns(start, record.pin)) {
      const c = this.pinnedContracts.get(record.contractHash);
      if (c) return { pinning: { ok: true, pin: record.pin, contract: c }, persist: false };
    }
    const p = resolvePin(state, this.registry, this.opts.defaultContract);
    if (p.ok && record && record.pin.contract === p.pin.contract && record.pin.version === p.pin.version) {
      const c = this.pinnedContracts.get(record.contractHash);
      if (c) return { pinning: { ok: true, pin: p.pin, contract: c }, persist: false };
    }
    return { pinning: p, persist: !record };
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
    const perType = new Map<string, { accepted: number; duplicate: number; conflict: number }>();
    // A redelivery of stored content of a live run is a duplicate without a store round trip (see DeliveredDigests).
    // The stored form is made once here and handed to the store with the receipt.
    const incoming = receipts;
    const digests: Digest[] = [];
    const bodies: string[] = [];
    let known = 0;
    receipts = [];
    for (const r of incoming) {
      const body = compactReceiptJson(r);
      const d = DeliveredDigests.digestOfJson(body);
      if (this.runs.has(r.run) && this.delivered.has(r.run, r.event, d)) {
        known++;
        const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
        t.duplicate++;
        perType.set(r.type, t);
      } else {
        receipts.push(r);
        digests.push(d);
        bodies.push(body);
      }
    }
    if (limits) await this.refuseForFullOwners(receipts);
    const release = limits ? this.reserve(receipts, now) : () => {};
    let res;
    const touched = new Set<string>();
    try {
      const scope = this.opts.sourceScopedEvents && source !== 'auditor' ? sourceTag(source) : undefined;
      const items: StoredReceipt[] = receipts.map((receipt, i) => ({ receipt, source, receivedAt: now, body: bodies[i], scope }));
      res = await this.store.append(items, spanLog);
      if (scope !== undefined) {
        // Stored under a source-scoped id (another source holds this event id): folded as stored.
        items.forEach((it, i) => {
          if (it.storedAs === undefined) return;
          receipts[i] = { ...receipts[i], event: it.storedAs };
          digests[i] = DeliveredDigests.digest(receipts[i]);
        });
      }
      // The reservation holds until the new runs are live: the fold below yields to the event loop in slices.
      await this.fold(receipts, res.results, digests, perType, touched, now);
    } finally {
      release();
    }
    res.duplicates += known;
    for (const [type, t] of perType) {
      for (const k of ['accepted', 'duplicate', 'conflict'] as const) if (t[k]) this.opts.hooks?.receipts?.(type, k, t[k]);
    }
    const slice = new Slicer();
    for (const run of touched) {
      this.reevaluate(run, now);
      await slice.yieldIfDue();
    }
    return { accepted: res.accepted, duplicates: res.duplicates, conflicts: res.conflicts };
  }

  /**
   * The fold step of ingest: each committed receipt into its run's state. A large batch (a post naming 20,000 agents,
   * or 100,000 new runs) is folded in slices of at most ~8 ms that yield to the event loop, so health checks and
   * other clients are answered meanwhile.
   */
  private async fold(receipts: readonly Receipt[], results: readonly ('accepted' | 'duplicate' | 'conflict')[], digests: readonly Digest[], perType: Map<string, { accepted: number; duplicate: number; conflict: number }>, touched: Set<string>, now: number): Promise<void> {
    const owns = this.opts.owns;
    const slice = new Slicer();
    let reloaded: Set<string> | undefined;
    for (let i = 0; i < receipts.length; i++) {
      if ((i & 255) === 255) await slice.yieldIfDue();
      const r = receipts[i];
      if (owns && !owns(r.run)) {
        // Stored and acknowledged; its owner folds it from the shared store.
        const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
        t[results[i]]++;
        perType.set(r.type, t);
        continue;
      }
      let live = this.runs.get(r.run);
      if (!live && this.evicted.has(r.run)) {
        // Back from the store with everything stored, this batch's receipts of the run included.
        live = this.reload(r.run, now);
        (reloaded ??= new Set()).add(r.run);
      }
      if (!live) {
        const state = new RunState(r.run, this.receiptSource);
        live = { state, verdict: null as unknown as RunVerdict, updatedAt: now, held: 0 };
        this.runs.set(r.run, live);
      }
      live.receivedAt = now;
      if (reloaded?.has(r.run)) {
        const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
        t[results[i]]++;
        perType.set(r.type, t);
        if (results[i] !== 'duplicate') touched.add(r.run);
        continue;
      }
      const result = live.state.add(r, results[i]);
      if (result !== 'duplicate') {
        live.held++;
        this.heldReceipts++;
      }
      const outcome = results[i] === 'conflict' || result === 'conflict' ? 'conflict' : result;
      if (outcome !== 'duplicate') touched.add(r.run);
      if (outcome !== 'conflict') this.delivered.record(r.run, r.event, digests[i]);
      const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
      t[outcome]++;
      perType.set(r.type, t);
    }
  }

  private reevaluate(run: string, now: number): void {
    const live = this.runs.get(run);
    if (!live) return;
    const before = live.verdict;
    const shadowBefore = live.shadow;
    const after = this.evaluateRun(live.state, this.pinRun(live.state, live), now, live);
    live.verdict = after;
    this.changed(live);
    live.updatedAt = now;
    this.deadlines.set(run, nextChange(live));
    if (live.shadow && this.opts.hooks?.shadowEntered) {
      for (const sv of live.shadow) {
        const prev = shadowBefore?.find((x) => x.contract === sv.contract && x.version === sv.version);
        const disagreed = sv.disagrees && !prev?.disagrees;
        if (!prev || prev.verdict !== sv.verdict || disagreed) this.opts.hooks.shadowEntered(run, sv, disagreed);
      }
    }
    const a = key(after);
    const b = before ? key(before) : null;
    if (!b || a.verdict !== b.verdict || a.contract !== b.contract || a.version !== b.version) {
      live.enteredAt = now;
      this.opts.hooks?.verdictEntered?.(run, a.contract, a.version, a.verdict, b);
    }
    if (!before || before.verdict !== after.verdict || before.settled !== after.settled || before.findings.length !== after.findings.length) {
      this.store.setVerdictState(run, after.verdict, after.settled, now);
    }
    this.emit('run', run, after);
  }

  /**
   * Cluster mode: fold receipts that other instances stored for runs this instance owns (read from the shared store
   * in commit order), then re-evaluate the touched runs. Counts nothing in the receipts metrics: the instance that
   * received them counted them. Repeats (a row seen again after a takeover) are duplicates of the fold.
   */
  foldStored(receipts: readonly Receipt[], now: number): number {
    const touched = new Set<string>();
    const owns = this.opts.owns;
    for (const r of receipts) {
      if (owns && !owns(r.run)) continue;
      let live = this.runs.get(r.run);
      if (!live) {
        live = { state: new RunState(r.run, this.receiptSource), verdict: null as unknown as RunVerdict, updatedAt: now, held: 0 };
        this.runs.set(r.run, live);
      }
      const result = live.state.add(r);
      if (result !== 'duplicate') {
        live.held++;
        this.heldReceipts++;
        touched.add(r.run);
        if (result === 'accepted') this.delivered.record(r.run, r.event, DeliveredDigests.digest(r));
      }
    }
    for (const run of touched) this.reevaluate(run, now);
    return touched.size;
  }

  /**
   * Cluster mode: take over a run from the shared store (its partition was just claimed): fold its receipts and
   * evaluate it. The verdict its previous owner stored counts as the previous verdict, so a takeover that changes
   * nothing is no transition (metrics summed over instances count each transition once).
   */
  adopt(stored: StoredRun, receipts: readonly Receipt[], contractContent: string | null, now: number): void {
    if (stored.pin && stored.contractHash && contractContent && !this.pinnedContracts.has(stored.contractHash)) {
      this.pinnedContracts.set(stored.contractHash, contractFromCanonical(contractContent, `pinned ${stored.pin.contract}@${stored.pin.version}`));
    }
    let live = this.runs.get(stored.run);
    if (!live) {
      live = { state: new RunState(stored.run, this.receiptSource), verdict: null as unknown as RunVerdict, updatedAt: stored.updatedAt, enteredAt: stored.updatedAt, held: 0 };
      this.runs.set(stored.run, live);
    }
    if (stored.pin && stored.contractHash && !live.pin) live.pin = { pin: stored.pin, contractHash: stored.contractHash };
    for (const r of receipts) {
      const result = live.state.add(r);
      if (result !== 'duplicate') {
        live.held++;
        this.heldReceipts++;
        if (result === 'accepted') this.delivered.record(r.run, r.event, DeliveredDigests.digest(r));
      }
    }
    if (live.state.size === 0 && live.state.conflicts.size === 0) {
      this.runs.delete(stored.run);
      this.uncount(live);
      return;
    }
    if (live.verdict === null && stored.verdict) {
      // The stored verdict stands for the previous one: the hooks see a transition only if evaluation moves it.
      const previous = this.evaluateRun(live.state, this.pinRun(live.state, live), now, live);
      if (previous.verdict === stored.verdict) {
        live.verdict = previous;
        this.changed(live);
        this.deadlines.set(stored.run, nextChange(live));
        return;
      }
    }
    this.reevaluate(stored.run, now);
  }

  /** Cluster mode: forget a live run (its partition went to another instance). Nothing is deleted from the store. */
  drop(run: string): boolean {
    const live = this.runs.get(run);
    if (!live) return false;
    this.runs.delete(run);
    this.uncount(live);
    this.heldReceipts -= live.held;
    this.delivered.forget(run);
    this.deadlines.set(run, null);
    return true;
  }

  /** The ids of the live runs this instance holds. */
  liveRunIds(): string[] {
    return [...this.runs.keys()];
  }

  /**
   * The run as `get` gives it, for any run: held here, or (cluster mode) read from the shared store and evaluated
   * now with the same pure verdict function. Null when no instance stored the run.
   */
  async fetch(run: string, now: number, maxAgeMs?: number): Promise<{ verdict: RunVerdict; receipts: Receipt[]; updatedAt: number; shadow?: ShadowVerdict[] } | null> {
    const held = this.get(run);
    // Only a valid run id can name a stored run: anything else (prose, 100 KB, a NUL) never reaches the shared store.
    if (held || !this.opts.remote || !isRunId(run)) return held;
    const detached = await this.opts.remote.load(run, maxAgeMs);
    if (!detached) return null;
    const again = this.get(run); // it may have become live here while the store answered
    if (again) return again;
    return { verdict: this.evaluateDetached(detached, now), receipts: detached.receipts, updatedAt: detached.updatedAt };
  }

  /**
   * Cluster mode: before the run-scope rule checks run-level receipts of runs another instance holds, read their
   * stored pins (scopeContract then judges them by the pinned contract, as the owner would).
   */
  async prefetchPins(runs: Iterable<string>): Promise<void> {
    const remote = this.opts.remote;
    if (!remote) return;
    const wanted = [...new Set(runs)].filter((r) => isRunId(r) && !this.runs.has(r) && !this.foreignPins.has(r));
    if (remote.loadMany) {
      // A group of runs per query, one group at a time: 20,000 run.starts in one post hold one connection, not the pool.
      for (let i = 0; i < wanted.length; i += LIST_GROUP) await this.prefetchGroup(remote, wanted.slice(i, i + LIST_GROUP));
      return;
    }
    await Promise.all(
      wanted.map(async (run) => {
        let p = await remote.pin(run);
        if (!p) {
          // Not pinned yet (its owner writes the pin just after the first evaluation): the pin its stored run.start names.
          const d = await remote.load(run);
          if (!d) return;
          const state = new RunState(run);
          for (const r of d.receipts) if (r.type === 'run.start') state.add(r);
          const resolved = resolvePin(state, this.registry, this.opts.defaultContract);
          if (!resolved.ok || !state.firstStart()) return;
          this.pinnedContracts.set(resolved.contract.hash, resolved.contract);
          p = { record: { pin: resolved.pin, contractHash: resolved.contract.hash }, contractContent: null };
        }
        if (!this.pinnedContracts.has(p.record.contractHash) && p.contractContent) {
          this.pinnedContracts.set(p.record.contractHash, contractFromCanonical(p.contractContent, `pinned ${p.record.pin.contract}@${p.record.pin.version}`));
        }
        if (this.foreignPins.size >= 10_000) this.foreignPins.delete(this.foreignPins.keys().next().value!);
        this.foreignPins.set(run, p.record);
      }),
    );
  }

  /** prefetchPins for one group of runs, read with loadMany: the stored pin, else the pin the stored run.start names. */
  private async prefetchGroup(remote: RemoteRuns, runs: string[]): Promise<void> {
    const loaded = await remote.loadMany!(runs);
    for (const d of loaded.values()) {
      let record = d.pin;
      if (!record) {
        const state = new RunState(d.run);
        for (const r of d.receipts) if (r.type === 'run.start') state.add(r);
        const resolved = resolvePin(state, this.registry, this.opts.defaultContract);
        if (!resolved.ok || !state.firstStart()) continue;
        this.pinnedContracts.set(resolved.contract.hash, resolved.contract);
        record = { pin: resolved.pin, contractHash: resolved.contract.hash };
      } else if (!this.pinnedContracts.has(record.contractHash) && d.contractContent) {
        this.pinnedContracts.set(record.contractHash, contractFromCanonical(d.contractContent, `pinned ${record.pin.contract}@${record.pin.version}`));
      }
      if (this.foreignPins.size >= 10_000) this.foreignPins.delete(this.foreignPins.keys().next().value!);
      this.foreignPins.set(d.run, record);
    }
  }

  /** A run's verdict as fetch gives it. */
  async fetchVerdict(run: string, now: number, maxAgeMs?: number): Promise<RunVerdict | null> {
    const held = this.verdictOf(run);
    if (held || !this.opts.remote) return held;
    return (await this.fetch(run, now, maxAgeMs))?.verdict ?? null;
  }

  /** The pure verdict of a run read from the shared store (its stored pin, else the pin its receipts resolve to). */
  evaluateDetached(d: DetachedRun, now: number): RunVerdict {
    const state = new RunState(d.run);
    for (const r of d.receipts) state.add(r);
    let pinning: Pinning | null = null;
    if (d.pin) {
      let c = this.pinnedContracts.get(d.pin.contractHash);
      if (!c && d.contractContent) c = contractFromCanonical(d.contractContent, `pinned ${d.pin.pin.contract}@${d.pin.pin.version}`);
      const start = state.firstStart();
      const governs = pinGoverns(start, d.pin.pin);
      if (c && governs) pinning = { ok: true, pin: d.pin.pin, contract: c };
    }
    pinning ??= resolvePin(state, this.registry, this.opts.defaultContract);
    return evaluate(state, pinning, now, { registry: this.registry });
  }

  /**
   * Runs for the list views: the live runs here and (cluster mode) the runs of the whole cluster from the shared
   * store, each evaluated now; newest first.
   */
  async listAll(filter: ListFilter, now: number): Promise<ListedRun[]> {
    if (!this.opts.remote) return this.list({ ...filter, now });
    const limit = filter.limit ?? 100;
    const remote = this.opts.remote;
    const rows = await remote.list({ verdict: filter.verdict, contract: filter.contract, limit });
    const out: ListedRun[] = [];
    const alertOf = (run: string) => this.alertStateOf(run, now, filter.windowMs, filter.stallMs);
    const held = (row: { run: string }): boolean => {
      const live = this.runs.get(row.run);
      if (!live?.verdict) return false;
      out.push({ verdict: live.verdict, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert: alertOf(row.run) });
      return true;
    };
    if (remote.loadMany) {
      // The runs other instances hold, LIST_GROUP at a time: a few queries per group, not one per run (issue 32); the
      // next group is read while this one is evaluated.
      const others = rows.filter((row) => !held(row));
      const groups: (typeof rows)[] = [];
      for (let i = 0; i < others.length; i += LIST_GROUP) groups.push(others.slice(i, i + LIST_GROUP));
      let next = groups.length ? remote.loadMany(groups[0].map((row) => row.run)) : null;
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g];
        const loaded = await next!;
        next = g + 1 < groups.length ? remote.loadMany(groups[g + 1].map((row) => row.run)) : null;
        next?.catch(() => {}); // awaited next turn; never an unhandled rejection meanwhile
        for (const row of group) {
          if (held(row)) continue; // it became live here while the store answered
          const d = loaded.get(row.run);
          if (d) out.push({ verdict: this.evaluateDetached(d, now), updatedAt: d.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
        }
      }
    } else {
      for (const row of rows) {
        if (held(row)) continue;
        const r = await this.fetch(row.run, now);
        if (r) out.push({ verdict: r.verdict, updatedAt: r.updatedAt, firstAt: row.firstAt, alert: alertOf(row.run) });
      }
    }
    const filtered = out.filter((r) => (!filter.verdict || r.verdict.verdict === filter.verdict) && (!filter.contract || r.verdict.pin?.contract === filter.contract) && matchesAlertFilter(r.alert, filter));
    filtered.sort(listOrder(filter));
    return filtered.slice(0, limit);
  }

  /** A restored run whose verdict differs from the one stored before the restart (time passed, a contract changed): a transition. */
  private restoredChange(stored: { run: string; verdict: Verdict | null; pin: Pin | null }, now: RunVerdict, at: number): void {
    const previous = { contract: stored.pin?.contract ?? '', version: stored.pin?.version ?? '', verdict: stored.verdict! };
    this.opts.hooks?.verdictEntered?.(stored.run, now.pin?.contract ?? '', now.pin?.version ?? '', now.verdict, previous);
    this.store.setVerdictState(stored.run, now.verdict, now.settled, at);
  }

  /** Move verdicts with time: re-evaluate the runs whose next deadline passed. */
  tick(now: number): number {
    const due = this.deadlines.popDue(now);
    for (const run of due) this.reevaluate(run, now);
    return due.length;
  }

  /** Prune settled runs idle for longer than the retention; memory is bounded by live runs. */
  prune(now: number): number {
    let n = 0;
    for (const [run, live] of this.runs) {
      if (live.verdict.settled && now - live.updatedAt > this.opts.retentionMs) {
        this.runs.delete(run);
        this.uncount(live);
        this.heldReceipts -= live.held;
        this.delivered.forget(run);
        this.deadlines.set(run, null);
        n++;
      }
    }
    this.store.prune(this.opts.retentionMs, now);
    return n;
  }

  /**
   * A live run's verdict and receipts. The receipts are read from the store (live state keeps none): the folded ones
   * in arrival order, then every version of each conflicted event id (conflicts in the order they appeared).
   */
  get(run: string): { verdict: RunVerdict; receipts: Receipt[]; updatedAt: number; shadow?: ShadowVerdict[] } | null {
    const live = this.runs.get(run);
    if (!live) return this.evicted.has(run) ? this.getEvicted(run) : null;
    const conflicts = live.state.conflicts;
    let receipts = this.store.runReceipts(run);
    if (conflicts.size > 0) {
      const versions = new Map<string, Receipt[]>([...conflicts.keys()].map((event) => [event, []]));
      const folded = receipts.filter((r) => {
        const v = versions.get(r.event);
        if (v) v.push(r);
        return !v;
      });
      receipts = [...folded, ...[...versions.values()].flat()];
    }
    return { verdict: live.verdict, receipts, updatedAt: live.updatedAt, ...(this.opts.shadow?.length ? { shadow: live.shadow ?? [] } : {}) };
  }

  /** A run that left live memory idle, read from the store and evaluated now (it stays out of live memory). */
  private getEvicted(run: string): { verdict: RunVerdict; receipts: Receipt[]; updatedAt: number } | null {
    const receipts = this.store.runReceipts(run);
    if (receipts.length === 0) return null;
    const record = this.store.getPin(run);
    const content = record ? this.store.getContractContent(record.contractHash) : null;
    const d: DetachedRun = { run, pin: record ?? null, contractContent: content ?? null, receipts, updatedAt: Date.now() };
    return { verdict: this.evaluateDetached(d, Date.now()), receipts, updatedAt: d.updatedAt };
  }

  /** Cluster mode: the reader of runs other instances hold (null on a single instance). */
  get remote(): RemoteRuns | null {
    return this.opts.remote ?? null;
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

  verdictOf(run: string): RunVerdict | null {
    return this.runs.get(run)?.verdict ?? null;
  }

  list(filter: ListFilter): ListedRun[] {
    const out: ListedRun[] = [];
    const now = filter.now ?? Date.now();
    for (const live of this.runs.values()) {
      const v = live.verdict;
      if (filter.verdict && v.verdict !== filter.verdict) continue;
      if (filter.contract && v.pin?.contract !== filter.contract) continue;
      const alert = this.alertStateOf(live.state.run, now, filter.windowMs, filter.stallMs);
      if (!matchesAlertFilter(alert, filter)) continue;
      out.push({ verdict: v, updatedAt: live.updatedAt, firstAt: live.state.firstAt, alert });
    }
    out.sort(listOrder(filter));
    return out.slice(0, filter.limit ?? 100);
  }

  /**
   * Runs per (contract, version, verdict), for the topology_runs gauge (rows with at least one run). Counted as verdicts
   * change, not by a walk over every live run: a run whose verdict was set since the last call is recounted, a run
   * forgotten leaves its row at once. Serve calls this every tick; with 100,000 live runs the walk cost ~9 ms a tick.
   */
  gauge(): GaugeRow[] {
    for (const live of this.gaugeDirty) this.count(live);
    this.gaugeDirty.clear();
    const out: GaugeRow[] = [];
    for (const row of this.gaugeRows.values()) out.push({ ...row });
    return out;
  }

  /** Counts a live run under its current verdict's row (moving it from the row it was counted under). */
  private count(live: LiveRun): void {
    const v = live.verdict;
    if (!v || live.gaugeOf === v) return;
    const k = key(v);
    const id = `${k.contract}\u0000${k.version}\u0000${k.verdict}`;
    if (id !== live.gaugeId) {
      this.leaveRow(live);
      const row = this.gaugeRows.get(id);
      if (row) row.count++;
      else this.gaugeRows.set(id, { ...k, count: 1 });
      live.gaugeId = id;
    }
    live.gaugeOf = v;
  }

  /** A live run's verdict, its entry time or its receipts changed: its gauge rows are counted again. */
  private changed(live: LiveRun): void {
    this.gaugeDirty.add(live);
    this.alertDirty.add(live);
  }

  /** Takes a forgotten run out of the gauges. */
  private uncount(live: LiveRun): void {
    this.gaugeDirty.delete(live);
    this.leaveRow(live);
    live.gaugeOf = undefined;
    this.alertDirty.delete(live);
    this.leaveAlertRows(live);
    this.alertTimers.set(live.state.run, null);
  }

  private leaveRow(live: LiveRun): void {
    const id = live.gaugeId;
    if (id === undefined) return;
    live.gaugeId = undefined;
    const row = this.gaugeRows.get(id)!;
    if (--row.count === 0) this.gaugeRows.delete(id);
  }

  /**
   * The contract the run-scope rule checks a run-level receipt against (src/ingest/trust.ts): the run's pinned
   * contract; before any pin, the one its earliest run.start (stored, or among `batch`) names, else the default.
   */
  scopeContract(run: string, batch: readonly Receipt[] = []): Contract | null {
    const live = this.runs.get(run);
    const record = live?.pin ?? this.store.getPin(run) ?? this.foreignPins.get(run);
    if (record) return this.pinnedContracts.get(record.contractHash) ?? null;
    const state = new RunState(run);
    const first = live?.state.firstStart();
    if (first) state.add(first);
    for (const r of batch) if (r.run === run && r.type === 'run.start') state.add(r);
    const p = resolvePin(state, this.registry, this.opts.defaultContract);
    return p.ok ? p.contract : null;
  }

  /** The stored handoff receipts of a run (the handoff party rule reads which parties its handoffs named). */
  storedHandoffReceipts(run: string): Receipt[] {
    const live = this.runs.get(run);
    if (live && !live.state.handoffReceipts().some((r) => r.type === 'handoff')) return [];
    if (!live && !isRunId(run)) return [];
    return this.store.runReceipts(run).filter((r) => r.type === 'handoff');
  }

  /** Acknowledge a run's current verdict: it leaves the alerting series until it enters another verdict. */
  ack(run: string, now: number, who: { by?: string | null; reason?: string | null } = {}): { acked: boolean; at: string; record: AckRecord } | null {
    const live = this.runs.get(run);
    if (!live || !live.verdict) return null;
    if (live.ackedVerdict === live.verdict.verdict && live.ackedAt !== undefined) {
      const record = live.ackRecord ?? { verdict: live.ackedVerdict, by: null, at: live.ackedAt, reason: null };
      return { acked: false, at: new Date(live.ackedAt).toISOString(), record };
    }
    live.ackedVerdict = live.verdict.verdict;
    live.ackedAt = now;
    live.ackRecord = { verdict: live.verdict.verdict, by: who.by ?? null, at: now, reason: who.reason ?? null };
    this.alertDirty.add(live);
    return { acked: true, at: new Date(now).toISOString(), record: live.ackRecord };
  }

  /** The latest acknowledgement of a live run (null when none); `current` when it covers the run's verdict now. */
  ackOf(run: string): (AckRecord & { current: boolean }) | null {
    const live = this.runs.get(run);
    if (!live?.ackRecord) return null;
    return { ...live.ackRecord, current: live.ackedVerdict === live.verdict?.verdict && live.ackRecord.verdict === live.verdict?.verdict };
  }

  /** The latest acknowledgement of any run: held here, or (cluster mode) read from the shared store. */
  async fetchAck(run: string): Promise<(AckRecord & { current: boolean }) | null> {
    const held = this.ackOf(run);
    if (held || this.runs.has(run) || !this.opts.remote?.ack || !isRunId(run)) return held;
    const stored = await this.opts.remote.ack(run);
    if (!stored) return null;
    const v = await this.fetchVerdict(run, Date.now());
    return { ...stored, current: v?.verdict === stored.verdict };
  }

  /**
   * Whether a live run counts in topology_alerting_runs / topology_stalled_runs at `now` (the rules of placeAlert),
   * with the window and stall time the gauges last used (or the ones given).
   */
  alertStateOf(run: string, now: number, windowMs: number | undefined = this.alertWindowMs, stallMs: number | undefined = this.alertStallMs): { acked: boolean; alerting: boolean; stalled: boolean } | null {
    const live = this.runs.get(run);
    const v = live?.verdict;
    if (!live || !v) return null;
    const acked = live.ackedVerdict === v.verdict;
    const alerting = ALERT_VERDICTS.has(v.verdict) && !acked && now - (live.enteredAt ?? live.updatedAt) <= (windowMs ?? this.alertWindowMs);
    const lastAt = live.state.lastAt;
    const stalled = !v.settled && !acked && Number.isFinite(lastAt) && now - lastAt > (stallMs ?? this.alertStallMs);
    return { acked, alerting, stalled };
  }

  /**
   * Cluster mode: an acknowledgement recorded in the shared store (at any instance) applied by the run's owner. It
   * holds only while the run is still in the acknowledged verdict (a new verdict alerts again).
   */
  applyAck(run: string, verdict: string, at: number, who: { by?: string | null; reason?: string | null } = {}): boolean {
    const live = this.runs.get(run);
    if (live && (!live.ackRecord || live.ackRecord.at <= at)) live.ackRecord = { verdict: verdict as Verdict, by: who.by ?? null, at, reason: who.reason ?? null };
    if (!live?.verdict || live.verdict.verdict !== verdict) return false;
    if (live.ackedVerdict === live.verdict.verdict && live.ackedAt !== undefined && live.ackedAt >= at) return false;
    live.ackedVerdict = live.verdict.verdict;
    live.ackedAt = at;
    this.alertDirty.add(live);
    return true;
  }

  ackedOf(run: string): string | null {
    const live = this.runs.get(run);
    return live && live.ackedVerdict === live.verdict?.verdict && live.ackedAt !== undefined ? new Date(live.ackedAt).toISOString() : null;
  }

  /**
   * Alerting rows: runs per (contract, verdict) that entered an alerting verdict within `windowMs` and are not
   * acknowledged; stalled rows: unsettled runs per contract whose latest receipt is older than `stallMs`. Counted as
   * runs change and as their time passes (a run is looked at again when it changes, is acknowledged, or reaches the
   * time its rows may change: the end of its alert window, the moment it stalls), not by a walk over every live run
   * (with 100,000 live runs the walk cost ~27 ms, once a second). The same answer as alertingByWalk.
   */
  alerting(now: number, windowMs: number, stallMs: number): { alerting: { contract: string; verdict: Verdict; count: number }[]; stalled: { contract: string; count: number }[] } {
    if (windowMs !== this.alertWindowMs || stallMs !== this.alertStallMs) {
      // first call, or other parameters: count every live run again
      this.alertWindowMs = windowMs;
      this.alertStallMs = stallMs;
      this.alertRows.clear();
      this.stallRows.clear();
      this.alertMembers.clear();
      this.alertTimers = new DeadlineHeap();
      this.alertDirty.clear();
      for (const live of this.runs.values()) {
        live.alertId = undefined;
        live.stallId = undefined;
        this.placeAlert(live, now);
      }
    } else {
      for (const live of this.alertDirty) this.placeAlert(live, now);
      this.alertDirty.clear();
      for (const run of this.alertTimers.popDue(now)) {
        const live = this.runs.get(run);
        if (live) this.placeAlert(live, now);
      }
    }
    return { alerting: [...this.alertRows.values()].map((r) => ({ ...r })), stalled: [...this.stallRows.values()].map((r) => ({ ...r })) };
  }

  /** Counts a live run in its alerting and stalled rows at `now`, and schedules the time they may change with time. */
  private placeAlert(live: LiveRun, now: number): void {
    this.leaveAlertRows(live);
    const v = live.verdict;
    let next = Infinity;
    if (v) {
      const contract = v.pin?.contract ?? '';
      const acked = live.ackedVerdict === v.verdict;
      if (ALERT_VERDICTS.has(v.verdict) && !acked) {
        const entered = live.enteredAt ?? live.updatedAt;
        if (now - entered <= this.alertWindowMs) {
          const id = `${contract}\u0000${v.verdict}`;
          const row = this.alertRows.get(id);
          if (row) row.count++;
          else this.alertRows.set(id, { contract, verdict: v.verdict, count: 1 });
          live.alertId = id;
          next = entered + this.alertWindowMs; // leaves the window after this instant
        }
      }
      const lastAt = live.state.lastAt;
      if (!v.settled && !acked && Number.isFinite(lastAt)) {
        if (now - lastAt > this.alertStallMs) {
          const row = this.stallRows.get(contract);
          if (row) row.count++;
          else this.stallRows.set(contract, { contract, count: 1 });
          live.stallId = contract;
        } else next = Math.min(next, lastAt + this.alertStallMs); // stalls after this instant
      }
      if (live.alertId !== undefined || live.stallId !== undefined) this.alertMembers.set(live.state.run, live);
    }
    this.alertTimers.set(live.state.run, Number.isFinite(next) ? next : null);
  }

  private leaveAlertRows(live: LiveRun): void {
    if (live.alertId !== undefined || live.stallId !== undefined) this.alertMembers.delete(live.state.run);
    if (live.alertId !== undefined) {
      const row = this.alertRows.get(live.alertId)!;
      if (--row.count === 0) this.alertRows.delete(live.alertId);
      live.alertId = undefined;
    }
    if (live.stallId !== undefined) {
      const row = this.stallRows.get(live.stallId)!;
      if (--row.count === 0) this.stallRows.delete(live.stallId);
      live.stallId = undefined;
    }
  }

  /**
   * The runs counted by the last `alerting` call (per-run alerts, src/alerting): each with its verdict, when it
   * entered it, whether it is in an alerting row (within the window, unacknowledged) and when it stalled, if it did.
   * O(runs in those rows), not O(live runs).
   */
  *alertingRuns(): Iterable<{ verdict: RunVerdict; enteredAt: number; inWindow: boolean; stalledAt: number | null; lastAt: number }> {
    for (const live of this.alertMembers.values()) {
      yield {
        verdict: live.verdict,
        enteredAt: live.enteredAt ?? live.updatedAt,
        inWindow: live.alertId !== undefined,
        stalledAt: live.stallId !== undefined ? live.state.lastAt + this.alertStallMs : null,
        lastAt: live.state.lastAt,
      };
    }
  }

  /** The alerting and stalled rows by a walk over every live run: what `alerting` must answer (O(live runs)). */
  alertingByWalk(now: number, windowMs: number, stallMs: number): { alerting: { contract: string; verdict: Verdict; count: number }[]; stalled: { contract: string; count: number }[] } {
    const a = new Map<string, { contract: string; verdict: Verdict; count: number }>();
    const st = new Map<string, { contract: string; count: number }>();
    for (const live of this.runs.values()) {
      const v = live.verdict;
      if (!v) continue;
      const contract = v.pin?.contract ?? '';
      const acked = live.ackedVerdict === v.verdict;
      if (ALERT_VERDICTS.has(v.verdict) && !acked && now - (live.enteredAt ?? live.updatedAt) <= windowMs) {
        const k = `${contract}\u0000${v.verdict}`;
        const e = a.get(k);
        if (e) e.count++;
        else a.set(k, { contract, verdict: v.verdict, count: 1 });
      }
      if (!v.settled && !acked && Number.isFinite(live.state.lastAt) && now - live.state.lastAt > stallMs) {
        const e = st.get(contract);
        if (e) e.count++;
        else st.set(contract, { contract, count: 1 });
      }
    }
    return { alerting: [...a.values()], stalled: [...st.values()] };
  }

  get liveRuns(): number {
    return this.runs.size;
  }

  get scheduledDeadlines(): number {
    return this.deadlines.size;
  }
}
