/**
 * The body of one span log entry (one trace's spans of one batch, PendingTraceLog) as the stores keep it.
 *
 * Format 2 (written since issue 35, round 3): most logged spans are plain skeleton spans (`op: "span"`: a place a
 * child arriving later may walk through) with nothing but their id, parent and source. As JSON objects each cost ~117
 * bytes, the trace id repeated in every one (a 512-span batch ~60 KB of span log, PostgreSQL parsing, writing and
 * compressing it in every commit). Format 2 writes them grouped by (parent, source): per group the parent (hex or
 * null), the index of its source in `src`, and the group's span ids as base64 of their 8-byte values concatenated
 * (11 characters a span); the trace id is the entry's own (its `trace_id` column). Every other logged span (agent,
 * handoff, relay, LangGraph, graph root) is written as before, as its object without `t`.
 *
 *   {"v":2,"src":["token-1-ab12cd34"],"g":[["a1b2c3d4e5f60718",0,"pQAAAAAAAQGl..."]],"x":[{"s":"…","p":…,"op":"agent",…}]}
 *
 * Same content as format 1 (a JSON array of LoggedSpan objects, still read: entries written before the upgrade):
 * ids, parents, sources and the resolution fields, nothing else. Decoding validates every field as parseLoggedSpan
 * does; a body that does not read as format 1 or 2 yields null (the entry is dropped, as an unreadable format-1 entry
 * always was).
 */
import { parseLoggedSpan, type LoggedSpan } from './pipeline.js';

const TRACE_HEX = /^[0-9a-f]{32}$/;
const SPAN_HEX = /^[0-9a-f]{16}$/;
const SOURCE = /^[A-Za-z0-9_.:-]{1,100}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

interface Group {
  parent: string | null;
  src: number;
  ids: string[];
}

/** The body of a span log entry of `spans` (all of one trace), in format 2. */
export function encodeLoggedSpans(spans: readonly LoggedSpan[]): string {
  const sources: string[] = [];
  const sourceIndex = new Map<string, number>();
  const groups = new Map<string, Group>();
  const other: Omit<LoggedSpan, 't'>[] = [];
  for (const l of spans) {
    if (l.op === 'span' && SPAN_HEX.test(l.s) && (l.p === null || SPAN_HEX.test(l.p))) {
      let src = sourceIndex.get(l.src);
      if (src === undefined) {
        src = sources.length;
        sources.push(l.src);
        sourceIndex.set(l.src, src);
      }
      const key = `${l.p ?? ''}:${src}`;
      const g = groups.get(key);
      if (g) g.ids.push(l.s);
      else groups.set(key, { parent: l.p, src, ids: [l.s] });
      continue;
    }
    const { t: _t, ...rest } = l;
    other.push(rest);
  }
  const g = [...groups.values()].map((x) => [x.parent, x.src, Buffer.from(x.ids.join(''), 'hex').toString('base64')]);
  return JSON.stringify(other.length ? { v: 2, src: sources, g, x: other } : { v: 2, src: sources, g });
}

/**
 * The logged spans of a span log entry of trace `traceId` (format 1 or 2), every field validated; null when the body
 * does not read as either format or any field fails. Throws only when `body` is not JSON.
 */
export function decodeLoggedSpans(traceId: string, body: string): LoggedSpan[] | null {
  const v: unknown = JSON.parse(body);
  if (Array.isArray(v)) {
    const parsed = v.map(parseLoggedSpan);
    return parsed.every((x): x is LoggedSpan => x !== null) ? parsed : null;
  }
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (o.v !== 2 || !TRACE_HEX.test(traceId)) return null;
  if (!Array.isArray(o.src) || !o.src.every((s) => typeof s === 'string' && SOURCE.test(s))) return null;
  if (!Array.isArray(o.g) || (o.x !== undefined && !Array.isArray(o.x))) return null;
  const sources = o.src as string[];
  const out: LoggedSpan[] = [];
  for (const x of (o.x ?? []) as unknown[]) {
    if (!x || typeof x !== 'object' || Array.isArray(x) || 't' in x) return null;
    const l = parseLoggedSpan({ ...(x as object), t: traceId });
    if (!l) return null;
    out.push(l);
  }
  for (const g of o.g as unknown[]) {
    if (!Array.isArray(g) || g.length !== 3) return null;
    const [parent, src, ids] = g as unknown[];
    if (!(parent === null || (typeof parent === 'string' && SPAN_HEX.test(parent)))) return null;
    if (!Number.isInteger(src) || (src as number) < 0 || (src as number) >= sources.length) return null;
    if (typeof ids !== 'string' || ids.length === 0 || !BASE64.test(ids)) return null;
    const bytes = Buffer.from(ids, 'base64');
    if (bytes.length % 8 !== 0 || bytes.toString('base64') !== ids) return null;
    for (let i = 0; i < bytes.length; i += 8) {
      out.push({ t: traceId, s: bytes.toString('hex', i, i + 8), p: parent as string | null, src: sources[src as number], op: 'span' });
    }
  }
  return out;
}
