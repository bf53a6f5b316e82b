/**
 * A run's event ids, as a set whose growth never stalls one receipt for long. A plain Set rehashes all its entries
 * when it doubles (at 1,024 ids about 50 µs on the bench machine, paid by the one receipt that crosses it). Past
 * SHARD_AT ids this set splits into SHARDS Sets chosen by the id's last two characters, so each doubling moves a
 * sixteenth of the ids (ids that all end alike fall in one shard: no worse than one Set). Pure: no I/O.
 */

/** A run this size or smaller keeps one Set (most runs). */
const SHARD_AT = 256;
const SHARDS = 16;

const shardOf = (id: string): number => {
  const n = id.length;
  return n === 0 ? 0 : (id.charCodeAt(n - 1) + 7 * (n > 1 ? id.charCodeAt(n - 2) : 0)) & (SHARDS - 1);
};

export class IdSet {
  private one: Set<string> | null = new Set();
  private shards: Set<string>[] | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  has(id: string): boolean {
    return this.one !== null ? this.one.has(id) : this.shards![shardOf(id)].has(id);
  }

  /** Adds `id`; true when it was not there (one hash lookup). */
  add(id: string): boolean {
    const set = this.one !== null ? this.one : this.shards![shardOf(id)];
    const n = set.size;
    set.add(id);
    if (set.size === n) return false;
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
