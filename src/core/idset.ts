/**
 * A run's event ids, as a set that is small while the run is and whose growth never stalls one receipt for long.
 * Most runs hold a few dozen ids: up to LIST_AT they sit in an array found by a scan (a Set of 20 ids takes ~700
 * bytes of hash table, the array ~200, and a scan of a few dozen short ids costs about one hash lookup). Past it
 * they move into a Set. A plain Set rehashes all its entries when it doubles (at 1,024 ids about 50 µs on the bench
 * machine, paid by the one receipt that crosses it), so past SHARD_AT ids the set splits into SHARDS Sets chosen by
 * the id's last two characters, and each doubling moves a sixteenth of the ids (ids that all end alike fall in one
 * shard: no worse than one Set). Pure: no I/O.
 */

/** A run this size or smaller keeps its ids in an array. */
const LIST_AT = 32;
/** A run this size or smaller keeps one Set (past LIST_AT). */
const SHARD_AT = 256;
const SHARDS = 16;

const shardOf = (id: string): number => {
  const n = id.length;
  return n === 0 ? 0 : (id.charCodeAt(n - 1) + 7 * (n > 1 ? id.charCodeAt(n - 2) : 0)) & (SHARDS - 1);
};

const NO_IDS: string[] = [];

/**
 * Is `id` among list[0..n-1]? The length and last character are compared first (read inline, where a comparison of
 * two distinct strings of equal length is a call): ids that differ mostly differ there.
 */
function scan(list: readonly string[], n: number, id: string): boolean {
  const len = id.length;
  const last = len === 0 ? -1 : id.charCodeAt(len - 1);
  for (let i = 0; i < n; i++) {
    const x = list[i];
    if (x.length === len && (len === 0 || x.charCodeAt(len - 1) === last) && x === id) return true;
  }
  return false;
}

export class IdSet {
  /**
   * While there are at most LIST_AT ids: the ids at 0..count-1 (distinct, in insertion order) of an array whose
   * length is its room (4, 6, 9, 13, 19, 28, 32: 1.5x when full; a pushed array would keep 1.5x + 16 slots). Null once
   * they moved into `one`.
   */
  private list: string[] | null = NO_IDS;
  private one: Set<string> | null = null;
  private shards: Set<string>[] | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  has(id: string): boolean {
    const list = this.list;
    if (list !== null) return scan(list, this.count, id);
    return this.one !== null ? this.one.has(id) : this.shards![shardOf(id)].has(id);
  }

  /** Adds `id`; true when it was not there (a scan of a short list, or one hash lookup). */
  add(id: string): boolean {
    const list = this.list;
    if (list !== null) {
      const n = this.count;
      if (scan(list, n, id)) return false;
      if (n < list.length) list[n] = id;
      else if (n < LIST_AT) {
        const bigger = new Array<string>(n === 0 ? 4 : Math.min(LIST_AT, n + (n >> 1)));
        for (let i = 0; i < n; i++) bigger[i] = list[i];
        bigger[n] = id;
        this.list = bigger;
      } else {
        const one = new Set<string>();
        for (let i = 0; i < n; i++) one.add(list[i]);
        one.add(id);
        this.one = one;
        this.list = null;
      }
      this.count = n + 1;
      return true;
    }
    const set = this.one !== null ? this.one : this.shards![shardOf(id)];
    const size = set.size;
    set.add(id);
    if (set.size === size) return false;
    if (++this.count > SHARD_AT && this.one !== null) this.split();
    return true;
  }

  private split(): void {
    const shards: Set<string>[] = [];
    for (let i = 0; i < SHARDS; i++) shards.push(new Set());
    for (const id of this.one!) shards[shardOf(id)].add(id);
    this.shards = shards;
    this.one = null;
  }
}
