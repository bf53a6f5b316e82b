/**
 * Splits the live work of a cluster of auditors sharing one PostgreSQL store, through the database only (no
 * protocol between instances): runs fall into hash partitions (`partitionOf(run)`), each partition is leased to one
 * instance in the `leases` table with an expiry on the database clock, and every instance heartbeats in `instances`.
 *
 * - Fair share: each instance holds about partitions / live instances; it claims free or expired leases up to its
 *   share and releases any beyond it (so a joining instance gets partitions within a renewal or two).
 * - The owner of a run holds it live: folds its receipts (appended by any instance; read from the shared store in
 *   commit order by `tail`), runs its deadline timers and exports its gauges. Prometheus sums the instances.
 * - Takeover: a dead instance stops renewing; once its leases expire (--lease-ttl, default 10 s) the survivors claim
 *   them at their next renewal (every ttl/5, at most 500 ms), load the partitions' runs from the store and evaluate them at once, so a
 *   run whose deadline passed meanwhile turns `incomplete` within lease expiry + one renewal.
 * - Span log: the content-free span records of traces still waiting for a caller are kept by the instance that
 *   received them; when that instance is gone, the owner of the trace's partition adopts and replays them.
 * - An instance that cannot renew before its leases run out drops its partitions (stops timers and gauges for them)
 *   rather than risk two owners. The lease's validity is kept on the monotonic clock from the instant a renewal was
 *   sent, and checked before every act as owner (the tick, a tail read, a takeover, folding a receipt): after a pause
 *   (SIGSTOP, a long GC, a frozen VM) past it, the partitions are dropped before any timer or read acts on them.
 *   The database fences the owner's writes as well (lease epochs: fence.ts, checked in the store's writes).
 *
 * The coordinator composes its parts, one per job, sharing a ClusterContext (context.ts):
 *   coordination.ts  the statements beside the store: leases.ts, heartbeat.ts (and trust), fence.ts, tail.ts
 *   ownership.ts     the partitions held and until when surely (owns, guard)
 *   renewal.ts       the renewal (heartbeat + lease renewal + clock sample) on the heartbeat's connection
 *   takeover.ts      reading partitions in, all or nothing
 *   tailer.ts        the tail step: receipts and acknowledgements of owned runs, forwarded span records
 *   span-adoption.ts span records of processes that are gone
 *   verdict-counts.ts verdict transitions counted once written
 */
import type { AuditEngine } from '../audit/engine.js';
import type { PgStore } from '../store/pg-store.js';
import { Coordination } from './coordination.js';
import type { ClusterContext, ClusterHooks, ClusterOptions } from './context.js';
import type { ClusterEngineStore } from './engine-store.js';
import { Ownership } from './ownership.js';
import { Renewal } from './renewal.js';
import { SpanLogAdoption } from './span-adoption.js';
import { Tailer } from './tailer.js';
import { Takeover } from './takeover.js';
import { VerdictCounts } from './verdict-counts.js';

export type { ClusterHooks, ClusterOptions } from './context.js';
export { LANGGRAPH_SETTLE_MS } from './tailer.js';

export class ClusterCoordinator {
  private engine: AuditEngine | null = null;
  private readonly ownership: Ownership;
  private readonly renewal: Renewal;
  private readonly takeover: Takeover;
  private readonly tailer: Tailer;
  private readonly adoption: SpanLogAdoption;
  private readonly counts: VerdictCounts;
  private renewTimer: NodeJS.Timeout | null = null;
  private tailTimer: NodeJS.Timeout | null = null;
  /**
   * Rebalancing, takeovers and tail reads run one at a time (a takeover and a tail never interleave), and a periodic
   * step is never queued behind itself: a tick whose step still waits is skipped (issue 49: under latency the chain
   * grew without bound). `wanted`: steps asked for and not begun; `running`: the loop running them, renewals first.
   */
  private readonly wanted = { rebalance: false, tail: false };
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Set when the server starts to shut down (beginLeave): no partition is claimed, a takeover stops. */
  private leaving = false;
  private readonly tailEveryMs: number;

