/** A handoff state version: a non-negative integer or a non-empty string. */
type StateVersion = number | string;

/**
 * State versions are opaque identifiers compared as text (semantics 5): `7.0` is not `7`; a JSON number is its
 * decimal text, so `7` and `"7"` are the same version.
 */
export function sameStateVersion(a: StateVersion, b: StateVersion): boolean {
  return String(a) === String(b);
}

/** Versions compare as in semantics 2a: dot-separated numeric parts numerically, else as text. */
export function compareVersions(a: StateVersion, b: StateVersion): number {
  const sa = String(a).trim();
  const sb = String(b).trim();
  const numeric = /^\d+(\.\d+)*$/;
  if (numeric.test(sa) && numeric.test(sb)) {
    const pa = sa.split('.').map(Number);
    const pb = sb.split('.').map(Number);
    for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
      const d = (pa[i] ?? 0) - (pb[i] ?? 0);
      if (d !== 0) return d < 0 ? -1 : 1;
    }
    return 0;
  }
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}
