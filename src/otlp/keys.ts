import { KEPT_ATTRIBUTE_KEYS } from './types.js';
import { utf8Text } from './wire.js';

/**
 * Decides from the UTF-8 bytes of an attribute key whether the decoder keeps it, without making a string of
 * keys it drops. Built once from the shared allow-list (KEPT_ATTRIBUTE_KEYS: exact keys only, no prefixes, so an
 * unknown `topology.x` key is dropped like any content key), so it agrees with isKeptAttributeKey by construction:
 * keys are bucketed by byte length. Kept keys return their canonical string, so even kept keys are not decoded.
 */
interface KeptKey {
  readonly bytes: Uint8Array;
  readonly key: string;
}

const utf8 = new TextEncoder();

function bucketKeysByLength(keys: Iterable<string>): KeptKey[][] {
  const buckets: KeptKey[][] = [];
  for (const key of keys) {
    const bytes = utf8.encode(key);
    (buckets[bytes.length] ??= []).push({ bytes, key });
  }
  return buckets;
}

const keysByLength: KeptKey[][] = bucketKeysByLength(KEPT_ATTRIBUTE_KEYS);

function bytesEqualAt(buf: Uint8Array, start: number, expected: Uint8Array): boolean {
  for (let i = 0; i < expected.length; i++) if (buf[start + i] !== expected[i]) return false;
  return true;
}

/** Same as bytesEqualAt, from the last byte back: keys of one length mostly share a prefix such as "gen_ai.". */
function bytesEqualBackwards(buf: Uint8Array, start: number, expected: Uint8Array): boolean {
  for (let i = expected.length - 1; i >= 0; i--) if (buf[start + i] !== expected[i]) return false;
  return true;
}

/**
 * Returns the key as a string if the allow-list keeps it, else null. `buf[start, start+length)` are the key's
 * bytes; nothing is allocated for a dropped key.
 */
export function keptKeyAt(buf: Uint8Array, start: number, length: number): string | null {
  const bucket = keysByLength[length];
  if (bucket !== undefined) {
    for (let i = 0; i < bucket.length; i++) {
      const candidate = bucket[i];
      if (bytesEqualBackwards(buf, start, candidate.bytes)) return candidate.key;
    }
  }
  return null;
}

const METADATA_BYTES = utf8.encode('metadata');

/** `metadata` (OpenInference's JSON metadata string, read only for its `langgraph_node`), else null. */
export function metadataKeyAt(buf: Uint8Array, start: number, length: number): string | null {
  return length === METADATA_BYTES.length && bytesEqualAt(buf, start, METADATA_BYTES) ? 'metadata' : null;
}

/**
 * Instrumentation scope names that mark an agent framework's spans (used only to notice traces that look like
 * an agent framework's but yield no receipt). Exact names, plus the OpenInference and OpenLLMetry families.
 */
export const FRAMEWORK_SCOPES: readonly string[] = [
  'gcp.vertex.agent',
  '@openai/agents',
  'openai-agents',
  'agent_framework',
  'mastra',
  'langsmith',
  '@mastra/core',
  '@mastra/observability',
  '@voltagent/core',
];
export const FRAMEWORK_SCOPE_PREFIXES: readonly string[] = ['@arizeai/openinference-instrumentation-', 'openinference.instrumentation.', 'opentelemetry.instrumentation.openai_agents', 'opentelemetry.instrumentation.langchain', 'opentelemetry.instrumentation.crewai', 'mastra'];
const MAX_SCOPE_BYTES = 128;
const scopeBytes = FRAMEWORK_SCOPES.map((s) => ({ s, b: utf8.encode(s) }));
const scopePrefixBytes = FRAMEWORK_SCOPE_PREFIXES.map((p) => utf8.encode(p));

/** The scope name when it is a framework scope (exact, or one of the prefixes and at most 128 bytes), else null. */
export function frameworkScopeAt(buf: Uint8Array, start: number, length: number): string | null {
  for (const { s, b } of scopeBytes) if (b.length === length && bytesEqualAt(buf, start, b)) return s;
  if (length > MAX_SCOPE_BYTES) return null;
  for (const p of scopePrefixBytes) if (length >= p.length && bytesEqualAt(buf, start, p)) return utf8Text(buf, start, start + length);
  return null;
}

/** Same for a scope name the JSON transport holds as a string. */
export function frameworkScopeOf(name: string): string | null {
  const b = utf8.encode(name);
  return frameworkScopeAt(b, 0, b.length);
}

/** Words that make a dropped attribute key look agent-like (reported by key in the coverage summary, never by value). */
const AGENT_LIKE_WORDS = ['agent', 'crew', 'handoff', 'graph', 'workflow', 'swarm', 'delegat', 'team'].map((w) => utf8.encode(w));
const MAX_AGENT_KEY_BYTES = 64;
const KEY_CHARS = /^[A-Za-z0-9_.:-]{1,64}$/;

/** The agent-like words by their first byte (lowercase), so a key is scanned once instead of once per word. */
const WORDS_BY_FIRST_BYTE: (Uint8Array[] | undefined)[] = new Array(256);
for (const w of AGENT_LIKE_WORDS) (WORDS_BY_FIRST_BYTE[w[0]] ??= []).push(w);

/**
 * A dropped attribute key that names an agent-like concept, as a string (at most 64 bytes of `[A-Za-z0-9_.:-]`),
 * else null. Every dropped key of every span comes here (content keys such as `llm.input_messages.0.message.content`
 * included), so the key's bytes are walked once: a word is compared only where a byte could start one.
 */
export function agentLikeKeyAt(buf: Uint8Array, start: number, length: number): string | null {
  if (length === 0 || length > MAX_AGENT_KEY_BYTES) return null;
  const stop = start + length;
  let found = false;
  scan: for (let i = start; i < stop; i++) {
    const words = WORDS_BY_FIRST_BYTE[buf[i] | 0x20];
    if (words === undefined) continue;
    for (let j = 0; j < words.length; j++) {
      const w = words[j];
      if (i + w.length > stop) continue;
      let k = 1;
      while (k < w.length && (buf[i + k] | 0x20) === w[k]) k++;
      if (k === w.length) {
        found = true;
        break scan;
      }
    }
  }
  if (!found) return null;
  const key = utf8Text(buf, start, start + length);
  return KEY_CHARS.test(key) ? key : null;
}

/** Same for a key the JSON transport holds as a string. */
export function agentLikeKey(key: string): string | null {
  if (key.length > MAX_AGENT_KEY_BYTES) return null;
  const b = utf8.encode(key);
  return agentLikeKeyAt(b, 0, b.length);
}

const LIBRARY_NAME = /^[A-Za-z0-9@/._:+-]{1,128}$/;
const LIBRARY_VERSION = /^[A-Za-z0-9._+-]{1,64}$/;

/** An instrumentation scope's name and version as the coverage report shows them (bounded charset, else a placeholder). */
export function libraryOf(name: string | null, version: string | null): { name: string; version: string } {
  return {
    name: name === null || name === '' ? '(unnamed)' : LIBRARY_NAME.test(name) ? name : '(invalid)',
    version: version === null || version === '' ? '' : LIBRARY_VERSION.test(version) ? version : '(invalid)',
  };
}
