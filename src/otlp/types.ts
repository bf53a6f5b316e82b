/**
 * The internal span record every OTLP transport (protobuf over HTTP or gRPC, JSON over HTTP) decodes into.
 * It holds only allow-listed attributes (see KEPT_ATTRIBUTE_KEYS / KEPT_ATTRIBUTE_PREFIXES): content such as
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
}

/** Attribute keys the decoder keeps; everything else is skipped without being materialised. */
export const KEPT_ATTRIBUTE_KEYS: ReadonlySet<string> = new Set([
  'service.name',
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
]);
export const KEPT_ATTRIBUTE_PREFIXES: readonly string[] = ['topology.'];

export function isKeptAttributeKey(key: string): boolean {
  if (KEPT_ATTRIBUTE_KEYS.has(key)) return true;
  for (const p of KEPT_ATTRIBUTE_PREFIXES) if (key.startsWith(p)) return true;
  return false;
}

/** Result of decoding one export request. */
export interface DecodedExport {
  /** Every span of the request (content attributes skipped), so parentage through non-agent spans can be resolved. */
  spans: SpanRecord[];
  /** Total spans seen in the request, kept or not (every span is counted, content spans included). */
  spanCount: number;
}
