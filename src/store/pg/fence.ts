/**
 * Fencing (src/store/pg/): the leases this store holds, by partition, at their epochs. An owner's writes (verdict
 * states, pruning, deleting span records it replayed) carry these epochs and change only rows of partitions whose
 * lease is still this instance's, at that epoch and unexpired, checked by the database in the writing statement
 * (FENCE_CTE) with the lease rows share-locked: an instance paused past its lease writes nothing there.
 */

/**
 * The partitions whose lease this instance ($1) holds at the epochs it knows ($2 parts, $3 epochs), unexpired by the
 * database clock, their lease rows share-locked until the writing transaction ends (a claim skips or waits for them).
 */
export const FENCE_CTE = `mine AS (
  SELECT l.part FROM leases l JOIN unnest($2::int[], $3::bigint[]) AS f(part, epoch) ON f.part = l.part AND f.epoch = l.epoch
  WHERE l.owner = $1 AND l.expires_at > now() FOR SHARE OF l
)`;

export class Fence {
  private readonly epochs = new Map<number, number>();
  /**
   * When each partition's fence was last set by a claim or cleared by a release (a count of such moves): a renewal
   * sent before that (it may run beside a claim or a release: the coordinator renews beside its steps) leaves it be.
   */
  private moveCount = 0;
  private readonly movedAt = new Map<number, number>();
  /** Owner writes (rows) the database refused since open because this instance no longer held the lease. */
  refused = 0;

  /** Claims and releases so far: a renewal notes it when sent (renewedAsOf). */
  get moves(): number {
    return this.moveCount;
  }

  /** The leases held (partition -> epoch) as two arrays for FENCE_CTE. */
  arrays(): [number[], number[]] {
    const parts = [...this.epochs.keys()];
    return [parts, parts.map((p) => this.epochs.get(p) ?? 0)];
  }

  /** The partitions held. */
  parts(): number[] {
    return [...this.epochs.keys()];
  }

  /** Holds `part` at `epoch` (a renewal). */
  hold(part: number, epoch: number): void {
    this.epochs.set(part, epoch);
  }

  /** Holds `part` at `epoch`, newly claimed: a moved partition. */
  claim(part: number, epoch: number): void {
    this.epochs.set(part, epoch);
    this.movedAt.set(part, ++this.moveCount);
  }

  /**
   * A renewal sent when `moves` was `movesSent` came back holding `held` (partition -> epoch): the fence follows it,
   * but for partitions claimed or released after it was sent.
   */
  renewedAsOf(movesSent: number, held: ReadonlyMap<number, number>): void {
    const settled = (p: number) => (this.movedAt.get(p) ?? 0) <= movesSent;
    for (const [part, epoch] of held) if (settled(part)) this.epochs.set(part, epoch);
    for (const p of [...this.epochs.keys()]) if (!held.has(p) && settled(p)) this.epochs.delete(p);
  }

  /** After a renewal: the partitions not renewed are no longer held. */
  keepOnly(held: ReadonlySet<number>): void {
    for (const p of [...this.epochs.keys()]) if (!held.has(p)) this.epochs.delete(p);
  }

  /** Stops writing as the owner of `parts` (released, or lapsed locally): a move. */
  drop(parts: readonly number[]): void {
    for (const p of parts) {
      this.epochs.delete(p);
      this.movedAt.set(p, ++this.moveCount);
    }
  }

  clear(): void {
    this.epochs.clear();
  }
}