  /**
   * `coordination`: the leases, heartbeat, fence and tail of this instance in the shared store (made here when not
   * given; serve makes it first, to join the cluster's trust with it).
   */
  constructor(
    readonly pg: PgStore,
    private readonly store: ClusterEngineStore,
    private readonly opts: ClusterOptions,
    private readonly hooks: ClusterHooks,
    readonly coordination: Coordination = new Coordination(pg),
  ) {
    this.tailEveryMs = opts.tailEveryMs ?? 100;
    // With `--span-routing any`, held records of a partition this instance lost are its new owner's (never pruned here).
    pg.pruneHeldOfOwnedOnly = opts.spanRouting === 'any';
    const mono = hooks.monotonic ?? (() => performance.now());
    this.ownership = new Ownership(pg, coordination.fence, mono, hooks.log, (p) => this.dropPartition(p));
    this.owns = this.ownership.owns;
    this.counts = new VerdictCounts(pg, (run) => this.ownership.owned.has(pg.partitionOf(run)));
    const context: ClusterContext = {
      pg,
      coordination,
      store,
      opts,
      hooks,
      ownership: this.ownership,
      engine: () => this.engine,
      keepLeases: () => this.renewal.keepLeases(),
    };
    this.renewal = new Renewal(context);
    this.takeover = new Takeover(context, this.renewal, () => this.leaving);
    this.tailer = new Tailer(context);
    this.adoption = new SpanLogAdoption(context);
  }

  /**
   * Counts a verdict transition of a run held here (`count` increments the metric) once the verdict state that the
   * transition set is written to the shared table (the next flush), or never if the fence refuses that write.
   */
  countWhenWritten(run: string, count: () => void): void {
    this.counts.countWhenWritten(run, count);
  }

  /** Whether this instance owns the run (its partition's lease, still valid by the local clock). */
  readonly owns: (run: string) => boolean;

  /**
   * Before acting as owner: true while the leases are valid; otherwise (the process was paused, or renewals failed
   * past the lease) every partition is dropped first, and false.
   */
  guard(): boolean {
    return this.ownership.guard();
  }

  /** For the engine's ownerFull: is a run's owner at its live limit; which runs the shared store has. */
  readonly ownerFull = {
    full: (run: string): boolean => this.renewal.fullParts.size > 0 && this.renewal.fullParts.has(this.pg.partitionOf(run)),
    known: (runs: readonly string[]): Promise<Set<string>> => this.pg.knownRuns(runs),
  };

  /**
   * With `--span-routing any`: whether another instance resolves the trace (its partition is not owned here, or the
   * leases are no longer surely valid: the records go through the shared span log to whoever owns it).
   */
  readonly forwards = (traceId: string): boolean => !this.owns(traceId);

  /**
   * With `--span-routing any`: forgets the pending spans of the traces given (deriving nothing), set by the server.
   * Called when a partition leaves this instance: their new owner adopts their span records from the shared log.
   */
  dropTraces: ((pick: (traceId: string) => boolean) => number) | null = null;

  /** The partitions held, ascending. */
  ownedParts(): number[] {
    return this.ownership.ownedParts();
  }

