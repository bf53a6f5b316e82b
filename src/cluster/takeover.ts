/**
 * Takeover: partitions newly held (claimed, or held under this name and not loaded) are read in, run by run, a group
 * of runs at a time, with their pins, contract content and acknowledgements; all or nothing (issue 49).
 */
import type { LiveRun } from '../store/index.js';
import type { ClusterContext } from './context.js';
import type { Renewal } from './renewal.js';

/** A takeover reads the receipts of this many runs per query (see load). */
const TAKEOVER_RUNS = 500;

/** A takeover given up between two groups of runs because the instance is leaving (SIGTERM). */
class TakeoverStopped extends Error {}

export class Takeover {
  /** Partitions taken over since start. */
  takeovers = 0;
  /**
   * Partitions whose takeover was given up because the instance is leaving: dropped here, their leases still this
   * instance's (the leave releases them with the others, so another instance takes them over at once).
   */
  readonly abandoned = new Set<number>();

  constructor(
    private readonly c: ClusterContext,
    private readonly renewal: Renewal,
    /** True once the instance is leaving: a takeover stops before its next group of runs. */
    private readonly stopping: () => boolean = () => false,
  ) {}

  /**
   * Takes partitions over, all or nothing (issue 49): a partition counts as taken over (listed from memory, its
   * timers trusted) only once every run of it is read in. When a statement of the takeover fails (the database
   * restarted, a connection reset, a deadline), the partitions are dropped here again, with whatever of their runs was
   * read so far, and their leases kept: the next renewal finds them held and not loaded and takes them over anew.
   */
  async takeOver(parts: number[]): Promise<void> {
    try {
      await this.load(parts);
    } catch (e) {
      for (const p of parts) this.c.ownership.drop(p);
      if (e instanceof TakeoverStopped) {
        for (const p of parts) this.abandoned.add(p);
        this.c.hooks.log('takeover_stopped', { partitions: parts.length });
      } else this.c.hooks.log('takeover_failed', { partitions: parts.length, error: (e as Error).message });
    }
  }

  /**
   * Reads partitions in: from now on receipts of their runs are folded here (the tail includes them from the current
   * position), and everything stored before is read now. Rows read twice are duplicates of the fold.
   */
  private async load(parts: number[]): Promise<void> {
    const { pg, ownership, hooks } = this.c;
    const engine = this.c.engine()!;
    const started = hooks.clock();
    // The settled runs (not alerting) are counted, not read: they stay in the store, loaded on their next receipt as
    // any run that left memory (what a takeover costs is the runs that can still change, not the retention's).
    // Counted before the partitions are taken: no owner changes their rows meanwhile, and a receipt folded here after
    // the take that loads one of them again takes it out of this count.
    const settled = await pg.settledCounts(parts);
    ownership.take(parts, this.renewal.renewalsSent);
    for (const c of settled) engine.retained.retain(c.contract, c.version, c.verdict, c.runs, c.part);
    // Run by run, a group of runs at a time (every receipt's run has a row, written in the same statement): what is
    // in memory at once is the partitions' run rows and one group's receipts, not every receipt of the partitions.
    const runs = await pg.partitionRuns(parts, true);
    let adopted = 0;
    for (let i = 0; i < runs.length; i += TAKEOVER_RUNS) {
      // A leaving instance (SIGTERM) stops here: a takeover of many runs would hold its exit past the bound (10 s).
      if (this.stopping()) throw new TakeoverStopped();
      const group = runs.slice(i, i + TAKEOVER_RUNS).filter((r) => ownership.owns(r.run));
      const receipts = await pg.receiptsOfRuns(group.map((r) => r.run));
      if (!(await this.c.keepLeases())) return;
      const now = hooks.clock();
      for (const stored of group) {
        const run = stored.run;
        const list = receipts.get(run);
        if (list === undefined) continue; // no receipt (pruned meanwhile)
        const content = await this.pinOf(stored);
        if (!ownership.owns(run)) continue; // lost again meanwhile
        try {
          engine.adopt(stored, list, content, now);
          adopted++;
        } catch (e) {
          hooks.log('takeover_run_failed', { run, error: (e as Error).message });
        }
      }
    }
    // Acknowledgements of the partitions' runs made anywhere before.
    for (const ack of await pg.acksSince(0, parts)) engine.applyAck(ack.run, ack.verdict, ack.ackedAt, ack);
    this.takeovers += parts.length;
    hooks.log('partitions_taken', { partitions: parts.length, runs: adopted, ms: hooks.clock() - started });
  }

  /** A stored run's pin, held here from now on, and its contract's content (null when unpinned or not stored). */
  private async pinOf(stored: LiveRun): Promise<string | null> {
    if (!stored.pin || !stored.contractHash) return null;
    const { store, pg } = this.c;
    store.rememberPin(stored.run, { pin: stored.pin, contractHash: stored.contractHash });
    const content = store.getContractContent(stored.contractHash) ?? (await pg.getContractContent(stored.contractHash));
    if (content) store.rememberContract(stored.contractHash, content);
    return content;
  }
}
