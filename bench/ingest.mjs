// End-to-end OTLP ingest benchmark, beside its physical limit.
//
//   npm run build && node bench/ingest.mjs            (about 90 s; options below, e.g. --transports grpc)
//
// For each transport (by default HTTP protobuf, gRPC into the node:http2 receiver, gRPC into --grpc-impl grpc-js,
// and a retry storm: HTTP protobuf with every batch delivered twice, the second time after the first's
// acknowledgement, so half the deliveries are duplicates; --transports http-json as well) it starts a fresh `topology-audit serve` as a child process
// (free loopback ports, a temp data dir on the local disk, default durability: SQLite WAL with synchronous=FULL,
// so every acknowledgement follows the group commit's fsync) and, from this separate process, sends realistic
// OTLP trace batches with concurrent clients in bounded loops (bounded by time and batch count, loopback only):
//   HTTP   node:http keep-alive clients POSTing /v1/traces (application/x-protobuf or application/json)
//   gRPC   a raw @grpc/grpc-js client (Buffer serializer) calling TraceService/Export (both gRPC receivers)
//
// Batches: 512 real SDK spans (ReadableSpan) encoded by the real serializers of @opentelemetry/otlp-transformer
// (ProtobufTraceSerializer, JsonTraceSerializer): 2.3 MB protobuf, 2.6 MB JSON. About 90% are model, tool and
// retrieval spans carrying KBs of prompt, output, tool-argument and document text the auditor must drop; about
// 10% are agent spans with explicit `topology.*` attributes that become receipts (run.start, edges of the drift
// contract research-publish@3, declared waits, verified outcome, run.end), in runs of 10 to 50 receipts. Four
// templates are encoded once; before every send the trace ids, span ids (and parent ids) and run ids are
// rewritten in place (fixed-width fields located in the encoded bytes), so every batch carries new runs and new
// receipts, never duplicates, without paying the SDK serializers per send. The server's own counters must show
// exactly the receipts sent as accepted (checked after every phase).
//
// Per transport:
//   warm-up       closed loop, --warmup-seconds (8: on a shared machine V8 keeps optimizing for several seconds, and
//                 its compiler threads' CPU would otherwise be counted as the server's per-span cost)
//   saturation    closed loop of --concurrency clients for --seconds, in --rounds rounds; after each round this
//                 process decodes the same bodies alone (decodeExportTraceRequest / decodeExportTraceJson from
//                 dist/otlp) for the decode-only limit, so each end-to-end / decode-only ratio is taken side by side;
//                 for gRPC, grpc-js and the retry storm each round is preceded by an HTTP protobuf round (fresh ids)
//                 into the same server, and the ratio of the two is reported per round and as their median
//                 ("vs HTTP (paired)": the retry storm's must be >= 1, gRPC's ~1); --no-pairs skips them;
//                 --baseline DIR: another build's server (e.g. an older commit, built in DIR) runs beside, each
//                 round is followed by the same round against it ("vs baseline": median of this / baseline)
//   half rate     open loop paced at half the sustained rate just measured, for --half-seconds: ack latency
//   floor         the same clients against a receiver that only takes requests off the wire (node:http,
//                 node:http2 with the receiver's settings, or grpc-js)
// Reported: spans/s, receipts/s, ack p50/p99, server CPU (user+system from /proc/<pid>/stat deltas) and spans per
// server CPU-second, decode-only spans per CPU-second and the ratio (median of rounds), transport-only spans per
// CPU-second, server peak RSS (VmHWM). A table, then one JSON line.
//
// --mix agentic (issue 35): the content-heavy agent-framework traffic described at buildAgenticSpans below
// (512 spans, ~9 MB of protobuf per batch, 1 agent span in 10, LLM spans with 2-16 KB prompts and outputs in
// attributes and events, tool, retrieval, HTTP and DB spans, plain traces), gzipped by the client (--gzip-level,
// default 1) as exporters send it; transports http-protobuf and the retry storm (paired rounds: fresh and
// duplicate-heavy side by side). Reported besides spans: MB/s and MB per server CPU-second (uncompressed
// protobuf), decode-only = gunzip + decode of the same gzipped bodies in this process, and the direct bound: the
// same clients against a receiver that reads, gunzips and decodes each body with the server's own code
// (dist/server/body.js, dist/otlp) and stores nothing. --no-direct-bound skips it.
//
//   node bench/ingest.mjs --mix agentic --baseline DIR     (~4 min; DIR: another build, as below)
//
// --workers-compare N (issue 35, item 2): `serve --workers 0` and `serve --workers N` side by side in alternating
// rounds, per transport, with the load generator's and other jobs' cores, the main thread's CPU per 1000 spans, and
// the transport + decode bound (also with the inflate output reused, as the decode workers do), and the cores left
// for the server; the bodies of each round are built and gzipped before it (--prebuilt-mb, --no-prebuilt); see workersMain.
//
//   node bench/ingest.mjs --mix agentic --workers-compare 1 --seconds 16 --rounds 4     (~4.5 min)
//
// Diagnostics: --profile DIR writes a V8 CPU profile of the server (summarise it with bench/profile-summary.mjs); --server-node-args=... passes node flags to
// the server (e.g. --perf-basic-prof-only-functions for `perf record -p <pid>`; the pid is printed on stderr);
// --baseline-node-args=... gives the baseline server its own flags (`--baseline . --server-node-args=X
// --baseline-node-args=` compares one build with and without the flags X, side by side).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import os from 'node:os';
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { decodeExportTraceJson, decodeExportTraceRequest } from '../dist/otlp/index.js';
import { inflateOptions } from '../dist/server/body.js';
import { messages, prng, text } from './payloads.mjs';
import { ROOT, CLK_TCK, cpuSecondsOf, mainThreadCpuSecondsOf, httpClient, median, memoryOf, quantile, round, scrape, sleep, startServer as startServe } from './otlp-load.mjs';

const IS_MAIN = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
const { values: args } = parseArgs({
  args: IS_MAIN ? process.argv.slice(2) : (process.env.BENCH_INGEST_ARGS ?? '').split(' ').filter(Boolean),
  options: {
    seconds: { type: 'string', default: '10' },
    'half-seconds': { type: 'string', default: '6' },
    'max-batches': { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '8' },
    spans: { type: 'string', default: '512' },
    content: { type: 'string', default: '3000' },
    templates: { type: 'string', default: '4' },
    transports: { type: 'string', default: 'http-protobuf,grpc,grpc-js,retry-storm' },
    'decode-seconds': { type: 'string', default: '2' },
    'warmup-seconds': { type: 'string', default: '8' },
    rounds: { type: 'string', default: '4' },
    // The traffic: 'classic' (the batches above) or 'agentic' (issue 35: the content-heavy agent-framework mix below,
    // gzip on, transports http-protobuf and the retry storm by default).
    mix: { type: 'string', default: 'classic' },
    // gzip every HTTP body (content-encoding: gzip), as exporters and collectors send it; on by default with --mix agentic.
    gzip: { type: 'boolean' },
    // zlib level of the client's gzip. Level 1 bodies of the agentic mix inflate ~25% slower than level 6 ones
    // (15 vs 12 ms per 8.6 MB: more compressed bytes), so level 1 is the harder case for the server; level 6 costs
    // the client 3x level 1's CPU on the 2 cores it shares with the server, so 1 by default.
    'gzip-level': { type: 'string', default: '1' },
    // Also measure the bound directly: a receiver that reads, gunzips and decodes each request (the server's own
    // body reader and decoder) and stores nothing, same clients, same bodies.
    'no-direct-bound': { type: 'boolean', default: false },
    // Write a V8 CPU profile of the server into this directory (for finding hot spots; slows the server a little).
    profile: { type: 'string' },
    // Extra node flags for the server process (e.g. --perf-basic-prof to attach `perf record -p <pid>`).
    'server-node-args': { type: 'string', default: '' },
    'baseline-node-args': { type: 'string' },
    'floor-seconds': { type: 'string', default: '3' },
    // Alternate the rounds of gRPC and the retry storm with HTTP protobuf rounds into the same server (ratio side by side).
    'no-pairs': { type: 'boolean', default: false },
    // Another build of the repository (a directory with bin/, dist/, contracts/, e.g. an older commit from
    // `git archive <commit> | tar -x -C DIR` and `tsc -p tsconfig.build.json` there): its server runs beside this
    // one and every round is followed by the same round against it, for a before/after ratio under the same load.
    baseline: { type: 'string' },
    // The worker pool (serve --workers N) against --workers 0, side by side in one run (see workersMain); N empty:
    // serve's default (available cores - 1, at least 1).
    'workers-compare': { type: 'string' },
    // --workers-compare: the bodies of each measured round are built and gzipped before it (a pool sized from the
    // server's rate so far, 1.5x, at most this many MB of gzipped bodies), so that during the round the load generator
    // only sends bytes; --no-prebuilt: built and gzipped on the fly, as before (the load generator then takes 0.5-0.9 core).
    'prebuilt-mb': { type: 'string', default: '1500' },
    'no-prebuilt': { type: 'boolean', default: false },
    // internal: run as the transport-floor receiver (see floorServerMain)
    'floor-server': { type: 'boolean', default: false },
    // internal: the floor receiver also reads (gunzips) and decodes each body, storing nothing (the direct bound)
    'floor-decode': { type: 'boolean', default: false },
  },
});
const SECONDS = Number(args.seconds);
const HALF_SECONDS = Number(args['half-seconds']);
const MAX_BATCHES = Number(args['max-batches']);
const PREBUILT = !args['no-prebuilt'];
const PREBUILT_BYTES = Number(args['prebuilt-mb']) * 1e6;
const CONCURRENCY = Number(args.concurrency);
const SPANS = Number(args.spans);
const MIX = args.mix;
if (MIX !== 'classic' && MIX !== 'agentic') throw new Error(`--mix classic|agentic, not ${MIX}`);
const GZIP = args.gzip ?? MIX === 'agentic';
const GZIP_LEVEL = Number(args['gzip-level']);
const CONTENT = Number(args.content);
const TEMPLATES = Number(args.templates);
const TRANSPORTS = (MIX === 'agentic' && !process.argv.some((a) => a.startsWith('--transports')) ? 'http-protobuf,retry-storm' : args.transports).split(',');
const DECODE_SECONDS = Number(args['decode-seconds']);
const WARMUP_SECONDS = Number(args['warmup-seconds']);
const ROUNDS = Number(args.rounds);
const FLOOR_SECONDS = Number(args['floor-seconds']);
const PAIRED = !args['no-pairs'];
const BASELINE = args.baseline ? resolve(args.baseline) : null;

