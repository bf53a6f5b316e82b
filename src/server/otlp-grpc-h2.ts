/**
 * OTLP/gRPC receiver on node:http2 directly: TraceService/Export as a unary gRPC method, without a general gRPC
 * server library in the request path (about half of the CPU @grpc/grpc-js spent per export went to its own
 * machinery; see docs/internals/performance.md).
 *
 * What it speaks (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md):
 * - POST /opentelemetry.proto.collector.trace.v1.TraceService/Export with content-type application/grpc or
 *   application/grpc+proto; any other path answers UNIMPLEMENTED, another content type HTTP 415.
 * - One length-prefixed message (1 byte compressed flag, 4 bytes big-endian length). The length is checked against
 *   the maximum message size before a byte of the body is kept (RESOURCE_EXHAUSTED); a compressed message
 *   (grpc-encoding gzip or deflate) is inflated with the same limit on its inflated size.
 * - The answer: headers, one length-prefixed ExportTraceServiceResponse and the trailers grpc-status/grpc-message;
 *   a failure is a trailers-only response.
 * - Bearer tokens in the `authorization` metadata, checked by the same function as the other receivers;
 *   admission (saturation -> UNAVAILABLE), undecodable protobuf -> INVALID_ARGUMENT, a store that cannot commit
 *   -> UNAVAILABLE (nothing acknowledged), as with @grpc/grpc-js before.
 * - TLS (ALPN h2) with the same material as the other listeners; HTTP/2 PING answered by node:http2; idle
 *   connections closed with GOAWAY after `idleTimeoutMs`.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { gunzip, inflate } from 'node:zlib';
import type { AuditMetrics } from '../metrics/index.js';
import { decodeExportTraceRequest, encodeExportTraceResponseProtobuf } from '../otlp/index.js';
import { ConsumeError, type Consumer, type GrpcStatusName, type IngestSource } from '../audit/consumer.js';
import { BodyBuffers } from './body.js';
import { ExportStep, type ExportMessage } from './export-step.js';
import { GRPC_CODE, grpcRefusal } from './refusal.js';
import { httpsOptions, type TlsMaterial } from './tls.js';
import { decodeGrpcMessage, type DecodePool } from './worker-pool.js';

export const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** Authenticates by the request's `authorization` metadata value (absent: undefined). */
export type GrpcH2Authenticate = (authorization: string | undefined) => IngestSource | null;

export interface GrpcH2Options {
  maxMessageBytes: number;
  tls?: TlsMaterial;
  /** A connection without streams for this long is closed with GOAWAY (default 5 minutes). */
  idleTimeoutMs?: number;
  /** Concurrent streams per connection (default 128; admission still bounds the work across connections). */
  maxConcurrentStreams?: number;
  /** An export was refused by a live-state cap (--max-live-runs / --max-live-receipts). */
  onLiveLimit?: (limit: 'runs' | 'receipts') => void;
  /** With TLS: a connection that has not finished its handshake after this long is closed (as on the HTTPS ports). */
  handshakeTimeoutMs?: number;
  /** Open connections; more are closed at accept (--max-connections, as on the HTTP ports). */
  maxConnections?: number;
  /** `serve --workers N`: messages are inflated and decoded in this pool (src/server/worker-pool.ts). */
  decodePool?: DecodePool | null;
}

/** The shape serve.ts uses of a gRPC server (the same two calls as @grpc/grpc-js's Server). */
export interface GrpcH2Server {
  /** Stop accepting; connections get GOAWAY and close once their streams are answered. */
  tryShutdown(cb: (err?: Error) => void): void;
  /** Cut every connection now. */
  forceShutdown(): void;
}

const CONNECTION_WINDOW = 32 * 1024 * 1024;


/** grpc-message is percent-encoded: bytes outside printable ASCII, and '%' itself. */
export function percentEncodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const inflateWith = (enc: 'gzip' | 'deflate', data: Buffer, limit: number) =>
  new Promise<Buffer>((resolve, reject) => (enc === 'gzip' ? gunzip : inflate)(data, { maxOutputLength: limit }, (err, out) => (err ? reject(err) : resolve(out))));

