/**
 * Agent spans typed in a framework's own vocabulary (docs/dialects.md "Agent recognition by rule"). Some frameworks
 * mark their agent spans with an attribute of their own namespace instead of `gen_ai.*` or OpenInference: a key whose
 * last segment is `type`, `kind` or `subtype` with the value `agent` (e.g. `<ns>.observation.type = agent`,
 * `<ns>:metadata:subtype = agent`), the agent named by an id/key or name attribute of the same namespace, or by the span
 * name. And LangChain's agent factory names the agent of every span of its loop in the run metadata `lc_agent_name`,
 * which tracing SDKs flatten to `<ns>.observation.metadata.lc_agent_name`.
 *
 * The decoder keeps none of these keys by name (they are not on the allow-list, src/otlp/types.ts). It classifies each
 * dropped key by its last segment (separators `.`, `:` and `_`), decodes a value only where it must: a type key's value
 * (kept only when it is `agent`), an `lc_agent_name` value (kept only when it is an id), and, only on a span typed
 * agent, the id/key and name attributes of the type key's namespace. Every other value is never read. What is kept is
 * stored as the derived attributes below, with the keys (never values) that supplied them, for `explain`.
 */
import type { AttrValue } from './types.js';

/** The key (e.g. `langfuse.observation.type`) that typed the span an agent. */
export const TYPED_AGENT_KEY = 'agent.typed.key';
/** The value of the namespace's id/key attribute, and that attribute's key. */
export const TYPED_AGENT_ID = 'agent.typed.id';
export const TYPED_AGENT_ID_KEY = 'agent.typed.id_key';
/** The value of the namespace's name attribute, and that attribute's key. */
export const TYPED_AGENT_NAME = 'agent.typed.name';
export const TYPED_AGENT_NAME_KEY = 'agent.typed.name_key';
/** LangChain's `lc_agent_name` read from a flat attribute (any namespace, e.g. `<ns>.observation.metadata.lc_agent_name`). */
export const LC_AGENT_NAME = 'lc_agent_name';
/** The key it was read from. */
export const LC_AGENT_NAME_KEY = 'lc_agent_name.key';

export const TYPED_ATTRIBUTE_KEYS: readonly string[] = [TYPED_AGENT_KEY, TYPED_AGENT_ID, TYPED_AGENT_ID_KEY, TYPED_AGENT_NAME, TYPED_AGENT_NAME_KEY, LC_AGENT_NAME, LC_AGENT_NAME_KEY];

/** What a dropped key may be to this rule. */
export type TypedRole = 'type' | 'id' | 'name' | 'lc';

const MAX_KEY_BYTES = 128;
const KEY_CHARS = /^[A-Za-z0-9_.:-]{1,128}$/;
const isSep = (b: number) => b === 0x2e /* . */ || b === 0x3a /* : */ || b === 0x5f; /* _ */

/** Last segments (lowercase, separators `.`, `:`, `_`) by role. `agentid` etc. are matched across a separator. */
const ID_WORDS = ['id', 'key'];
const NAME_WORDS = ['name'];
const LC = 'lc_agent_name';

/** ASCII lower case of one byte (letters only: `_` | 0x20 is not `_`). */
const lower = (b: number) => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b);

/** Does `buf[start, end)` end with `word` (ASCII, case-insensitive) that starts the key or follows a separator? */
function endsWithSegment(buf: Uint8Array, start: number, end: number, word: string): boolean {
  const at = end - word.length;
  if (at < start) return false;
  for (let i = 0; i < word.length; i++) if (lower(buf[at + i]) !== word.charCodeAt(i)) return false;
  return at === start || isSep(buf[at - 1]);
}

const utf8 = new TextEncoder();

/** The role of a dropped key from its bytes (nothing is allocated), or null: most keys have none. */
export function typedRoleAt(buf: Uint8Array, start: number, length: number): TypedRole | null {
  if (length === 0 || length > MAX_KEY_BYTES) return null;
  const end = start + length;
  const last = lower(buf[end - 1]);
  if (last === 0x65 /* e */) {
    if (endsWithSegment(buf, start, end, LC)) return 'lc';
    if (endsWithSegment(buf, start, end, 'type') || endsWithSegment(buf, start, end, 'subtype')) return 'type';
    if (endsWithSegment(buf, start, end, 'name')) return 'name';
    return null;
  }
  if (last === 0x64 /* d */) return endsWithSegment(buf, start, end, 'kind') ? 'type' : endsWithSegment(buf, start, end, 'id') ? 'id' : null;
  if (last === 0x79 /* y */) return endsWithSegment(buf, start, end, 'key') ? 'id' : null;
  return null;
}

/** Same for a key the JSON transport holds as a string (read in place: most keys have no role, so nothing is encoded). */
export function typedRoleOf(key: string): TypedRole | null {
  const n = key.length;
  if (n === 0 || n > MAX_KEY_BYTES) return null;
  const last = lower(key.charCodeAt(n - 1));
  if (last !== 0x65 && last !== 0x64 && last !== 0x79) return null;
  const b = utf8.encode(key);
  return typedRoleAt(b, 0, b.length);
}

/** A key as kept for `explain` (bounded charset), else null (the key is then not used at all). */
export function typedKeyText(key: string): string | null {
  return KEY_CHARS.test(key) ? key : null;
}

/** Is this type key's value `agent` (case-insensitive: OpenInference writes `AGENT`)? */
export const isAgentType = (v: AttrValue | undefined): boolean => typeof v === 'string' && v.length === 5 && v.toLowerCase() === 'agent';