// ---------------------------------------------------------------------------------------------------------
// Payloads

// The same deterministic text generator as the decode benchmark's payloads.
const randint = (random, lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const iso = (ms) => new Date(ms).toISOString();

/** Run sizes (receipts per run) of 10 to 50 that add up to `total` (total >= 10). */
function runSizes(random, total) {
  const sizes = [];
  let left = total;
  while (left >= 20) {
    const n = randint(random, 10, Math.min(50, left - 10));
    sizes.push(n);
    left -= n;
  }
  sizes.push(left);
  return sizes;
}

/**
 * The agent spans of one run: topology.* attributes of receipts on the drift contract (research-publish@3),
 * in the shape bench/engine.mjs uses: run.start, the first delegation, then cycles of a declared wait on the
 * verifier, the researcher's handoff to the verifier, the verifier's return and a new delegation. Half the runs
 * end (verified outcome, run.end completed); the others stay live.
 */
function runReceiptAttrs(random, size, at0) {
  const out = [];
  const edge = (from, to, kind) => ({ 'topology.event.type': 'edge', 'topology.edge.from': from, 'topology.edge.to': to, 'topology.edge.kind': kind });
  out.push({ 'topology.event.type': 'run.start', 'topology.contract.id': 'research-publish', 'topology.phase': 'research', 'topology.edge.from': 'orchestrator' });
  out.push(edge('orchestrator', 'researcher', 'delegate'));
  const ends = random() < 0.5;
  const middle = size - out.length - (ends ? 2 : 0);
  for (let i = 0; i < middle; i++) {
    const k = out.length;
    if (k % 4 === 2) out.push({ 'topology.event.type': 'wait', 'topology.wait.on': 'verifier', 'topology.wait.edge': 'verifier -> orchestrator : return', 'topology.wait.deadline': iso(at0 + k * 20 + 600_000), 'topology.edge.from': 'researcher' });
    else if (k % 4 === 3) out.push(edge('researcher', 'verifier', 'handoff'));
    else if (k % 4 === 0) out.push(edge('verifier', 'orchestrator', 'return'));
    else out.push(edge('orchestrator', ['researcher', 'web-search', 'doc-search'][Math.floor(k / 4) % 3], 'delegate'));
  }
  if (ends) {
    out.push({ 'topology.event.type': 'outcome', 'topology.outcome.verified': true, 'topology.edge.from': 'orchestrator' });
    out.push({ 'topology.event.type': 'run.end', 'topology.run.result': 'completed', 'topology.edge.from': 'orchestrator' });
  }
  for (const a of out) a['topology.contract.version'] = '3';
  return out;
}

/**
 * One batch of real SDK spans. Returns the spans, the placeholder run ids (16 chars, rewritten per send) and
 * the number of receipts the batch stands for.
 */
function buildBatchSpans(seed) {
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
    spanLimits: { attributeValueLengthLimit: Infinity, attributeCountLimit: 256 },
  });
  const tracer = provider.getTracer('bench-agents', '0.1.0');
  const agentTotal = Math.round(SPANS * 0.1);
  const contentTotal = SPANS - agentTotal;
  const sizes = runSizes(random, agentTotal);
  const runIds = sizes.map(() => `run-${randomBytes(6).toString('hex')}`);
  let contentLeft = contentTotal;
  let agentsLeft = agentTotal;
  const base = Date.now() - 120_000;
  sizes.forEach((size, runIndex) => {
    const at0 = base + runIndex * 1000;
    const receipts = runReceiptAttrs(random, size, at0);
    let root = null;
    receipts.forEach((attrs, i) => {
      const at = at0 + i * 20;
      const parentCtx = root ? trace.setSpan(context.active(), root) : context.active();
      const agentName = attrs['topology.edge.to'] ?? attrs['topology.edge.from'] ?? 'orchestrator';
      const span = tracer.startSpan(`invoke_agent ${agentName}`, {
        kind: SpanKind.INTERNAL,
        startTime: at,
        attributes: { 'gen_ai.agent.name': agentName, 'topology.run.id': runIds[runIndex], ...attrs },
      }, parentCtx);
      if (!root) root = span;
      // Content spans under this agent span: model calls, tool calls and retrievals.
      const children = Math.round(contentLeft / agentsLeft);
      contentLeft -= children;
      agentsLeft--;
      const ctx = trace.setSpan(context.active(), span);
      for (let c = 0; c < children; c++) {
        const t = at + 1 + c;
        const kind = random();
        let child;
        if (kind < 0.6) {
          child = tracer.startSpan('chat gpt-4o', { kind: SpanKind.CLIENT, startTime: t, attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o',
            'gen_ai.response.model': 'gpt-4o-2024-08-06',
            'gen_ai.usage.input_tokens': 1000 + Math.floor(random() * 3000),
            'gen_ai.usage.output_tokens': 100 + Math.floor(random() * 900),
            'server.address': 'api.openai.com',
            'gen_ai.system_instructions': text(random, CONTENT / 4),
            'gen_ai.input.messages': messages(random, 'user', CONTENT),
            'gen_ai.output.messages': messages(random, 'assistant', CONTENT / 2),
          } }, ctx);
        } else if (kind < 0.85) {
          child = tracer.startSpan('execute_tool web_search', { kind: SpanKind.INTERNAL, startTime: t, attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': 'web_search',
            'gen_ai.tool.call.id': `call_${runIndex}_${i}_${c}`,
            'gen_ai.tool.call.arguments': JSON.stringify({ query: text(random, 200), path: '/srv/data/private.csv' }),
            'gen_ai.tool.call.result': text(random, CONTENT),
          } }, ctx);
        } else {
          child = tracer.startSpan('retrieve documents', { kind: SpanKind.CLIENT, startTime: t, attributes: {
            'gen_ai.operation.name': 'retrieval',
            'db.system.name': 'qdrant',
            'gen_ai.retrieval.query.text': text(random, 300),
            'gen_ai.retrieval.documents': JSON.stringify([0, 1, 2].map((d) => ({ id: `doc-${d}`, content: text(random, CONTENT / 3) }))),
          } }, ctx);
          if (random() < 0.1) child.setStatus({ code: SpanStatusCode.ERROR, message: text(random, 120) });
        }
        child.end(t + 5);
      }
      if (span !== root) span.end(at + 15);
    });
    root.end(at0 + receipts.length * 20 + 5);
  });
  const spans = memory.getFinishedSpans();
  void provider.shutdown();
  if (spans.length !== SPANS) throw new Error(`built ${spans.length} spans, expected ${SPANS}`);
  return { spans, runIds, receipts: agentTotal, runs: sizes.length };
}


// ---------------------------------------------------------------------------------------------------------
// The agentic mix (--mix agentic, issue 35): what an agent framework exports. One span in ten is an agent span
// (the receipts: the same runs of topology.* spans as above); the others are what the agents do, carrying content:
//   LLM spans (about 51% of all spans): a prompt and an output of 2-16 KB each, in one of three conventions — OTel GenAI
//     (gen_ai.input.messages / gen_ai.output.messages / gen_ai.system_instructions), the older gen_ai.prompt /
//     gen_ai.completion attributes with span events repeating them (gen_ai.content.prompt / .completion), and
//     OpenInference (input.value / output.value, llm.input_messages.* / llm.output_messages.*);
//   tool spans (about 17%): arguments (0.2-2 KB JSON) and a result (1-8 KB), GenAI or OpenInference TOOL;
//   retrieval spans (about 6%): a query and three documents of 1-4 KB;
//   HTTP client and database spans (about 10%) under the agents;
//   and plain traces (about 6% of the spans): an HTTP server span with database and HTTP client spans beneath,
//     no agent span in the trace (what the span log keeps for the skeleton, item 3 of the issue).
// Text is drawn from a 4,000-word vocabulary of generated words, so it compresses about as English does (~3-4x
// with gzip), not as a 30-word loop would.

