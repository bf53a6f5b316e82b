/**
 * Recognising a redelivered receipt cheaply: a 128-bit digest (SHA-256, truncated) of the compact stored JSON per
 * (run, event) of live runs, kept in a bounded map. A delivery whose digest equals the recorded one carries the
 * same content as a stored version, so it is a duplicate: no canonical form, no store round trip, no classifier
 * step. Anything else (no digest recorded, evicted, another content) goes the exact way through the store,
 * which stays the authority for duplicates and conflicts (also across a restart, when the map starts empty).
 *
 * Soundness: the compact JSON is the stored body, so equal compact JSON means equal stored fields, and their
 * canonical forms (which compare receipts) are equal too. Only digests of content the store has answered as
 * accepted or duplicate are recorded, so a recorded digest always names a stored version of that (run, event).
 *
 * Memory: about 60 bytes per recorded receipt; at most `maxEntries` (runs recorded first are forgotten first).
 */
import * as crypto from 'node:crypto';
import { compactReceiptJson } from '../core/canonical.js';
import type { Receipt } from '../core/types.js';

export const DEFAULT_MAX_DIGESTS = 262_144;

/** One-shot SHA-256 (crypto.hash, Node >= 20.12: no Hash object per call, ~2 µs instead of ~5 µs), else createHash. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64') => string }).hash;
const sha256Base64 = oneShot ? (s: string) => oneShot('sha256', s, 'base64') : (s: string) => crypto.createHash('sha256').update(s).digest('base64');

export class DeliveredDigests {
  private readonly runs = new Map<string, Map<string, string>>();
  private entries = 0;

  constructor(readonly maxEntries = DEFAULT_MAX_DIGESTS) {}

  /** The digest of a receipt's stored form. */
  static digest(r: Receipt): string {
    return DeliveredDigests.digestOfJson(compactReceiptJson(r));
  }

  /** The digest of a stored form already made (compactReceiptJson of the receipt). */
  static digestOfJson(json: string): string {
    return sha256Base64(json).slice(0, 22);
  }

  /** True when this (run, event) is recorded with exactly this digest. */
  has(run: string, event: string, digest: string): boolean {
    return this.runs.get(run)?.get(event) === digest;
  }

  /** Record the digest of content the store holds for (run, event); the first recorded digest stays. */
  record(run: string, event: string, digest: string): void {
    let events = this.runs.get(run);
    if (!events) {
      events = new Map();
      this.runs.set(run, events);
    }
    if (events.has(event)) return;
    events.set(event, digest);
    this.entries++;
    while (this.entries > this.maxEntries) {
      const oldest = this.runs.keys().next().value as string;
      this.forget(oldest);
    }
  }

  forget(run: string): void {
    const events = this.runs.get(run);
    if (!events) return;
    this.entries -= events.size;
    this.runs.delete(run);
  }

  get size(): number {
    return this.entries;
  }
}
