/** A handoff state version: a non-negative integer or a non-empty string. */
type StateVersion = number | string;

/**
 * State versions are opaque identifiers compared as text (semantics 5): `7.0` is not `7`; a JSON number is its
 * decimal text, so `7` and `"7"` are the same version. The one comparison of state versions: they are the same
 * or they are not; no state version is "newer" than another by its text (contract versions, which do order, are
 * compared by `compareContractVersions` in src/core/contract.ts).
 */
export function sameStateVersion(a: StateVersion, b: StateVersion): boolean {
  return String(a) === String(b);
}
