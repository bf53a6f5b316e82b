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
 * `Date.parse` of the ISO form of a text: a lowercase `t` or a space between date and time becomes `T`, a final `z`
 * becomes `Z`. `Date.parse` reads only the uppercase `T` form as ISO; other forms go to its legacy parser, which
 * reads years 0000-0099 as 1950-2049 ("0050-01-01 00:00:00Z" would be 1950).
 */
function isoParse(t: string): number {
  const c = t.charCodeAt(10);
  let iso = t.length > 10 && (c === 116 || c === 32) ? `${t.slice(0, 10)}T${t.slice(11)}` : t;
  if (iso.endsWith('z')) iso = `${iso.slice(0, -1)}Z`;
  return Date.parse(iso);
}

/** `T`, `t` or a space: the separators RFC 3339 (and the receipt schema) allow between date and time. */
const isDateTimeSeparator = (c: number): boolean => c === 84 || c === 116 || c === 32;

/** Two decimal digits at i..i+1, or -1. */
function two(t: string, i: number): number {
  const a = t.charCodeAt(i) - 48;
  const b = t.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * Whole milliseconds of an RFC 3339 text, exactly as `Date.parse` gives them (a longer fraction is truncated to the
 * millisecond, never rounded up), so together with subMillisOf this is exact. The common form
 * `YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|+HH:MM|-HH:MM)` with fields in range is read directly (no allocation,
 * a fraction of the cost of `Date.parse`); anything else (out-of-range fields, other texts) is left to `Date.parse` (test/core-nanotime.test.ts checks the two agree).
 */
export function millisOf(t: string): number {
  const n = t.length;
  if (n < 20 || t.charCodeAt(4) !== 45 || t.charCodeAt(7) !== 45 || !isDateTimeSeparator(t.charCodeAt(10)) || t.charCodeAt(13) !== 58 || t.charCodeAt(16) !== 58) return isoParse(t);
  const y1 = two(t, 0);
  const y2 = two(t, 2);
  const mo = two(t, 5);
  const d = two(t, 8);
  const h = two(t, 11);
  const mi = two(t, 14);
  const s = two(t, 17);
  if (y1 < 0 || y2 < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59) return isoParse(t);
  let i = 19;
  let frac = 0;
  if (t.charCodeAt(i) === 46 /* . */) {
    i++;
    const from = i;
    let scale = 100;
    for (; i < n; i++) {
      const c = t.charCodeAt(i) - 48;
      if (!(c >= 0 && c <= 9)) break;
      if (scale >= 1) frac += c * scale;
      scale /= 10;
    }
    if (i === from || i - from > 9) return isoParse(t);
  }
  let offset = 0;
  const z = t.charCodeAt(i);
  if ((z === 90 /* Z */ || z === 122 /* z */) && i + 1 === n) {
    // UTC
  } else if ((z === 43 || z === 45) && i + 6 === n && t.charCodeAt(i + 3) === 58) {
    const oh = two(t, i + 1);
    const om = two(t, i + 4);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return isoParse(t);
    offset = (oh * 60 + om) * (z === 43 ? -60_000 : 60_000);
  } else return isoParse(t);
  // Days from the civil date (proleptic Gregorian; a day past the month's end runs on, as Date.parse does).
  const year = y1 * 100 + y2;
  const yy = mo <= 2 ? year - 1 : year;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const mp = mo > 2 ? mo - 3 : mo + 9;
  const doy = Math.floor((153 * mp + 2) / 5) + d - 1;
  const days = era * 146_097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719_468;
  return ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + frac + offset;
}

export { RFC3339_TEXT, instantTextError, isInstantText } from '@topology-audit/receipt';

/** The instant of an RFC 3339 text (validated upstream). */
export function parseInstant(t: string): Instant {
  return { ms: millisOf(t), ns: subMillisOf(t) };
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

/** An instant after every other (no lease, no terminal: an interval that never ends). */
export const NEVER: Instant = Object.freeze({ ms: Infinity, ns: 0 });

/** The earlier of two instants (a on a tie). */
export const earlierOf = (a: Instant, b: Instant): Instant => (compareInstants(b, a) < 0 ? b : a);

/** The later of two instants (a on a tie). */
export const laterOf = (a: Instant, b: Instant): Instant => (compareInstants(b, a) > 0 ? b : a);

/** RFC 3339 text of an instant (formatInstant of its two parts). */
export const instantText = (t: Instant): string => formatInstant(t.ms, t.ns);

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
