/**
 * The fold step of append -> fold -> pin -> evaluate: each committed receipt into its live run's state (RunState.add),
 * a run that left live memory loaded again first, a run whose fold reads its history back loaded first where the
 * store answers only asynchronously; and, in a cluster, the folds of receipts other instances stored (the tail) and
 * of a run taken over with its partition.
 */
import type { AddResult } from '../core/classify.js';
import type { Receipt } from '../core/types.js';
import type { PinRecord, LiveRun as StoredRun } from '../store/index.js';
import { countType, type PerType } from './append-step.js';
import type { Digest } from './delivered.js';
import type { EvaluateStep } from './evaluate-step.js';
import { nextChange, type LiveRun } from './live-run.js';
import type { LiveRuns } from './live-runs.js';
import type { Ownership } from './ownership.js';
import type { Pinner } from './pinning.js';
import type { ReadAhead } from './read-ahead.js';
import type { Retirement } from './retirement.js';
import { Slicer } from './slicer.js';
import type { EngineStore } from './store.js';

/** What the fold step reads and calls besides the live runs. */
export interface FoldHost {
  readonly store: EngineStore;
  readonly pinner: Pinner;
  readonly ownership: Ownership;
  readonly ahead: ReadAhead;
  readonly evaluation: EvaluateStep;
  readonly retirement: Retirement;
}

export class FoldStep {
  constructor(
    private readonly live: LiveRuns,
    private readonly host: FoldHost,
  ) {}

