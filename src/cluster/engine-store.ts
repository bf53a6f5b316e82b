/**
 * The engine's store in cluster mode (`serve --store postgres://...`): the AuditEngine reads pins and contract
 * content synchronously, so this view answers them from what this instance holds (loaded when it takes a partition
 * over, or written by it). Receipts go straight to the shared store's group commit: an append resolves only after
 * the PostgreSQL COMMIT (acknowledged = committed), and a run's first pin handed to the append (with its contract's
 * content) is written in that same transaction. Pins set otherwise (setPin: a run not pinned by an append) are
 * written behind by the next flush (the tick), contract content by putContractContent. A run's
 * receipts are read back from the shared store, asynchronously (readReceipts), when the engine needs them: this
 * instance holds no receipt in memory, only the live runs' aggregates, as a single instance does.
 */
import type { Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import { listedJson } from '../audit/listing.js';
import { sharedPin } from '../core/registry.js';
import { StoreCommitError, type AppendPin, type AppendResult, type LiveRun, type PinRecord, type PrunableRun, type Slicer, type SpanLogEntry, type StoredReceipt } from '../store/index.js';
import type { PgStore } from '../store/pg-store.js';
import type { AsyncEngineStore } from '../audit/store.js';

/** A span log entry another (dead) instance logged, adopted by the owner of its trace's partition. */
export interface AdoptedSpanLogEntry {
  seq: number;
  traceId: string;
  body: string;
}

/** A verdict state set and not written yet; `full` the evaluation it came from (runs.listed). */
interface VerdictState {
  run: string;
  verdict: Verdict;
  settled: boolean;
  updatedAt: number;
  full?: { verdict: RunVerdict; firstAt: number };
}

export class ClusterEngineStore implements AsyncEngineStore {
  private readonly pins = new Map<string, PinRecord>();
  private readonly contracts = new Map<string, string>();
  private verdicts = new Map<string, VerdictState>();
  /** The engine writes the verdict state whenever what the list views show changes: the other instances list from it. */
  readonly listsVerdicts = true;
  /** A run's receipts are read from the shared store asynchronously only (readReceipts): the engine reads ahead. */
  readonly synchronousReads = false;
  /** Pins set here and not written yet (written by the next flush; kept when the run is forgotten meanwhile). */
  private pendingPins = new Map<string, PinRecord>();
  private readonly writes = new Set<Promise<unknown>>();
  private adopted: AdoptedSpanLogEntry[] = [];
  private failures = 0;
  private flushing: Promise<void> | null = null;
  /** The runs of the flush in flight (its verdict states and pins), until it is done. */
  private inFlight: readonly string[] = [];
  /** The verdict states of the flush in flight, by run (storedRuns answers them until they land). */
  private inFlightStates = new Map<string, VerdictState>();

  constructor(
    readonly pg: PgStore,
    /** The partitions this instance owns (pruning is limited to them). */
    private readonly ownedParts: () => readonly number[],
    private readonly log: (event: string, fields?: Record<string, unknown>) => void = () => {},
  ) {}

  /**
   * Stores receipts, and the first pins of their runs in the same transaction: resolves only after the shared store's
   * COMMIT. The pins in force (this append's, or another writer's written before) are held here from then on.
   */
  async append(items: readonly StoredReceipt[], spanLog?: readonly SpanLogEntry[], pins?: readonly AppendPin[]): Promise<AppendResult> {
    const res = await this.pg.append(items, spanLog, pins);
    if (pins?.length) {
      for (const p of pins) if (!this.contracts.has(p.contractHash)) this.contracts.set(p.contractHash, p.content);
      if (res.pins) for (const [run, record] of res.pins) this.pins.set(run, record);
    }
    return res;
  }

  /**
   * A run's receipts read back from the shared store (a conflict's rebuild, the events of an unknown agent, the API):
   * every distinct content per (run, event) in commit order.
   */
  readReceipts(run: string): Promise<Receipt[]> {
    return this.pg.runReceipts(run);
  }

  /** Many runs' receipts in one query (a batch's runs loaded again, ReadAhead.around). */
  readManyReceipts(runs: readonly string[]): Promise<Map<string, Receipt[]>> {
    return this.pg.receiptsOfRuns(runs);
  }

  /** Forgets the pins of runs the engine no longer holds (pruned or dropped). */
  retain(live: (run: string) => boolean): void {
    for (const run of this.pins.keys()) if (!live(run)) this.pins.delete(run);
  }

  getPin(run: string): PinRecord | null {
    return this.pins.get(run) ?? null;
  }

  /**
   * The first pin wins in the shared store too: when another owner's pin is already there, it replaces this one here.
   * Written behind by the next flush (the tick), with every pin set meanwhile in one statement: one transaction, and
   * one WAL flush, per tick rather than per new run.
   */
  setPin(run: string, pin: Pin, contractHash: string): PinRecord {
    const existing = this.pins.get(run);
    if (existing) return existing;
    const record: PinRecord = { pin: sharedPin(pin.contract, pin.version, pin.phase), contractHash };
    this.pins.set(run, record);
    this.pendingPins.set(run, record);
    return record;
  }

  /** What a takeover read from the shared store. */
  rememberPin(run: string, record: PinRecord): void {
    this.pins.set(run, record);
  }

  rememberContract(hash: string, content: string): void {
    this.contracts.set(hash, content);
  }

  forget(run: string): void {
    this.pins.delete(run);
    this.verdicts.delete(run);
  }

  setVerdictState(run: string, verdict: Verdict, settled: boolean, updatedAt: number, full?: { verdict: RunVerdict; firstAt: number }): void {
    this.verdicts.set(run, { run, verdict, settled, updatedAt, full });
  }

  /**
   * Writes the pins and the verdict states set since the last call (one statement each); called by the tick.
   * Never rejects: what failed is put back for the next flush.
   */
  flush(): Promise<void> {
    // One flush at a time, so a run's states land in the order they were set.
    if (this.flushing) return this.flushing;
    if (this.verdicts.size === 0 && this.pendingPins.size === 0) return Promise.resolve();
    const pins = [...this.pendingPins];
    this.pendingPins = new Map();
    const rows = [...this.verdicts.values()];
    this.verdicts = new Map();
    this.inFlight = [...pins.map(([run]) => run), ...rows.map((r) => r.run)];
    this.inFlightStates = new Map(rows.map((r) => [r.run, r]));
    this.flushing = Promise.all([this.track(this.writePins(pins), 'pin_write_failed'), this.track(this.writeVerdicts(rows), 'verdict_write_failed')]).then(() => {
      this.flushing = null;
      this.inFlight = [];
      this.inFlightStates = new Map();
    });
    return this.flushing;
  }

  /**
   * The runs whose verdict state or pin was set here and is not committed yet (set since the last flush, or in the
   * flush in flight; a failed write's, until written): their stored verdict or pin may lag what memory holds, so a
   * page of the run list filtered on either reads them whatever is stored (ClusterReads.storedPage). One tick's
   * changes (about 100 ms), more only while the writes fail.
   */
  unwritten(): string[] {
    return [...new Set([...this.verdicts.keys(), ...this.pendingPins.keys(), ...this.inFlight])];
  }

  private async writePins(pins: [string, PinRecord][]): Promise<void> {
    if (pins.length === 0) return;
    try {
      const inForce = await this.pg.setPins(pins.map(([run, r]) => ({ run, pin: r.pin, contractHash: r.contractHash })));
      // The pin in force is the first any instance wrote; a run forgotten meanwhile stays forgotten.
      for (const [run, record] of inForce) if (this.pins.has(run)) this.pins.set(run, record);
    } catch (e) {
      for (const [run, r] of pins) if (!this.pendingPins.has(run)) this.pendingPins.set(run, r);
      throw e;
    }
  }

  private async writeVerdicts(rows: VerdictState[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      // Fenced: rows of partitions this instance no longer holds (lost while it was paused) are refused, not retried.
      // With each verdict what the list views show (serialised here: once per run per flush, the latest only).
      const refused = await this.pg.setVerdictStates(
        rows.map((r) => ({ run: r.run, verdict: r.verdict, settled: r.settled, updatedAt: r.updatedAt, listed: r.full && r.full.verdict.verdict === r.verdict ? listedJson(r.full.verdict, r.full.firstAt) : null })),
      );
      if (refused > 0) this.log('fenced_write_refused', { write: 'verdict_states', rows: refused });
    } catch (e) {
      // Put them back (unless newer ones were set meanwhile) for the next flush.
      for (const r of rows) if (!this.verdicts.has(r.run)) this.verdicts.set(r.run, r);
      throw e;
    }
  }

  putContractContent(hash: string, contract: string, version: string, content: string): void {
    if (this.contracts.has(hash)) return;
    this.contracts.set(hash, content);
    void this.track(this.pg.putContractContent(hash, contract, version, content), 'contract_write_failed');
  }

  getContractContent(hash: string): string | null {
    return this.contracts.get(hash) ?? null;
  }

  /** Nothing to restore: an instance of a cluster takes runs over partition by partition (ClusterCoordinator). */
  *iterateLiveRuns(): Generator<LiveRun> {}

  /** Deletes behind (see RunRows.prune): `pruned` is told each committed batch's runs. */
  prune(olderThanMs: number, now: number, pruned?: (runs: readonly PrunableRun[]) => void): number {
    const parts = this.ownedParts();
    if (parts.length) void this.track(this.pg.prune(olderThanMs, now, parts, pruned), 'prune_failed');
    return 0;
  }

  /**
   * Runs' stored rows for runs that left memory (Retirement.checkReturning), in one query: the verdict state and pin
   * set here and not written yet (or in the flush in flight) win over what is stored, and the pinned contracts'
   * content is read once (held from then on, as a takeover does).
   */
  async storedRuns(runs: readonly string[]): Promise<Map<string, LiveRun>> {
    const out = new Map<string, LiveRun>();
    let rows: LiveRun[];
    try {
      rows = await this.pg.getRuns(runs);
    } catch (e) {
      // Before the append: the request fails as a commit would (503, nothing stored, the exporter retries).
      throw new StoreCommitError(e);
    }
    for (const row of rows) out.set(row.run, row);
    for (const run of runs) {
      const state = this.verdicts.get(run) ?? this.inFlightStates.get(run);
      const pin = this.pendingPins.get(run);
      if (!state && !pin) continue;
      const row = out.get(run) ?? { run, firstAt: state?.updatedAt ?? 0, updatedAt: state?.updatedAt ?? 0, verdict: null, settled: false, pin: null, contractHash: null };
      if (state) Object.assign(row, { verdict: state.verdict, settled: state.settled, updatedAt: Math.max(row.updatedAt, state.updatedAt) });
      if (pin && !row.pin) Object.assign(row, { pin: pin.pin, contractHash: pin.contractHash });
      out.set(run, row);
    }
    const missing = [...new Set([...out.values()].flatMap((r) => (r.contractHash && !this.contracts.has(r.contractHash) ? [r.contractHash] : [])))];
    if (missing.length) {
      const contents = await this.pg.contractContents(missing).catch((e: unknown) => {
        throw new StoreCommitError(e);
      });
      for (const [hash, content] of contents) this.contracts.set(hash, content);
    }
    return out;
  }

  /** Span log entries to replay: those adopted from dead instances (set by the coordinator before a replay). */
  spanLog(): { seq: number; traceId: string; body: string }[] {
    return this.adopted;
  }

  setAdopted(entries: AdoptedSpanLogEntry[]): void {
    this.adopted = entries;
  }

  /** After a replay: the adopted entries are deleted (the replay logged what still waits under this instance). */
  deleteSpanLogUpTo(seq: number): void {
    const done = this.adopted.filter((e) => e.seq <= seq).map((e) => e.seq);
    this.adopted = this.adopted.filter((e) => e.seq > seq);
    if (done.length) {
      void this.track(
        this.pg.deleteSpanLog(done).then((n) => {
          if (n < done.length) this.log('fenced_write_refused', { write: 'span_log_delete', rows: done.length - n });
        }),
        'span_log_delete_failed',
      );
    }
  }

  /** Awaited by the periodic job (one pass at a time), which logs and counts a failure (periodic_task_failed). */
  pruneSpanLog(before: number, stillPending: (traceId: string) => boolean, slicer?: Slicer): Promise<number> {
    return this.pg.pruneSpanLog(before, stillPending, this.pg.instance, slicer);
  }

  /** Background writes that failed since start (each is logged). */
  get failedWrites(): number {
    return this.failures;
  }

  /** Resolves when every write started so far has landed (or failed). */
  async sync(): Promise<void> {
    await this.flush(); // the flush in flight, if any
    await this.flush(); // what was set meanwhile
    while (this.writes.size) await Promise.allSettled([...this.writes]);
  }

  /** A background write: awaited by sync(); a failure is counted and logged (content-free), never thrown. */
  private track(p: Promise<unknown>, failure: string): Promise<void> {
    const settled = p.then(
      () => undefined,
      (e: unknown) => {
        this.failures++;
        this.log(failure, { error: (e as Error).message });
      },
    );
    this.writes.add(settled);
    void settled.then(() => this.writes.delete(settled));
    return settled;
  }
}
