/**
 * The restart: live state rebuilt from the store (a single instance; a cluster's instance takes its runs over with
 * its partitions). Settled runs stay in the store, counted for topology_runs; the runs that can still change are read
 * back page by page and evaluated now; a contract file changed under a version a run is pinned to refuses the start.
 */
import type { Pinning, RunState } from '../core/classify.js';
import type { ContractRegistry } from '../core/registry.js';
import type { Pin, Receipt, RunVerdict, Verdict } from '../core/types.js';
import type { LiveRun as StoredRun } from '../store/index.js';
import type { AuditEvents, EventBus } from './events.js';
import type { RunGauges } from './gauges.js';
import { ALERT_VERDICTS, nextChange, verdictKey, type LiveRun } from './live-run.js';
import type { LiveRuns } from './live-runs.js';
import type { Pinner } from './pinning.js';
import type { EngineStore } from './store.js';

/** A row of the store that cannot be read back, named by table and row. */
export class RestoreError extends Error {}

/** What the restart reads and calls besides the live runs. */
export interface RestoreHost {
  readonly store: EngineStore;
  readonly registry: ContractRegistry;
  readonly pinner: Pinner;
  readonly gauges: RunGauges;
  readonly events: EventBus<AuditEvents>;
  /** Whether settled runs leave live memory (a single instance with synchronous reads). */
  readonly retires: boolean;
  syncReceipts(run: string): Receipt[];
  evaluateRun(state: RunState, pinning: Pinning, now: number, shadowInto?: LiveRun): RunVerdict;
  retireIfSettled(run: string, live: LiveRun, now: number): void;
}

export class Restorer {
  constructor(
    private readonly live: LiveRuns,
    private readonly host: RestoreHost,
  ) {}

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
    const changeableOnly = this.host.retires && this.restoreSettled(changed);
    for (const lr of this.host.store.iterateLiveRuns(undefined, changeableOnly)) {
      try {
        if (lr.pin && lr.contractHash) {
          const current = this.host.registry.get(lr.pin.contract, lr.pin.version);
          if (current && current.hash !== lr.contractHash) changed.push(`${lr.pin.contract}@${lr.pin.version} (pinned by run ${lr.run})`);
          this.restoreContract(lr);
        }
        if (this.host.retires && lr.settled && lr.verdict !== null && !ALERT_VERDICTS.has(lr.verdict)) {
          // Settled: it stays in the store only (counted in topology_runs until pruned; loaded on its next receipt).
          this.host.gauges.retain(lr.pin?.contract ?? '', lr.pin?.version ?? '', lr.verdict);
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
    return { runs: this.live.size, receipts };
  }

  /**
   * The settled runs of a restart without reading them: counted for topology_runs, and their pinned contents checked
   * against the contract files (a content the registry lacks and a stored run pins is learned; under a version the
   * registry has, it is a changed file). False when the store cannot (every run is then read).
   */
  private restoreSettled(changed: string[]): boolean {
    const { settledRunCounts, pinnedContents, runPinnedTo } = this.host.store;
    if (!settledRunCounts || !pinnedContents || !runPinnedTo) return false;
    for (const row of pinnedContents.call(this.host.store)) {
      if (this.host.pinner.contract(row.hash)) continue; // the registry's own content
      const run = runPinnedTo.call(this.host.store, row.hash);
      if (run === null) continue; // pinned only by runs already pruned
      if (this.host.registry.get(row.contract, row.version)) changed.push(`${row.contract}@${row.version} (pinned by run ${run})`);
      try {
        this.host.pinner.learn(row.hash, row.content, `pinned ${row.contract}@${row.version}`);
      } catch (e) {
        throw new RestoreError(`store table contracts, row hash ${row.hash} (pinned by run ${run}): ${(e as Error).message}`);
      }
    }
    for (const c of settledRunCounts.call(this.host.store)) this.host.gauges.retain(c.contract, c.version, c.verdict, c.runs);
    return true;
  }

  /** The pinned content of a stored run's contract, read back from the store unless known. */
  private restoreContract(lr: StoredRun): void {
    if (!lr.pin || !lr.contractHash || this.host.pinner.contract(lr.contractHash)) return;
    const content = this.host.store.getContractContent(lr.contractHash);
    if (!content) return;
    try {
      this.host.pinner.learn(lr.contractHash, content, `pinned ${lr.pin.contract}@${lr.pin.version}`);
    } catch (e) {
      throw new RestoreError(`store table contracts, row hash ${lr.contractHash} (pinned by run ${lr.run}): ${(e as Error).message}`);
    }
  }

  /** One stored run back into live memory, evaluated now; returns how many receipts were read. */
  private restoreRun(lr: StoredRun, now: number): number {
    const state = this.live.state(lr.run);
    let held = 0;
    let receipts = 0;
    for (const r of this.host.syncReceipts(lr.run)) {
      if (state.add(r) !== 'duplicate') held++;
      receipts++;
    }
    if (state.size === 0 && state.conflicts.size === 0) return receipts;
    const restored: LiveRun = { state, verdict: null as unknown as RunVerdict, updatedAt: lr.updatedAt, enteredAt: lr.updatedAt, held, receivedAt: lr.updatedAt };
    restored.verdict = this.host.evaluateRun(state, this.host.pinner.pin(state, undefined), now, restored);
    this.live.put(lr.run, restored);
    this.live.changed(restored);
    this.live.deadlines.set(lr.run, nextChange(restored));
    this.live.idle.set(lr.run, lr.updatedAt);
    if (lr.verdict && lr.verdict !== restored.verdict.verdict) {
      restored.enteredAt = now;
      this.restoredChange(lr, restored.verdict, now);
    }
    this.host.retireIfSettled(lr.run, restored, now);
    return receipts;
  }

  /** A restored run whose verdict differs from the one stored before the restart (time passed, a contract changed): a transition. */
  private restoredChange(stored: { run: string; verdict: Verdict | null; pin: Pin | null }, now: RunVerdict, at: number): void {
    const previous = { contract: stored.pin?.contract ?? '', version: stored.pin?.version ?? '', verdict: stored.verdict! };
    this.host.events.publish('verdictEntered', { run: stored.run, ...verdictKey(now), previous, result: now });
    this.host.store.setVerdictState(stored.run, now.verdict, now.settled, at);
  }
}
