// Decode-only throughput of the content-free OTLP decoders against full generic decoding of the same bodies.
//
//   npx tsc -p tsconfig.build.json && node bench/decode.mjs [--spans 512] [--content 3000] [--seconds 1.5]
//
// Payloads: bench/payloads.mjs (real SDK spans, real otlp-transformer serializers). Subjects, each run on the
// same bodies in the same process:
//   protobuf  decodeExportTraceRequest (ours: wire walk, content skipped unread)
//   baseline  protobufjs decoding the full ExportTraceServiceRequest schema (every string materialised)
//   json      decodeExportTraceJson (ours: JSON.parse + allow-list walk)
//   json.parse JSON.parse of the same body alone (a floor for any OTLP/JSON decoder)
// Rounds of all subjects are interleaved; each figure is the median round. Ratios use CPU-time throughput.
// Prints a table and, last, one JSON line of results.
import os from 'node:os';
import { parseArgs } from 'node:util';
import protobuf from 'protobufjs';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../dist/otlp/index.js';
import { buildTraceBatch } from './payloads.mjs';

const { values: args } = parseArgs({
  options: {
    spans: { type: 'string', default: '512' },
    content: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '1.5' },
    batches: { type: 'string', default: '4' },
  },
});
const SPANS = Number(args.spans);
const CONTENT = Number(args.content);
const SECONDS = Number(args.seconds);
const BATCHES = Number(args.batches);

// The public opentelemetry-proto definitions (trace, common, resource, collector), for the generic baseline.
const OTLP_PROTO = `
syntax = "proto3";
package opentelemetry.proto;
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3;
  double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3;
  uint32 dropped_attributes_count = 4; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; fixed32 flags = 16;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; uint32 dropped_attributes_count = 10;
  message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3;
    uint32 dropped_attributes_count = 4; }
  repeated Event events = 11; uint32 dropped_events_count = 12;
  message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4;
    uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
  repeated Link links = 13; uint32 dropped_links_count = 14; Status status = 15;
}
message Status { string message = 2; int32 code = 3; }
`;
const RequestType = protobuf.parse(OTLP_PROTO, { keepCase: true }).root.lookupType(
  'opentelemetry.proto.ExportTraceServiceRequest',
);

function countSpansGeneric(message) {
  let n = 0;
  for (const rs of message.resource_spans) for (const ss of rs.scope_spans) n += ss.spans.length;
  return n;
}

function countSpansJson(request) {
  let n = 0;
  for (const rs of request.resourceSpans) for (const ss of rs.scopeSpans) n += ss.spans.length;
  return n;
}

const batches = [];
for (let i = 0; i < BATCHES; i++) batches.push(buildTraceBatch({ spans: SPANS, contentBytes: CONTENT, seed: i + 1 }));
const protobufBodies = batches.map((b) => b.protobuf);
const jsonBodies = batches.map((b) => b.json);
const textDecoder = new TextDecoder();

// Sanity: every subject sees all spans, and the two decoders of ours agree.
for (const b of batches) {
  const fromPb = decodeExportTraceRequest(b.protobuf);
  const fromJson = decodeExportTraceJson(b.json);
  if (fromPb.spanCount !== b.spanCount || fromJson.spanCount !== b.spanCount) throw new Error('span count mismatch');
  if (JSON.stringify(fromPb) !== JSON.stringify(fromJson)) throw new Error('protobuf and JSON decoders disagree');
  if (countSpansGeneric(RequestType.decode(b.protobuf)) !== b.spanCount) throw new Error('baseline span count mismatch');
}

const subjects = {
  protobuf: { bodies: protobufBodies, decode: (body) => decodeExportTraceRequest(body).spanCount },
  'protobuf.baseline.protobufjs': { bodies: protobufBodies, decode: (body) => countSpansGeneric(RequestType.decode(body)) },
  json: { bodies: jsonBodies, decode: (body) => decodeExportTraceJson(body).spanCount },
  'json.baseline.JSON.parse': { bodies: jsonBodies, decode: (body) => countSpansJson(JSON.parse(textDecoder.decode(body))) },
};

