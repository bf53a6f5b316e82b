import type { IncomingMessage } from 'node:http';
import { gunzip, inflate } from 'node:zlib';
import { promisify } from 'node:util';

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);

export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly reason: 'too_large' | 'bad_content_type' | 'undecodable' | 'saturated' | 'store_unavailable' | 'unauthenticated' | 'bad_request' = 'bad_request') {
    super(message);
  }
}

/**
 * Read a request body, refusing more than `limit` bytes on the wire and, after decompression, more than `limit`
 * bytes of content (a gzip bomb stops at the limit: zlib's maxOutputLength, never an unbounded buffer).
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`, 'too_large');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw new HttpError(413, `request body exceeds the limit of ${limit} bytes`, 'too_large');
    }
    chunks.push(chunk as Buffer);
  }
  const raw = Buffer.concat(chunks, size);
  const enc = String(req.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (enc === 'identity' || enc === '') return raw;
  if (enc !== 'gzip' && enc !== 'deflate') throw new HttpError(415, `unsupported content-encoding "${enc.slice(0, 40)}" (gzip, deflate or identity)`, 'bad_content_type');
  try {
    return enc === 'gzip' ? await gunzipAsync(raw, { maxOutputLength: limit }) : await inflateAsync(raw, { maxOutputLength: limit });
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError) {
      throw new HttpError(413, `decompressed body exceeds the limit of ${limit} bytes`, 'too_large');
    }
    throw new HttpError(400, `body is not valid ${enc}`, 'undecodable');
  }
}
