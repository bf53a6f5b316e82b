/**
 * OpenInference's `metadata` attribute is a JSON object serialised into one string (LangChain run metadata:
 * the LangGraph node, step, checkpoint, thread id, and whatever the application put there, content
 * included). The decoder keeps exactly one field of it, `langgraph_node`, as the derived attribute
 * `metadata.langgraph_node`: this scanner walks the JSON bytes without decoding them, compares top-level
 * keys byte by byte, and turns only that key's string value into a JS string (bounded in length). Every
 * other key and value, and the metadata string itself, never becomes a JS value.
 */

/** The derived attribute the decoder stores. */
export const LANGGRAPH_NODE_ATTRIBUTE = 'metadata.langgraph_node';
/** The source attribute (OpenInference SemanticConventions.METADATA). */
export const METADATA_ATTRIBUTE = 'metadata';
/** Longest node name kept (bytes); a longer value is not an agent id anyway. */
export const MAX_NODE_BYTES = 256;

const KEY = new TextEncoder().encode('langgraph_node');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const decoder = new TextDecoder('utf-8', { fatal: false });

const isSpace = (b: number) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

/** Index just past the string starting at `i` (which holds the opening quote), or -1 when unterminated. */
function skipString(buf: Uint8Array, i: number, end: number): number {
  for (let j = i + 1; j < end; j++) {
    const b = buf[j];
    if (b === BACKSLASH) j++;
    else if (b === QUOTE) return j + 1;
  }
  return -1;
}

/** Index just past the JSON value starting at `i` (skipped, never decoded), or -1 when malformed. */
function skipValue(buf: Uint8Array, i: number, end: number): number {
  if (i >= end) return -1;
  const b = buf[i];
  if (b === QUOTE) return skipString(buf, i, end);
  if (b === 0x7b || b === 0x5b) {
    let depth = 0;
    for (let j = i; j < end; j++) {
      const c = buf[j];
      if (c === QUOTE) {
        j = skipString(buf, j, end) - 1;
        if (j < 0) return -1;
      } else if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  // number, true, false, null: up to the next delimiter
  let j = i;
  while (j < end && buf[j] !== 0x2c && buf[j] !== 0x7d && buf[j] !== 0x5d && !isSpace(buf[j])) j++;
  return j;
}

/**
 * The top-level `langgraph_node` string of the JSON object in `buf[start, end)`, or null (not an object, no
 * such key, not a plain string, escaped, empty or longer than MAX_NODE_BYTES, or malformed JSON).
 */
export function langgraphNodeOf(buf: Uint8Array, start: number, end: number): string | null {
  let i = start;
  while (i < end && isSpace(buf[i])) i++;
  if (buf[i] !== 0x7b) return null;
  i++;
  for (;;) {
    while (i < end && (isSpace(buf[i]) || buf[i] === 0x2c)) i++;
    if (i >= end || buf[i] === 0x7d) return null;
    if (buf[i] !== QUOTE) return null;
    const keyStart = i + 1;
    const keyEnd = skipString(buf, i, end);
    if (keyEnd < 0) return null;
    const matches = keyEnd - 1 - keyStart === KEY.length && KEY.every((c, k) => buf[keyStart + k] === c);
    i = keyEnd;
    while (i < end && isSpace(buf[i])) i++;
    if (buf[i] !== 0x3a) return null;
    i++;
    while (i < end && isSpace(buf[i])) i++;
    if (matches) {
      if (buf[i] !== QUOTE) return null;
      const vEnd = skipString(buf, i, end);
      if (vEnd < 0) return null;
      const len = vEnd - 1 - (i + 1);
      if (len <= 0 || len > MAX_NODE_BYTES) return null;
      for (let k = i + 1; k < vEnd - 1; k++) if (buf[k] === BACKSLASH) return null;
      return decoder.decode(buf.subarray(i + 1, vEnd - 1));
    }
    const next = skipValue(buf, i, end);
    if (next < 0) return null;
    i = next;
  }
}

const encoder = new TextEncoder();

/** Same, for a metadata value that the JSON transport already holds as a string. */
export function langgraphNodeOfString(s: string): string | null {
  // Cheap refusal before encoding: no key, no work.
  if (!s.includes('"langgraph_node"')) return null;
  const bytes = encoder.encode(s);
  return langgraphNodeOf(bytes, 0, bytes.length);
}