const VOCAB = (() => {
  const random = prng(4242);
  const syl = ['ka', 'to', 're', 'mi', 'san', 'lo', 'ver', 'di', 'na', 'po', 'tri', 'gu', 'el', 'or', 'ix', 'que', 'ba', 'ston', 'fe', 'ly', 'an', 'cor', 'pe', 'th', 'ing', 'al', 'ent', 'us'];
  return Array.from({ length: 4000 }, () => {
    let w = '';
    const n = 1 + Math.floor(random() * 4);
    for (let i = 0; i < n; i++) w += syl[Math.floor(random() * syl.length)];
    return w;
  });
})();
function prose(random, bytes) {
  const parts = [];
  let n = 0;
  while (n < bytes) {
    const r = random();
    const w = r < 0.03 ? String(Math.floor(random() * 100000)) : r < 0.06 ? `${VOCAB[Math.floor(random() * VOCAB.length)]}.` : VOCAB[Math.floor(random() * random() * VOCAB.length)];
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(' ');
}
const between = (random, lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const chatMessages = (random, role, bytes) => JSON.stringify([{ role, parts: [{ type: 'text', content: prose(random, bytes) }] }]);

/** The content spans of one agent span (or of a plain trace): model, tool, retrieval, HTTP and DB spans. */
function agenticChild(tracer, random, ctx, t, label) {
  const k = random();
  const attrs = {};
  let name;
  let kind = SpanKind.CLIENT;
  const events = [];
  if (k < 0.61) {
    const prompt = between(random, 2048, 16384);
    const output = between(random, 2048, 16384);
    const style = random();
    name = 'chat gpt-4o';
    Object.assign(attrs, {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': prompt >> 2,
      'gen_ai.usage.output_tokens': output >> 2,
      'gen_ai.response.finish_reasons': ['stop'],
      'server.address': 'api.openai.com',
    });
    if (style < 0.4) {
      attrs['gen_ai.system_instructions'] = prose(random, between(random, 500, 2000));
      attrs['gen_ai.input.messages'] = chatMessages(random, 'user', prompt);
      attrs['gen_ai.output.messages'] = chatMessages(random, 'assistant', output);
    } else if (style < 0.7) {
      // Older instrumentations: the text in attributes and again in span events.
      const p = prose(random, prompt);
      const c = prose(random, output);
      attrs['gen_ai.prompt'] = p;
      attrs['gen_ai.completion'] = c;
      events.push(['gen_ai.content.prompt', { 'gen_ai.prompt': p }], ['gen_ai.content.completion', { 'gen_ai.completion': c }]);
    } else {
      name = 'ChatOpenAI';
      const p = prose(random, prompt);
      const c = prose(random, output);
      Object.assign(attrs, {
        'openinference.span.kind': 'LLM',
        'llm.model_name': 'gpt-4o',
        'llm.provider': 'openai',
        'input.value': JSON.stringify({ messages: [{ role: 'user', content: p }] }),
        'input.mime_type': 'application/json',
        'output.value': c,
        'output.mime_type': 'text/plain',
        'llm.input_messages.0.message.role': 'user',
        'llm.input_messages.0.message.content': p,
        'llm.output_messages.0.message.role': 'assistant',
        'llm.output_messages.0.message.content': c,
        'llm.token_count.prompt': prompt >> 2,
        'llm.token_count.completion': output >> 2,
      });
    }
    if (random() < 0.3) events.push(['gen_ai.choice', { index: 0, finish_reason: 'stop', 'gen_ai.event.content': prose(random, between(random, 256, 2048)) }]);
  } else if (k < 0.81) {
    const tool = ['web_search', 'read_file', 'run_sql', 'send_email'][Math.floor(random() * 4)];
    const args = JSON.stringify({ query: prose(random, between(random, 150, 1900)), path: '/srv/data/private.csv' });
    const result = prose(random, between(random, 1024, 8192));
    kind = SpanKind.INTERNAL;
    if (random() < 0.6) {
      name = `execute_tool ${tool}`;
      Object.assign(attrs, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool, 'gen_ai.tool.call.id': `call_${label}`, 'gen_ai.tool.call.arguments': args, 'gen_ai.tool.call.result': result });
    } else {
      name = tool;
      Object.assign(attrs, { 'openinference.span.kind': 'TOOL', 'tool.name': tool, 'input.value': args, 'input.mime_type': 'application/json', 'output.value': result });
    }
  } else if (k < 0.88) {
    name = 'retrieve documents';
    Object.assign(attrs, {
      'gen_ai.operation.name': 'retrieval',
      'db.system.name': 'qdrant',
      'gen_ai.retrieval.query.text': prose(random, 300),
      'gen_ai.retrieval.documents': JSON.stringify([0, 1, 2].map((d) => ({ id: `doc-${d}`, content: prose(random, between(random, 1024, 4096)) }))),
    });
  } else {
    plainChild(random, attrs);
    name = attrs['db.system.name'] ? `SELECT ${attrs['db.namespace']}` : attrs['http.request.method'];
  }
  const span = tracer.startSpan(name, { kind, startTime: t, attributes: attrs }, ctx);
  for (const [n, a] of events) span.addEvent(n, a, t + 1);
  if (random() < 0.03) span.setStatus({ code: SpanStatusCode.ERROR, message: prose(random, 120) });
  span.end(t + 5);
}

/** An HTTP client or database span's attributes (no content beyond a query). */
function plainChild(random, attrs) {
  if (random() < 0.5) {
    Object.assign(attrs, {
      'db.system.name': 'postgresql',
      'db.namespace': 'orders',
      'db.operation.name': 'SELECT',
      'db.query.text': `SELECT id, customer_id, total, status FROM orders WHERE customer_id = $1 AND created_at > $2 ORDER BY created_at DESC LIMIT ${between(random, 10, 100)}`,
      'server.address': 'db.internal',
      'server.port': 5432,
    });
  } else {
    Object.assign(attrs, {
      'http.request.method': random() < 0.7 ? 'GET' : 'POST',
      'url.full': `https://api.partner.example/v2/items/${between(random, 1, 99999)}?expand=details`,
      'server.address': 'api.partner.example',
      'http.response.status_code': random() < 0.95 ? 200 : 503,
      'network.protocol.version': '1.1',
    });
  }
}

function buildAgenticSpans(seed) {
  const random = prng(seed);
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'agent-app', 'service.version': '1.4.2', 'host.name': 'worker-7', 'telemetry.sdk.language': 'python' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
    spanLimits: { attributeValueLengthLimit: Infinity, attributeCountLimit: 256 },
  });
  const tracer = provider.getTracer('bench-agentic', '0.1.0');
  const agentTotal = Math.round(SPANS * 0.1);
  const plainTotal = Math.round(SPANS * 0.06);
  let contentLeft = SPANS - agentTotal - plainTotal;
  let agentsLeft = agentTotal;
  const sizes = runSizes(random, agentTotal);
  const runIds = sizes.map(() => `run-${randomBytes(6).toString('hex')}`);
  const base = Date.now() - 120_000;
  sizes.forEach((size, runIndex) => {
    const at0 = base + runIndex * 1000;
    let root = null;
    runReceiptAttrs(random, size, at0).forEach((attrs, i) => {
      const at = at0 + i * 20;
      const parentCtx = root ? trace.setSpan(context.active(), root) : context.active();
      const agentName = attrs['topology.edge.to'] ?? attrs['topology.edge.from'] ?? 'orchestrator';
      const span = tracer.startSpan(`invoke_agent ${agentName}`, { kind: SpanKind.INTERNAL, startTime: at, attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': agentName, 'topology.run.id': runIds[runIndex], ...attrs } }, parentCtx);
      if (!root) root = span;
      const children = Math.round(contentLeft / agentsLeft);
      contentLeft -= children;
      agentsLeft--;
      const ctx = trace.setSpan(context.active(), span);
      for (let c = 0; c < children; c++) agenticChild(tracer, random, ctx, at + 1 + c, `${runIndex}_${i}_${c}`);
      if (span !== root) span.end(at + 15);
    });
    root.end(at0 + size * 20 + 5);
  });
  // Plain traces: no agent span anywhere in them.
  let plainLeft = plainTotal;
  for (let p = 0; plainLeft > 0; p++) {
    const n = Math.min(plainLeft, between(random, 3, 8));
    plainLeft -= n;
    const t = base + 500 + p * 50;
    const root = tracer.startSpan('GET /api/orders/{id}', { kind: SpanKind.SERVER, startTime: t, attributes: { 'http.request.method': 'GET', 'http.route': '/api/orders/{id}', 'url.path': `/api/orders/${p}`, 'http.response.status_code': 200 } });
    const ctx = trace.setSpan(context.active(), root);
    for (let c = 1; c < n; c++) {
      const attrs = {};
      plainChild(random, attrs);
      tracer.startSpan(attrs['db.system.name'] ? 'SELECT orders' : attrs['http.request.method'], { kind: SpanKind.CLIENT, startTime: t + c, attributes: attrs }, ctx).end(t + c + 2);
    }
    root.end(t + n + 5);
  }
  const spans = memory.getFinishedSpans();
  void provider.shutdown();
  if (spans.length !== SPANS) throw new Error(`built ${spans.length} spans, expected ${SPANS}`);
  return { spans, runIds, receipts: agentTotal, runs: sizes.length };
}

function findAll(buf, needle) {
  const out = [];
  for (let i = buf.indexOf(needle); i !== -1; i = buf.indexOf(needle, i + 1)) out.push(i);
  return out;
}

/**
 * Where the ids sit in an encoded body: every offset of every trace id, span id (and parent span id) and run id
 * of the batch. Protobuf: the raw id bytes after their field tags (trace_id 0x0a 0x10; span_id 0x12 0x08;
 * parent_span_id 0x22 0x08), found in one pass. JSON: the lowercase hex text after "traceId", "spanId" and
 * "parentSpanId". Run ids: their text. Every span id must be found once plus once per child.
 */
function slotsOf(body, batch, encoding) {
  const traceIndex = new Map([...new Set(batch.spans.map((s) => s.spanContext().traceId))].map((id, i) => [id, i]));
  const spanIndex = new Map(batch.spans.map((s, i) => [s.spanContext().spanId, i]));
  const slots = { trace: [], span: [], run: [] };
  const take = (kind, index, id, offset) => {
    const i = index.get(id);
    if (i !== undefined) slots[kind].push({ offset, index: i });
  };
  if (encoding === 'protobuf') {
    for (let i = 0; i + 2 < body.length; i++) {
      const a = body[i];
      const b = body[i + 1];
      if (a === 0x0a && b === 0x10) take('trace', traceIndex, body.toString('hex', i + 2, i + 18), i + 2);
      else if ((a === 0x12 || a === 0x22) && b === 0x08) take('span', spanIndex, body.toString('hex', i + 2, i + 10), i + 2);
    }
  } else {
    for (const [field, kind, index, len] of [['"traceId":"', 'trace', traceIndex, 32], ['"spanId":"', 'span', spanIndex, 16], ['"parentSpanId":"', 'span', spanIndex, 16]]) {
      for (const at of findAll(body, Buffer.from(field))) take(kind, index, body.toString('latin1', at + field.length, at + field.length + len), at + field.length);
    }
  }
  const found = new Map();
  for (const { index } of slots.span) found.set(index, (found.get(index) ?? 0) + 1);
  const children = new Map();
  for (const s of batch.spans) {
    const p = s.parentSpanContext?.spanId;
    if (p) children.set(p, (children.get(p) ?? 0) + 1);
  }
  batch.spans.forEach((s, i) => {
    const id = s.spanContext().spanId;
    if (found.get(i) !== 1 + (children.get(id) ?? 0)) throw new Error(`${encoding}: span id ${id} found ${found.get(i) ?? 0} times`);
  });
  if (new Set(slots.trace.map((t) => t.index)).size !== traceIndex.size) throw new Error(`${encoding}: a trace id was not found`);
  batch.runIds.forEach((id, index) => {
    for (const offset of findAll(body, Buffer.from(id, 'latin1'))) slots.run.push({ offset, index });
  });
  return slots;
}

/** Fresh ids for send number `seq`: 8-byte span ids, 16-byte trace ids and 16-char run ids, unique per seq. */
function freshSpanId(seq, index) {
  const b = Buffer.alloc(8);
  b[0] = 0xa5;
  b.writeUInt32BE(seq >>> 0, 1);
  b.writeUInt16BE(index, 5);
  b[7] = 1;
  return b;
}
function freshTraceId(seq, index) {
  const b = Buffer.alloc(16);
  b[0] = 0xb7;
  b.writeUInt32BE(seq >>> 0, 1);
  b.writeUInt16BE(index, 5);
  b[15] = 1;
  return b;
}
const freshRunId = (seq, index) => `run-${(seq >>> 0).toString(16).padStart(8, '0')}${index.toString(16).padStart(4, '0')}`;

/** A copy of the template body with send `seq`'s fresh ids written into every slot. */
function patched(template, seq) {
  const body = Buffer.from(template.body);
  const hex = template.encoding === 'json';
  for (const { offset, index } of template.slots.span) {
    const id = freshSpanId(seq, index);
    if (hex) body.write(id.toString('hex'), offset, 'latin1');
    else id.copy(body, offset);
  }
  for (const { offset, index } of template.slots.trace) {
    const id = freshTraceId(seq, index);
    if (hex) body.write(id.toString('hex'), offset, 'latin1');
    else id.copy(body, offset);
  }
  for (const { offset, index } of template.slots.run) body.write(freshRunId(seq, index), offset, 'latin1');
  return body;
}

function buildTemplates() {
  const out = { protobuf: [], json: [] };
  for (let t = 0; t < TEMPLATES; t++) {
    const batch = MIX === 'agentic' ? buildAgenticSpans(2000 + t) : buildBatchSpans(1000 + t);
    const pb = Buffer.from(ProtobufTraceSerializer.serializeRequest(batch.spans));
    const js = Buffer.from(JsonTraceSerializer.serializeRequest(batch.spans));
    for (const [encoding, body] of [['protobuf', pb], ['json', js]]) {
      out[encoding].push({ encoding, body, slots: slotsOf(body, batch, encoding), spans: batch.spans.length, receipts: batch.receipts, runs: batch.runs });
    }
  }
  return out;
}

/** Sanity: a patched body decodes to the batch's spans with fresh ids, parentage and run ids intact. */
function checkTemplates(templates) {
  for (let t = 0; t < TEMPLATES; t++) {
    const seq = 0xfffff000 + t;
    const pb = decodeExportTraceRequest(patched(templates.protobuf[t], seq));
    const js = decodeExportTraceJson(patched(templates.json[t], seq));
    if (JSON.stringify(pb) !== JSON.stringify(js)) throw new Error('patched protobuf and JSON bodies decode differently');
    const ids = new Set(pb.spans.map((s) => s.spanId));
    if (ids.size !== SPANS || ![...ids].every((id) => id.startsWith('a5'))) throw new Error('span ids not rewritten');
    for (const s of pb.spans) {
      if (s.parentSpanId !== null && !ids.has(s.parentSpanId)) throw new Error('a parent span id was not rewritten');
      if (!s.traceId.startsWith('b7')) throw new Error('trace id not rewritten');
      const run = s.attrs['topology.run.id'];
      if (run !== undefined && !String(run).startsWith(`run-${seq.toString(16)}`)) throw new Error('run id not rewritten');
    }
    const receipts = pb.spans.filter((s) => s.attrs['topology.event.type'] !== undefined).length;
    if (receipts !== templates.protobuf[t].receipts) throw new Error('receipt span count mismatch');
  }
}

// ---------------------------------------------------------------------------------------------------------
// The server

// ---------------------------------------------------------------------------------------------------------
// Clients (the server's child process, its /metrics, /proc readings and the HTTP client: bench/otlp-load.mjs)

const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/**
 * `serve` of this build with --profile and --server-node-args, or of `root` (a baseline) with --baseline-node-args
 * when given, else --server-node-args.
 */
function startServer(extraArgs = [], root = null) {
  const flags = root !== null && args['baseline-node-args'] !== undefined ? args['baseline-node-args'] : args['server-node-args'];
  const nodeArgs = [...(args.profile && root === null ? ['--cpu-prof', '--cpu-prof-dir', resolve(args.profile)] : []), ...flags.split(' ').filter(Boolean)];
  return startServe(extraArgs, nodeArgs, root ?? ROOT);
}

function grpcClient(port) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
  });
  const send = (body) =>
    new Promise((resolve, reject) => {
      client.makeUnaryRequest(EXPORT_PATH, (b) => b, (b) => b, body, (err, answer) => {
        if (err) return reject(err);
        if (answer.length > 0) return reject(new Error('partial success'));
        resolve();
      });
    });
  return { send, close: () => client.close() };
}

