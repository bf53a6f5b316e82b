/**
 * The internal span record every OTLP transport (protobuf over HTTP or gRPC, JSON over HTTP) decodes into.
 * It holds only allow-listed attributes (see KEPT_ATTRIBUTE_KEYS, exact keys): content such as
 * prompts, outputs and tool arguments is skipped by the decoder and never exists here.
 */
export type AttrValue = string | number | boolean;

export interface SpanEventRecord {
  name: string;
  timeMs: number;
  /** The exact nanoseconds below the millisecond of time_unix_nano (0..999_999); `timeMs` is a rounded double. */
  timeNs?: number;
  attrs: Record<string, AttrValue>;
}

export interface SpanLinkRecord {
  traceId: string; // lowercase hex, 32 chars
  spanId: string; // lowercase hex, 16 chars
}

export interface SpanRecord {
  traceId: string; // lowercase hex
  spanId: string; // lowercase hex
  parentSpanId: string | null;
  name: string;
  /** OTLP SpanKind enum: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer */
  kind: number;
  startMs: number;
  endMs: number;
  /** The exact nanoseconds below the millisecond of start/end_time_unix_nano (0..999_999): the ms are rounded doubles. */
  startNs?: number;
  endNs?: number;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error */
  statusCode: number;
  /** Kept span attributes, with kept resource attributes merged underneath (span wins). */
  attrs: Record<string, AttrValue>;
  /** Only events that carry at least one kept attribute. */
  events: SpanEventRecord[];
  links: SpanLinkRecord[];
  /** The instrumentation scope's name (e.g. `gcp.vertex.agent`, `@arizeai/openinference-instrumentation-langchain`), when sent. */
  scope?: string;
  /**
   * Any instrumentation scope's name and version, for the coverage report only (src/ingest/coverage.ts): a library
   * name (at most 128 characters of letters, digits and `@ / . _ : + -`, else `(invalid)`), never attribute text.
   */
  library?: { name: string; version: string };
  /** Keys (never values) of dropped attributes that look agent-like (keys.ts agentLikeKeyAt): at most 16, for coverage. */
  agentKeys?: string[];
}

/**
 * The `topology.*` keys a receipt is made of (interfaces.md "Span attributes", plus `topology.gap.reason`, the
 * reason of an explicit gap): an exact list, not a prefix, so that an invented `topology.note` is content and is
 * skipped like any other attribute.
 */
export const TOPOLOGY_ATTRIBUTE_KEYS: readonly string[] = [
  'topology.run.id',
  'topology.event.type',
  'topology.edge.from',
  'topology.edge.to',
  'topology.edge.kind',
  'topology.contract.id',
  'topology.contract.version',
  'topology.phase',
  'topology.wait.on',
  'topology.wait.edge',
  'topology.wait.deadline',
  'topology.outcome.verified',
  'topology.run.result',
  'topology.gap.reason',
];

/**
 * Attribute keys the decoder keeps (exact keys only); everything else is skipped without being materialised.
 * Only what receipts and dialects read: not `service.name`, not names of spans' content.
 */
export const KEPT_ATTRIBUTE_KEYS: ReadonlySet<string> = new Set([
  ...TOPOLOGY_ATTRIBUTE_KEYS,
  'gen_ai.operation.name',
  'gen_ai.agent.id',
  'gen_ai.agent.name',
  'gen_ai.conversation.id',
  'gen_ai.tool.name',
  'gen_ai.handoff.from_agent',
  'gen_ai.handoff.to_agent',
  'gen_ai.agent.handoff.source.name',
  'gen_ai.agent.handoff.target.name',
  'graph.node.id',
  'graph.node.parent_id',
  'openinference.span.kind',
  'executor.id',
  'executor.type',
  'edge_group.id',
  'edge_group.type',
  'edge_group.delivery_status',
  'message.source_id',
  'message.target_id',
  // Google ADK: the invocation (one user turn), on model-call spans (run key `invocation`).
  'gcp.vertex.agent.invocation_id',
  // OpenInference's agent name on AGENT spans; OpenLLMetry's span kind and entity name (never its input/output).
  'agent.name',
  'traceloop.span.kind',
  'traceloop.entity.name',
  // The Vercel AI SDK: the operation and the application's name for the call (its agent), never prompts or results.
  'ai.operationId',
  'ai.telemetry.functionId',
  // VoltAgent: the entity kind and agent id/name on every span of an agent's operation, the span's own kind, and a
  // sub-agent's id/name (never its input, output, instructions or state snapshot).
  'entity.type',
  'entity.id',
  'entity.name',
  'span.type',
  'subagent.id',
  'subagent.name',
]);
/** No prefix is kept: `topology.*` is the exact list above (kept as an export for callers of the old API). */
export const KEPT_ATTRIBUTE_PREFIXES: readonly string[] = [];
/**
 * Attributes the decoder derives from a dropped one instead of keeping it: `metadata` (OpenInference, a JSON
 * string) yields only its `langgraph_node` field as `metadata.langgraph_node` and, beside it, its
 * `langgraph_checkpoint_ns` as `metadata.langgraph_checkpoint_ns` (src/otlp/metadata.ts).
 */
export const DERIVED_ATTRIBUTE_KEYS: ReadonlySet<string> = new Set(['metadata.langgraph_node', 'metadata.langgraph_checkpoint_ns']);

export function isKeptAttributeKey(key: string): boolean {
  return KEPT_ATTRIBUTE_KEYS.has(key);
}

/** Result of decoding one export request. */
export interface DecodedExport {
  /** Every span of the request (content attributes skipped), so parentage through non-agent spans can be resolved. */
  spans: SpanRecord[];
  /** Total spans seen in the request, kept or not (every span is counted, content spans included). */
  spanCount: number;
}
