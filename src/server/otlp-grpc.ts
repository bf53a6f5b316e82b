/** OTLP/gRPC receiver: TraceService/Export with the request as a raw Buffer, decoded by the same content-free walker. */
import * as grpc from '@grpc/grpc-js';
import type { AuditMetrics } from '../metrics/index.js';
import { OtlpDecodeError, decodeExportTraceRequest, encodeExportTraceResponseProtobuf, type DecodedExport } from '../otlp/index.js';
import { ConsumeError, type Consumer, type IngestSource } from '../audit/consumer.js';
import { grpcRefusal } from './refusal.js';

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

export type GrpcAuthenticate = (md: grpc.Metadata) => IngestSource | null;

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

export function startGrpc(consumer: Consumer, metrics: AuditMetrics, host: string, port: number, opts: GrpcOptions, authenticate: GrpcAuthenticate): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': opts.maxMessageBytes,
    'grpc.max_send_message_length': 1024 * 1024,
    'grpc.max_concurrent_streams': opts.maxConcurrentStreams ?? 100,
    'grpc.max_connection_idle_ms': opts.maxConnectionIdleMs ?? 300_000,
    'grpc-node.max_session_memory': opts.maxSessionMemoryMiB ?? 64,
  });
  /** Every refusal, mapped once (src/server/refusal.ts) and counted. */
  const fail = (cb: grpc.sendUnaryData<Buffer>, e: unknown) => {
    const r = grpcRefusal(e);
    if (r.limit) opts.onLiveLimit?.(r.limit);
    if (r.reason) metrics.ingestRejected('grpc', r.reason);
    metrics.ingestRequest('grpc', r.status);
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(r.metadata)) metadata.set(k, v);
    cb({ code: r.code, details: r.message, metadata });
  };
  server.addService(TRACE_SERVICE, {
    Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      let release: () => void;
      let auth: IngestSource | null;
      let decoded: DecodedExport | undefined;
      try {
        auth = authenticate(call.metadata);
        if (!auth) throw new ConsumeError('unauthenticated', 'missing or invalid bearer token');
        release = consumer.admit();
      } catch (e) {
        return fail(cb, e);
      }
      try {
        decoded = decodeExportTraceRequest(call.request);
      } catch (e) {
        release();
        return fail(cb, e instanceof OtlpDecodeError ? new ConsumeError('undecodable', `undecodable protobuf: ${e.message}`) : e);
      }
      const ingesting = consumer.consumeSpans(decoded, 'grpc', auth);
      decoded = undefined; // not held while the commit waits (see Ingestor.consumeSpans)
      ingesting.finally(release).then(
        (result) => {
          metrics.ingestRequest('grpc', 'OK');
          if (result.liveLimit) opts.onLiveLimit?.(result.liveLimit);
          const partial = result.rejectedSpans ? { rejectedSpans: result.rejectedSpans, errorMessage: result.errorMessage } : undefined;
          cb(null, Buffer.from(encodeExportTraceResponseProtobuf(partial)));
        },
        (e) => fail(cb, e),
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
