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
 *   The database fences the owner's writes as well (PgStore: lease epochs).
 */
import type { AuditEngine } from '../audit/engine.js';
import type { PgStore, TailedReceipt } from '../store/pg-store.js';
import type { ClusterEngineStore } from './engine-store.js';

/** A takeover reads the receipts of this many runs per query (see takeOver). */
const TAKEOVER_RUNS = 500;
/** Span log entries of instances that died are adopted this many per query (see adoptSpanLog). */
const SPAN_LOG_PAGE = 2000;
/** adoptSpanLog reads the owned partitions' span log from the start at least this often (else from its cursor). */
const ADOPT_RESCAN_MS = 30_000;
/**
 * With `--span-routing any`, a LangGraph root is read no sooner than this after it arrived (and after a read of the
 * forwarded span log that began later): time for node spans a sender exported side by side with it (e.g. a
 * Collector's sending queue with several consumers) to arrive anywhere and be forwarded.
 */
export const LANGGRAPH_SETTLE_MS = 500;

export interface ClusterOptions {
  /** How long a lease (and an instance's heartbeat) lasts without renewal. */
  leaseTtlMs: number;
  /** How often leases are renewed and the fair share rebalanced (default ttl / 5, at most 500 ms). */
  renewEveryMs?: number;
  /** How often the shared store is read for receipts other instances stored for runs owned here. */
  tailEveryMs?: number;
  /** Receipts read per tail query. */
  tailBatch?: number;
  /**
   * `trace` (default): the Collector routes every span of a trace to one instance; span records are adopted only
   * from instances that are gone. `any`: spans may arrive anywhere; instances forward the spans of traces they do not
   * own through the shared span log, and the owner of a trace's partition resolves them (every tail read).
   */
  spanRouting?: 'trace' | 'any';
  /**
   * How long after the last renewal landed the instance says it is not ready and refuses exports (503 + Retry-After)
   * until a renewal lands (default max(3 renewals, ttl / 2)).
   */
  beatDeadlineMs?: number;
  /**
   * An instance whose wall clock is further than this from the database's (measured with each heartbeat) holds no
   * partition: it claims none and releases those it holds (default 60 s). Within it, verdicts are timed on the
   * database's clock (the local clock plus the measured offset: `clockOffsetMs`).
   */
  maxClockOffsetMs?: number;
}

export interface ClusterHooks {
  log: (event: string, fields?: Record<string, unknown>) => void;
  clock: () => number;
  /** The clock leases are timed on (default performance.now: monotonic, runs on while the process is stopped). */
  monotonic?: () => number;
  /** This host's wall clock, compared with the database's at each heartbeat (default Date.now). */
  wall?: () => number;
}

/** Offset samples kept: the one with the shortest round trip among them is the offset (the least uncertain). */
const OFFSET_SAMPLES = 8;

