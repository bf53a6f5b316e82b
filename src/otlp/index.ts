export { OtlpDecodeError } from './errors.js';
export { decodeExportTraceRequest } from './protobuf.js';
export { decodeExportTraceJson } from './json.js';
export {
  encodeExportTraceResponseProtobuf,
  encodeExportTraceResponseJson,
  encodeRpcStatusProtobuf,
  encodeRpcStatusJson,
  GrpcStatusCode,
} from './response.js';
export type { ExportPartialSuccess } from './response.js';
export { KEPT_ATTRIBUTE_KEYS, KEPT_ATTRIBUTE_PREFIXES, isKeptAttributeKey } from './types.js';
export type { AttrValue, DecodedExport, SpanEventRecord, SpanLinkRecord, SpanRecord } from './types.js';
