/**
 * The fence check inside the shared store's owner writes (verdict states, the retention prune, deleting span records
 * an owner replayed): the hook the cluster gives the store. The leases and their epochs are the cluster's
 * (src/cluster/fence.ts, src/cluster/leases.ts); the store only asks the fence it was given which leases it holds,
 * at which epochs, and writes only rows of partitions whose lease is still this instance's, at that epoch and
 * unexpired, checked by the database in the writing statement (FENCE_CTE) with the lease rows share-locked: an
 * instance paused past its lease writes nothing there. A store given no fence holds no lease: every owner write is
 * refused.
 */

/**
 * The partitions whose lease this instance ($1) holds at the epochs it knows ($2 parts, $3 epochs), unexpired by the
 * database clock, their lease rows share-locked until the writing transaction ends (a claim skips or waits for them).
 */
export const FENCE_CTE = `mine AS (
  SELECT l.part FROM leases l JOIN unnest($2::int[], $3::bigint[]) AS f(part, epoch) ON f.part = l.part AND f.epoch = l.epoch
  WHERE l.owner = $1 AND l.expires_at > now() FOR SHARE OF l
)`;

/** The leases an owner's writes are checked against (src/cluster/fence.ts keeps them as the leases move). */
export interface OwnerFence {
  /** The leases held (partition -> epoch) as two arrays for FENCE_CTE. */
  arrays(): [number[], number[]];
  /** The partitions held. */
  parts(): number[];
}

/** The fence of a store no cluster gave one: no lease held. */
export const NO_LEASES: OwnerFence = { arrays: () => [[], []], parts: () => [] };
