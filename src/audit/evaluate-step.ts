/**
 * The pin and evaluate steps of append -> fold -> pin -> evaluate, for the live runs: a run's pinning (pinning.ts),
 * the one verdict function (and the shadow verdicts of candidate versions), what a new verdict publishes (events.ts)
 * and writes back (the run's verdict state), and its next deadline. A large run is evaluated in slices that yield to
 * the event loop. Where the store answers only asynchronously, an evaluation that reads the run back has the run's
 * history loaded first (read-ahead.ts).
 */
import { evaluate, evaluateSteps, evaluationReadsBack, type Pinning, type RunState } from '../core/classify.js';
import type { Contract } from '../core/contract.js';
import type { ContractRegistry } from '../core/registry.js';
import { shadowEvaluate, shadowReadsBack } from '../core/shadow.js';
import type { RunVerdict } from '../core/types.js';
import type { AuditEvents, EventBus } from './events.js';
import { nextChange, verdictKey, type LiveRun } from './live-run.js';
import type { LiveRuns } from './live-runs.js';
import { sameListed } from './listing.js';
import type { Pinner } from './pinning.js';
import type { ReadAhead } from './read-ahead.js';
import { Slicer } from './slicer.js';
import type { EngineStore } from './store.js';

/** What the evaluate step reads and calls besides the live runs. */
export interface EvaluateHost {
  readonly registry: ContractRegistry;
  readonly pinner: Pinner;
  readonly store: EngineStore;
  readonly events: EventBus<AuditEvents>;
  readonly ahead: ReadAhead;
  /** Candidate versions every run of their contract is also evaluated against. */
  readonly shadow?: readonly Contract[];
  retireIfSettled(run: string, live: LiveRun, now: number): void;
}

export class EvaluateStep {
  /** Re-evaluations waiting for the run's history to load (cluster mode), by run. */
  private readonly deferred = new Map<string, Promise<void>>();

  constructor(
    private readonly live: LiveRuns,
    private readonly host: EvaluateHost,
  ) {}

  /** The pin step for a live run: its pinning (the first pin persisted), the pin record kept on the run. */
  pin(live: LiveRun): Pinning {
    return this.host.pinner.pin(live.state, live.pin, (record) => (live.pin = record));
  }

  /** The evaluate step: the one verdict function; with candidates configured, also the shadow verdicts, kept on `shadowInto`. */
  evaluate(state: RunState, pinning: Pinning, now: number, shadowInto?: LiveRun): RunVerdict {
    const opts = { registry: this.host.registry };
    const verdict = evaluate(state, pinning, now, opts);
    if (this.host.shadow?.length && shadowInto) shadowInto.shadow = shadowEvaluate(state, pinning, verdict, this.host.shadow, now, opts);
    return verdict;
  }

  /**
   * Re-evaluates a live run. When the evaluation reads the run's receipts back (evaluationReadsBack) and the store
   * answers only asynchronously, its history is loaded first and it is evaluated then: the returned promise resolves then.
   */
  reevaluate(run: string, now: number): Promise<void> | undefined {
    const live = this.live.get(run);
    if (!live) return;
    const before = live.verdict;
    const shadowBefore = live.shadow;
    const pinning = this.pin(live);
    if (this.readsBack(live, pinning)) return this.defer(run, now);
    const after = this.evaluate(live.state, pinning, now, live);
    live.verdict = after;
    this.live.changed(live);
    live.updatedAt = now;
    this.live.deadlines.set(run, nextChange(live));
    if (live.shadow && this.host.events.has('shadowEntered')) {
      for (const sv of live.shadow) {
        const prev = shadowBefore?.find((x) => x.contract === sv.contract && x.version === sv.version);
        const disagreed = sv.disagrees && !prev?.disagrees;
        if (!prev || prev.verdict !== sv.verdict || disagreed) this.host.events.publish('shadowEntered', { run, shadow: sv, disagreed });
      }
    }
    const a = verdictKey(after);
    const b = before ? verdictKey(before) : (live.previous ?? null);
    live.previous = undefined;
    if (!b || a.verdict !== b.verdict || a.contract !== b.contract || a.version !== b.version) {
      live.enteredAt = now;
      this.host.events.publish('verdictEntered', { run, ...a, previous: b, result: after });
    }
    const listed = this.host.store.listsVerdicts === true;
    if (!before || before.verdict !== after.verdict || before.settled !== after.settled || before.findings.length !== after.findings.length || (listed && (!sameListed(before, after) || live.listedFirstAt !== live.state.firstAt))) {
      // A store that lists verdicts (cluster mode) is told whenever what the list views show changed, findings included.
      if (listed) live.listedFirstAt = live.state.firstAt;
      this.host.store.setVerdictState(run, after.verdict, after.settled, now, { verdict: after, firstAt: live.state.firstAt });
    }
    this.live.recount(live);
    this.host.events.publish('runEvaluated', { run, verdict: after });
    this.host.retireIfSettled(run, live, now);
    return undefined;
  }

