/** OTLP/gRPC receiver: TraceService/Export with the request as a raw Buffer, decoded by the same content-free walker. */
import * as grpc from '@grpc/grpc-js';
import type { AuditMetrics } from '../metrics/index.js';
import { decodeExportTraceRequest, encodeExportTraceResponseProtobuf } from '../otlp/index.js';
import type { Consumer, IngestSource } from '../audit/consumer.js';
import { ExportStep, type ExportMessage } from './export-step.js';
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
  const step = new ExportStep(consumer, metrics, { transport: 'grpc', okStatus: 'OK', refusal: grpcRefusal, onLiveLimit: opts.onLiveLimit });
  server.addService(TRACE_SERVICE, {
    Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      // @grpc/grpc-js has read the whole message (within grpc.max_receive_message_length) before the call.
      const message: ExportMessage = { decode: () => decodeExportTraceRequest(call.request), release: () => {} };
      step.export({ from: () => authenticate(call.metadata), read: () => Promise.resolve(message), discard: () => {}, what: 'protobuf' }).then(
        (out) => {
          if (out.ok) return cb(null, Buffer.from(encodeExportTraceResponseProtobuf(out.partial)));
          const metadata = new grpc.Metadata();
          for (const [k, v] of Object.entries(out.refused.metadata)) metadata.set(k, v);
          cb({ code: out.refused.code, details: out.refused.message, metadata });
        },
        // Not reached (the step maps every failure); an answer all the same.
        () => cb({ code: grpc.status.INTERNAL, details: 'internal error' }),
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