/** A framing error of the unary call: its kind (the metric's reason) and the gRPC status the protocol asks for. */
const framing = (status: GrpcStatusName, message: string, kind: 'undecodable' | 'too_large' | 'bad_request' = 'undecodable') => new ConsumeError(kind, message, { grpcStatus: status });

/** Reads the one length-prefixed message of a unary call into pooled memory, refusing oversized messages early. */
function readMessage(stream: http2.ServerHttp2Stream, limit: number, pool: BodyBuffers): Promise<{ compressed: boolean; body: Buffer; release: () => void }> {
  return new Promise((resolve, reject) => {
    const prefix = Buffer.alloc(5);
    let prefixFill = 0;
    let lease: { buf: Buffer; release: () => void } | null = null;
    let length = -1;
    let fill = 0;
    let failed = false;
    const fail = (e: ConsumeError) => {
      if (failed) return;
      failed = true;
      lease?.release();
      cleanup();
      reject(e);
    };
    const onData = (chunk: Buffer) => {
      if (failed) return;
      let at = 0;
      if (prefixFill < 5) {
        const n = Math.min(5 - prefixFill, chunk.length);
        chunk.copy(prefix, prefixFill, 0, n);
        prefixFill += n;
        at = n;
        if (prefixFill < 5) return;
        if (prefix[0] > 1) return fail(framing('INTERNAL', `invalid message flag ${prefix[0]}`));
        length = prefix.readUInt32BE(1);
        if (length > limit) return fail(framing('RESOURCE_EXHAUSTED', `message of ${length} bytes exceeds the limit of ${limit} bytes`, 'too_large'));
        lease = pool.take(length);
      }
      const rest = chunk.length - at;
      if (fill + rest > length) return fail(framing('UNIMPLEMENTED', 'more than one request message on a unary method'));
      chunk.copy(lease!.buf, fill, at);
      fill += rest;
    };
    const onEnd = () => {
      if (failed) return;
      cleanup();
      if (prefixFill === 0) return fail(framing('UNIMPLEMENTED', 'no request message on a unary method'));
      if (prefixFill < 5 || fill < length) return fail(framing('INTERNAL', 'request message cut short'));
      resolve({ compressed: prefix[0] === 1, body: lease!.buf, release: lease!.release });
    };
    const onGone = () => fail(framing('INTERNAL', 'stream closed before the request message ended', 'bad_request'));
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onGone);
      stream.off('aborted', onGone);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('close', onGone);
    stream.on('aborted', onGone);
  });
}

/**
 * node:http2 (Node 20.20) sends a session's pending frames from a native immediate that does not keep the event loop
 * from blocking in poll: a response written from a timer or a promise (the answer after the group commit) can then stay
 * unsent until the process's next I/O. A lone exporter waiting for that answer waited forever (3 of 30 concurrent
 * exports, about one burst in six, in a test run). A JavaScript immediate queued after each write makes the
 * loop pass its check phase, where the native one runs: 0 of 54 such bursts lost an answer after it. Not gone: eight
 * bursts of 30 in a row over one connection still lose the 8th burst's admitted answers (the grpc-js receiver,
 * `--grpc-impl grpc-js`, does not); cause not found yet, an open follow-up (docs/operations.md).
 */
const wakeLoop = () => setImmediate(noop);
const noop = () => {};

