/**
 * OpenInference's `metadata` attribute is a JSON object serialised into one string (LangChain run metadata:
 * the LangGraph node, step, checkpoint, thread id, and whatever the application put there, content
 * included). The decoder keeps exactly three fields of it, `langgraph_node`, `langgraph_checkpoint_ns` and
 * `langgraph_step`, as the derived attributes `metadata.langgraph_node`, `metadata.langgraph_checkpoint_ns` and
 * `metadata.langgraph_step`: this scanner walks the JSON bytes without decoding them, compares top-level keys byte by
 * byte, and turns only those keys' values into JS values (strings bounded in length, the step a small integer).
 * Every other key and value, and the metadata string itself, never becomes a JS value.
 */

/** The derived attribute the decoder stores. */
export const LANGGRAPH_NODE_ATTRIBUTE = 'metadata.langgraph_node';
/**
 * The second field kept: `langgraph_checkpoint_ns`, the path of the task the span ran in (`node:taskid|node:taskid`,
 * LangGraph's own node names and task ids: the evidence of which node invoked which task or subgraph). Kept only
 * when it is plain (no escapes) and at most MAX_NS_BYTES; the dialect keeps it only when every segment is an id.
 */
export const LANGGRAPH_NS_ATTRIBUTE = 'metadata.langgraph_checkpoint_ns';
/**
 * The third: `langgraph_step`, the superstep the node ran in (LangGraph's own counter, a non-negative integer). Nodes
 * of one graph run in different supersteps ran one after the other whatever their span times say; nodes of one
 * superstep ran in parallel. Kept only as plain digits up to MAX_STEP.
 */
export const LANGGRAPH_STEP_ATTRIBUTE = 'metadata.langgraph_step';
/**
 * The fourth: `lc_agent_name`, the name LangChain's agent factory (`createAgent({ name })`) gives the agent whose loop the
 * span ran in. Kept only beside `langgraph_node`, plain, at most MAX_NODE_BYTES; the dialect uses it only when it is an id.
 */
export const LANGGRAPH_AGENT_ATTRIBUTE = 'metadata.lc_agent_name';
/** Largest step kept (a graph's recursion limit is far below it). */
export const MAX_STEP = 1_000_000_000;
/** Longest checkpoint namespace kept (bytes). */
export const MAX_NS_BYTES = 1024;
/** The source attribute (OpenInference SemanticConventions.METADATA). */
export const METADATA_ATTRIBUTE = 'metadata';
/** Longest node name kept (bytes); a longer value is not an agent id anyway. */
export const MAX_NODE_BYTES = 256;

const KEY = new TextEncoder().encode('langgraph_node');
const NS_KEY = new TextEncoder().encode('langgraph_checkpoint_ns');
const STEP_KEY = new TextEncoder().encode('langgraph_step');
const AGENT_KEY = new TextEncoder().encode('lc_agent_name');
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

/** The LangGraph fields of a metadata JSON object: its node, the checkpoint namespace of its task, its superstep. */
export interface LangGraphFields {
  node: string | null;
  ns: string | null;
  step: number | null;
  /** `lc_agent_name`: the prebuilt agent whose loop the span ran in. */
  agent: string | null;
}

const keyIs = (buf: Uint8Array, start: number, end: number, key: Uint8Array) => end - start === key.length && key.every((c, k) => buf[start + k] === c);

/** A plain string value at `i` (opening quote) of at most `max` bytes, or null (escaped, empty, too long, malformed). */
function plainString(buf: Uint8Array, i: number, end: number, max: number): { value: string | null; next: number } {
  if (buf[i] !== QUOTE) return { value: null, next: skipValue(buf, i, end) };
  const vEnd = skipString(buf, i, end);
  if (vEnd < 0) return { value: null, next: -1 };
  const len = vEnd - 1 - (i + 1);
  if (len <= 0 || len > max) return { value: null, next: vEnd };
  for (let k = i + 1; k < vEnd - 1; k++) if (buf[k] === BACKSLASH) return { value: null, next: vEnd };
  return { value: decoder.decode(buf.subarray(i + 1, vEnd - 1)), next: vEnd };
}