/** A retry storm: every batch is delivered twice, the second time after the first was acknowledged. */
function twice(client) {
  return {
    send: async (body) => {
      await client.send(body);
      await client.send(body);
    },
    close: () => client.close(),
    gzip: client.gzip,
  };
}

// `deliveries`: how often each batch is sent; `floor`: the no-op receiver the transport-only limit is taken from.
const GZIP_HEADERS = () => (GZIP ? { 'content-encoding': 'gzip' } : {});
const TRANSPORT = {
  'http-protobuf': { encoding: 'protobuf', floor: 'http', client: (ports, n) => httpClient(ports.otlpHttp, 'application/x-protobuf', n, GZIP_HEADERS()) },
  'http-json': { encoding: 'json', floor: 'http', client: (ports, n) => httpClient(ports.otlpHttp, 'application/json', n, GZIP_HEADERS()) },
  // gRPC into the default receiver (node:http2) and into the @grpc/grpc-js server (--grpc-impl grpc-js), same client.
  grpc: { encoding: 'protobuf', floor: 'h2', client: (ports) => grpcClient(ports.otlpGrpc) },
  'grpc-js': { encoding: 'protobuf', floor: 'grpc-js', serverArgs: ['--grpc-impl', 'grpc-js'], client: (ports) => grpcClient(ports.otlpGrpc) },
  'retry-storm': { encoding: 'protobuf', floor: 'http', deliveries: 2, client: (ports, n) => twice(httpClient(ports.otlpHttp, 'application/x-protobuf', n, GZIP_HEADERS())) },
};

let sendSeq = 1;
/** Spans delivered per batch count every delivery; receipts count new receipts, `again` the redelivered ones. */
let deliveries = 1;
const gzipAsync = (b) => promisify(zlib.gzip)(b, { level: GZIP_LEVEL });
/**
 * The next batch with fresh ids; gzipped (default level, as exporters' zlib streams do, on libuv's threads) when
 * the client sends gzip. `bytes`: uncompressed protobuf bytes delivered; `wire`: bytes on the wire.
 */