/**
 * Runs `decode` over the bodies round-robin for about `seconds` of wall time. Returns throughput per wall
 * second and per CPU second of this process (user + system, GC threads included): on a shared machine the
 * CPU figure is the steadier one.
 */
function measure({ bodies, decode }, seconds) {
  let spans = 0;
  let bytes = 0;
  let sink = 0;
  const cpuStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  const budget = BigInt(Math.round(seconds * 1e9));
  let elapsed = 0n;
  for (let i = 0; elapsed < budget; i++) {
    const body = bodies[i % bodies.length];
    sink += decode(body);
    spans += SPANS;
    bytes += body.length;
    elapsed = process.hrtime.bigint() - start;
  }
  const cpu = process.cpuUsage(cpuStart);
  const wallSeconds = Number(elapsed) / 1e9;
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  if (sink !== spans) throw new Error('a decoder lost spans');
  return { spansPerSec: spans / wallSeconds, spansPerCpuSec: spans / cpuSeconds, mbPerCpuSec: bytes / 1e6 / cpuSeconds };
}

const ROUNDS = 5;
const results = {};
for (const [name, subject] of Object.entries(subjects)) measure(subject, 0.3); // warm up every subject first
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, subject] of Object.entries(subjects)) {
    (results[name] ??= []).push(measure(subject, SECONDS / ROUNDS));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = {};
for (const [name, runs] of Object.entries(results)) {
  summary[name] = {
    spansPerCpuSec: Math.round(median(runs.map((r) => r.spansPerCpuSec))),
    mbPerCpuSec: Math.round(median(runs.map((r) => r.mbPerCpuSec)) * 10) / 10,
    spansPerWallSec: Math.round(median(runs.map((r) => r.spansPerSec))),
  };
}

const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const payload = {
  spansPerBatch: SPANS,
  agentSpansPerBatch: Math.round(avg(batches.map((b) => b.agentSpanCount))),
  protobufBytesPerBatch: Math.round(avg(protobufBodies.map((b) => b.length))),
  jsonBytesPerBatch: Math.round(avg(jsonBodies.map((b) => b.length))),
};
const ratios = {
  protobufVsProtobufjs: Math.round((summary.protobuf.spansPerCpuSec / summary['protobuf.baseline.protobufjs'].spansPerCpuSec) * 10) / 10,
  jsonVsJsonParse: Math.round((summary.json.spansPerCpuSec / summary['json.baseline.JSON.parse'].spansPerCpuSec) * 100) / 100,
  protobufVsJson: Math.round((summary.protobuf.spansPerCpuSec / summary.json.spansPerCpuSec) * 10) / 10,
};

console.log(
  `payload: ${SPANS} spans/batch (${payload.agentSpansPerBatch} agent spans), protobuf ${(payload.protobufBytesPerBatch / 1e6).toFixed(2)} MB, ` +
    `JSON ${(payload.jsonBytesPerBatch / 1e6).toFixed(2)} MB, ${BATCHES} distinct batches, node ${process.version}`,
);
console.log(`${'subject'.padEnd(30)} ${'spans/CPU-s'.padStart(12)} ${'MB/CPU-s'.padStart(9)} ${'spans/wall-s'.padStart(13)}`);
for (const [name, r] of Object.entries(summary)) {
  console.log(
    `${name.padEnd(30)} ${String(r.spansPerCpuSec).padStart(12)} ${String(r.mbPerCpuSec).padStart(9)} ${String(r.spansPerWallSec).padStart(13)}`,
  );
}
console.log(`ratios: ${JSON.stringify(ratios)}`);
console.log(JSON.stringify({ bench: 'otlp-decode', node: process.version, loadavg1m: os.loadavg()[0], payload, results: summary, ratios }));
