/**
 * The live runs: the one map of the runs held in memory, with what must move with it (the receipts they hold, the
 * redelivery digests, the deadline, idle and retire heaps, the runs being loaded again, the admission counts and the
 * events announcing a change). Every step of the engine (fold, evaluate, retire, restore, list) reads and changes
 * the live runs through it, so those invariants have one owner.
 */
import { RunState, type AddResult, type ReceiptSource } from '../core/classify.js';
import type { Receipt, RunVerdict } from '../core/types.js';
import { DeliveredDigests } from './delivered.js';
import type { AuditEvents, EventBus } from './events.js';
import { DeadlineHeap } from './heap.js';
import type { LiveRun } from './live-run.js';

/** What the live runs tell admission (admission.ts): a run counted, or no longer. */
export interface LiveCounts {
  track(live: LiveRun): void;
  untrack(live: LiveRun): void;
}

export class LiveRuns {
  private readonly runs = new Map<string, LiveRun>();
  /** Each live run's next change with time alone (nextChange): tick re-evaluates the due ones. */
  readonly deadlines = new DeadlineHeap();
  /** Live runs by the server time of their latest receipt: idle eviction takes the longest idle first (no walk). */
  readonly idle = new DeadlineHeap();
  /** Settled runs in an alerting verdict, by the end of their alert window: then they leave live memory. */
  readonly retireAt = new DeadlineHeap();
  /**
   * Runs of the batch being folded that are in the store but not in live memory (settled and retired, or left idle):
   * loaded again from the store by their fold. Transient: a run is in it only between its batch's check and fold.
   */
  readonly returning = new Set<string>();
  /** Digests of stored receipts of live runs: a redelivery is recognised without the store (see DeliveredDigests). */
  readonly delivered: DeliveredDigests;
  /** Receipts the live runs hold (distinct contents): what --max-live-receipts counts. */
  heldReceipts = 0;

  constructor(
    private readonly events: EventBus<AuditEvents>,
    private readonly counts: LiveCounts,
    /** Where a live RunState reads its receipts back (read-ahead.ts). */
    private readonly source: ReceiptSource,
    maxDeliveredDigests?: number,
  ) {
    this.delivered = new DeliveredDigests(maxDeliveredDigests);
  }

  get(run: string): LiveRun | undefined {
    return this.runs.get(run);
  }

  has(run: string): boolean {
    return this.runs.has(run);
  }

  get size(): number {
    return this.runs.size;
  }

  values(): IterableIterator<LiveRun> {
    return this.runs.values();
  }

  ids(): string[] {
    return [...this.runs.keys()];
  }

  entries(): IterableIterator<[string, LiveRun]> {
    return this.runs.entries();
  }

  /** A new RunState of a run, reading back through the live runs' source. */
  state(run: string): RunState {
    return new RunState(run, this.source);
  }

  /** A run put in live memory (loaded again, restored; counted by admission), replacing one held before. */
  put(run: string, live: LiveRun): void {
    const replaced = this.runs.get(run);
    if (replaced && replaced !== live) {
      this.events.publish('runForgotten', { live: replaced, retired: false });
      this.counts.untrack(replaced);
    }
    this.runs.set(run, live);
    this.heldReceipts += live.held;
    this.counts.track(live);
  }

  /** A new live run (not evaluated yet); `source`: whose receipt brought it (the fair live cap counts per source). */
  create(run: string, at: number, entered?: number, source?: string): LiveRun {
    const live: LiveRun = { state: this.state(run), verdict: null as unknown as RunVerdict, updatedAt: at, held: 0 };
    if (entered !== undefined) live.enteredAt = entered;
    if (source !== undefined) live.source = source;
    this.runs.set(run, live);
    this.counts.track(live);
    return live;
  }

  /**
   * Takes a run out of live memory (pruned, evicted, dropped, retired): its held receipts, digests, deadline, idle
   * entry and gauge rows (`retired`: a settled run stays counted in topology_runs, see RunGauges.runRetired).
   */
  forget(run: string, live: LiveRun, retired = false): void {
    this.runs.delete(run);
    this.events.publish('runForgotten', { live, retired });
    this.heldReceipts -= live.held;
    this.delivered.forget(run);
    this.deadlines.set(run, null);
    this.idle.set(run, null);
    this.retireAt.set(run, null);
    this.counts.untrack(live);
  }

  /** A run created by a takeover that found nothing to hold: gone again, nothing else held for it. */
  discard(run: string, live: LiveRun): void {
    this.runs.delete(run);
    this.events.publish('runForgotten', { live, retired: false });
    this.counts.untrack(live);
  }

  /** A live run evaluated: admission counts it among the runs that can still change, or no longer. */
  recount(live: LiveRun): void {
    this.counts.track(live);
  }

  /** A live run received a receipt at server time `at` (idle eviction orders by it). */
  received(live: LiveRun, at: number): void {
    live.receivedAt = at;
    this.idle.set(live.state.run, at);
  }

  /** The run's verdict, its entry time or its receipts changed (the gauges listen). */
  changed(live: LiveRun): void {
    this.events.publish('runChanged', { live });
  }

  /** A receipt folded into a live run that holds it now (not a duplicate). */
  hold(live: LiveRun): void {
    live.held++;
    this.heldReceipts++;
  }

  /** Counts a stored receipt folded into a live run (no store answer known); whether it changed the run. */
  counted(live: LiveRun, r: Receipt, result: AddResult): boolean {
    if (result === 'duplicate') return false;
    this.hold(live);
    if (result === 'accepted') this.delivered.record(r.run, r.event, DeliveredDigests.digest(r));
    return true;
  }
}
