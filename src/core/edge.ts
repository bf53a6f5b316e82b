
import type { EdgeSpec } from '@topology-audit/receipt';
export { EdgeSyntaxError, parseEdge, type EdgeSpec } from '@topology-audit/receipt';

/** The canonical edge key of one concrete edge: `from -> to : kind`. */
export function edgeKey(from: string, to: string, kind: string): string {
  return `${from} -> ${to} : ${kind}`;
}

/** Canonical text of an edge spec: a single target plainly, several in brackets. */
export function specKey(spec: EdgeSpec): string {
  return spec.to.length === 1 ? edgeKey(spec.from, spec.to[0], spec.kind) : `${spec.from} -> [${spec.to.join(', ')}] : ${spec.kind}`;
}

/** Key for lookups: no spaces at all, so `a->b:kind` equals `a -> b : kind`. */
export function compactKey(text: string): string {
  return text.replace(/\s+/g, '');
}

/** One string object per triple key text (bounded): equal keys are the same object, so map lookups compare pointers. */
const triples = new Map<string, string>();
const TRIPLE_KEYS = 100_000;

/**
 * Compact triple key used by maps on the hot path. Interned: the same text gives the same flat string object (up to
 * a bound; past it keys are made as they are), so looking a run's edge up in a contract's map is a pointer compare.
 */
export function tripleKey(from: string, to: string, kind: string): string {
  const k = `${from}\u0000${to}\u0000${kind}`;
  const known = triples.get(k);
  if (known !== undefined) return known;
  if (triples.size >= TRIPLE_KEYS) return k;
  // The stored copy is what every later call returns: equal keys are one object. (Not `Object.keys({ [k]: 0 })[0]`,
  // as before: each new key made a new hidden class, and a run naming 20,000 new edges spent seconds there.)
  triples.set(k, k);
  return k;
}

const DURATION_RE = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Durations: an integer with ms, s, m, h or d. Returns milliseconds or null when malformed. */
export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2]];
  // exact integer milliseconds only (a duration beyond 2^53 ms, ~285,000 years, cannot be exact)
  return Number.isSafeInteger(ms) ? ms : null;
}

export function formatDuration(ms: number): string {
  if (ms % 86_400_000 === 0 && ms > 0) return `${ms / 86_400_000}d`;
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0 && ms > 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** Human "how long", e.g. 2m30s. */
export function humanDuration(ms: number): string {
  const neg = ms < 0;
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${neg ? '-' : ''}${rest}ms`;
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return (neg ? '-' : '') + parts.slice(0, 2).join('');
}