export class ClusterCoordinator {
  private readonly owned = new Set<number>();
  /** Owned partitions whose stored runs were all read in (takeOver done): every run of them is live here. */
  private readonly adopted = new Set<number>();
  private cursor = 0;
  private ackCursor = 0;
  /**
   * Where adoptSpanLog's last complete read ended: every record up to `from` of partitions `parts` whose holder was
   * not live (`live`, as the database listed the live processes then) has been adopted. `fullAt`: its last read from
   * the start (monotonic ms).
   */
  private adoptCursor: { parts: string; live: string; from: number; fullAt: number } | null = null;
  private engine: AuditEngine | null = null;
  /** Until when (monotonic clock, ms) the leases renewed last are surely still this instance's. */
  private leaseValidUntil = 0;
  private readonly mono: () => number;
  private renewTimer: NodeJS.Timeout | null = null;
  private tailTimer: NodeJS.Timeout | null = null;
  /**
   * Rebalancing, takeovers and tail reads run one at a time (a takeover and a tail never interleave), and a periodic
   * step is never queued behind itself: a tick whose step still waits is skipped (issue 49: under latency the chain
   * grew without bound). `wanted`: steps asked for and not begun; `running`: the loop running them, renewals first.
   */
  private readonly wanted = { rebalance: false, tail: false };
  private running: Promise<void> | null = null;
  /**
   * The renewal in flight (one at a time, on the heartbeat's own connection: PgStore.beat). Renewals do not wait for
   * the steps: while a step runs (a tail read, a takeover, behind a slow pool), the renewal timer renews beside it.
   */
  private renewing: Promise<boolean> | null = null;
  /** Renewals sent so far; `acquired`: the count when each owned partition was taken (see renew). */
  private renewalsSent = 0;
  private readonly acquired = new Map<number, number>();
  /** When (monotonic ms) the last renewal landed: past `beatDeadlineMs` the instance is unready (PgStore.beatOverdue). */
  private lastRenewedAt = 0;
  private readonly beatDeadlineMs: number;
  /** The last heartbeats' clock samples: database clock minus this host's at the beat's midpoint, and the round trip. */
  private offsetSamples: { offset: number; rtt: number }[] = [];
  private offset = { ms: 0, uncertaintyMs: 0, measured: false };
  private clockRefused = false;
  private stopped = false;
  private replaySpanLog: (() => Promise<number>) | undefined;
  private readLangGraphRoots: ((before: number) => Promise<number>) | undefined;
  private liveInstances = 1;
  private takeovers = 0;
  private lapses = 0;
  /**
   * Verdict transitions of runs held here, counted (metrics) only once their verdict state is in the shared table: the
   * next owner compares with that table, so each transition is counted by exactly one instance. Those of a write the
   * fence refused (the partition was lost) are never counted here: the new owner counts from what the table holds.
   */
  private pendingCounts = new Map<string, (() => void)[]>();
  private readonly renewEveryMs: number;
  private readonly tailEveryMs: number;
  private readonly tailBatch: number;

  constructor(
    readonly pg: PgStore,
    private readonly store: ClusterEngineStore,
    private readonly opts: ClusterOptions,
    private readonly hooks: ClusterHooks,
  ) {
    // Renewing often is cheap (one small statement: PgStore.beat) and bounds how late an expired lease is claimed.
    this.renewEveryMs = opts.renewEveryMs ?? Math.max(100, Math.min(500, Math.floor(opts.leaseTtlMs / 5)));
    this.tailEveryMs = opts.tailEveryMs ?? 100;
    this.tailBatch = opts.tailBatch ?? 5000;
    this.mono = hooks.monotonic ?? (() => performance.now());
    // A renewal that has not landed this long after the last one: a hung statement holds the steps (or the beat hangs).
    this.beatDeadlineMs = opts.beatDeadlineMs ?? Math.max(3 * this.renewEveryMs, Math.floor(opts.leaseTtlMs / 2));
    // With `--span-routing any`, held records of a partition this instance lost are its new owner's (never pruned here).
    pg.pruneHeldOfOwnedOnly = opts.spanRouting === 'any';
    pg.onVerdictWrite = {
      taken: (runs) => {
        const taken: [string, (() => void)[]][] = [];
        for (const run of runs) {
          const counts = this.pendingCounts.get(run);
          if (counts) {
            taken.push([run, counts]);
            this.pendingCounts.delete(run);
          }
        }
        return taken;
      },
      landed: (token, written) => {
        for (const [run, counts] of token as [string, (() => void)[]][]) {
          if (written === null) {
            // The write failed (it is retried by the next flush): counted when it lands, unless the partition left
            // meanwhile (the state was forgotten with the run; the next owner counts from the table).
            if (this.owned.has(this.pg.partitionOf(run))) this.pendingCounts.set(run, [...counts, ...(this.pendingCounts.get(run) ?? [])]);
          } else if (written.has(run)) {
            for (const count of counts) count();
          }
        }
      },
    };
  }

  /**
   * Counts a verdict transition of a run held here (`count` increments the metric) once the verdict state that the
   * transition set is written to the shared table (the next flush), or never if the fence refuses that write.
   */
  countWhenWritten(run: string, count: () => void): void {
    const list = this.pendingCounts.get(run);
    if (list) list.push(count);
    else this.pendingCounts.set(run, [count]);
  }

