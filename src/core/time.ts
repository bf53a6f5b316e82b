/**
 * Instants exact to the nanosecond (semantics 2a "Time"), kept cheap: whole milliseconds since the epoch (an
 * integer double, exact) plus the nanoseconds below the millisecond (an integer 0..999_999). Most instants differ
 * by a millisecond or more, so a comparison is one integer step and a second one only on a tie. No BigInt, no
 * allocation on the hot path (callers keep the two numbers side by side). Pure: no I/O.
 */

/** An instant: `ms` whole milliseconds since the epoch, `ns` nanoseconds past that millisecond (0..999_999). */
export interface Instant {
  ms: number;
  ns: number;
}

/** Nanoseconds past the millisecond of an RFC 3339 text (validated upstream): fraction digits 4..9, zero-padded. */
export function subMillisOf(t: string): number {
  // The fraction starts after "YYYY-MM-DDTHH:MM:SS" (19 characters); only 4+ digits carry sub-millisecond time.
  if (t.length < 25 || t.charCodeAt(19) !== 46 /* . */) return 0;
  let ns = 0;
  let i = 23;
  let scale = 100_000;
  for (; scale >= 1; i++, scale /= 10) {
    const c = t.charCodeAt(i) - 48;
    if (!(c >= 0 && c <= 9)) break;
    ns += c * scale;
  }
  return ns;
}

/**
 * Whole milliseconds of an RFC 3339 text. `Date.parse` truncates a longer fraction to the millisecond (it never
 * rounds up), so together with subMillisOf this is exact.
 */
export function millisOf(t: string): number {
  return Date.parse(t);
}

/** The instant of an RFC 3339 text (validated upstream). */
export function parseInstant(t: string): Instant {
  return { ms: Date.parse(t), ns: subMillisOf(t) };
}

/** The instant of a number (whole or fractional milliseconds are taken as they are: ns 0) or an Instant. */
export function toInstant(t: number | Instant): Instant {
  return typeof t === 'number' ? { ms: t, ns: 0 } : t;
}

/** a < b, on (ms, ns) pairs. */
export const isBefore = (aMs: number, aNs: number, bMs: number, bNs: number): boolean => aMs < bMs || (aMs === bMs && aNs < bNs);

/** Sign of a - b. */
export function compareInstants(a: Instant, b: Instant): number {
  return a.ms !== b.ms ? (a.ms < b.ms ? -1 : 1) : a.ns - b.ns;
}

/** RFC 3339 text of (ms, ns): milliseconds always (as Date#toISOString), then the sub-millisecond digits when non-zero. */
export function formatInstant(ms: number, ns = 0): string {
  const base = new Date(ms).toISOString();
  if (ns === 0) return base;
  const digits = String(ns).padStart(6, '0').replace(/0+$/, '');
  return `${base.slice(0, -1)}${digits}Z`;
}

/** RFC 3339 text of a whole-millisecond instant, or null when there is none (null, or not finite). */
export const isoOrNull = (ms: number | null): string | null => (ms === null || !Number.isFinite(ms) ? null : formatInstant(ms));

/**
 * An instant in whole milliseconds, rounded up when it has a sub-millisecond part: the first millisecond clock
 * reading at or after the instant (what a millisecond timer can wait for).
 */
export const ceilMillis = (ms: number, ns: number): number => (ns > 0 ? ms + 1 : ms);

/** Human "how long" of a - b in (ms, ns) parts: below a millisecond in ns or µs ("1ns", "400µs"), else as `human` says. */
export function humanDelta(aMs: number, aNs: number, bMs: number, bNs: number, human: (ms: number) => string): string {
  const totalNs = (aMs - bMs) * 1_000_000 + (aNs - bNs);
  if (Math.abs(totalNs) < 1000) return `${totalNs}ns`;
  if (Math.abs(totalNs) < 1_000_000) return `${totalNs / 1000}µs`;
  return human(aMs - bMs + (aNs - bNs) / 1_000_000);
}
