import { KEPT_ATTRIBUTE_KEYS } from './types.js';

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
