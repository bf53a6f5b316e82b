/**
 * Span log adoption (each renewal step): the span records held by processes that are gone (an instance that died, or
 * an earlier life of an instance restarted under the same name, this one included), in trace partitions owned here,
 * are replayed (and re-logged) here, a page at a time.
 */
import { SPAN_LOG_PAGE, type ClusterContext } from './context.js';

/** adopt reads the owned partitions' span log from the start at least this often (else from its cursor). */
const ADOPT_RESCAN_MS = 30_000;

/**
 * Where the last complete read ended: every record up to `from` of partitions `parts` whose holder was not live
 * (`live`, as the database listed the live processes then) has been adopted. `fullAt`: its last read from the start
 * (monotonic ms).
 */
type AdoptCursor = { parts: string; live: string; from: number; fullAt: number };

export class SpanLogAdoption {
  private cursor: AdoptCursor | null = null;
  /** Replays the span records set with store.setAdopted (set when the coordinator starts). */
  replaySpanLog: (() => Promise<number>) | undefined;

  constructor(private readonly c: ClusterContext) {}

  /** Adopts the span records of processes that are gone, in the partitions owned here. */
  async adopt(): Promise<void> {
    const { ownership, pg, store } = this.c;
    if (!this.replaySpanLog || ownership.owned.size === 0) return;
    const parts = ownership.ownedParts();
    const partsKey = parts.join(',');
    const now = ownership.mono();
    // From the last read's end while the owned partitions and the live processes are those it saw: a record up to it
    // becomes adoptable only when its holder stops being live (which changes `live`). Otherwise, and every
    // ADOPT_RESCAN_MS, from the start (issue 35: reading every owned record twice a second cost ~5 ms a read, growing).
    const c = this.cursor;
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
      const page = await pg.orphanSpanLogPage(parts, after, SPAN_LOG_PAGE, this.c.opts.spanRouting === 'any');
      if (!ownership.guard()) {
        this.cursor = null;
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
        store.setAdopted(entries.map((e) => ({ seq: e.seq, traceId: e.traceId, body: e.body })));
        n += await this.replaySpanLog();
        await store.sync();
        if (!(await this.c.keepLeases())) {
          this.cursor = null;
          break;
        }
        after = entries[entries.length - 1].seq;
      }
      if (entries.length < SPAN_LOG_PAGE) {
        // Every adoptable record up to the page's head was among those read (same snapshot; seqs up to a committed head
        // are final). A read that saw the live processes change between its pages starts from the start next time.
        this.cursor = steady ? { parts: partsKey, live: live0, from: Math.max(after, page.head), fullAt } : null;
        break;
      }
    }
    if (pages > 0) this.c.hooks.log('span_log_adopted', { entries: n });
  }
}
