import { SpanStatusCode, type Attributes } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as HttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as HttpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import type { Receipt } from '../../src/core/types.js';
import type { LooseReceipt } from './receipt.js';

export type Transport = 'http-json' | 'http-protobuf' | 'grpc';

export function exporterFor(transport: Transport, endpoints: { otlpHttp: string; otlpGrpc: string }, headers?: Record<string, string>): SpanExporter {
  if (transport === 'http-json') return new HttpJsonExporter({ url: `${endpoints.otlpHttp}/v1/traces`, headers });
  if (transport === 'http-protobuf') return new HttpProtoExporter({ url: `${endpoints.otlpHttp}/v1/traces`, headers });
  const exp = new GrpcExporter({ url: endpoints.otlpGrpc, ...(headers ? { metadata: undefined } : {}) });
  return exp;
}

export function providerFor(exporter: SpanExporter, batch = false): BasicTracerProvider {
  return new BasicTracerProvider({ spanProcessors: [batch ? new BatchSpanProcessor(exporter, { scheduledDelayMillis: 50 }) : new SimpleSpanProcessor(exporter)] });
}

/** The span attributes that make a receipt (interfaces.md, "Span attributes"). */
export function receiptAttributes(r: LooseReceipt): Attributes {
  const a: Attributes = { 'topology.run.id': r.run, 'topology.event.type': r.type };
  const set = (k: string, v: unknown) => {
    if (v !== undefined) a[k] = v as string;
  };
  set('topology.contract.version', r.version);
  set('topology.contract.id', r.contract);
  set('topology.phase', r.phase);
  set('topology.edge.from', r.from);
  set('topology.edge.to', r.to);
  set('topology.edge.kind', r.kind);
  set('topology.wait.on', r.on);
  set('topology.wait.edge', r.edge);
  set('topology.wait.deadline', r.deadline);
  if (r.verified !== undefined) a['topology.outcome.verified'] = r.verified;
  set('topology.run.result', r.result);
  set('topology.gap.reason', r.reason);
  return a;
}

/** Emit each receipt as one span through a real tracer; times are taken from the receipts. */
export async function emitReceiptsAsSpans(provider: BasicTracerProvider, receipts: Receipt[], extra: Attributes = {}): Promise<void> {
  const tracer = provider.getTracer('topology-audit-test');
  for (const r of receipts) {
    const at = new Date(r.at);
    const span = tracer.startSpan(`topology ${r.type}`, { startTime: at, attributes: { ...receiptAttributes(r), ...extra } });
    span.setStatus({ code: r.status === 'error' ? SpanStatusCode.ERROR : SpanStatusCode.OK });
    span.end(new Date(at.getTime() + 1));
  }
  await provider.forceFlush();
}
