import type { ZlibOptions } from 'node:zlib';

/** Deflate's largest expansion (a run of one byte): about 1032 output bytes per input byte. */
const MAX_INFLATE_RATIO = 1032;
const MIN_CHUNK = 64 * 1024;

/**
 * zlib options for inflating `data` (gzip or deflate) into at most `limit` bytes, sized so the output is one chunk.
 * zlib's default 16 KiB output chunks cost a JS callback (and, async, a thread-pool round trip) each, and the final
 * Buffer.concat copies the whole output once more (synchronously, 35-48 ms of CPU for an 8.6 MB export against
 * 12-15 ms into one chunk of the right size; docs/internals/performance.md, issue 35). A
 * gzip member ends with its size modulo 2^32 (ISIZE): used as a hint, never trusted: at most `limit` bytes and
 * at most what `data` could inflate to, so a small body claiming a large size allocates no more than its real
 * inflation could; a wrong hint only costs more chunks (or unused room), and `maxOutputLength` still bounds the
 * output. Deflate has no size field: a chunk of four times the input (at least 64 KiB, at most the limit).
 */
export function inflateOptions(data: Buffer, enc: 'gzip' | 'deflate', limit: number): ZlibOptions {
  const most = Math.min(limit, data.length * MAX_INFLATE_RATIO);
  let hint = data.length * 4;
  if (enc === 'gzip' && data.length >= 18) hint = data.readUInt32LE(data.length - 4);
  // One byte more than the content: zlib allocates a further chunk whenever a chunk ends exactly full.
  const chunkSize = Math.max(MIN_CHUNK, Math.min(most, hint) + 1);
  return { maxOutputLength: limit, chunkSize };
}