  /**
   * `atLiveLimit`: this instance said it is at its live limit at its last heartbeat; `partitionsAtLimit`: partitions
   * of other instances at theirs (new runs in them are refused here); `beatDown`: the last heartbeat failed or is
   * overdue (not ready, exports refused); `poolsReplaced`: connection pools replaced after a heartbeat got no answer;
   * `leaseRemainingMs`: how long the leases renewed last are surely still valid here (negative: lapsed).
   */
  stats(): { partitions: number; owned: number; liveInstances: number; takeovers: number; lapses: number; fencedWrites: number; tailSeq: number; atLiveLimit: boolean; partitionsAtLimit: number; beatDown: boolean; poolsReplaced: number; clockOffsetMs: number; clockUncertaintyMs: number; clockRefused: boolean; leaseRemainingMs: number } {
    const beat = this.coordination.beats.beatStats();
    const r = this.renewal;
    const own = this.ownership;
    return { partitions: this.pg.partitions, owned: own.owned.size, liveInstances: r.liveInstances, takeovers: this.takeover.takeovers, lapses: own.lapses, fencedWrites: this.pg.fencedWrites, tailSeq: this.tailer.cursor, atLiveLimit: r.saidFull, partitionsAtLimit: r.fullParts.size, beatDown: beat.down, poolsReplaced: beat.poolsReplaced, clockOffsetMs: Math.round(r.offset.ms), clockUncertaintyMs: Math.round(r.offset.uncertaintyMs), clockRefused: r.clockRefused, leaseRemainingMs: Math.round(own.validUntil - own.mono()) };
  }

  /**
   * Joins the cluster: heartbeat, claim a fair share, take its runs over; then renews and tails on timers.
   * `replaySpanLog`: replays the span log entries set with store.setAdopted. `readLangGraphRoots` (with
   * `--span-routing any`): reads the graphs of LangGraph roots that arrived before the given instant, called after
   * each read of the span log other instances forwarded.
   */
  async start(engine: AuditEngine, replaySpanLog?: () => Promise<number>, readLangGraphRoots?: (before: number) => Promise<number>): Promise<void> {
    this.engine = engine;
    this.adoption.replaySpanLog = replaySpanLog;
    this.tailer.replaySpanLog = replaySpanLog;
    this.tailer.readLangGraphRoots = readLangGraphRoots;
    await this.tailer.start();
    this.renewal.started();
    this.request('rebalance');
    await this.running;
    this.renewTimer = setInterval(() => {
      this.renewal.checkOverdue();
      // Renewals first (issue 49): a step still running (a tail read or a takeover waiting on the pool) does not hold
      // the renewal back; it is sent beside it, unless the last one is still out (never queued behind itself).
      if (this.running !== null && !this.renewal.inFlight) void this.renewal.renew().catch((e) => this.hooks.log('lease_renew_failed', { error: (e as Error).message }));
      this.request('rebalance');
    }, this.renewal.renewEveryMs);
    this.renewTimer.unref();
    this.tailTimer = setInterval(() => this.request('tail'), this.tailEveryMs);
    this.tailTimer.unref();
  }

  /**
   * Leaves the cluster: stops the timers, writes what is pending and releases the leases so others take over at once
   * (closing the store then gives up this instance's liveness: Coordination.leave).
   */
  /**
   * The server is shutting down (SIGTERM): a takeover in progress stops before its next group of runs and no partition
   * is claimed, so the leave is not held up by reading runs in. The leases are still renewed until stop.
   */
  beginLeave(): void {
    this.leaving = true;
  }

  async stop(): Promise<void> {
    this.leaving = true;
    this.stopped = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    if (this.tailTimer) clearInterval(this.tailTimer);
    await this.running;
    await this.renewal.settle();
    await this.store.sync();
    // The partitions held, and those whose takeover the leave cut short (dropped, their leases still ours).
    const parts = [...new Set([...this.ownedParts(), ...this.takeover.abandoned])].sort((a, b) => a - b);
    this.ownership.clear();
    if (parts.length) await this.coordination.leases.releaseLeases(parts).catch((e) => this.hooks.log('lease_release_failed', { error: (e as Error).message }));
  }

  /** The database's clock minus this host's (ms), as last measured (0 before the first heartbeat). */
  clockOffsetMs(): number {
    return this.renewal.offset.ms;
  }

  /** Asks for a step (once: asked again before it began, it runs once); starts the loop running steps if idle. */
  private request(kind: 'rebalance' | 'tail'): void {
    if (this.stopped) return;
    this.wanted[kind] = true;
    if (this.running === null) this.running = this.runSteps();
  }

