/**
 * Recognising a redelivered receipt cheaply: a 128-bit digest (SHA-256, truncated) of the compact stored JSON of
 * receipts of live runs, kept in a bounded table. A delivery whose digest is recorded for its run carries the same
 * content as a stored version, so it is a duplicate: no canonical form, no store round trip, no classifier step.
 * Anything else (no digest recorded, evicted, another content) goes the exact way through the store, which stays
 * the authority for duplicates and conflicts (also across a restart, when the table starts empty).
 *
 * Soundness: the compact JSON is the stored body, so equal compact JSON means equal stored fields, and their
 * canonical forms (which compare receipts) are equal too. Only digests of content the store has answered as
 * accepted or duplicate are recorded, so a recorded digest always names stored content of that (run, event) (the
 * compact JSON holds both ids).
 *
 * Memory: the digests sit in typed arrays, nothing is allocated per digest: an open-addressing table (linear
 * probing, at most half full, removal by moving the later slots of a probe run back) of 6 32-bit words per slot,
 * and a ring of slots in insertion order: about 50 bytes per digest at the bound, the same whatever runs come and
 * go (no garbage for the collector as old digests leave). At most `maxEntries` digests: past it the oldest recorded
 * digest is forgotten first. A forgotten run (pruned) keeps no digest that can match: digests carry the run's
 * number, and a run recorded again after being forgotten gets a new one; its old digests leave as they age out.
 */
import * as crypto from 'node:crypto';
import { compactReceiptJson } from '../core/canonical.js';
import type { Receipt } from '../core/types.js';

export const DEFAULT_MAX_DIGESTS = 262_144;

/** crypto.hash (Node 20.12 and later): one call, no Hash object per receipt; older runtimes use createHash. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'binary') => string }).hash;

/** A receipt's digest: SHA-256 of its compact stored JSON, one character per byte (latin1); the first 16 bytes are kept. */
export type Digest = string;

/** The 32-bit word `k` (0..3) of a digest. */
const word = (d: Digest, k: number): number => {
  const i = k * 4;
  return d.charCodeAt(i) | (d.charCodeAt(i + 1) << 8) | (d.charCodeAt(i + 2) << 16) | (d.charCodeAt(i + 3) << 24);
};

const EMPTY = 0;

export class DeliveredDigests {
  /** Each recorded run's current number (1, 2, ...): digests recorded for it carry it. */
  private readonly runIds = new Map<string, number>();
  private nextRunId = 1;
  // The table (linear probing, at most half full): slot i holds digest words w0[i]..w3[i] of run number rid[i]
  // (EMPTY: free) and its place in the ring, at[i].
  private capacity = 0;
  private w0 = new Int32Array(0);
  private w1 = new Int32Array(0);
  private w2 = new Int32Array(0);
  private w3 = new Int32Array(0);
  private rid = new Int32Array(0);
  private at = new Int32Array(0);
  // The ring of recorded digests in insertion order (their slots), oldest at `head`.
  private readonly ring: Int32Array;
  private head = 0;
  private entries = 0;

  constructor(readonly maxEntries = DEFAULT_MAX_DIGESTS) {
    this.ring = new Int32Array(Math.max(1, maxEntries));
  }

  /** The digest of a receipt's stored form. */
  static digest(r: Receipt): Digest {
    return DeliveredDigests.digestOfJson(compactReceiptJson(r));
  }

  /** The digest of a stored form already made (compactReceiptJson of the receipt). */
  static digestOfJson(json: string): Digest {
    return oneShot ? oneShot('sha256', json, 'binary') : crypto.createHash('sha256').update(json).digest('binary');
  }

  /** True when this digest is recorded for this run (`event` is in the digest: the compact JSON holds it). */
  has(run: string, _event: string, digest: Digest): boolean {
    const id = this.runIds.get(run);
    return id !== undefined && this.entries > 0 && this.find(id, digest) >= 0;
  }