/** The node:http2 server with the receiver's settings; idle sessions are closed with GOAWAY after `idleTimeoutMs`. */
function createH2Server(opts: GrpcH2Options): { server: http2.Http2Server | http2.Http2SecureServer; sessions: Set<http2.ServerHttp2Session> } {
  const settings: http2.Settings = {
    maxConcurrentStreams: opts.maxConcurrentStreams ?? 128,
    // Large windows and frames: an export of megabytes then needs few WINDOW_UPDATEs and DATA frames.
    initialWindowSize: 4 * 1024 * 1024,
    maxFrameSize: 1024 * 1024,
    maxHeaderListSize: 64 * 1024,
  };
  const serverOptions: http2.ServerOptions = {
    settings,
    // Room for the in-flight messages of one connection (the default 10 MB would refuse a few concurrent exports).
    maxSessionMemory: Math.max(64, Math.ceil((opts.maxMessageBytes * 4) / (1024 * 1024))),
    maxOutstandingPings: 10,
  };
  const server = opts.tls
    ? http2.createSecureServer({ ...serverOptions, ...httpsOptions(opts.tls), ALPNProtocols: ['h2'], ...(opts.handshakeTimeoutMs !== undefined ? { handshakeTimeout: opts.handshakeTimeoutMs } : {}) })
    : http2.createServer(serverOptions);
  if (opts.maxConnections !== undefined) server.maxConnections = opts.maxConnections;
  const sessions = new Set<http2.ServerHttp2Session>();
  const idleMs = opts.idleTimeoutMs ?? 300_000;
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.on('error', () => {});
    // The connection window too (the settings above set each stream's): without it the client stalls every 64 KB.
    try {
      session.setLocalWindowSize(CONNECTION_WINDOW);
    } catch {
      /* the session is already closing */
    }
    // node:http2 counts only inactivity on the socket: a busy connection is never idle.
    session.setTimeout(idleMs, () => session.close());
  });
  server.on('sessionError', () => {});
  // A TLS client that fails the handshake (e.g. no client certificate under mutual TLS) is dropped by node.
  server.on('tlsClientError', () => {});
  return { server, sessions };
}