async function nextBatch(templates, client) {
  const seq = sendSeq++;
  const t = templates[seq % templates.length];
  const raw = patched(t, seq);
  const body = client?.gzip ? await gzipAsync(raw) : raw;
  return { body, spans: t.spans * deliveries, receipts: t.receipts, again: t.receipts * (deliveries - 1), bytes: raw.length * deliveries, wire: body.length * deliveries };
}


/** The whole machine's busy CPU-seconds (all cores, /proc/stat: user + nice + system + irq + softirq). */
function machineBusySeconds() {
  const f = readFileSync('/proc/stat', 'latin1').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6]) / CLK_TCK;
}

/**
 * Server CPU (user, system), its main thread's, the server's receipt counters, this load generator's CPU (all its
 * threads: the clients, and gzip on libuv's threads) and the machine's, at one instant.
 */
async function serverSnapshot(server) {
  const self = process.cpuUsage();
  return {
    cpu: cpuSecondsOf(server.pid),
    main: mainThreadCpuSecondsOf(server.pid),
    metrics: server.ports.api ? await scrape(server.ports.api) : null,
    loadgen: (self.user + self.system) / 1e6,
    machine: machineBusySeconds(),
  };
}

/**
 * Closed loop: `concurrency` clients send back to back for `seconds` (or `maxBatches` batches). Returns the raw
 * tallies; `summarise` turns them into rates.
 */
async function saturate(server, client, templates, seconds, maxBatches, prebuilt = null) {
  const latencies = [];
  let exhausted = false;
  let spans = 0;
  let receipts = 0;
  let again = 0;
  let bytes = 0;
  let wire = 0;
  let issued = 0;
  const before = await serverSnapshot(server);
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline && issued < maxBatches) {
      let b;
      if (prebuilt) {
        // Bodies built and gzipped before the window: during it the load generator only sends bytes. None left: the
        // round ends early (its wall time is what was measured), never a body sent twice.
        b = prebuilt.bodies.shift();
        if (b === undefined) {
          exhausted = true;
          break;
        }
        prebuilt.bytes -= b.body.length;
      }
      issued++;
      if (!prebuilt) b = await nextBatch(templates, client);
      const s = performance.now();
      await client.send(b.body);
      latencies.push(performance.now() - s);
      spans += b.spans;
      receipts += b.receipts;
      again += b.again;
      bytes += b.bytes;
      wire += b.wire;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const wall = (performance.now() - t0) / 1000;
  const after = await serverSnapshot(server);
  return { latencies, spans, receipts, again, bytes, wire, wall, before, after, exhausted };
}

/**
 * --workers-compare: a pool of bodies built (fresh ids: every one from its own send number, sent once) and gzipped
 * before a measured round, topped up to `count` (at most `maxBytes` of bodies held); the round takes from it. Built
 * on libuv's threads 4 at a time, outside the window. `built`, `peakBodies`, `peakBytes` and `buildSeconds` say what it cost.
 */
function prebuiltPool() {
  return { bodies: [], bytes: 0, built: 0, peakBodies: 0, peakBytes: 0, buildSeconds: 0 };
}
async function topUp(pool, templates, client, count, maxBytes) {
  const t0 = performance.now();
  while (pool.bodies.length < count && pool.bytes < maxBytes) {
    const n = Math.min(4, count - pool.bodies.length);
    const made = await Promise.all(Array.from({ length: n }, () => nextBatch(templates, client)));
    for (const b of made) {
      pool.bodies.push(b);
      pool.bytes += b.body.length;
      pool.built++;
    }
    pool.peakBodies = Math.max(pool.peakBodies, pool.bodies.length);
    pool.peakBytes = Math.max(pool.peakBytes, pool.bytes);
  }
  pool.buildSeconds += (performance.now() - t0) / 1000;
}

/** Open loop: one batch every 1/rate seconds regardless of answers, for `seconds`. */
async function paced(server, client, templates, batchesPerSecond, seconds) {
  const latencies = [];
  let spans = 0;
  let receipts = 0;
  let again = 0;
  let maxSlipMs = 0;
  const before = await serverSnapshot(server);
  const t0 = performance.now();
  const interval = 1000 / batchesPerSecond;
  const n = Math.max(1, Math.floor(seconds * batchesPerSecond));
  const inflight = [];
  for (let k = 0; k < n; k++) {
    const due = t0 + k * interval;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    maxSlipMs = Math.max(maxSlipMs, performance.now() - due);
    const b = await nextBatch(templates, client);
    const s = performance.now();
    inflight.push(
      client.send(b.body).then(() => {
        latencies.push(performance.now() - s);
        spans += b.spans;
        receipts += b.receipts;
        again += b.again;
      }),
    );
  }
  await Promise.all(inflight);
  const wall = (performance.now() - t0) / 1000;
  const after = await serverSnapshot(server);
  return { ...summarise({ latencies, spans, receipts, again, bytes: 0, wire: 0, wall, before, after }), targetBatchesPerSec: round(batchesPerSecond, 1), maxSendSlipMs: round(maxSlipMs, 1) };
}


