// Realistic OTLP trace export payloads for benchmarks, encoded by the real OpenTelemetry serializers
// (@opentelemetry/otlp-transformer ProtobufTraceSerializer / JsonTraceSerializer) from real SDK ReadableSpans.
//
// A batch mirrors an agent system's export: about 90% model, tool and retrieval spans that carry several KB of
// prompt, output, tool-argument or document text (content the auditor must skip), and about 10% invoke_agent /
// topology spans that become receipts.
//
//   import { buildTraceBatch } from './payloads.mjs';
//   const { protobuf, json, spanCount } = buildTraceBatch({ spans: 512, seed: 1 });
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';

const WORDS = (
  'the agent should review the quarterly report and summarise risks for the board including supply chain ' +
  'exposure currency hedging customer churn and regulatory changes then draft an email to the finance team ' +
  'with three concrete recommendations cite every source document and flag any numbers that disagree'
).split(' ');

/** A small deterministic PRNG (mulberry32), so payloads are the same for the same seed. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function text(random, bytes) {
  const parts = [];
  let n = 0;
  while (n < bytes) {
    const w = WORDS[Math.floor(random() * WORDS.length)];
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(' ');
}

export const messages = (random, role, bytes) => JSON.stringify([{ role, parts: [{ type: 'text', content: text(random, bytes) }] }]);

const AGENTS = ['orchestrator', 'researcher', 'writer', 'reviewer', 'coder', 'planner'];

/**
 * Records `spans` real SDK spans (ReadableSpan) across `traces` runs. `contentBytes` scales the content text
 * of model, tool and retrieval spans (each carries roughly 1x to 2x that many bytes of content).
 */