/** The characters of an agent id (the dialect applies the id rule itself): an `lc_agent_name` value with others is not kept. */
const ID_CHARS = /^[A-Za-z0-9_.@#+=-]{1,200}$/;
/** An `lc_agent_name` value (LangChain's name of the agent), kept only when it is made of id characters. */
export const lcAgentNameOf = (v: AttrValue | undefined): string | null => (typeof v === 'string' && ID_CHARS.test(v) ? v : null);

/**
 * The namespaces of a type key, innermost first: every prefix that ends just before a separator, short of the last
 * segment (`langfuse.observation.type` -> `langfuse.observation`, `langfuse`).
 */
export function namespacesOf(typeKey: string): string[] {
  const out: string[] = [];
  let i = typeKey.length - 1;
  while (i > 0 && !isSep(typeKey.charCodeAt(i))) i--;
  // `subtype`/`type` after `_` (`my_fw_agent_type`): the segment is the word; prefixes end at each separator before it.
  for (; i > 0; i--) if (isSep(typeKey.charCodeAt(i))) out.push(typeKey.slice(0, i));
  return out;
}

/** The attribute of namespace `ns` with a role: `ns` + separator + `id`/`key` (or `agent` + separator + one), `name` likewise. */
export function roleInNamespace(key: string, ns: string, role: 'id' | 'name'): boolean {
  if (key.length <= ns.length + 1 || !key.startsWith(ns) || !isSep(key.charCodeAt(ns.length))) return false;
  const rest = key.slice(ns.length + 1).toLowerCase();
  const words = role === 'id' ? ID_WORDS : NAME_WORDS;
  for (const w of words) {
    if (rest === w) return true;
    if (rest.length === w.length + 6 && rest.startsWith('agent') && isSep(rest.charCodeAt(5)) && rest.endsWith(w)) return true;
  }
  return false;
}

/**
 * For a span typed agent by `typeKey`, the id/key and the name attribute among `candidates` (keys of the span's
 * dropped attributes with those roles), each from the innermost namespace that has one; undefined when none.
 */
export function typedIdentityKeys(typeKey: string, candidates: readonly { key: string; role: TypedRole }[]): { idKey?: string; nameKey?: string } {
  const out: { idKey?: string; nameKey?: string } = {};
  for (const ns of namespacesOf(typeKey)) {
    for (const c of candidates) {
      if (out.idKey === undefined && c.role === 'id' && roleInNamespace(c.key, ns, 'id')) out.idKey = c.key;
      if (out.nameKey === undefined && c.role === 'name' && roleInNamespace(c.key, ns, 'name')) out.nameKey = c.key;
    }
    if (out.idKey !== undefined && out.nameKey !== undefined) break;
  }
  return out;
}

/** Bound on candidate keys remembered per span (further ones are ignored). */
export const MAX_TYPED_CANDIDATES = 32;

/** A dropped key of the JSON transport with a role, and its string value as the JSON already holds it. */
export interface TypedJsonCandidate {
  key: string;
  role: TypedRole;
  value: unknown;
}

/** The rule's attributes of a span decoded from OTLP/JSON (same result as the protobuf decoder's). */
export function typedJsonAttributes(typed: readonly TypedJsonCandidate[], attrs: Record<string, AttrValue>, identityCandidates: () => readonly TypedJsonCandidate[]): void {
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);
  for (const t of typed) {
    if (t.role !== 'lc') continue;
    const v = lcAgentNameOf(str(t.value));
    const key = typedKeyText(t.key);
    if (v === null || key === null) continue;
    attrs[LC_AGENT_NAME] = v;
    attrs[LC_AGENT_NAME_KEY] = key;
    break;
  }
  const type = typed.find((t) => t.role === 'type' && isAgentType(str(t.value)) && typedKeyText(t.key) !== null);
  if (type === undefined) return;
  attrs[TYPED_AGENT_KEY] = type.key;
  const candidates: TypedCandidate[] = keptTypedCandidates(attrs);
  for (const t of identityCandidates()) if ((t.role === 'id' || t.role === 'name') && typedKeyText(t.key) !== null) candidates.push({ key: t.key, role: t.role, read: () => t.value as AttrValue | undefined });
  setTypedIdentity(type.key, candidates, attrs);
}

/** An id/key or name attribute that may name a typed agent, and how to read its value (read only when chosen). */
export interface TypedCandidate {
  key: string;
  role: TypedRole;
  read: () => AttrValue | undefined;
}

/** Kept attributes are candidates too (a namespace's `.id` may be on the allow-list for a dialect of its own). */
export function keptTypedCandidates(attrs: Record<string, AttrValue>): TypedCandidate[] {
  const out: TypedCandidate[] = [];
  for (const key of Object.keys(attrs)) {
    if (TYPED_ATTRIBUTE_KEYS.includes(key)) continue;
    const role = typedRoleOf(key);
    if (role === 'id' || role === 'name') out.push({ key, role, read: () => attrs[key] });
  }
  return out;
}

/** Sets the typed agent's id and name (and the keys they came from) from the chosen candidates. */
export function setTypedIdentity(typeKey: string, candidates: readonly TypedCandidate[], attrs: Record<string, AttrValue>): void {
  const { idKey, nameKey } = typedIdentityKeys(typeKey, candidates);
  for (const [k, attr, attrKey] of [
    [idKey, TYPED_AGENT_ID, TYPED_AGENT_ID_KEY],
    [nameKey, TYPED_AGENT_NAME, TYPED_AGENT_NAME_KEY],
  ] as const) {
    const c = k === undefined ? undefined : candidates.find((x) => x.key === k);
    const v = c?.read();
    if (typeof v !== 'string' || v.length === 0) continue;
    attrs[attr] = v;
    attrs[attrKey] = c!.key;
  }
}