  /**
   * The evaluate step of an ingest: each run the batch touched, evaluated in slices that yield to the event loop;
   * resolves once every one is evaluated (those whose history had to be loaded first included).
   */
  async evaluateTouched(touched: Iterable<string>, now: number): Promise<void> {
    const slice = new Slicer();
    let waiting: Promise<void>[] | undefined;
    for (const run of touched) {
      await this.inSlices(run, now, slice);
      const pending = this.reevaluate(run, now);
      if (pending) (waiting ??= []).push(pending);
      await slice.yieldIfDue();
    }
    if (waiting) await Promise.all(waiting);
  }

  /**
   * Evaluates a live run in steps (`evaluateSteps`), yielding to the event loop every ~8 ms, so that the
   * `reevaluate` that follows finds the verdict cached on the state and does the rest (the events published, the
   * verdict state for the store) at once. A run naming 20,000 agents has 40,001 findings: one synchronous evaluation
   * of it held the event loop 0.2-0.5 s. Nothing else is done here: if the run changes meanwhile (another request
   * folds into it), the state does not keep this verdict and `reevaluate` evaluates again; a read back the
   * evaluation needs (cluster mode) is left to `reevaluate`.
   */
  async inSlices(run: string, now: number, slice: Slicer): Promise<void> {
    const live = this.live.get(run);
    if (!live) return;
    const pinning = this.pin(live);
    if (this.readsBack(live, pinning)) return; // reevaluate loads its history first
    const steps = evaluateSteps(live.state, pinning, now, { registry: this.host.registry });
    while (!steps.next().done) await slice.yieldIfDue();
  }

  /** Whether evaluating a live run (and its shadow verdicts) reads its receipts back while its history is not loaded. */
  private readsBack(live: LiveRun, pinning: Pinning): boolean {
    if (this.host.ahead.loaded(live.state.run)) return false;
    return evaluationReadsBack(live.state, pinning) || (this.host.shadow !== undefined && shadowReadsBack(live.state, pinning, this.host.shadow));
  }

  /** A re-evaluation that reads the run's receipts back (cluster mode): its history loaded, then evaluated. */
  private defer(run: string, now: number): Promise<void> {
    const pending = this.deferred.get(run);
    if (pending) return pending;
    const done = this.host.ahead.around([run], () => void this.reevaluate(run, now)).then(
      () => void this.deferred.delete(run),
      (e: unknown) => {
        this.deferred.delete(run);
        this.host.events.publish('readBackFailed', { run, error: e });
      },
    );
    this.deferred.set(run, done);
    return done;
  }

  /** Resolves when the re-evaluations waiting for a read ahead (cluster mode) are done. */
  async settled(): Promise<void> {
    while (this.deferred.size) await Promise.all([...this.deferred.values()]);
  }
}
