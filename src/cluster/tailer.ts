/**
 * The tail step of a coordinator (every --tail-every, 100 ms): folds receipts other instances stored for runs owned
 * here, in commit order, and applies acknowledgements made anywhere; with `--span-routing any`, first resolves the
 * span records other instances forwarded for traces of partitions owned here.
 */
import { SPAN_LOG_PAGE, type ClusterContext } from './context.js';
import type { TailedReceipt } from './tail.js';

/**
 * With `--span-routing any`, a LangGraph root is read no sooner than this after it arrived (and after a read of the
 * forwarded span log that began later): time for node spans a sender exported side by side with it (e.g. a
 * Collector's sending queue with several consumers) to arrive anywhere and be forwarded.
 */
export const LANGGRAPH_SETTLE_MS = 500;

export class Tailer {
  /** The last receipt seq folded (or passed over: not of a partition owned here, or stored here). */
  cursor = 0;
  private ackCursor = 0;
  private readonly tailBatch: number;
  /** Replays the span records set with store.setAdopted; reads the LangGraph roots that arrived before an instant. */
  replaySpanLog: (() => Promise<number>) | undefined;
  readLangGraphRoots: ((before: number) => Promise<number>) | undefined;

  constructor(private readonly c: ClusterContext) {
    this.tailBatch = c.opts.tailBatch ?? 5000;
  }

  /** Tails from the store's head now (joining: what was stored before is read by the takeovers). */
  async start(): Promise<void> {
    this.cursor = await this.c.coordination.tail.headSeq();
  }

  /** Folds receipts other instances stored for runs owned here, in commit order; applies acknowledgements made anywhere. */
  async step(): Promise<void> {
    const { ownership, coordination, pg } = this.c;
    ownership.guard();
    if (ownership.owned.size === 0) {
      this.cursor = await coordination.tail.headSeq();
      return;
    }
    if (this.c.opts.spanRouting === 'any' && this.replaySpanLog && !(await this.readForwarded())) return;
    const engine = this.c.engine()!;
    // The acknowledgements and the first page of receipts in one round trip (the timer's every 100 ms, per instance).
    const first = await coordination.tail.tailWithAcks(this.cursor, this.tailBatch, ownership.ownedParts(), pg.instance, this.ackCursor);
    if (!ownership.guard()) return;
    for (const ack of first.acks) {
      engine.applyAck(ack.run, ack.verdict, ack.ackedAt, ack);
      this.ackCursor = ack.seq;
    }
    for (let page: TailedReceipt[] | null = first.receipts; ; page = null) {
      const rows = page ?? (await coordination.tail.tail(this.cursor, this.tailBatch, ownership.ownedParts(), pg.instance));
      if (!(await this.c.keepLeases())) return;
      if (rows.length > 0) {
        await engine.foldStored(rows.map((r) => r.receipt), this.c.hooks.clock());
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
   * Span records other instances forwarded for traces this instance resolves (whoever forwarded them, this instance
   * included: it may have taken the partition after forwarding), replayed; then the LangGraph roots they complete.
   * False when the leases lapsed meanwhile.
   */
  private async readForwarded(): Promise<boolean> {
    const { ownership, pg, store, hooks } = this.c;
    const began = hooks.clock();
    const entries = await pg.forwardedSpanLog(ownership.ownedParts(), SPAN_LOG_PAGE);
    if (!ownership.guard()) return false;
    if (entries.length) {
      store.setAdopted(entries.map((e) => ({ seq: e.seq, traceId: e.traceId, body: e.body })));
      await this.replaySpanLog!();
      await store.sync(); // the replayed entries are deleted before the next read
    }
    // Every span forwarded before a root that arrived before `began` was committed before that read began, so is
    // here now (for a sender that sends its batches one after another), unless the read was a full page (more to
    // read: the roots wait for the next one). Roots also wait LANGGRAPH_SETTLE_MS, for batches sent side by side.
    if (entries.length < SPAN_LOG_PAGE) await this.readLangGraphRoots?.(began - LANGGRAPH_SETTLE_MS);
    return true;
  }
}
