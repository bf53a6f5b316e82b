/** OTLP/gRPC receiver: TraceService/Export with the request as a raw Buffer, decoded by the same content-free walker. */
import * as grpc from '@grpc/grpc-js';
import type { AuditMetrics } from '../metrics/index.js';
import { OtlpDecodeError, decodeExportTraceRequest, encodeExportTraceResponseProtobuf, type DecodedExport } from '../otlp/index.js';
import { SaturatedError, StoreUnavailableError, type Ingestor, type SourceBinding } from './ingest.js';
import { LiveLimitError } from '../audit/engine.js';

export const TRACE_SERVICE = {
  Export: {
    path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
} satisfies grpc.ServiceDefinition;

export type GrpcAuthenticate = (md: grpc.Metadata) => { source: string; bind?: SourceBinding } | null;

export interface GrpcOptions {
  maxMessageBytes: number;
  credentials?: grpc.ServerCredentials;
  /** Concurrent calls per HTTP/2 connection (grpc.max_concurrent_streams). */
  maxConcurrentStreams?: number;
  /** A connection idle this long is closed (grpc.max_connection_idle_ms). */
  maxConnectionIdleMs?: number;
  /** Memory one HTTP/2 session may buffer before new streams are refused (grpc-node.max_session_memory, MiB). */
  maxSessionMemoryMiB?: number;
  /** An export was refused by a live-state cap. */
  onLiveLimit?: (limit: 'runs' | 'receipts') => void;
}

export function startGrpc(ingestor: Ingestor, metrics: AuditMetrics, host: string, port: number, opts: GrpcOptions, authenticate: GrpcAuthenticate): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': opts.maxMessageBytes,
    'grpc.max_send_message_length': 1024 * 1024,
    'grpc.max_concurrent_streams': opts.maxConcurrentStreams ?? 100,
    'grpc.max_connection_idle_ms': opts.maxConnectionIdleMs ?? 300_000,
    'grpc-node.max_session_memory': opts.maxSessionMemoryMiB ?? 64,
  });
  const fail = (cb: grpc.sendUnaryData<Buffer>, code: grpc.status, message: string, reason?: Parameters<AuditMetrics['ingestRejected']>[1]) => {
    if (reason) metrics.ingestRejected('grpc', reason);
    metrics.ingestRequest('grpc', grpc.status[code]);
    cb({ code, details: message, metadata: new grpc.Metadata() });
  };
  server.addService(TRACE_SERVICE, {
    Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const auth = authenticate(call.metadata);
      if (!auth) return fail(cb, grpc.status.UNAUTHENTICATED, 'missing or invalid bearer token', 'unauthenticated');
      let release: () => void;
      try {
        release = ingestor.admit();
      } catch (e) {
        if (e instanceof SaturatedError) return fail(cb, grpc.status.UNAVAILABLE, e.message, 'saturated');
        return fail(cb, grpc.status.UNAVAILABLE, (e as Error).message, 'store_unavailable');
      }
      let decoded: DecodedExport | undefined;
      try {
        decoded = decodeExportTraceRequest(call.request);
      } catch (e) {
        release();
        if (e instanceof OtlpDecodeError) return fail(cb, grpc.status.INVALID_ARGUMENT, `undecodable protobuf: ${e.message}`, 'undecodable');
        return fail(cb, grpc.status.INTERNAL, 'internal error');
      }
      const ingesting = ingestor.spans(decoded, 'grpc', auth.source, auth.bind);
      decoded = undefined; // not held while the commit waits (see Ingestor.spans)
      ingesting.finally(release).then(
        (result) => {
          metrics.ingestRequest('grpc', 'OK');
          const partial = result.rejectedSpans ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage } : undefined;
          cb(null, Buffer.from(encodeExportTraceResponseProtobuf(partial)));
        },
        (e) => {
          if (e instanceof StoreUnavailableError) fail(cb, grpc.status.UNAVAILABLE, e.message, 'store_unavailable');
          else if (e instanceof LiveLimitError) {
            opts.onLiveLimit?.(e.limit);
            const md = new grpc.Metadata();
            md.set('retry-after', String(e.retryAfterSeconds));
            metrics.ingestRejected('grpc', 'live_limit');
            metrics.ingestRequest('grpc', grpc.status[grpc.status.UNAVAILABLE]);
            cb({ code: grpc.status.UNAVAILABLE, details: e.message, metadata: md });
          }
          else fail(cb, grpc.status.INTERNAL, 'internal error');
        },
      );
    },
  });
  return new Promise((resolve, reject) => {
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, opts.credentials ?? grpc.ServerCredentials.createInsecure(), (err, bound) => {
      if (err) return reject(err);
      resolve({ server, port: bound });
    });
  });
}