  /** Record the digest of content the store holds for (run, event); a digest already recorded for the run is kept once. */
  record(run: string, _event: string, digest: Digest): void {
    let id = this.runIds.get(run);
    if (id === undefined) {
      if (this.nextRunId >= 0x7fff_fff0) this.renumber();
      id = this.nextRunId++;
      this.runIds.set(run, id);
    } else if (this.entries > 0 && this.find(id, digest) >= 0) return;
    if (this.entries === this.ring.length) this.remove(this.ring[this.head]);
    if ((this.entries + 1) * 2 > this.capacity) this.grow();
    const mask = this.capacity - 1;
    let i = this.home(word(digest, 0));
    while (this.rid[i] !== EMPTY) i = (i + 1) & mask;
    this.rid[i] = id;
    this.w0[i] = word(digest, 0);
    this.w1[i] = word(digest, 1);
    this.w2[i] = word(digest, 2);
    this.w3[i] = word(digest, 3);
    const place = (this.head + this.entries) % this.ring.length;
    this.ring[place] = i;
    this.at[i] = place;
    this.entries++;
  }

  /** Forget a run's digests (pruned): none of them matches from now on; they leave the table as they age out. */
  forget(run: string): void {
    this.runIds.delete(run);
  }

  /** Digests held (those of forgotten runs included until they age out). */
  get size(): number {
    return this.entries;
  }

  private home(a: number): number {
    return (a ^ (a >>> 15)) & (this.capacity - 1);
  }

  /** The slot holding (run number, digest), or -1. */
  private find(id: number, d: Digest): number {
    const a = word(d, 0);
    const b = word(d, 1);
    const c = word(d, 2);
    const e = word(d, 3);
    const mask = this.capacity - 1;
    for (let i = this.home(a); ; i = (i + 1) & mask) {
      const r = this.rid[i];
      if (r === EMPTY) return -1;
      if (r === id && this.w0[i] === a && this.w1[i] === b && this.w2[i] === c && this.w3[i] === e) return i;
    }
  }

  /** Removes the oldest digest (at slot `i`, the ring's head); later slots of its probe run move back (no tombstones). */
  private remove(i: number): void {
    this.head = (this.head + 1) % this.ring.length;
    this.entries--;
    const mask = this.capacity - 1;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (this.rid[j] === EMPTY) break;
      const k = this.home(this.w0[j]);
      // the entry at j may stay when its home lies cyclically in (i, j]
      if (i <= j ? i < k && k <= j : i < k || k <= j) continue;
      this.rid[i] = this.rid[j];
      this.w0[i] = this.w0[j];
      this.w1[i] = this.w1[j];
      this.w2[i] = this.w2[j];
      this.w3[i] = this.w3[j];
      this.at[i] = this.at[j];
      this.ring[this.at[i]] = i;
      i = j;
    }
    this.rid[i] = EMPTY;
  }

  /** Doubles the table (from 1024 slots; it never needs more than twice maxEntries). */
  private grow(): void {
    const old = { w0: this.w0, w1: this.w1, w2: this.w2, w3: this.w3, rid: this.rid };
    const capacity = Math.max(1024, this.capacity * 2);
    this.capacity = capacity;
    this.w0 = new Int32Array(capacity);
    this.w1 = new Int32Array(capacity);
    this.w2 = new Int32Array(capacity);
    this.w3 = new Int32Array(capacity);
    this.rid = new Int32Array(capacity);
    this.at = new Int32Array(capacity);
    const mask = capacity - 1;
    for (let k = 0; k < this.entries; k++) {
      const place = (this.head + k) % this.ring.length;
      const s = this.ring[place];
      let i = this.home(old.w0[s]);
      while (this.rid[i] !== EMPTY) i = (i + 1) & mask;
      this.rid[i] = old.rid[s];
      this.w0[i] = old.w0[s];
      this.w1[i] = old.w1[s];
      this.w2[i] = old.w2[s];
      this.w3[i] = old.w3[s];
      this.ring[place] = i;
      this.at[i] = place;
    }
  }

  /**
   * Run numbers ran out (after two billion recorded runs): the runs still recorded are numbered again from 1, the
   * digests of forgotten runs all get one number no run has.
   */
  private renumber(): void {
    const map = new Map<number, number>();
    let next = 2;
    for (const [run, id] of this.runIds) {
      map.set(id, next);
      this.runIds.set(run, next++);
    }
    for (let i = 0; i < this.capacity; i++) if (this.rid[i] !== EMPTY) this.rid[i] = map.get(this.rid[i]) ?? 1;
    this.nextRunId = next;
  }
}
