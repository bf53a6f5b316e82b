/**
 * Which held entries have gone quiet, at a cost that follows what expired and what was touched, never what is held
 * (issue 44): a min-heap of (last-seen time, key) with lazy deletion. An entry is pushed when it is first held; a
 * touch pushes nothing (it only moves the entry's `lastSeen`); a pass pops the entries whose pushed time is due,
 * re-checks each against the entry itself, and pushes back, at its current `lastSeen`, one that was touched since.
 * So each entry is popped at most once per pass in which its pushed time came due. A popped entry whose key was
 * deleted (or deleted and set again: another value object) is stale and dropped.
 *
 * Exactness: a pass finds exactly the entries a full walk with the same predicate would, as long as no entry's
 * `lastSeen` moved back (the wall clock stepped back): `noteTime` notices that, and the next pass first rebuilds the
 * heap from every entry (once). The keys come back in the map's insertion order (each entry carries the order in which
 * it was first set), which is the order a walk of the map visits them.
 */

export interface Slot<K, V> {
  at: number;
  key: K;
  value: V;
  /** Insertion order of the value in its map. */
  seq: number;
}

/** A min-heap of slots by time (then insertion order). */
export class DueHeap<K, V> {
  private h: Slot<K, V>[] = [];

  get size(): number {
    return this.h.length;
  }

  push(s: Slot<K, V>): void {
    const h = this.h;
    h.push(s);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(s, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = s;
  }

  /** The earliest slot, if its time is at or before `cutoff`, removed; else undefined. */
  popDue(cutoff: number): Slot<K, V> | undefined {
    const h = this.h;
    const top = h[0];
    if (top === undefined || top.at > cutoff) return undefined;
    const last = h.pop()!;
    if (h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && before(h[r]!, h[l]!) ? r : l;
      if (!before(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
    return top;
  }

  /** Replace the contents (slots in any order). */
  reset(slots: Slot<K, V>[]): void {
    this.h = [];
    for (const s of slots) this.push(s);
  }
}

const before = <K, V>(a: Slot<K, V>, b: Slot<K, V>) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/**
 * The quiet entries of one Map<K, V> whose values carry `lastSeen`. Call `added` when a new value is set in the
 * map, `noteTime` with every time written to a `lastSeen`, and `quiet` for a pass. Entries held back by `hold` (e.g.
 * a trace with pending work) are kept aside and re-checked on every pass until they are touched, leave, or expire.
 */
export class QuietOrder<K, V extends { lastSeen: number }> {
  private readonly heap = new DueHeap<K, V>();
  /** Quiet entries held back at the last pass (their pushed time is spent): re-checked each pass. */
  private held = new Map<K, Slot<K, V>>();
  private seq = 0;
  private latest = -Infinity;
  private clockBack = false;
  /** Entries looked at by passes so far (heap pops, held re-checks, entries of a rebuild): the work of expiry. */
  visited = 0;

  constructor(private readonly map: Map<K, V>) {}

  /** A new value was set in the map under `key`. */
  added(key: K, value: V): void {
    this.noteTime(value.lastSeen);
    this.heap.push({ at: value.lastSeen, key, value, seq: ++this.seq });
    this.compact();
  }

  /** A `lastSeen` was set to `t`: O(1); a time before one already seen makes the next pass rebuild the heap first. */
  noteTime(t: number): void {
    if (t < this.latest) this.clockBack = true;
    else this.latest = t;
  }

  /**
   * The keys quiet at `now` (`now - lastSeen >= quietMs`) and not held back by `hold`, in the map's insertion order.
   * They stay in the map: the caller deletes them.
   */
  quiet(now: number, quietMs: number, hold: (key: K, value: V) => boolean = () => false): K[] {
    if (this.clockBack) this.rebuild(); // every slot at its entry's lastSeen again: exact from here on
    const due: Slot<K, V>[] = [];
    const held = this.held;
    this.held = new Map();
    for (const s of held.values()) {
      this.visited++;
      this.check(s, now, quietMs, hold, due);
    }
    const cutoff = now - quietMs;
    for (let s = this.heap.popDue(cutoff); s !== undefined; s = this.heap.popDue(cutoff)) {
      this.visited++;
      this.check(s, now, quietMs, hold, due);
    }
    due.sort((a, b) => a.seq - b.seq);
    return due.map((s) => s.key);
  }

  private check(s: Slot<K, V>, now: number, quietMs: number, hold: (key: K, value: V) => boolean, due: Slot<K, V>[]): void {
    if (this.map.get(s.key) !== s.value) return; // gone, or gone and set again (its own slot)
    if (now - s.value.lastSeen < quietMs) {
      this.heap.push({ ...s, at: s.value.lastSeen }); // touched since it was pushed
      return;
    }
    if (hold(s.key, s.value)) {
      this.held.set(s.key, s);
      return;
    }
    due.push(s);
  }

  /**
   * Stale slots (of entries deleted by eviction or a read) are dropped when they outnumber the map's entries: the heap
   * is rebuilt in map order (which is insertion order, so the new sequence numbers keep it); amortised O(1) per push.
   * Held entries go back to the heap at their `lastSeen` (due: the next pass re-checks them). A key returned by a
   * pass and still in the map would come back too: every caller deletes what a pass returns.
   */
  private compact(): void {
    if (this.heap.size + this.held.size > 2 * this.map.size + 1024) this.rebuild();
  }

  private rebuild(): void {
    this.clockBack = false;
    this.latest = -Infinity;
    const slots: Slot<K, V>[] = [];
    for (const [key, value] of this.map) {
      this.visited++;
      this.noteTime(value.lastSeen);
      slots.push({ at: value.lastSeen, key, value, seq: ++this.seq });
    }
    this.held = new Map();
    this.heap.reset(slots);
  }
}
