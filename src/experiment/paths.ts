/**
 * Configuration field paths: `model.version`, `authority.manual-specialist.capabilities[reserve_part]`,
 * `topology.handoffs[handoff-manual]`. A bracket names an array element by its id (or its value, for a list
 * of names, or its index when elements have no id). A declared path covers every path it is a prefix of,
 * segment by segment.
 */

export type Segments = readonly string[];

const SEGMENT = /^[A-Za-z0-9_:@#+=-]+$/;

/** Parse a declared path; throws on syntax errors. Brackets and dots both separate segments. */
export function parsePath(path: string): string[] {
  const out: string[] = [];
  let i = 0;
  let expectSegment = true;
  while (i < path.length) {
    const ch = path[i];
    if (ch === '[') {
      const end = path.indexOf(']', i);
      if (end < 0) throw new Error(`unclosed "[" in ${JSON.stringify(path)}`);
      const key = path.slice(i + 1, end);
      if (key === '') throw new Error(`empty "[]" in ${JSON.stringify(path)}`);
      out.push(key);
      i = end + 1;
      expectSegment = false;
      if (path[i] === '.') {
        i++;
        expectSegment = true;
      }
      continue;
    }
    let j = i;
    while (j < path.length && path[j] !== '.' && path[j] !== '[') j++;
    const seg = path.slice(i, j);
    if (!SEGMENT.test(seg)) throw new Error(`bad segment ${JSON.stringify(seg)} in ${JSON.stringify(path)}`);
    out.push(seg);
    expectSegment = false;
    i = j;
    if (path[i] === '.') {
      i++;
      expectSegment = true;
    }
  }
  if (out.length === 0 || expectSegment) throw new Error(`incomplete path ${JSON.stringify(path)}`);
  return out;
}

export function isValidPath(path: string): boolean {
  try {
    parsePath(path);
    return true;
  } catch {
    return false;
  }
}

/** Render segments; `elements[i]` says segment i names an array element. */
export function renderPath(segments: Segments, elements: readonly boolean[]): string {
  let out = '';
  segments.forEach((s, i) => {
    out += elements[i] ? `[${s}]` : out ? `.${s}` : s;
  });
  return out;
}

export function covers(declared: Segments, path: Segments): boolean {
  return declared.length <= path.length && declared.every((s, i) => s === path[i]);
}