/** A trailers-only answer (a failed call): grpc-status, grpc-message and any metadata in one HEADERS frame. */
function trailersOnly(stream: http2.ServerHttp2Stream, status: GrpcStatusName, message: string, metadata: Record<string, string> = {}): void {
  if (stream.destroyed || stream.closed) return;
  if (stream.headersSent) {
    stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  stream.respond(
    { ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-status': String(GRPC_CODE[status]), 'grpc-message': percentEncodeGrpcMessage(message), ...metadata },
    { endStream: true },
  );
  wakeLoop();
  // The client may still be sending (e.g. an oversized message): tell it to stop, without an error, once the
  // response is on its way. Node 22 sends a RST_STREAM submitted in the same turn ahead of the response's HEADERS
  // (the client then sees no status at all); the session writes the HEADERS before the next turn's callbacks.
  if (!stream.readableEnded) {
    setImmediate(() => {
      if (!stream.closed && !stream.destroyed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
  }
}

export function startGrpcH2(
  consumer: Consumer,
  metrics: AuditMetrics,
  host: string,
  port: number,
  opts: GrpcH2Options,
  authenticate: GrpcH2Authenticate,
): Promise<{ server: GrpcH2Server; port: number }> {
  const { server, sessions } = createH2Server(opts);
  const pool = new BodyBuffers();

  /** Answers a call that is not an export (unknown method), counted under its gRPC status. */
  const answer = (stream: http2.ServerHttp2Stream, status: GrpcStatusName, message: string) => {
    metrics.ingestRequest('grpc', status);
    trailersOnly(stream, status, message);
  };
  const step = new ExportStep(consumer, metrics, { transport: 'grpc', okStatus: 'OK', refusal: grpcRefusal, onLiveLimit: opts.onLiveLimit });

  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    const path = headers[':path'];
    const contentType = String(headers['content-type'] ?? '');
    if (!/^application\/grpc(\+proto)?(;|$)/i.test(contentType)) {
      // Not gRPC: an HTTP error, as the gRPC protocol asks.
      if (!stream.headersSent) stream.respond({ ':status': 415, 'content-type': 'text/plain' }, { endStream: false });
      stream.end('use content-type application/grpc');
      stream.resume();
      return;
    }
    if (path !== EXPORT_PATH || headers[':method'] !== 'POST') {
      stream.resume();
      return answer(stream, 'UNIMPLEMENTED', `unknown method ${String(path).slice(0, 100)}; this receiver serves ${EXPORT_PATH.slice(1)}`);
    }
    const enc = String(headers['grpc-encoding'] ?? 'identity').toLowerCase();
    const from = () => {
      if (enc !== 'identity' && enc !== 'gzip' && enc !== 'deflate') {
        throw new ConsumeError('bad_content_type', `unsupported grpc-encoding "${enc.slice(0, 40)}" (identity, gzip, deflate)`, { grpcStatus: 'UNIMPLEMENTED' });
      }
      const authorization = headers.authorization;
      return authenticate(Array.isArray(authorization) ? authorization[0] : authorization);
    };
    void exportCall(stream, enc as 'identity' | 'gzip' | 'deflate', from);
  });

  /** The message of one export, read into pooled memory; a compressed one is inflated here or in the decode pool. */
  async function read(stream: http2.ServerHttp2Stream, enc: 'identity' | 'gzip' | 'deflate'): Promise<ExportMessage> {
    const msg = await readMessage(stream, opts.maxMessageBytes, pool);
    return {
      release: msg.release,
      decode: () => {
        if (opts.decodePool && msg.compressed && enc !== 'identity') {
          // Compressed: inflated and decoded in a worker (an uncompressed message is decoded here, as in otlp-http.ts).
          // The pool copies the message before it returns: its memory goes back at once.
          const decoding = decodeGrpcMessage(opts.decodePool, enc, msg.body, opts.maxMessageBytes);
          msg.release();
          return decoding;
        }
        // The decoder copies what it keeps into strings: nothing refers to the pooled body once it returned.
        return msg.compressed ? inflated(msg.body, enc).then(decodeExportTraceRequest) : decodeExportTraceRequest(msg.body);
      },
    };
  }

  /** A compressed message inflated (the pooled body is read until this settles). */
  async function inflated(body: Buffer, enc: 'identity' | 'gzip' | 'deflate'): Promise<Buffer> {
    if (enc === 'identity') throw framing('INTERNAL', 'compressed message without a grpc-encoding');
    try {
      return await inflateWith(enc, body, opts.maxMessageBytes);
    } catch (e) {
      if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError) {
        throw framing('RESOURCE_EXHAUSTED', `inflated message exceeds the limit of ${opts.maxMessageBytes} bytes`, 'too_large');
      }
      throw framing('INTERNAL', `message is not valid ${enc}`);
    }
  }

  /**
   * One export (src/server/export-step.ts). The admission slot is taken only once the message is complete
   * (docs/operations.md): a stream that sends headers and no message (or a slow one) holds a stream of its
   * connection, never an ingest slot.
   */
  async function exportCall(stream: http2.ServerHttp2Stream, enc: 'identity' | 'gzip' | 'deflate', from: () => IngestSource | null): Promise<void> {
    const out = await step.export({ from, read: () => read(stream, enc), discard: () => stream.resume(), what: 'protobuf' });
    if (!out.ok) return trailersOnly(stream, out.refused.status, out.refused.message, out.refused.metadata);
    const reply = encodeExportTraceResponseProtobuf(out.partial);
    const framed = Buffer.allocUnsafe(5 + reply.length);
    framed[0] = 0;
    framed.writeUInt32BE(reply.length, 1);
    framed.set(reply, 5);
    if (stream.destroyed || stream.closed) return; // the client went away; its receipts are committed anyway
    stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-accept-encoding': 'identity,deflate,gzip' }, { waitForTrailers: true });
    stream.once('wantTrailers', () => {
      stream.sendTrailers({ 'grpc-status': '0' });
      wakeLoop();
    });
    stream.end(framed);
    wakeLoop();
  }

  return listenH2(server, sessions, host, port);
}

/** Listens; the returned server stops with GOAWAY to every session (tryShutdown) or cuts them (forceShutdown). */
function listenH2(server: http2.Http2Server | http2.Http2SecureServer, sessions: Set<http2.ServerHttp2Session>, host: string, port: number): Promise<{ server: GrpcH2Server; port: number }> {
  const grpcServer: GrpcH2Server = {
    tryShutdown(cb) {
      server.close(() => cb());
      for (const s of sessions) s.close();
    },
    forceShutdown() {
      for (const s of sessions) s.destroy();
      server.close();
    },
  };
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({ server: grpcServer, port: (server.address() as AddressInfo).port });
    });
  });
}