/** Rates of one or more phases (tallies added up); checks that the server accepted every receipt sent, once. */
function summarise(...phases) {
  const sum = (f) => phases.reduce((a, p) => a + f(p), 0);
  const latencies = phases.flatMap((p) => p.latencies);
  const spans = sum((p) => p.spans);
  const receipts = sum((p) => p.receipts);
  const wall = sum((p) => p.wall);
  const user = sum((p) => p.after.cpu.user - p.before.cpu.user);
  const system = sum((p) => p.after.cpu.system - p.before.cpu.system);
  const accepted = sum((p) => p.after.metrics.accepted - p.before.metrics.accepted);
  const notAccepted = sum((p) => p.after.metrics.notAccepted - p.before.metrics.notAccepted);
  const again = sum((p) => p.again ?? 0);
  const duplicates = sum((p) => p.after.metrics.duplicates - p.before.metrics.duplicates);
  if (accepted !== receipts || notAccepted !== 0 || duplicates !== again) {
    throw new Error(`server accepted ${accepted} receipts (${duplicates} duplicates, ${notAccepted} otherwise); expected ${receipts} new receipts and ${again} duplicates`);
  }
  const commits = sum((p) => p.after.metrics.commits - p.before.metrics.commits);
  const committed = sum((p) => p.after.metrics.committedReceipts - p.before.metrics.committedReceipts);
  const commitSeconds = sum((p) => p.after.metrics.commitSeconds - p.before.metrics.commitSeconds);
  // p99 of the group commits (including their fsync) in these phases, to bucket precision
  const buckets = phases[0].after.metrics.commitBuckets.map(([le], i) => [le, sum((p) => p.after.metrics.commitBuckets[i][1] - p.before.metrics.commitBuckets[i][1])]);
  const commitP99 = buckets.find(([, n]) => n >= 0.99 * commits)?.[0] ?? Infinity;
  return {
    batches: latencies.length,
    spans,
    receipts: accepted,
    duplicates,
    wallSeconds: round(wall, 2),
    spansPerSec: Math.round(spans / wall),
    receiptsPerSec: Math.round(accepted / wall),
    ackP50Ms: round(quantile(latencies, 0.5), 1),
    ackP99Ms: round(quantile(latencies, 0.99), 1),
    serverCpuSeconds: round(user + system, 2),
    serverSystemShare: round(system / (user + system), 2),
    serverCores: round((user + system) / wall, 2),
    // The main thread's part of the server's CPU (the rest: libuv's threads inflating gzip, V8's GC and compiler threads).
    serverMainThreadShare: round(sum((p) => p.after.main - p.before.main) / (user + system), 2),
    spansPerServerCpuSec: Math.round(spans / (user + system)),
    // The load generator (this process) and everything else on the machine (other jobs), in cores.
    loadgenCores: round(sum((p) => p.after.loadgen - p.before.loadgen) / wall, 2),
    machineBusyCores: round(sum((p) => p.after.machine - p.before.machine) / wall, 2),
    otherJobsCores: round((sum((p) => p.after.machine - p.before.machine) - user - system - sum((p) => p.after.loadgen - p.before.loadgen)) / wall, 2),
    // Uncompressed protobuf MB (1e6 bytes) per second and per server CPU-second; wire MB per second.
    mbPerSec: round(sum((p) => p.bytes ?? 0) / 1e6 / wall, 1),
    wireMbPerSec: round(sum((p) => p.wire ?? 0) / 1e6 / wall, 1),
    mbPerServerCpuSec: round(sum((p) => p.bytes ?? 0) / 1e6 / (user + system), 1),
    commits,
    receiptsPerCommit: commits ? round(committed / commits, 1) : 0,
    commitMeanMs: commits ? round((commitSeconds / commits) * 1000, 1) : 0,
    commitP99MsAtMost: commits ? commitP99 * 1000 : 0,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Decode-only limit (this process, the same bodies)

/** Fresh-id bodies of an encoding, as the server receives them (8 distinct bodies, decoded round-robin); gzipped with --gzip. */
function decodeBodies(templates, encoding) {
  return Array.from({ length: 8 }, (_, i) => {
    const raw = patched(templates[encoding][i % templates[encoding].length], 0xffff0000 + i);
    return GZIP ? zlib.gzipSync(raw, { level: GZIP_LEVEL }) : raw;
  });
}

/** Spans per CPU-second of this process decoding `bodies` (gunzipping them first with --gzip) for about `seconds`. */
function decodeOnly(bodies, encoding, seconds) {
  const decode = encoding === 'protobuf' ? decodeExportTraceRequest : decodeExportTraceJson;
  let spans = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  do {
    // gunzip as cheaply as zlib allows here: synchronously, into one output chunk (the server's inflateOptions).
    for (const b of bodies) spans += decode(GZIP ? zlib.gunzipSync(b, inflateOptions(b, 'gzip', 64 << 20)) : b).spanCount;
  } while (performance.now() - t0 < seconds * 1000);
  const c = process.cpuUsage(c0);
  return spans / ((c.user + c.system) / 1e6);
}

/**
 * decodeOnly, but inflating into one reused output buffer as the decode workers do (src/server/decode-worker.ts
 * inflateInto: zlib's synchronous path given the engine's output memory) instead of a fresh allocation per body.
 * A fresh 9 MB output costs ~40 ms of page faults on this VM, three times the inflate: this is the stricter bound.
 */
let reusedOutput = null;
function decodeOnlyReused(bodies, encoding, seconds) {
  if (!GZIP) return decodeOnly(bodies, encoding, seconds);
  const decode = encoding === 'protobuf' ? decodeExportTraceRequest : decodeExportTraceJson;
  let spans = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  do {
    for (const b of bodies) {
      const opts = inflateOptions(b, 'gzip', 64 << 20);
      if (reusedOutput === null || reusedOutput.length < opts.chunkSize) reusedOutput = Buffer.allocUnsafeSlow(opts.chunkSize);
      const engine = zlib.createGunzip({ maxOutputLength: 64 << 20, chunkSize: 64 });
      engine._outBuffer = reusedOutput;
      engine._chunkSize = reusedOutput.length;
      spans += decode(engine._processChunk(b, engine._finishFlushFlag)).spanCount;
    }
  } while (performance.now() - t0 < seconds * 1000);
  const c = process.cpuUsage(c0);
  return spans / ((c.user + c.system) / 1e6);
}

// ---------------------------------------------------------------------------------------------------------

async function measureTransport(server, name, templates, base = null) {
  const spec = TRANSPORT[name];
  const t = templates[spec.encoding];
  const bodies = decodeBodies(templates, spec.encoding);
  const closed = spec.client(server.ports, CONCURRENCY);
  // Side by side: the transports other than HTTP protobuf alternate their rounds with HTTP protobuf rounds (fresh
  // ids) into the same server, so their ratio to it is taken under the same load, minute by minute.
  const paired = name !== 'http-protobuf' && PAIRED ? TRANSPORT['http-protobuf'].client(server.ports, CONCURRENCY) : null;
  const baseClient = base ? spec.client(base.ports, CONCURRENCY) : null;
  const phase = async (client, d, seconds, batches, srv = server) => {
    deliveries = d;
    return saturate(srv, client, t, seconds, batches);
  };
  summarise(await phase(closed, spec.deliveries ?? 1, WARMUP_SECONDS, MAX_BATCHES)); // warm up (JIT, caches, store)
  if (paired) summarise(await phase(paired, 1, 1, MAX_BATCHES));
  if (base) summarise(await phase(baseClient, spec.deliveries ?? 1, WARMUP_SECONDS, MAX_BATCHES, base));
  decodeOnly(bodies, spec.encoding, 0.3);
  // Saturation in ROUNDS rounds, each followed by decode-only of the same bodies: ratios side by side.
  const rounds = [];
  for (let i = 0; i < ROUNDS; i++) {
    const ref = paired ? summarise(await phase(paired, 1, SECONDS / ROUNDS, MAX_BATCHES / ROUNDS)).spansPerServerCpuSec : undefined;
    const ph = await phase(closed, spec.deliveries ?? 1, SECONDS / ROUNDS, MAX_BATCHES / ROUNDS);
    const e2e = summarise(ph).spansPerServerCpuSec;
    const decode = decodeOnly(bodies, spec.encoding, DECODE_SECONDS / ROUNDS);
    const before = base ? summarise(await phase(baseClient, spec.deliveries ?? 1, SECONDS / ROUNDS, MAX_BATCHES / ROUNDS, base)).spansPerServerCpuSec : undefined;
    rounds.push({ phase: ph, e2e, decode: Math.round(decode), ratio: round(e2e / decode, 3), ref, before });
  }
  closed.close();
  paired?.close();
  baseClient?.close();
  deliveries = spec.deliveries ?? 1;
  const max = summarise(...rounds.map((r) => r.phase));
  const open = spec.client(server.ports, 256);
  const half = await paced(server, open, t, max.batches / max.wallSeconds / 2, HALF_SECONDS);
  open.close();
  return {
    max,
    half,
    rounds: rounds.map((r) => ({
      spansPerServerCpuSec: r.e2e,
      decodeOnlySpansPerCpuSec: r.decode,
      ratio: r.ratio,
      ...(paired ? { httpProtobufSpansPerServerCpuSec: r.ref, vsHttpProtobuf: round(r.e2e / r.ref, 3) } : {}),
      ...(base ? { baselineSpansPerServerCpuSec: r.before, vsBaseline: round(r.e2e / r.before, 3) } : {}),
    })),
    // Median over rounds of (this build's spans per server CPU-second / the baseline build's in the round after it).
    ...(base ? { baselineSpansPerServerCpuSec: Math.round(median(rounds.map((r) => r.before))), vsBaseline: median(rounds.map((r) => round(r.e2e / r.before, 3))) } : {}),
    decodeOnlySpansPerCpuSec: Math.round(median(rounds.map((r) => r.decode))),
    endToEndVsDecodeOnly: median(rounds.map((r) => r.ratio)),
    // Median over rounds of (this transport's spans per server CPU-second / HTTP protobuf's in the round before it).
    ...(paired ? { vsHttpProtobuf: median(rounds.map((r) => round(r.e2e / r.ref, 3))) } : {}),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Transport floor: the same clients and bodies against receivers that only take each request off the wire
// (node:http reading the body; @grpc/grpc-js with the same Buffer service definition) and answer at once.
// Its CPU per span is what the transport costs before any decoding, storing or auditing.

async function floorServerMain() {
  // --floor-decode: the HTTP receiver reads each body with the server's own reader (pooled buffer, gunzip) and
  // decodes it with the server's decoder, then answers: transport + gunzip + decode, nothing stored.
  const body = args['floor-decode'] ? await import('../dist/server/body.js') : null;
  const pool = body ? new body.BodyBuffers() : null;
  const httpServer = http.createServer((req, res) => {
    if (body) {
      const json = String(req.headers['content-type']).startsWith('application/json');
      body.readBodyInto(req, 20 * 1024 * 1024, pool).then(({ body: b, release }) => {
        try {
          (json ? decodeExportTraceJson : decodeExportTraceRequest)(b);
        } finally {
          release();
        }
        res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
        res.end(json ? '{}' : '');
      }, (e) => {
        res.writeHead(400);
        res.end(String(e));
      });
      return;
    }
    req.on('data', () => {});
    req.on('end', () => {
      const json = String(req.headers['content-type']).startsWith('application/json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : '');
    });
  });
  // node:http2 taking one gRPC message off the wire and answering an empty response with grpc-status 0 (the same
  // HTTP/2 settings as the receiver in src/server/otlp-grpc-h2.ts).
  const h2Server = http2.createServer({ settings: { initialWindowSize: 4 * 1024 * 1024, maxFrameSize: 1024 * 1024 }, maxSessionMemory: 64 });
  h2Server.on('session', (session) => session.setLocalWindowSize(32 * 1024 * 1024));
  h2Server.on('stream', (stream) => {
    stream.on('data', () => {});
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.alloc(5));
    });
  });
  const grpcServer = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  const passthrough = (b) => b;
  grpcServer.addService(
    { Export: { path: EXPORT_PATH, requestStream: false, responseStream: false, requestSerialize: passthrough, requestDeserialize: passthrough, responseSerialize: passthrough, responseDeserialize: passthrough } },
    { Export: (_call, cb) => cb(null, Buffer.alloc(0)) },
  );
  httpServer.listen(0, '127.0.0.1', () => {
    h2Server.listen(0, '127.0.0.1', () => {
      grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, grpcPort) => {
        if (err) throw err;
        console.log(JSON.stringify({ listening: { otlpHttp: httpServer.address().port, otlpGrpc: grpcPort, otlpH2: h2Server.address().port } }));
      });
    });
  });
}

async function startFloorServer(decode = false) {
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--floor-server', ...(decode ? ['--floor-decode'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const ports = await new Promise((res, rej) => {
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) res(JSON.parse(line).listening);
    });
    child.once('exit', (code) => rej(new Error(`floor server exited with ${code}`)));
  });
  return { pid: child.pid, ports, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) };
}