  /** Whether this instance owns the run (its partition's lease, still valid by the local clock). */
  readonly owns = (run: string): boolean => this.owned.has(this.pg.partitionOf(run)) && this.mono() <= this.leaseValidUntil;

  /**
   * Before acting as owner: true while the leases are valid; otherwise (the process was paused, or renewals failed
   * past the lease) every partition is dropped first, and false.
   */
  guard(): boolean {
    if (this.owned.size === 0) return true;
    if (this.mono() <= this.leaseValidUntil) return true;
    this.hooks.log('leases_lapsed', { partitions: this.owned.size, overdueMs: Math.round(this.mono() - this.leaseValidUntil) });
    this.lapses++;
    for (const p of [...this.owned]) this.dropPartition(p);
    return false;
  }
  /** Partitions held by another live instance at its live limit (as of the last renewal). */
  private fullParts = new Set<number>();
  private saidFull = false;
  /** For the engine's ownerFull: is a run's owner at its live limit; which runs the shared store has. */
  readonly ownerFull = {
    full: (run: string): boolean => this.fullParts.size > 0 && this.fullParts.has(this.pg.partitionOf(run)),
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

  /**
   * The partitions whose runs the list views read from this instance's memory (and not from the shared store): held,
   * taken over completely (every stored run of them was read in), and the leases still valid by the local clock.
   * A run stored through another instance joins them when the tail reads it (every --tail-every, 100 ms).
   */
  listedParts(): number[] {
    if (this.mono() > this.leaseValidUntil) return [];
    return [...this.adopted].filter((p) => this.owned.has(p));
  }

  /** The partitions held, ascending. */
  ownedParts(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  /**
   * `atLiveLimit`: this instance said it is at its live limit at its last heartbeat; `partitionsAtLimit`: partitions
   * of other instances at theirs (new runs in them are refused here); `beatDown`: the last heartbeat failed or is
   * overdue (not ready, exports refused); `poolsReplaced`: connection pools replaced after a heartbeat got no answer;
   * `leaseRemainingMs`: how long the leases renewed last are surely still valid here (negative: lapsed).
   */
  stats(): { partitions: number; owned: number; liveInstances: number; takeovers: number; lapses: number; fencedWrites: number; tailSeq: number; atLiveLimit: boolean; partitionsAtLimit: number; beatDown: boolean; poolsReplaced: number; clockOffsetMs: number; clockUncertaintyMs: number; clockRefused: boolean; leaseRemainingMs: number } {
    const beat = this.pg.beatStats();
    return { partitions: this.pg.partitions, owned: this.owned.size, liveInstances: this.liveInstances, takeovers: this.takeovers, lapses: this.lapses, fencedWrites: this.pg.fencedWrites, tailSeq: this.cursor, atLiveLimit: this.saidFull, partitionsAtLimit: this.fullParts.size, beatDown: beat.down, poolsReplaced: beat.poolsReplaced, clockOffsetMs: Math.round(this.offset.ms), clockUncertaintyMs: Math.round(this.offset.uncertaintyMs), clockRefused: this.clockRefused, leaseRemainingMs: Math.round(this.leaseValidUntil - this.mono()) };
  }

  /**
   * Joins the cluster: heartbeat, claim a fair share, take its runs over; then renews and tails on timers.
   * `replaySpanLog`: replays the span log entries set with store.setAdopted. `readLangGraphRoots` (with
   * `--span-routing any`): reads the graphs of LangGraph roots that arrived before the given instant, called after
   * each read of the span log other instances forwarded.
   */
  async start(engine: AuditEngine, replaySpanLog?: () => Promise<number>, readLangGraphRoots?: (before: number) => Promise<number>): Promise<void> {
    this.engine = engine;
    this.replaySpanLog = replaySpanLog;
    this.readLangGraphRoots = readLangGraphRoots;
    this.cursor = await this.pg.headSeq();
    this.lastRenewedAt = this.mono();
    this.request('rebalance');
    await this.running;
    this.renewTimer = setInterval(() => {
      if (this.mono() - this.lastRenewedAt > this.beatDeadlineMs) this.pg.beatOverdue();
      // Renewals first (issue 49): a step still running (a tail read or a takeover waiting on the pool) does not hold
      // the renewal back; it is sent beside it, unless the last one is still out (never queued behind itself).
      if (this.running !== null && this.renewing === null) void this.renew().catch((e) => this.hooks.log('lease_renew_failed', { error: (e as Error).message }));
      this.request('rebalance');
    }, this.renewEveryMs);
    this.renewTimer.unref();
    this.tailTimer = setInterval(() => this.request('tail'), this.tailEveryMs);
    this.tailTimer.unref();
  }

  /** Leaves the cluster: stops the timers, writes what is pending and releases the leases so others take over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    if (this.tailTimer) clearInterval(this.tailTimer);
    await this.running;
    await this.renewing?.catch(() => {});
    await this.store.sync();
    const parts = this.ownedParts();
    this.owned.clear();
    if (parts.length) await this.pg.releaseLeases(parts).catch((e) => this.hooks.log('lease_release_failed', { error: (e as Error).message }));
  }

  /**
   * One clock sample from a heartbeat: the database's clock_timestamp() against this host's wall clock at the midpoint
   * of the round trip (off by at most half the round trip). The offset is the least uncertain of the last samples.
   */
  private sampleClock(dbNow: number, wallSent: number, wallReceived: number): void {
    if (!Number.isFinite(dbNow)) return;
    this.offsetSamples.push({ offset: dbNow - (wallSent + wallReceived) / 2, rtt: Math.max(0, wallReceived - wallSent) });
    if (this.offsetSamples.length > OFFSET_SAMPLES) this.offsetSamples.shift();
    const best = this.offsetSamples.reduce((a, b) => (b.rtt < a.rtt ? b : a));
    this.offset = { ms: best.offset, uncertaintyMs: best.rtt / 2, measured: true };
    const maxMs = this.opts.maxClockOffsetMs ?? 60_000;
    const refuse = Math.abs(best.offset) > maxMs;
    if (refuse !== this.clockRefused) {
      this.clockRefused = refuse;
      this.hooks.log(refuse ? 'clock_offset_refused' : 'clock_offset_ok', { offsetMs: Math.round(best.offset), maxMs });
    }
  }

  /** The database's clock minus this host's (ms), as last measured (0 before the first heartbeat). */
  clockOffsetMs(): number {
    return this.offset.ms;
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
          await (kind === 'rebalance' ? this.rebalance() : this.tail());
        } catch (e) {
          this.hooks.log('cluster_step_failed', { error: (e as Error).message });
        }
      }
    } finally {
      this.running = null;
    }
  }

  /**
   * Within a long step (a takeover of many runs, pages of span records): renews the leases when a renewal is due, so
   * the step itself never lets them lapse. Partitions not renewed are dropped. False when none is held any more.
   */
  private async keepLeases(): Promise<boolean> {
    const due = this.mono() >= this.leaseValidUntil - this.opts.leaseTtlMs + 2 * this.renewEveryMs;
    if (!due && this.mono() <= this.leaseValidUntil) return this.owned.size > 0;
    // Also after a local lapse within the step (a slow machine): the database extends only leases that are still this
    // instance's and unexpired, so nobody else can hold one it gets back; nothing was acted on meanwhile. A renewal
    // already out (the timer's, sent during this step) serves.
    await this.renew();
    return this.guard() && this.owned.size > 0;
  }

  /**
   * One renewal (heartbeat, lease renewal, clock sample: PgStore.beat) on the heartbeat's own connection, which never
   * waits for a pool slot behind appends, tail reads or API reads; the one in flight when asked again. Partitions the
   * database no longer gives this instance are dropped, but only those taken before the renewal was sent (one claimed
   * while it was out is not in its answer). False when it came back after the local lease ran out (all dropped).
   */
  private renew(): Promise<boolean> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private async renewOnce(): Promise<boolean> {
    const sent = this.mono();
    const n = ++this.renewalsSent;
    // Leases may have expired and been taken: stop acting as owner before renewing anything.
    this.guard();
    const full = this.engine?.atLiveLimit() ?? false;
    const wall = this.hooks.wall ?? Date.now;
    const wallSent = wall();
    // Heartbeat, renewal and the partitions of instances at their live limit: one statement, one round trip.
    const beat = await this.pg.beat(this.opts.leaseTtlMs, full);
    this.sampleClock(beat.dbNow, wallSent, wall());
    this.saidFull = full;
    this.liveInstances = Math.max(1, beat.liveInstances);
    this.fullParts = new Set(beat.fullParts);
    this.lastHeld = beat.held;
    this.lastRenewedAt = this.mono();
    // Renewed on the database clock at some point after `sent`: valid here until sent + ttl, less a renewal's margin.
    this.leaseValidUntil = sent + this.opts.leaseTtlMs - this.renewEveryMs;
    if (!this.guard()) return false; // the renewal itself took longer than the lease
    const held = new Set(beat.held);
    for (const p of [...this.owned]) if (!held.has(p) && (this.acquired.get(p) ?? 0) < n) this.dropPartition(p);
    return true;
  }

  /** The partitions the last renewal found leased here (ascending). */
  private lastHeld: number[] = [];

  /** A renewal sent after this call (not one already out, whose answer may predate the caller's last claim or release). */
  private async renewFresh(): Promise<boolean> {
    await this.renewing?.catch(() => {});
    return this.renew();
  }

  /**
   * The renewal step. A renewal that came back after the local lease ran out (the database renewed leases this
   * instance had just dropped: nobody would act on them) is sent again at once, and the partitions it still holds are
   * loaded in the same step, rather than a renewal later.
   */
  private async rebalance(): Promise<void> {
    if (await this.renewAndBalance()) return;
    this.hooks.log('lease_renewal_late', { partitions: this.owned.size });
    await this.renewAndBalance();
  }

  /** False when the renewal took longer than the lease (every partition was dropped; nothing else done). */
  private async renewAndBalance(): Promise<boolean> {
    try {
      if (!(await this.renewFresh())) return false;
    } catch (e) {
      this.hooks.log('lease_renew_failed', { error: (e as Error).message });
      return true;
    }
    // Steps run one at a time: no claim or release since that renewal was sent, so its answer is the lease table's.
    const held = [...this.lastHeld];
    // Leases held under this name but not loaded: a restart under the same --instance before they expired.
    const unloaded = held.filter((p) => !this.owned.has(p));
    if (unloaded.length) await this.takeOver(unloaded);
    // An instance whose clock is too far from the database's holds nothing (its share is the others').
    const fair = this.clockRefused ? 0 : Math.ceil(this.pg.partitions / this.liveInstances);
    if (held.length > fair) {
      const extra = held.sort((a, b) => b - a).slice(0, held.length - fair);
      await this.store.sync();
      for (const p of extra) this.dropPartition(p);
      await this.pg.releaseLeases(extra);
      this.hooks.log('partitions_released', { partitions: extra.length, liveInstances: this.liveInstances });
    } else if (held.length < fair) {
      const claimed = await this.pg.claimLeases(fair - held.length, this.opts.leaseTtlMs);
      if (claimed.length) await this.takeOver(claimed);
    }
    await this.adoptSpanLog();
    // Runs the engine pruned (settled past retention) leave this instance's memory too.
    this.store.retain((run) => this.engine!.verdictOf(run) !== null);
    return true;
  }

  /**
   * Takes partitions over, all or nothing (issue 49): a partition counts as taken over (listed from memory, its
   * timers trusted) only once every run of it is read in. When a statement of the takeover fails (the database
   * restarted, a connection reset, a deadline), the partitions are dropped here again, with whatever of their runs was
   * read so far, and their leases kept: the next renewal finds them held and not loaded and takes them over anew.
   */
  private async takeOver(parts: number[]): Promise<void> {
    try {
      await this.load(parts);
    } catch (e) {
      for (const p of parts) this.dropPartition(p);
      this.hooks.log('takeover_failed', { partitions: parts.length, error: (e as Error).message });
    }
  }

  /**
   * Reads partitions in: from now on receipts of their runs are folded here (the tail includes them from the current
   * position), and everything stored before is read now. Rows read twice are duplicates of the fold.
   */
  private async load(parts: number[]): Promise<void> {
    const engine = this.engine!;
    const started = this.hooks.clock();
    for (const p of parts) {
      this.owned.add(p);
      this.acquired.set(p, this.renewalsSent);
    }
    // Run by run, a group of runs at a time (every receipt's run has a row, written in the same statement): what is
    // in memory at once is the partitions' run rows and one group's receipts, not every receipt of the partitions.
    const runs = await this.pg.partitionRuns(parts);
    let adopted = 0;
    for (let i = 0; i < runs.length; i += TAKEOVER_RUNS) {
      const group = runs.slice(i, i + TAKEOVER_RUNS).filter((r) => this.owns(r.run));
      const receipts = await this.pg.receiptsOfRuns(group.map((r) => r.run));
      if (!(await this.keepLeases())) return;
      const now = this.hooks.clock();
      for (const stored of group) {
        const run = stored.run;
        const list = receipts.get(run);
        if (list === undefined) continue; // no receipt (pruned meanwhile)
        let content: string | null = null;
        if (stored.pin && stored.contractHash) {
          this.store.rememberPin(run, { pin: stored.pin, contractHash: stored.contractHash });
          content = this.store.getContractContent(stored.contractHash) ?? (await this.pg.getContractContent(stored.contractHash));
          if (content) this.store.rememberContract(stored.contractHash, content);
        }
        if (!this.owns(run)) continue; // lost again meanwhile
        try {
          engine.adopt(stored, list, content, now);
          adopted++;
        } catch (e) {
          this.hooks.log('takeover_run_failed', { run, error: (e as Error).message });
        }
      }
    }
    // Acknowledgements of the partitions' runs made anywhere before.
    for (const ack of await this.pg.acksSince(0, parts)) engine.applyAck(ack.run, ack.verdict, ack.ackedAt, ack);
    for (const p of parts) if (this.owned.has(p)) this.adopted.add(p);
    this.takeovers += parts.length;
    this.hooks.log('partitions_taken', { partitions: parts.length, runs: adopted, ms: this.hooks.clock() - started });
  }

  private dropPartition(p: number): void {
    this.adopted.delete(p);
    this.acquired.delete(p);
    if (!this.owned.delete(p)) return;
    this.pg.unfence([p]);
    const engine = this.engine!;
    for (const run of engine.liveRunIds()) {
      if (this.pg.partitionOf(run) === p) {
        engine.drop(run);
        this.store.forget(run);
      }
    }
    // Transitions whose state was not written (forgotten with the run): the partition's next owner counts from the table.
    for (const run of [...this.pendingCounts.keys()]) if (this.pg.partitionOf(run) === p) this.pendingCounts.delete(run);
    // Spans of the partition's traces waiting here for a caller: its next owner adopts their records (adoptSpanLog).
    const dropped = this.dropTraces?.((traceId) => this.pg.partitionOf(traceId) === p) ?? 0;
    if (dropped > 0) this.hooks.log('pending_spans_handed_over', { partition: p, spans: dropped });
  }

  /** Folds receipts other instances stored for runs owned here, in commit order; applies acknowledgements made anywhere. */
  private async tail(): Promise<void> {
    this.guard();
    if (this.owned.size === 0) {
      this.cursor = await this.pg.headSeq();
      return;
    }
    if (this.opts.spanRouting === 'any' && this.replaySpanLog) {
      // Span records other instances forwarded for traces this instance resolves.
      const began = this.hooks.clock();
      // Whoever forwarded them, this instance included (it may have taken the partition after forwarding).
      const entries = await this.pg.forwardedSpanLog(this.ownedParts(), SPAN_LOG_PAGE);
      if (!this.guard()) return;
      if (entries.length) {
        this.store.setAdopted(entries.map((e) => ({ seq: e.seq, traceId: e.traceId, body: e.body })));
        await this.replaySpanLog();
        await this.store.sync(); // the replayed entries are deleted before the next read
      }
      // Every span forwarded before a root that arrived before `began` was committed before that read began, so is
      // here now (for a sender that sends its batches one after another), unless the read was a full page (more to
      // read: the roots wait for the next one). Roots also wait LANGGRAPH_SETTLE_MS, for batches sent side by side.
      if (entries.length < SPAN_LOG_PAGE) await this.readLangGraphRoots?.(began - LANGGRAPH_SETTLE_MS);
    }
    // The acknowledgements and the first page of receipts in one round trip (the timer's every 100 ms, per instance).
    const first = await this.pg.tailWithAcks(this.cursor, this.tailBatch, this.ownedParts(), this.pg.instance, this.ackCursor);
    if (!this.guard()) return;
    for (const ack of first.acks) {
      this.engine!.applyAck(ack.run, ack.verdict, ack.ackedAt, ack);
      this.ackCursor = ack.seq;
    }
    for (let page: TailedReceipt[] | null = first.receipts; ; page = null) {
      const rows = page ?? (await this.pg.tail(this.cursor, this.tailBatch, this.ownedParts(), this.pg.instance));
      if (!(await this.keepLeases())) return;
      if (rows.length > 0) {
        await this.engine!.foldStored(rows.map((r) => r.receipt), this.hooks.clock());
        this.cursor = rows[rows.length - 1].seq;
      }
      if (rows.length < this.tailBatch) {
        // The first page was not full: nothing up to its snapshot's head is left to fold here (tailWithAcks).
        if (page !== null) this.cursor = Math.max(this.cursor, first.head);
        return;
      }
    }
  }

  /**
   * Span records held by processes that are gone (an instance that died, or an earlier life of an instance restarted
   * under the same name, this one included), in trace partitions owned here: replayed (and re-logged) here.
   */
  private async adoptSpanLog(): Promise<void> {
    if (!this.replaySpanLog || this.owned.size === 0) return;
    const parts = this.ownedParts();
    const partsKey = parts.join(',');
    const now = this.mono();
    // From the last read's end while the owned partitions and the live processes are those it saw: a record up to it
    // becomes adoptable only when its holder stops being live (which changes `live`). Otherwise, and every
    // ADOPT_RESCAN_MS, from the start (issue 35: reading every owned record twice a second cost ~5 ms a read, growing).
    const c = this.adoptCursor;
    let base = c !== null && c.parts === partsKey && now - c.fullAt < ADOPT_RESCAN_MS ? c : null;
    let fullAt = base ? base.fullAt : now;
    let live0: string | null = null;
    let steady = true;
    // A page at a time (each replayed, then deleted): bounded memory however much the instances that died had logged.
    let n = 0;
    let pages = 0;
    for (let after = base ? base.from : 0; ; ) {
      // With `--span-routing any` only a partition's owner holds records of its traces: those held by any other process
      // (a live one that lost the partition too) are this owner's now.
      const page = await this.pg.orphanSpanLogPage(parts, after, SPAN_LOG_PAGE, this.opts.spanRouting === 'any');
      if (!this.guard()) {
        this.adoptCursor = null;
        break;
      }
      if (live0 === null) {
        if (base !== null && page.live !== base.live) {
          // A process started or stopped being live since the read the cursor came from: read from the start.
          base = null;
          fullAt = now;
          after = 0;
          continue;
        }
        live0 = page.live;
      } else if (page.live !== live0) {
        steady = false;
      }
      const entries = page.entries;
      if (entries.length > 0) {
        pages++;
        this.store.setAdopted(entries.map((e) => ({ seq: e.seq, traceId: e.traceId, body: e.body })));
        n += await this.replaySpanLog();
        await this.store.sync();
        if (!(await this.keepLeases())) {
          this.adoptCursor = null;
          break;
        }
        after = entries[entries.length - 1].seq;
      }
      if (entries.length < SPAN_LOG_PAGE) {
        // Every adoptable record up to the page's head was among those read (same snapshot; seqs up to a committed head
        // are final). A read that saw the live processes change between its pages starts from the start next time.
        this.adoptCursor = steady ? { parts: partsKey, live: live0, from: Math.max(after, page.head), fullAt } : null;
        break;
      }
    }
    if (pages > 0) this.hooks.log('span_log_adopted', { entries: n });
  }

}
