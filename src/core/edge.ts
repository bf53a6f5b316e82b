import { EDGE_KINDS, type EdgeKind } from './vocab.js';

/** A directed edge as written: one source, one or more targets (bounded choice), one kind. */
export interface EdgeSpec {
  from: string;
  to: string[];
  kind: EdgeKind;
}

const EDGE_RE = /^\s*([^\s\[\]>:,-][^\[\]>:,]*?)\s*->\s*(\[[^\]]*\]|[^\[\]>:,]+?)\s*:\s*([A-Za-z_]+)\s*$/;

export class EdgeSyntaxError extends Error {}

/** Parse `"a -> b : kind"` or `"a -> [b, c] : kind"` (spaces ignored). */
export function parseEdge(text: string): EdgeSpec {
  const m = EDGE_RE.exec(text);
  if (!m) throw new EdgeSyntaxError(`not an edge: ${JSON.stringify(text)} (expected "from -> to : kind")`);
  const from = m[1].trim();
  const rawTo = m[2].trim();
  const kind = m[3];
  if (!(EDGE_KINDS as readonly string[]).includes(kind)) {
    throw new EdgeSyntaxError(`unknown edge kind ${JSON.stringify(kind)} (expected one of ${EDGE_KINDS.join(', ')})`);
  }
  const to = rawTo.startsWith('[')
    ? rawTo.slice(1, -1).split(',').map((s) => s.trim()).filter((s) => s.length > 0)
    : [rawTo];
  if (to.length === 0) throw new EdgeSyntaxError(`edge ${JSON.stringify(text)} has no target`);
  return { from, to, kind: kind as EdgeKind };
}

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
