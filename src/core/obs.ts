/** Observations (an event at an instant) and the sorted event-id lists the run state and the rules share. */

/** An observation: its event and its instant (whole ms `at` plus sub-ms `ns`, see src/core/time.ts). */
export interface Obs {
  event: string;
  at: number;
  ns: number;
}

/** Is b earlier than a (or a absent)? By time (ms, then ns), then event id (code point order; ids are ASCII). */
export function earlier(a: Obs | null, b: Obs): boolean {
  return a === null || b.at < a.at || (b.at === a.at && (b.ns < a.ns || (b.ns === a.ns && b.event < a.event)));
}
/** a <= b on (ms, ns) pairs. */
export const atOrBefore = (aMs: number, aNs: number, bMs: number, bNs: number): boolean => aMs < bMs || (aMs === bMs && aNs <= bNs);

/** The first index of sorted `a` in [lo, hi) whose item is not below `x` (binary search). */
function lowerBound(a: readonly string[], x: string, lo: number, hi: number): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A list at least this many times longer than the other is merged by binary searches (see mergeSorted). */
const SEARCH_MERGE = 16;

/**
 * Merge of two sorted lists of distinct strings (code unit order, as Array.prototype.sort). When one list is much
 * shorter (a few new events into a long run's list, the usual incremental case), each of its items is placed by a
 * binary search and the runs of the long list between them are copied without comparing: O(k log n) comparisons.
 */
export function mergeSorted(a: string[], b: string[]): string[] {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  if (a.length < b.length) {
    const t = a;
    a = b;
    b = t;
  }
  const out: string[] = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  if (b.length * SEARCH_MERGE <= a.length) {
    for (; j < b.length; j++) {
      const x = b[j];
      const stop = lowerBound(a, x, i, a.length);
      while (i < stop) out[k++] = a[i++];
      out[k++] = x;
    }
    while (i < a.length) out[k++] = a[i++];
    return out;
  }
  while (i < a.length && j < b.length) out[k++] = a[i] < b[j] ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}
