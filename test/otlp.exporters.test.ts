/**
 * The decoders against bytes produced by the REAL OpenTelemetry JS exporters (OTLP/HTTP protobuf, OTLP/HTTP
 * JSON, OTLP/gRPC), captured live from local servers: one protobuf decoder serves HTTP and gRPC, the JSON
 * decoder gives the same records, and no content attribute, status message or secret survives decoding.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../src/otlp/index.js';
import { captureRealExports, SECRET_MARKER, type CapturedExports } from './fixtures/otlp/scenario.mjs';
import { expectDecodedToMatchSdk, expectedRecord } from './fixtures/otlp/expect.js';

let captured: CapturedExports;

beforeAll(async () => {
  captured = await captureRealExports();
}, 20_000);

describe('decoding what the real exporters send', () => {
  it('captured one request per transport, and the content really is on the wire', () => {
    expect(captured.protobufContentType).toBe('application/x-protobuf');
    expect(captured.jsonContentType).toBe('application/json');
    for (const body of [captured.protobuf, captured.json, captured.grpc]) {
      expect(body.includes(SECRET_MARKER)).toBe(true);
    }
    expect(captured.sdkSpans).toHaveLength(7);
  });

  it('OTLP/HTTP protobuf decodes to the SDK spans, kept attributes only', () => {
    expectDecodedToMatchSdk(decodeExportTraceRequest(captured.protobuf), captured.sdkSpans);
  });

  it('OTLP/gRPC request bytes decode with the same function to the same records', () => {
    const grpc = decodeExportTraceRequest(captured.grpc);
    expectDecodedToMatchSdk(grpc, captured.sdkSpans);
    expect(grpc).toEqual(decodeExportTraceRequest(captured.protobuf));
  });

  it('OTLP/HTTP JSON decodes to the same records as protobuf (bytes or text input)', () => {
    const fromBytes = decodeExportTraceJson(captured.json);
    expectDecodedToMatchSdk(fromBytes, captured.sdkSpans);
    expect(fromBytes).toEqual(decodeExportTraceRequest(captured.protobuf));
    expect(decodeExportTraceJson(captured.json.toString('utf8'))).toEqual(fromBytes);
  });

  it('no content survives: the marker is nowhere in any decoded output', () => {
    for (const decoded of [
      decodeExportTraceRequest(captured.protobuf),
      decodeExportTraceRequest(captured.grpc),
      decodeExportTraceJson(captured.json),
    ]) {
      const text = JSON.stringify(decoded);
      expect(text).not.toContain(SECRET_MARKER);
      expect(text).not.toContain('quick brown fox');
      expect(text).not.toContain('/home/alice');
    }
  });

  it('keeps the facts receipts are built from: topology, agents, parentage, events, links, status', () => {
    const spans = decodeExportTraceRequest(captured.protobuf).spans;
    const byName = new Map(spans.map((s) => [s.name, s]));
    const root = byName.get('invoke_agent orchestrator')!;
    const researcher = byName.get('invoke_agent researcher')!;
    const auditor = byName.get('invoke_agent auditor')!;
    const chat = byName.get('chat gpt-4o')!;

    expect(root.parentSpanId).toBeNull();
    expect(researcher.parentSpanId).toBe(root.spanId);
    expect(chat.parentSpanId).toBe(researcher.spanId);
    expect(researcher.links).toEqual([{ traceId: auditor.traceId, spanId: auditor.spanId }]);
    expect(researcher.statusCode).toBe(2);
    expect(byName.get('résumé agent ✓')!.statusCode).toBe(1);
    expect(root.kind).toBe(1);
    expect(researcher.kind).toBe(3);
    expect(auditor.kind).toBe(4);
    expect(byName.get('queue receive')!.kind).toBe(5);
    expect(byName.get('résumé agent ✓')!.kind).toBe(2);

    // Exact allow-list: service.name and invented topology.* keys (score, retry.offset, big) are dropped.
    expect(root.attrs).toEqual({
      'topology.run.id': 'run-42',
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'orchestrator',
      'gen_ai.agent.id': 'agent-orch-1',
      'gen_ai.conversation.id': 'conv-9',
      'topology.event.type': 'run.start',
      'topology.contract.id': 'triage',
      'topology.contract.version': 3,
      'topology.phase': 'plan',
      'topology.outcome.verified': true,
    });
    expect(researcher.attrs['topology.run.id']).toBe('run-override'); // span wins over the resource
    expect(chat.attrs).toEqual({ 'gen_ai.operation.name': 'chat', 'topology.run.id': 'run-42' });
    expect(chat.events).toEqual([]); // its only event carries content alone

    expect(root.events.map((e) => [e.name, e.attrs])).toEqual([
      ['topology.wait', { 'topology.event.type': 'wait', 'topology.wait.on': 'researcher' }],
      ['topology.outcome', { 'topology.event.type': 'outcome', 'topology.outcome.verified': false }],
    ]);
    expect(root.events[0].timeMs - root.startMs).toBeCloseTo(5 - 0.123456, 3);
    expect(chat.endMs - chat.startMs).toBeCloseTo(9.999999, 3);
  });

  it('the reference expectation is not vacuous: the SDK spans do carry dropped content', () => {
    const chat = captured.sdkSpans.find((s) => s.name === 'chat gpt-4o')!;
    expect(String(chat.attributes['gen_ai.input.messages'])).toContain(SECRET_MARKER);
    expect(Object.keys(expectedRecord(chat).attrs)).not.toContain('gen_ai.input.messages');
  });
});
