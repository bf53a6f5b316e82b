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

/** The body of a span log entry of `spans` (all of one trace), in format 2. */
export function encodeLoggedSpans(spans: readonly LoggedSpan[]): string {
  const sources: string[] = [];
  // Plain spans by parent ('' for none), then by source index: the group's span ids, hex, concatenated.
  const groups = new Map<string, string[]>();
  const parents = new Map<string, string | null>();
  const other: Omit<LoggedSpan, 't'>[] = [];
  for (const l of spans) {
    if (l.op === 'span' && l.s.length === 16) {
      let src = sources.indexOf(l.src);
      if (src < 0) src = sources.push(l.src) - 1;
      const pk = l.p ?? '';
      let bySrc = groups.get(pk);
      if (bySrc === undefined) {
        groups.set(pk, (bySrc = []));
        parents.set(pk, l.p);
      }
      bySrc[src] = bySrc[src] === undefined ? l.s : bySrc[src] + l.s;
      continue;
    }
    const { t: _t, ...rest } = l;
    other.push(rest);
  }
  const g: [string | null, number, string][] = [];
  for (const [pk, bySrc] of groups) {
    for (let src = 0; src < bySrc.length; src++) {
      const hex = bySrc[src];
      if (hex === undefined) continue;
      const bytes = Buffer.from(hex, 'hex');
      if (bytes.length * 2 === hex.length) {
        g.push([parents.get(pk)!, src, bytes.toString('base64')]);
        continue;
      }
      // Not all lowercase hex (never from the decoders): each span as its record, validated (and refused) on replay.
      for (let i = 0; i < hex.length; i += 16) other.push({ s: hex.slice(i, i + 16), p: parents.get(pk)!, src: sources[src], op: 'span' });
    }
  }
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