/** A plain non-negative integer at `i` (digits only, no sign, fraction or exponent) up to MAX_STEP, or null. */
function plainStep(buf: Uint8Array, i: number, end: number): { value: number | null; next: number } {
  const next = skipValue(buf, i, end);
  if (next < 0) return { value: null, next };
  const len = next - i;
  if (len < 1 || len > 10) return { value: null, next };
  let v = 0;
  for (let k = i; k < next; k++) {
    const d = buf[k] - 0x30;
    if (d < 0 || d > 9) return { value: null, next };
    v = v * 10 + d;
  }
  return { value: v <= MAX_STEP ? v : null, next };
}

/**
 * The top-level `langgraph_node` and `langgraph_checkpoint_ns` strings and `langgraph_step` integer of the JSON object in `buf[start, end)`
 * (each null when absent, not a plain string, escaped, empty or too long). Malformed JSON ends the scan: what was
 * read before it stands (as a scan that stops at the key it wants would have found it).
 */
export function langgraphFieldsOf(buf: Uint8Array, start: number, end: number): LangGraphFields {
  const out: LangGraphFields = { node: null, ns: null, step: null, agent: null };
  let i = start;
  while (i < end && isSpace(buf[i])) i++;
  if (buf[i] !== 0x7b) return out;
  i++;
  for (;;) {
    while (i < end && (isSpace(buf[i]) || buf[i] === 0x2c)) i++;
    if (i >= end || buf[i] === 0x7d) return out;
    if (buf[i] !== QUOTE) return out;
    const keyStart = i + 1;
    const keyEnd = skipString(buf, i, end);
    if (keyEnd < 0) return out;
    const isNode = keyIs(buf, keyStart, keyEnd - 1, KEY);
    const isNs = !isNode && keyIs(buf, keyStart, keyEnd - 1, NS_KEY);
    const isStep = !isNode && !isNs && keyIs(buf, keyStart, keyEnd - 1, STEP_KEY);
    const isAgent = !isNode && !isNs && !isStep && keyIs(buf, keyStart, keyEnd - 1, AGENT_KEY);
    i = keyEnd;
    while (i < end && isSpace(buf[i])) i++;
    if (buf[i] !== 0x3a) return out;
    i++;
    while (i < end && isSpace(buf[i])) i++;
    if (isNode || isNs || isAgent) {
      const { value, next } = plainString(buf, i, end, isNs ? MAX_NS_BYTES : MAX_NODE_BYTES);
      if (next < 0) return out;
      if (isNode) out.node = value;
      else if (isNs) out.ns = value;
      else out.agent = value;
      i = next;
      continue;
    }
    if (isStep) {
      const { value, next } = plainStep(buf, i, end);
      if (next < 0) return out;
      out.step = value;
      i = next;
      continue;
    }
    const next = skipValue(buf, i, end);
    if (next < 0) return out;
    i = next;
  }
}

/**
 * The top-level `langgraph_node` string of the JSON object in `buf[start, end)`, or null (not an object, no
 * such key, not a plain string, escaped, empty or longer than MAX_NODE_BYTES, or malformed JSON).
 */
export function langgraphNodeOf(buf: Uint8Array, start: number, end: number): string | null {
  return langgraphFieldsOf(buf, start, end).node;
}

const encoder = new TextEncoder();

/** Same, for a metadata value that the JSON transport already holds as a string. */
export function langgraphFieldsOfString(s: string): LangGraphFields {
  // Cheap refusal before encoding: no key, no work.
  if (!s.includes('"langgraph_')) return { node: null, ns: null, step: null, agent: null };
  const bytes = encoder.encode(s);
  return langgraphFieldsOf(bytes, 0, bytes.length);
}

/** The node only (see langgraphFieldsOfString). */
export function langgraphNodeOfString(s: string): string | null {
  return langgraphFieldsOfString(s).node;
}