  /**
   * The fold step of ingest: each committed receipt into its run's state. A large batch (a post naming 20,000 agents,
   * or 100,000 new runs) is folded in slices of at most ~8 ms that yield to the event loop, so health checks and
   * other clients are answered meanwhile.
   */
  async fold(receipts: readonly Receipt[], results: readonly ('accepted' | 'duplicate' | 'conflict')[], digests: readonly Digest[], perType: PerType, touched: Set<string>, now: number, source?: string): Promise<void> {
    const ownership = this.host.ownership;
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
      let live = this.live.get(r.run);
      // Marked before the append (cluster mode: looked up then, its history read ahead for this fold), or (a single
      // instance) retired while this batch was being committed (its state is in the store).
      if (!live && (this.live.returning.has(r.run) || (this.host.retirement.retires && this.host.store.synchronousReads && this.host.store.runVerdict!(r.run)?.verdict != null))) {
        // Back from the store with everything stored, this batch's receipts of the run included.
        live = this.host.retirement.reload(r.run, now, source);
        (reloaded ??= new Set()).add(r.run);
      }
      live ??= this.live.create(r.run, now, undefined, source);
      if (live.receivedAt !== now) this.live.received(live, now);
      if (reloaded?.has(r.run)) {
        countType(perType, r.type, results[i]);
        touched.add(r.run); // evaluated again (and, settled, it leaves memory again)
        continue;
      }
      let result = this.add(live, r, results[i]);
      if (typeof result !== 'string') result = await result;
      if (result !== 'duplicate') this.live.hold(live);
      const outcome = results[i] === 'conflict' || result === 'conflict' ? 'conflict' : result;
      if (outcome !== 'duplicate') touched.add(r.run);
      if (outcome !== 'conflict') this.live.delivered.record(r.run, r.event, digests[i]);
      countType(perType, r.type, outcome);
    }
  }

  /** The pins the append wrote (or found in force): held by their live runs, so the pin step persists nothing. */
  holdPins(pins: ReadonlyMap<string, PinRecord>): void {
    for (const [run, record] of pins) {
      const live = this.live.get(run);
      if (live && !live.pin) live.pin = record;
    }
  }

  /**
   * The runs of a committed batch whose fold reads their history back (RunState.readsBackToAdd with the store's
   * answer; a run not held yet only for a stored conflict): loaded before the fold where the store answers only
   * asynchronously. None where it answers synchronously.
   */
  historyNeeded(receipts: readonly Receipt[], results: readonly AddResult[]): string[] {
    if (this.host.ahead.synchronous) return [];
    const runs: string[] = [];
    for (let i = 0; i < receipts.length; i++) {
      const r = receipts[i];
      if (!this.host.ownership.owns(r.run)) continue;
      const live = this.live.get(r.run);
      if (live ? live.state.readsBackToAdd(r, results[i]) : results[i] === 'conflict') runs.push(r.run);
    }
    return runs;
  }

  /**
   * RunState.add, the run's history loaded first when the add reads it back and it is not loaded (a fold into the
   * run since the batch's load made a repeat of it, or the tail's fold of another instance's receipts).
   */
  private add(live: LiveRun, r: Receipt, known?: AddResult): AddResult | Promise<AddResult> {
    if (this.host.ahead.loaded(r.run) || !live.state.readsBackToAdd(r, known)) return live.state.add(r, known);
    return this.host.ahead.around([r.run], () => live.state.add(r, known));
  }

  /**
   * Cluster mode: fold receipts that other instances stored for runs this instance owns (read from the shared store
   * in commit order), then re-evaluate the touched runs. Counts nothing in the receipts metrics: the instance that
   * received them counted them. Repeats (a row seen again after a takeover) are duplicates of the fold.
   */
  async foldStored(receipts: readonly Receipt[], now: number): Promise<number> {
    const touched = new Set<string>();
    const owned = receipts.filter((r) => this.host.ownership.owns(r.run));
    // A run that left memory (settled) is loaded again with everything stored (these receipts included); the runs
    // are held in memory until evaluated (Retirement.holding).
    await this.host.retirement.holding(
      owned.map((r) => r.run),
      now,
      async (returning) => {
        const reloaded = new Set<string>();
        if (returning.length) {
          await this.host.ahead.around(returning, () => {
            for (const run of returning) {
              if (this.live.has(run) || !this.live.returning.has(run)) continue;
              this.host.retirement.reload(run, now);
              reloaded.add(run);
              touched.add(run);
            }
          });
        }
        for (const r of owned) {
          if (reloaded.has(r.run)) continue;
          const live = this.live.get(r.run) ?? this.live.create(r.run, now);
          let result = this.add(live, r);
          if (typeof result !== 'string') result = await result;
          if (this.live.counted(live, r, result)) touched.add(r.run);
        }
        const waiting: Promise<void>[] = [];
        for (const run of touched) {
          const pending = this.host.evaluation.reevaluate(run, now);
          if (pending) waiting.push(pending);
        }
        await Promise.all(waiting);
      },
    );
    return touched.size;
  }

  /**
   * Cluster mode: take over a run from the shared store (its partition was just claimed): fold its receipts and
   * evaluate it. The verdict its previous owner stored counts as the previous verdict, so a takeover that changes
   * nothing is no transition (metrics summed over instances count each transition once).
   */
  adopt(stored: StoredRun, receipts: readonly Receipt[], contractContent: string | null, now: number): void {
    if (stored.pin && stored.contractHash && contractContent) this.host.pinner.learn(stored.contractHash, contractContent, `pinned ${stored.pin.contract}@${stored.pin.version}`);
    const live = this.live.get(stored.run) ?? this.live.create(stored.run, stored.updatedAt, stored.updatedAt);
    if (stored.pin && stored.contractHash && !live.pin) live.pin = { pin: stored.pin, contractHash: stored.contractHash };
    // The takeover's read is the run's receipts: what its fold and evaluation read back (cluster mode).
    this.host.ahead.withRead(stored.run, receipts, () => this.adoptFold(stored, live, receipts, now));
  }

  private adoptFold(stored: StoredRun, live: LiveRun, receipts: readonly Receipt[], now: number): void {
    for (const r of receipts) this.live.counted(live, r, live.state.add(r));
    if (live.state.size === 0 && live.state.conflicts.size === 0) {
      this.live.discard(stored.run, live);
      return;
    }
    if (live.verdict === null && stored.verdict) {
      // The stored verdict stands for the previous one: subscribers see a transition only if evaluation moves it.
      const previous = this.host.evaluation.evaluate(live.state, this.host.evaluation.pin(live), now, live);
      if (previous.verdict === stored.verdict) {
        live.verdict = previous;
        this.live.recount(live);
        this.live.changed(live);
        this.live.deadlines.set(stored.run, nextChange(live));
        // Not a transition; the list views' row is written again (its findings may have moved, or never been written), its
        // update time kept (retention counts from it).
        if (this.host.store.listsVerdicts) {
          live.listedFirstAt = live.state.firstAt;
          this.host.store.setVerdictState(stored.run, previous.verdict, previous.settled, stored.updatedAt, { verdict: previous, firstAt: live.state.firstAt });
        }
        // Settled: it leaves memory at once, counted in topology_runs (as any settled run here).
        this.host.retirement.retireIfSettled(stored.run, live, now);
        return;
      }
    }
    this.host.evaluation.reevaluate(stored.run, now);
  }
}