export function buildReadableSpans({ spans = 512, traces = 8, contentBytes = 3000, agentShare = 0.09, seed = 1 } = {}) {
  const random = prng(seed);
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'agent-app',
      'service.version': '1.4.2',
      'host.name': 'worker-7',
      'process.command_line': '/usr/bin/node /srv/app/agents.js --config /srv/app/secret.yaml',
    }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
    spanLimits: { attributeValueLengthLimit: Infinity },
  });
  const tracer = provider.getTracer('bench-agents', '0.1.0');
  const perTrace = Math.ceil(spans / traces);
  let recorded = 0;
  for (let t = 0; t < traces && recorded < spans; t++) {
    const runId = `run-${seed}-${t}`;
    const start = Date.now() - 60_000;
    const root = tracer.startSpan('invoke_agent orchestrator', {
      kind: SpanKind.INTERNAL,
      startTime: start,
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'orchestrator',
        'gen_ai.agent.id': 'agent-orchestrator',
        'topology.run.id': runId,
        'topology.event.type': 'run.start',
        'topology.contract.id': 'research-pipeline',
        'topology.contract.version': '3',
        'topology.phase': 'execute',
      },
    });
    recorded++;
    let agentCtx = trace.setSpan(context.active(), root);
    let agentSpan = root;
    const inThisTrace = Math.min(perTrace, spans - recorded + 1);
    for (let i = 1; i < inThisTrace; i++) {
      const at = start + i * 20;
      if (random() < agentShare) {
        const agent = AGENTS[1 + Math.floor(random() * (AGENTS.length - 1))];
        agentSpan = tracer.startSpan(
          `invoke_agent ${agent}`,
          {
            kind: SpanKind.INTERNAL,
            startTime: at,
            attributes: {
              'gen_ai.operation.name': 'invoke_agent',
              'gen_ai.agent.name': agent,
              'gen_ai.agent.id': `agent-${agent}`,
              'gen_ai.conversation.id': runId,
              'topology.run.id': runId,
              'topology.edge.from': 'orchestrator',
              'topology.edge.to': agent,
              'topology.edge.kind': 'delegate',
            },
          },
          trace.setSpan(context.active(), root),
        );
        agentSpan.addEvent('topology.wait', { 'topology.event.type': 'wait', 'topology.wait.on': agent }, at + 1);
        agentSpan.end(at + 15);
        agentCtx = trace.setSpan(context.active(), agentSpan);
      } else {
        const kind = random();
        let span;
        if (kind < 0.6) {
          span = tracer.startSpan('chat gpt-4o', { kind: SpanKind.CLIENT, startTime: at, attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o',
            'gen_ai.response.model': 'gpt-4o-2024-08-06',
            'gen_ai.usage.input_tokens': 1000 + Math.floor(random() * 3000),
            'gen_ai.usage.output_tokens': 100 + Math.floor(random() * 900),
            'server.address': 'api.openai.com',
            'gen_ai.system_instructions': text(random, contentBytes / 4),
            'gen_ai.input.messages': messages(random, 'user', contentBytes),
            'gen_ai.output.messages': messages(random, 'assistant', contentBytes / 2),
          } }, agentCtx);
        } else if (kind < 0.85) {
          span = tracer.startSpan('execute_tool web_search', { kind: SpanKind.INTERNAL, startTime: at, attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': 'web_search',
            'gen_ai.tool.call.id': `call_${i}`,
            'gen_ai.tool.call.arguments': JSON.stringify({ query: text(random, 200), path: '/srv/data/private.csv' }),
            'gen_ai.tool.call.result': text(random, contentBytes),
          } }, agentCtx);
        } else {
          span = tracer.startSpan('retrieve documents', { kind: SpanKind.CLIENT, startTime: at, attributes: {
            'gen_ai.operation.name': 'retrieval',
            'db.system.name': 'qdrant',
            'gen_ai.retrieval.query.text': text(random, 300),
            'gen_ai.retrieval.documents': JSON.stringify([0, 1, 2].map((d) => ({ id: `doc-${d}`, content: text(random, contentBytes / 3) }))),
          } }, agentCtx);
          if (random() < 0.1) span.setStatus({ code: SpanStatusCode.ERROR, message: text(random, 120) });
        }
        span.end(at + 10);
      }
      recorded++;
    }
    root.end(start + inThisTrace * 20 + 5);
  }
  const finished = memory.getFinishedSpans().slice(0, spans);
  void provider.shutdown();
  return finished;
}

/** The request bodies the OTLP/HTTP protobuf and JSON exporters would send for these spans. */
export function encodeSpans(readableSpans) {
  return {
    protobuf: ProtobufTraceSerializer.serializeRequest(readableSpans),
    json: JsonTraceSerializer.serializeRequest(readableSpans),
  };
}

/**
 * One export batch: real ReadableSpans and their protobuf and JSON request bodies. Different seeds give
 * different runs (and the SDK gives fresh trace and span ids on every call).
 */
export function buildTraceBatch(options = {}) {
  const readableSpans = buildReadableSpans(options);
  const { protobuf, json } = encodeSpans(readableSpans);
  const agentSpanCount = readableSpans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent').length;
  return { readableSpans, protobuf, json, spanCount: readableSpans.length, agentSpanCount };
}

/**
 * A store benchmark's append: `size` edge deliveries of appender `appender`'s `seq`-th append, a new run every
 * `appendsPerRun` appends (bench/store.mjs, bench/pg-store.mjs); `extra` fields go on each receipt.
 */
export function storeDeliveries(appender, seq, size, appendsPerRun, extra = {}) {
  return Array.from({ length: size }, (_, i) => ({
    receipt: {
      run: `run-${appender}-${Math.floor(seq / appendsPerRun)}`,
      event: `e-${seq}-${i}`,
      type: 'edge',
      at: new Date(Date.UTC(2025, 0, 1) + seq).toISOString(),
      from: 'orchestrator',
      to: 'researcher',
      kind: 'delegate',
      ...extra,
    },
    source: 'bench',
    receivedAt: Date.now(),
  }));
}