/** Spans per receiver CPU-second of the transport alone, same clients, same bodies. */
const floors = new Map();
async function transportFloor(name, templates, decode = false) {
  const spec = TRANSPORT[name];
  const key = `${spec.floor}${decode ? '+decode' : ''}`;
  if (floors.has(key)) return floors.get(key);
  const floor = await startFloorServer(decode);
  deliveries = 1;
  try {
    const ports = spec.floor === 'h2' ? { ...floor.ports, otlpGrpc: floor.ports.otlpH2 } : floor.ports;
    const client = (spec.deliveries ? TRANSPORT['http-protobuf'] : spec).client(ports, CONCURRENCY);
    // Warm-up: the decoding receiver's JIT needs as long as the server's did.
    await saturate(floor, client, templates[spec.encoding], decode ? WARMUP_SECONDS : 1, MAX_BATCHES);
    const phase = await saturate(floor, client, templates[spec.encoding], FLOOR_SECONDS, MAX_BATCHES);
    client.close();
    const cpu = phase.after.cpu.user + phase.after.cpu.system - phase.before.cpu.user - phase.before.cpu.system;
    floors.set(key, Math.round(phase.spans / cpu));
    return floors.get(key);
  } finally {
    await floor.stop();
  }
}

async function main() {
  const started = performance.now();
  const templates = buildTemplates();
  checkTemplates(templates);
  const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const payload = {
    spansPerBatch: SPANS,
    receiptsPerBatch: round(avg(templates.protobuf.map((t) => t.receipts)), 1),
    runsPerBatch: round(avg(templates.protobuf.map((t) => t.runs)), 1),
    protobufBytesPerBatch: Math.round(avg(templates.protobuf.map((t) => t.body.length))),
    jsonBytesPerBatch: Math.round(avg(templates.json.map((t) => t.body.length))),
    ...(GZIP ? { gzipLevel: GZIP_LEVEL, gzipBytesPerBatch: Math.round(avg(templates.protobuf.map((t) => zlib.gzipSync(t.body, { level: GZIP_LEVEL }).length))) } : {}),
    mix: MIX,
  };
  // A fresh server (and data dir) per transport, so that no transport inherits another's runs and database.
  const results = {};
  for (const name of TRANSPORTS) {
    if (!TRANSPORT[name]) throw new Error(`unknown transport ${name}`);
    const server = await startServer(TRANSPORT[name].serverArgs);
    process.stderr.write(`${name}: server pid ${server.pid}\n`);
    const base = BASELINE ? await startServer(TRANSPORT[name].serverArgs, BASELINE) : null;
    if (process.env.BENCH_PAUSE_MS) await sleep(Number(process.env.BENCH_PAUSE_MS));
    try {
      results[name] = await measureTransport(server, name, templates, base);
      results[name].liveRunsAtEnd = (await scrape(server.ports.api)).liveRuns;
      // The limit on the other side: what the transport alone costs (a no-op receiver), and the two together.
      const floor = await transportFloor(name, templates);
      const decode = results[name].decodeOnlySpansPerCpuSec;
      results[name].transportOnlySpansPerCpuSec = floor;
      results[name].transportPlusDecodeSpansPerCpuSec = Math.round(1 / (1 / floor + 1 / decode));
      results[name].endToEndVsTransportPlusDecode = round(results[name].max.spansPerServerCpuSec / results[name].transportPlusDecodeSpansPerCpuSec, 3);
      if (!args['no-direct-bound'] && TRANSPORT[name].floor === 'http') {
        // The same bound taken directly: a receiver that reads (gunzips) and decodes with the server's own code.
        results[name].directBoundSpansPerCpuSec = await transportFloor(name, templates, true);
        results[name].endToEndVsDirectBound = round(results[name].max.spansPerServerCpuSec / results[name].directBoundSpansPerCpuSec, 3);
      }
    } finally {
      if (base) await base.stop();
      const peak = memoryOf(server.pid).hwmMiB;
      const code = await server.stop();
      if (code !== 0) process.stderr.write(`server exited with ${code}\n${server.stderr().slice(-2000)}\n`);
      if (results[name]) results[name].serverPeakRssMiB = round(peak, 1);
    }
    process.stderr.write(`${name}: ${JSON.stringify(results[name])}\n`);
  }

  const machine = { nproc: os.availableParallelism(), cpu: os.cpus()[0]?.model, node: process.version, loadavg1m: round(os.loadavg()[0], 2) };
  console.log(`machine: ${machine.nproc} cores, ${machine.cpu}, node ${machine.node}, load ${machine.loadavg1m}`);
  console.log(`payload (${MIX}${GZIP ? ', gzip' : ''}): ${SPANS} spans/batch, ${payload.receiptsPerBatch} receipts in ${payload.runsPerBatch} runs, protobuf ${(payload.protobufBytesPerBatch / 1e6).toFixed(2)} MB${GZIP ? ` (gzip ${(payload.gzipBytesPerBatch / 1e6).toFixed(2)} MB)` : ''}, JSON ${(payload.jsonBytesPerBatch / 1e6).toFixed(2)} MB; ${CONCURRENCY} clients`);
  const cols = [
    ['transport', 14, (n) => n],
    ['spans/s', 9, (n, r) => r.max.spansPerSec],
    ['receipts/s', 11, (n, r) => r.max.receiptsPerSec],
    ['ack p50', 10, (n, r) => `${r.max.ackP50Ms}ms`],
    ['ack p99', 10, (n, r) => `${r.max.ackP99Ms}ms`],
    ['srv cores', 10, (n, r) => r.max.serverCores],
    ['spans/srv-CPU-s', 16, (n, r) => r.max.spansPerServerCpuSec],
    ['MB/s', 7, (n, r) => r.max.mbPerSec],
    ['MB/srv-CPU-s', 13, (n, r) => r.max.mbPerServerCpuSec],
    ['decode-only', 12, (n, r) => r.decodeOnlySpansPerCpuSec],
    ['e2e/decode', 11, (n, r) => r.endToEndVsDecodeOnly],
    ['half-rate p99', 14, (n, r) => `${r.half.ackP99Ms}ms`],
    ['rcpt/commit', 12, (n, r) => r.max.receiptsPerCommit],
    ['half: commit mean/p99', 22, (n, r) => `${r.half.commitMeanMs}/<=${r.half.commitP99MsAtMost}ms`],
    ['peak RSS', 10, (n, r) => `${Math.round(r.serverPeakRssMiB)}MiB`],
    ['transport-only', 15, (n, r) => r.transportOnlySpansPerCpuSec],
    ['transport+decode', 17, (n, r) => r.transportPlusDecodeSpansPerCpuSec],
    ['e2e/(transport+decode)', 23, (n, r) => r.endToEndVsTransportPlusDecode],
    ['direct bound', 13, (n, r) => r.directBoundSpansPerCpuSec ?? '—'],
    ['e2e/direct', 11, (n, r) => r.endToEndVsDirectBound ?? '—'],
    ['vs HTTP (paired)', 17, (n, r) => r.vsHttpProtobuf ?? '—'],
    ...(BASELINE ? [['baseline', 10, (n, r) => r.baselineSpansPerServerCpuSec], ['vs baseline', 12, (n, r) => r.vsBaseline]] : []),
  ];
  console.log(cols.map(([h, w], i) => (i === 0 ? h.padEnd(w) : h.padStart(w))).join(''));
  for (const name of TRANSPORTS) {
    console.log(cols.map(([, w, f], i) => (i === 0 ? String(f(name, results[name])).padEnd(w) : String(f(name, results[name])).padStart(w))).join(''));
  }
  console.log(`one fresh server per transport; bench took ${round((performance.now() - started) / 1000, 1)} s`);
  console.log(JSON.stringify({ bench: 'ingest', machine, payload, concurrency: CONCURRENCY, ...(BASELINE ? { baseline: BASELINE } : {}), results }));
}

// ---------------------------------------------------------------------------------------------------------
// The worker pool (issue 35, item 2): `node bench/ingest.mjs --mix agentic --workers-compare [N]` starts two
// servers of this build, `serve --workers 0` and `serve` with N workers (default: serve's own default, available
// cores - 1), per transport (http-protobuf and the retry storm by default), warms both up, then alternates
// closed-loop rounds between them (the order flips every round) with the same clients and bodies (fresh ids), so
// both figures come from the same minutes of the same machine. Per server: acknowledged spans per wall second,
// server CPU-seconds per wall second (all threads: /proc/<pid>/stat), the main thread's own (/proc/<pid>/task/<pid>/
// stat: the single writer runs there, so at 1.0 the instance cannot go faster whatever the number of workers), its
// CPU-seconds per 1000 spans, spans per server CPU-second, receipts per group commit, and in the same rounds the
// load generator's cores and the other jobs' (the machine's busy CPU minus server and load generator). Then the
// transport + decode bound on the same bodies (the no-op receiver, and gunzip + decode in this process after each
// round), as in main().

