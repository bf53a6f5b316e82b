/**
 * The machine-readable difference between the baseline and candidate configurations
 * (article section 6, "A machine-readable diff should show ..."; "If another field changes, stop").
 */
import { diffAuthority, type AuthorityDiff } from './authority.js';
import type { Manifest } from './manifest.js';
import { covers, parsePath, renderPath } from './paths.js';

export type ChangeKind = 'added' | 'removed' | 'changed';

export interface ConfigChange {
  /** Field path inside an arm's `config`, e.g. `model.version`, `topology.agents[manual-specialist]`. */
  path: string;
  change: ChangeKind;
  baseline?: unknown;
  candidate?: unknown;
  /** Covered by one of the declared changed-slice paths. */
  inSlice: boolean;
}

export interface ConfigDiff {
  experiment: string;
  baseline: string;
  candidate: string;
  slice: { description: string; consequence: 'read' | 'effect'; paths: string[] };
  changes: ConfigChange[];
  /** Changes no declared slice path covers: the comparison would not isolate topology. */
  outsideSlice: ConfigChange[];
  authority: AuthorityDiff;
  /** Nothing outside the slice changed. */
  isolated: boolean;
  /** No authority widening (including inside the slice). */
  authorityPreserved: boolean;
  ok: boolean;
}

type Plain = Record<string, unknown>;
const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isPlain(a) && isPlain(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
  }
  return false;
}

/**
 * How array elements are identified: by value for lists of names (order-insensitive sets),
 * by `id` for lists of objects that all have one, else by index.
 */
function elementKeys(arr: unknown[]): string[] | null {
  if (arr.every(isScalar)) return arr.map((v) => String(v));
  if (arr.every((v) => isPlain(v) && typeof v.id === 'string')) return arr.map((v) => (v as Plain).id as string);
  return null;
}

interface Walk {
  segments: string[];
  elements: boolean[];
}

function push(out: Omit<ConfigChange, 'inSlice'>[], w: Walk, change: ChangeKind, baseline: unknown, candidate: unknown) {
  const c: Omit<ConfigChange, 'inSlice'> & { segments: string[] } = {
    path: renderPath(w.segments, w.elements),
    change,
    segments: w.segments,
  };
  if (change !== 'added') c.baseline = baseline;
  if (change !== 'removed') c.candidate = candidate;
  out.push(c);
}

function walkValues(a: unknown, b: unknown, w: Walk, out: Omit<ConfigChange, 'inSlice'>[]): void {
  if (deepEqual(a, b)) return;
  const child = (seg: string, element: boolean): Walk => ({ segments: [...w.segments, seg], elements: [...w.elements, element] });
  if (isPlain(a) && isPlain(b)) {
    const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !(k in a))];
    for (const k of keys) {
      if (!(k in b)) push(out, child(k, false), 'removed', a[k], undefined);
      else if (!(k in a)) push(out, child(k, false), 'added', undefined, b[k]);
      else walkValues(a[k], b[k], child(k, false), out);
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const ka = elementKeys(a);
    const kb = elementKeys(b);
    const sameShape = a.length === 0 || b.length === 0 || a.every(isScalar) === b.every(isScalar);
    if (ka && kb && sameShape && new Set(ka).size === ka.length && new Set(kb).size === kb.length) {
      const ma = new Map(ka.map((k, i) => [k, a[i]]));
      const mb = new Map(kb.map((k, i) => [k, b[i]]));
      for (const k of ka) {
        if (!mb.has(k)) push(out, child(k, true), 'removed', ma.get(k), undefined);
        else walkValues(ma.get(k), mb.get(k), child(k, true), out);
      }
      for (const k of kb) if (!ma.has(k)) push(out, child(k, true), 'added', undefined, mb.get(k));
      return;
    }
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (i >= b.length) push(out, child(String(i), true), 'removed', a[i], undefined);
      else if (i >= a.length) push(out, child(String(i), true), 'added', undefined, b[i]);
      else walkValues(a[i], b[i], child(String(i), true), out);
    }
    return;
  }
  push(out, w, 'changed', a, b);
}

/** Every leaf-level difference between two configuration values, with rendered field paths. */
export function structuralDiff(baseline: unknown, candidate: unknown): (Omit<ConfigChange, 'inSlice'> & { segments: string[] })[] {
  const out: (Omit<ConfigChange, 'inSlice'> & { segments: string[] })[] = [];
  walkValues(baseline, candidate, { segments: [], elements: [] }, out);
  return out;
}

/** The configuration diff of a manifest: declared-slice coverage plus the authority diff. */
export function diffConfigs(manifest: Manifest): ConfigDiff {
  const declared = manifest.changedSlice.paths.map(parsePath);
  const changes: ConfigChange[] = structuralDiff(manifest.baseline.config, manifest.candidate.config).map(({ segments, ...c }) => ({
    ...c,
    inSlice: declared.some((d) => covers(d, segments)),
  }));
  const outsideSlice = changes.filter((c) => !c.inSlice);
  const authority = diffAuthority(manifest);
  return {
    experiment: manifest.experiment,
    baseline: manifest.baseline.label,
    candidate: manifest.candidate.label,
    slice: { ...manifest.changedSlice },
    changes,
    outsideSlice,
    authority,
    isolated: outsideSlice.length === 0,
    authorityPreserved: authority.widening.length === 0,
    ok: outsideSlice.length === 0 && authority.widening.length === 0,
  };
}
