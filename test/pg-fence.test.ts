// The fence of the shared store (src/cluster/fence.ts): the leases an instance holds at their epochs, which every
// owner write is checked against. A renewal (the heartbeat's `beat`, on its own connection) may run beside a claim or a
// release (the coordinator renews beside its steps): when it comes back it must leave be the partitions claimed or
// released after it was sent, and follow the database for every other one (issue 49 item 4).
import { describe, expect, it } from 'vitest';
import { Fence } from '../src/cluster/fence.js';

const held = (entries: [number, number][]) => new Map(entries);

describe('the fence of the shared store', () => {
  it('follows a renewal: renewed partitions at their epochs, the others dropped', () => {
    const f = new Fence();
    f.claim(1, 5);
    f.claim(2, 7);
    const sent = f.moves;
    f.renewedAsOf(sent, held([[1, 5]]));
    expect(f.arrays()).toEqual([[1], [5]]);
  });

  it('keeps a partition claimed after the renewal was sent, though the renewal did not see it', () => {
    const f = new Fence();
    f.claim(1, 5);
    const sent = f.moves;
    f.claim(3, 2); // claimed while the renewal was in flight
    f.renewedAsOf(sent, held([[1, 5]]));
    expect(f.arrays()).toEqual([[1, 3], [5, 2]]);
  });

  it('does not take back a partition released after the renewal was sent, though the renewal renewed it', () => {
    const f = new Fence();
    f.claim(1, 5);
    f.claim(2, 7);
    const sent = f.moves;
    f.drop([2]); // released while the renewal was in flight
    f.renewedAsOf(sent, held([[1, 5], [2, 7]]));
    expect(f.parts()).toEqual([1]);
    // a later renewal, sent after the release, sees it again if the database says so
    f.renewedAsOf(f.moves, held([[1, 5], [2, 8]]));
    expect(f.arrays()).toEqual([[1, 2], [5, 8]]);
  });
});