  /**
   * Runs the steps asked for one at a time, a renewal before a tail read (a renewal waits for at most the one step
   * running); a failure is logged and does not stop the loop.
   */
  private async runSteps(): Promise<void> {
    try {
      for (;;) {
        if (this.stopped) return;
        const kind = this.wanted.rebalance ? 'rebalance' : this.wanted.tail ? 'tail' : null;
        if (kind === null) return;
        this.wanted[kind] = false;
        try {
          await (kind === 'rebalance' ? this.rebalance() : this.tailer.step());
        } catch (e) {
          this.hooks.log('cluster_step_failed', { error: (e as Error).message });
        }
      }
    } finally {
      this.running = null;
    }
  }

  /**
   * The renewal step. A renewal that came back after the local lease ran out (the database renewed leases this
   * instance had just dropped: nobody would act on them) is sent again at once, and the partitions it still holds are
   * loaded in the same step, rather than a renewal later.
   */
  private async rebalance(): Promise<void> {
    if (await this.renewAndBalance()) return;
    this.hooks.log('lease_renewal_late', { partitions: this.ownership.owned.size });
    await this.renewAndBalance();
  }

  /** False when the renewal took longer than the lease (every partition was dropped; nothing else done). */
  private async renewAndBalance(): Promise<boolean> {
    try {
      if (!(await this.renewal.renewFresh())) return false;
    } catch (e) {
      this.hooks.log('lease_renew_failed', { error: (e as Error).message });
      return true;
    }
    // Steps run one at a time: no claim or release since that renewal was sent, so its answer is the lease table's.
    const held = [...this.renewal.lastHeld];
    // Leases held under this name but not loaded: a restart under the same --instance before they expired.
    const unloaded = held.filter((p) => !this.ownership.owned.has(p));
    if (unloaded.length) await this.takeover.takeOver(unloaded);
    // An instance whose clock is too far from the database's holds nothing (its share is the others').
    const fair = this.renewal.clockRefused ? 0 : Math.ceil(this.pg.partitions / this.renewal.liveInstances);
    if (held.length > fair) {
      const extra = held.sort((a, b) => b - a).slice(0, held.length - fair);
      await this.store.sync();
      for (const p of extra) this.ownership.drop(p);
      await this.coordination.leases.releaseLeases(extra);
      this.hooks.log('partitions_released', { partitions: extra.length, liveInstances: this.renewal.liveInstances });
    } else if (held.length < fair && !this.leaving) {
      const claimed = await this.coordination.leases.claimLeases(fair - held.length, this.opts.leaseTtlMs);
      if (claimed.length) await this.takeover.takeOver(claimed);
    }
    await this.adoption.adopt();
    // Runs the engine pruned (settled past retention) leave this instance's memory too.
    this.store.retain((run) => this.engine!.verdictOf(run) !== null);
    return true;
  }

  /** A partition no longer held (Ownership.drop): its live runs, pending counts and pending spans are let go here. */
  private dropPartition(p: number): void {
    const engine = this.engine!;
    for (const run of engine.liveRunIds()) {
      if (this.pg.partitionOf(run) === p) {
        engine.drop(run);
        this.store.forget(run);
      }
    }
    // The retired runs' counts in topology_runs go with the partition (its next owner counts them).
    engine.retained.dropRetained(p);
    // Transitions whose state was not written (forgotten with the run): the partition's next owner counts from the table.
    this.counts.forgetPartition(p);
    // Spans of the partition's traces waiting here for a caller: its next owner adopts their records (adoptSpanLog).
    const dropped = this.dropTraces?.((traceId) => this.pg.partitionOf(traceId) === p) ?? 0;
    if (dropped > 0) this.hooks.log('pending_spans_handed_over', { partition: p, spans: dropped });
  }
}
