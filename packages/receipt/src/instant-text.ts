/** Instant texts (semantics 2a "Time"): RFC 3339 with at most nine fraction digits, a date and time that exist. */

/** Days in a month of a year (proleptic Gregorian). */
function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** The shape every instant text has: RFC 3339 date-time, at most nine fraction digits (the Time rule). */
export const RFC3339_TEXT = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * Why a text is not an instant (semantics 2a "Time"), or null when it is one: RFC 3339 with at most nine fraction
 * digits, and a date and time that exist: month 01-12, a day the month has (2026-02-30 and 2026-04-31 are refused,
 * where `Date.parse` would run on into the next month), hour 00-23 (24:00:00 is refused), minute and second 00-59
 * (no leap second), offset hours 00-23 and minutes 00-59. The one check every path that reads a time text uses.
 */
export function instantTextError(t: string): string | null {
  const m = RFC3339_TEXT.exec(t);
  if (m === null) return 'an RFC 3339 time, e.g. 2026-01-02T03:04:05Z, with at most nine fraction digits (nanoseconds)';
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (month < 1 || month > 12) return `not a calendar date: month ${m[2]} does not exist`;
  if (day < 1 || day > daysIn(year, month)) return `not a calendar date: ${m[1]}-${m[2]} has no day ${m[3]}`;
  if (Number(m[4]) > 23) return `not a time of day: hour ${m[4]} (00-23; 24:00:00 is the next day's 00:00:00)`;
  if (Number(m[5]) > 59) return `not a time of day: minute ${m[5]}`;
  if (Number(m[6]) > 59) return `not a time of day: second ${m[6]} (leap seconds are not instants)`;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return `not a UTC offset: ${m[8]}`;
  return null;
}

/** Is the text an instant (instantTextError finds nothing)? */
export const isInstantText = (t: unknown): t is string => typeof t === 'string' && instantTextError(t) === null;
