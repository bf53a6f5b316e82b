/** The edge text of receipts and contracts: `a -> b : kind` or `a -> [b, c] : kind`. */
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
