/** The hash partition of a run or trace id in the shared store: which lease (and owner) a run belongs to. */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/**
 * The hash partition of a run or trace id: FNV-1a (32 bit) over its UTF-8 bytes, modulo `partitions`. Stable across
 * instances, builds and platforms (a lone surrogate hashes as U+FFFD, as TextEncoder encodes it).
 */
export function partitionOf(key: string, partitions: number): number {
  let h = FNV_OFFSET;
  const mix = (byte: number): void => {
    h = Math.imul(h ^ byte, FNV_PRIME) >>> 0;
  };
  for (let i = 0; i < key.length; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      mix(c);
      continue;
    }
    if (c < 0x800) {
      mix(0xc0 | (c >> 6));
      mix(0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < key.length) {
      const d = key.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        mix(0xf0 | (cp >> 18));
        mix(0x80 | ((cp >> 12) & 0x3f));
        mix(0x80 | ((cp >> 6) & 0x3f));
        mix(0x80 | (cp & 0x3f));
        i++;
        continue;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    mix(0xe0 | (c >> 12));
    mix(0x80 | ((c >> 6) & 0x3f));
    mix(0x80 | (c & 0x3f));
  }
  return h % partitions;
}
