/**
 * A min-heap of (time, key) with lazy invalidation: the timer touches only runs whose next deadline passed. A key
 * rescheduled or cleared leaves its old entry behind until that time comes; when such stale entries outnumber the
 * scheduled keys (plus a slack), the heap is rebuilt from the scheduled keys alone, so its memory stays proportional to
 * them (a run re-evaluated every second with a deadline 30 minutes out would otherwise leave 1,800 entries).
 */
/** Stale entries tolerated beyond the scheduled keys before a rebuild. */
const COMPACT_SLACK = 1024;

export class DeadlineHeap {
  private readonly times: number[] = [];
  private readonly keys: string[] = [];
  private readonly current = new Map<string, number>();

  get size(): number {
    return this.current.size;
  }

  /** Schedule (or reschedule) a key; null clears it. */
  set(key: string, at: number | null): void {
    if (at === null) {
      this.current.delete(key);
      return;
    }
    if (this.current.get(key) === at) return;
    this.current.set(key, at);
    this.times.push(at);
    this.keys.push(key);
    this.up(this.times.length - 1);
    if (this.times.length > 2 * this.current.size + COMPACT_SLACK) this.compact();
  }

  /** Entries in the heap, stale ones included (for tests and diagnostics). */
  get entries(): number {
    return this.times.length;
  }

  /** Rebuild the heap from the scheduled keys only (drops every stale entry), in O(n). */
  private compact(): void {
    this.times.length = 0;
    this.keys.length = 0;
    for (const [k, t] of this.current) {
      this.times.push(t);
      this.keys.push(k);
    }
    for (let i = (this.times.length >> 1) - 1; i >= 0; i--) this.down(i);
  }

  /** When the key is scheduled (undefined: not). */
  at(key: string): number | undefined {
    return this.current.get(key);
  }

  /** Remove and return every key due at or before `now` (at most `limit`, the earliest first). */
  popDue(now: number, limit = Infinity): string[] {
    const out: string[] = [];
    while (out.length < limit && this.times.length > 0 && this.times[0] <= now) {
      const t = this.times[0];
      const k = this.keys[0];
      this.removeTop();
      if (this.current.get(k) === t) {
        this.current.delete(k);
        out.push(k);
      }
    }
    return out;
  }

  private removeTop(): void {
    const lastT = this.times.pop()!;
    const lastK = this.keys.pop()!;
    if (this.times.length === 0) return;
    this.times[0] = lastT;
    this.keys[0] = lastK;
    this.down(0);
  }

  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.times[p] <= this.times[i]) break;
      this.swap(i, p);
      i = p;
    }
  }

  private down(i: number): void {
    const n = this.times.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.times[l] < this.times[m]) m = l;
      if (r < n && this.times[r] < this.times[m]) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }

  private swap(a: number, b: number): void {
    [this.times[a], this.times[b]] = [this.times[b], this.times[a]];
    [this.keys[a], this.keys[b]] = [this.keys[b], this.keys[a]];
  }
}
