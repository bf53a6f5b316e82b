/**
 * Response encoders, read back by the real OpenTelemetry exporter code: the otlp-transformer response
 * deserializers (what the exporters use), an exporter end to end against a server answering with our bytes,
 * and protobufjs for google.rpc.Status.
 */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import protobuf from 'protobufjs';
import { diag, DiagLogLevel, type DiagLogger } from '@opentelemetry/api';
import { ExportResultCode, hrTime } from '@opentelemetry/core';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  encodeExportTraceResponseJson,
  encodeExportTraceResponseProtobuf,
  encodeRpcStatusJson,
  encodeRpcStatusProtobuf,
  GrpcStatusCode,
} from '../src/otlp/index.js';

const utf8 = new TextEncoder();

const statusType = protobuf.Root.fromJSON({
  nested: {
    google: { nested: { rpc: { nested: { Status: { fields: {
      code: { type: 'int32', id: 1 },
      message: { type: 'string', id: 2 },
    } } } } } },
  },
}).lookupType('google.rpc.Status');

describe('ExportTraceServiceResponse encoders', () => {
  it('full success is the empty message / {}', () => {
    expect(encodeExportTraceResponseProtobuf()).toEqual(new Uint8Array(0));
    expect(encodeExportTraceResponseProtobuf({ rejectedSpans: 0 })).toEqual(new Uint8Array(0));
    expect(ProtobufTraceSerializer.deserializeResponse(encodeExportTraceResponseProtobuf())).toEqual({});
    expect(encodeExportTraceResponseJson()).toBe('{}');
    expect(JsonTraceSerializer.deserializeResponse(utf8.encode(encodeExportTraceResponseJson({ rejectedSpans: 0 })))).toEqual({});
  });

  it('partial success round-trips through the exporters own deserializers', () => {
    for (const partial of [
      { rejectedSpans: 3, errorMessage: '3 spans had no run id' },
      { rejectedSpans: 2 ** 40 },
      { rejectedSpans: 0, errorMessage: 'warning only ✓' },
    ]) {
      const fromPb = ProtobufTraceSerializer.deserializeResponse(encodeExportTraceResponseProtobuf(partial));
      expect(Number(fromPb.partialSuccess?.rejectedSpans ?? 0)).toBe(partial.rejectedSpans);
      expect(fromPb.partialSuccess?.errorMessage ?? '').toBe(partial.errorMessage ?? '');
      const json = encodeExportTraceResponseJson(partial);
      const fromJson = JsonTraceSerializer.deserializeResponse(utf8.encode(json));
      expect(Number(fromJson.partialSuccess?.rejectedSpans ?? 0)).toBe(partial.rejectedSpans);
      expect(fromJson.partialSuccess?.errorMessage ?? '').toBe(partial.errorMessage ?? '');
    }
    expect(encodeExportTraceResponseJson({ rejectedSpans: 7, errorMessage: 'e' })).toBe(
      '{"partialSuccess":{"rejectedSpans":"7","errorMessage":"e"}}',
    );
  });

  it('refuses a negative or fractional rejected count', () => {
    expect(() => encodeExportTraceResponseProtobuf({ rejectedSpans: 1.5 })).toThrow(RangeError);
    expect(() => encodeExportTraceResponseJson({ rejectedSpans: -1, errorMessage: 'x' })).toThrow(RangeError);
  });
});

describe('google.rpc.Status encoders', () => {
  it('decode with protobufjs to the same code and message', () => {
    for (const [code, message] of [
      [GrpcStatusCode.INVALID_ARGUMENT, 'Span.trace_id is 15 bytes, expected 16 at byte 40'],
      [GrpcStatusCode.UNAVAILABLE, ''],
      [0, 'ok'],
      [-5, 'négatif'],
    ] as const) {
      const decoded = statusType.toObject(statusType.decode(encodeRpcStatusProtobuf(code, message)), { defaults: true });
      expect(decoded).toEqual({ code, message });
    }
    expect(JSON.parse(encodeRpcStatusJson(3, 'bad'))).toEqual({ code: 3, message: 'bad' });
    expect(() => encodeRpcStatusProtobuf(2 ** 31)).toThrow(RangeError);
  });
});

describe('a real exporter reading our partial success answer', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    diag.disable();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  async function oneSpan(): Promise<ReadableSpan[]> {
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
    provider.getTracer('t').startSpan('s', { startTime: hrTime() }).end();
    await provider.forceFlush();
    return memory.getFinishedSpans();
  }

  it.each([
    ['protobuf', 'application/x-protobuf', encodeExportTraceResponseProtobuf({ rejectedSpans: 1, errorMessage: 'no run id' })],
    ['json', 'application/json', utf8.encode(encodeExportTraceResponseJson({ rejectedSpans: 1, errorMessage: 'no run id' }))],
  ])('%s', async (kind, contentType, body) => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': contentType });
        res.end(Buffer.from(body));
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const warnings: string[] = [];
    const logger: DiagLogger = {
      error: () => {}, info: () => {}, debug: () => {}, verbose: () => {},
      warn: (...args: unknown[]) => warnings.push(args.map(String).join(' ')),
    };
    diag.setLogger(logger, DiagLogLevel.WARN);
    const url = `http://127.0.0.1:${port}/v1/traces`;
    const exporter = kind === 'protobuf' ? new ProtoExporter({ url }) : new JsonExporter({ url });
    const spans = await oneSpan();
    const result = await new Promise<{ code: number }>((resolve) => exporter.export(spans, resolve));
    await exporter.shutdown();
    expect(result.code).toBe(ExportResultCode.SUCCESS);
    const partial = warnings.find((w) => w.includes('Partial Success'));
    expect(partial).toBeDefined();
    expect(partial).toContain('no run id');
    expect(partial).toMatch(/"rejectedSpans":"?1"?/);
  });
});
