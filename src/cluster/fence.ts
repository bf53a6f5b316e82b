/**
 * Fencing, the cluster's side: the leases this instance holds, by partition, at their epochs, as claims, renewals and
 * releases move them (src/cluster/leases.ts, heartbeat.ts). The store is given it (PgStore.fenceWith) and checks every
 * owner write against it in the writing statement (src/store/pg/fence.ts): an instance paused past its lease writes
 * nothing there.
 */
import type { OwnerFence } from '../store/pg-store.js';

export class Fence implements OwnerFence {
  private readonly epochs = new Map<number, number>();
  /**
   * When each partition's fence was last set by a claim or cleared by a release (a count of such moves): a renewal
   * sent before that (it may run beside a claim or a release: the coordinator renews beside its steps) leaves it be.
   */
  private moveCount = 0;
  private readonly movedAt = new Map<number, number>();

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