async function workersMain() {
  const n = args['workers-compare'] === '' ? Math.max(1, os.availableParallelism() - 1) : Number(args['workers-compare']);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--workers-compare: expected a positive integer: ${args['workers-compare']}`);
  const started = performance.now();
  const templates = buildTemplates();
  checkTemplates(templates);
  const results = {};
  for (const name of TRANSPORTS) {
    const spec = TRANSPORT[name];
    if (!spec || spec.serverArgs) throw new Error(`--workers-compare: transport ${name} (http-protobuf, http-json, grpc or retry-storm)`);
    const t = templates[spec.encoding];
    const bodies = decodeBodies(templates, spec.encoding);
    // Each server's clients idle while the other's round runs: a keep-alive longer than that, so that no idle
    // connection is closed by the server as a client reuses it (EPIPE on a loaded machine).
    const keep = ['--keep-alive-timeout', '120s'];
    const servers = [
      { label: 'workers 0', server: await startServer(['--workers', '0', ...keep]), phases: [] },
      { label: `workers ${n}`, server: await startServer(['--workers', String(n), ...keep]), phases: [] },
    ];
    const decodes = [];
    const reusedDecodes = [];
    try {
      for (const s of servers) s.client = spec.client(s.server.ports, CONCURRENCY);
      deliveries = spec.deliveries ?? 1;
      for (const s of servers) {
        const ph = await saturate(s.server, s.client, t, WARMUP_SECONDS, MAX_BATCHES);
        summarise(ph);
        // Batches per second so far (the warm-up's bodies were gzipped on the fly: the first round gets 3x that, 2 x 1.5).
        s.rate = (ph.latencies.length / ph.wall) * (PREBUILT ? 2 : 1);
      }
      decodeOnly(bodies, spec.encoding, 0.3);
      const pool = PREBUILT ? prebuiltPool() : null;
      const roundSeconds = SECONDS / ROUNDS;
      for (let i = 0; i < ROUNDS; i++) {
        for (const s of i % 2 === 0 ? servers : [...servers].reverse()) {
          if (pool) await topUp(pool, t, s.client, Math.min(MAX_BATCHES / ROUNDS, Math.ceil(s.rate * roundSeconds * 1.5) + 2 * CONCURRENCY), PREBUILT_BYTES);
          const ph = await saturate(s.server, s.client, t, roundSeconds, MAX_BATCHES / ROUNDS, pool);
          s.phases.push(ph);
          s.rate = Math.max(s.rate, (ph.latencies.length / ph.wall) * 1.5);
          if (ph.exhausted) s.exhausted = (s.exhausted ?? 0) + 1;
          const r = summarise(ph);
          const left = round(os.availableParallelism() - r.loadgenCores - r.otherJobsCores, 2);
          process.stderr.write(`${name} round ${i + 1} ${s.label}: ${r.spansPerSec} spans/s, ${r.serverCores} server cores (main ${round((ph.after.main - ph.before.main) / r.wallSeconds, 2)}; left for it ${left}), ${r.spansPerServerCpuSec} spans/srv-CPU-s, loadgen ${r.loadgenCores}, others ${r.otherJobsCores}${ph.exhausted ? `, prebuilt bodies ran out after ${r.wallSeconds} s` : ''}\n`);
        }
        decodes.push(decodeOnly(bodies, spec.encoding, DECODE_SECONDS / ROUNDS));
        reusedDecodes.push(decodeOnlyReused(bodies, spec.encoding, DECODE_SECONDS / ROUNDS));
      }
      for (const s of servers) s.client.close();
      const [single, pooled] = servers.map((s) => {
        const r = summarise(...s.phases);
        const main = s.phases.reduce((a, p) => a + p.after.main - p.before.main, 0);
        // The cores the machine had left for this server in its rounds: all of them minus the load generator's and the other jobs'.
        const leftForServer = round(os.availableParallelism() - r.loadgenCores - r.otherJobsCores, 2);
        return { ...r, leftForServerCores: leftForServer, mainThreadCores: round(main / r.wallSeconds, 2), mainThreadCpuMsPer1000Spans: round((main / r.spans) * 1e6, 2), peakRssMiB: round(memoryOf(s.server.pid).hwmMiB, 1), prebuiltRanOutRounds: s.exhausted ?? 0 };
      });
      // Per round pair: pool / single, spans per wall second and per server CPU-second.
      const pairs = servers[0].phases.map((p, i) => [summarise(p), summarise(servers[1].phases[i])]);
      const floor = await transportFloor(name, templates);
      const decode = median(decodes);
      const bound = Math.round(1 / (1 / floor + 1 / decode));
      const reused = median(reusedDecodes);
      const strict = Math.round(1 / (1 / floor + 1 / reused));
      results[name] = {
        workers0: { ...single, vsBound: round(single.spansPerServerCpuSec / bound, 3), vsReusedBound: round(single.spansPerServerCpuSec / strict, 3) },
        [`workers${n}`]: { ...pooled, vsBound: round(pooled.spansPerServerCpuSec / bound, 3), vsReusedBound: round(pooled.spansPerServerCpuSec / strict, 3) },
        spansPerSecVsWorkers0: median(pairs.map(([a, b]) => round(b.spansPerSec / a.spansPerSec, 3))),
        spansPerServerCpuSecVsWorkers0: median(pairs.map(([a, b]) => round(b.spansPerServerCpuSec / a.spansPerServerCpuSec, 3))),
        transportOnlySpansPerCpuSec: floor,
        decodeOnlySpansPerCpuSec: Math.round(decode),
        transportPlusDecodeSpansPerCpuSec: bound,
        decodeOnlyReusedOutputSpansPerCpuSec: Math.round(reused),
        transportPlusDecodeReusedOutputSpansPerCpuSec: strict,
        ...(pool ? { prebuilt: { bodies: pool.built, peakBodies: pool.peakBodies, peakMB: round(pool.peakBytes / 1e6, 1), buildSeconds: round(pool.buildSeconds, 1) } } : {}),
      };
    } finally {
      for (const s of servers) {
        const code = await s.server.stop();
        if (code !== 0) process.stderr.write(`server (${s.label}) exited with ${code}\n${s.server.stderr().slice(-2000)}\n`);
      }
    }
    process.stderr.write(`${name}: ${JSON.stringify(results[name])}\n`);
  }
  const machine = { nproc: os.availableParallelism(), cpu: os.cpus()[0]?.model, node: process.version, loadavg1m: round(os.loadavg()[0], 2) };
  console.log(`machine: ${machine.nproc} cores, ${machine.cpu}, node ${machine.node}, load ${machine.loadavg1m}; mix ${MIX}${GZIP ? `, gzip level ${GZIP_LEVEL}` : ''}; ${CONCURRENCY} clients, ${ROUNDS} alternating rounds of ${SECONDS / ROUNDS} s per server`);
  const cols = [
    ['transport', 13, (name) => name],
    ['server', 11, (name, r) => r.label],
    ['spans/s', 8, (name, r) => r.spansPerSec],
    ['ack p50', 9, (name, r) => `${r.ackP50Ms}ms`],
    ['srv cores', 10, (name, r) => r.serverCores],
    ['main cores', 11, (name, r) => r.mainThreadCores],
    ['main ms/1k spans', 17, (name, r) => r.mainThreadCpuMsPer1000Spans],
    ['spans/srv-CPU-s', 16, (name, r) => r.spansPerServerCpuSec],
    ['vs bound', 9, (name, r) => r.vsBound],
    ['vs reused', 10, (name, r) => r.vsReusedBound],
    ['rcpt/commit', 12, (name, r) => r.receiptsPerCommit],
    ['loadgen', 8, (name, r) => r.loadgenCores],
    ['others', 7, (name, r) => r.otherJobsCores],
    ['left', 6, (name, r) => r.leftForServerCores],
    ['peak RSS', 9, (name, r) => `${Math.round(r.peakRssMiB)}MiB`],
  ];
  console.log(cols.map(([h, w], i) => (i === 0 ? h.padEnd(w) : h.padStart(w))).join(''));
  for (const name of TRANSPORTS) {
    const r = results[name];
    for (const [label, x] of [['workers 0', r.workers0], [`workers ${n}`, r[`workers${n}`]]]) {
      console.log(cols.map(([, w, f], i) => String(f(name, { ...x, label }))[i === 0 ? 'padEnd' : 'padStart'](w)).join(''));
    }
    console.log(`${''.padEnd(13)}bound (transport ${r.transportOnlySpansPerCpuSec} + decode-only ${r.decodeOnlySpansPerCpuSec}): ${r.transportPlusDecodeSpansPerCpuSec} spans/CPU-s; with reused inflate output (decode-only ${r.decodeOnlyReusedOutputSpansPerCpuSec}): ${r.transportPlusDecodeReusedOutputSpansPerCpuSec}`);
    console.log(`${''.padEnd(13)}workers ${n} / workers 0 (median of round pairs): spans/s x${r.spansPerSecVsWorkers0}, spans per server CPU-s x${r.spansPerServerCpuSecVsWorkers0}`);
    if (r.prebuilt) console.log(`${''.padEnd(13)}bodies built and gzipped before the rounds: ${r.prebuilt.bodies} (at most ${r.prebuilt.peakBodies} held, ${r.prebuilt.peakMB} MB; ${r.prebuilt.buildSeconds} s outside the windows); rounds that ran out of them: workers 0 ${r.workers0.prebuiltRanOutRounds}, workers ${n} ${r[`workers${n}`].prebuiltRanOutRounds}`);
  }
  console.log(`bench took ${round((performance.now() - started) / 1000, 1)} s`);
  console.log(JSON.stringify({ bench: 'ingest-workers', machine, workers: n, concurrency: CONCURRENCY, results }));
}

export { buildTemplates, checkTemplates, patched, nextBatch };

if (IS_MAIN && args['floor-server']) {
  floorServerMain();
} else if (IS_MAIN && args['workers-compare'] !== undefined) {
  workersMain().catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
} else if (IS_MAIN) {
  main().catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
