#!/usr/bin/env node
// The span skeleton of caller resolution (issue 37): its heap cost per span, and that a flood of traces that never
// complete cannot grow it past its limit.
// Usage: npm run build && node --expose-gc bench/skeleton.mjs [--traces 20000] [--spans 10] [--flood 200000] [--max 20000]
//   cost   --traces traces of --spans spans each (a root agent, tool spans below it, one child agent at the bottom)
//          go through the real SpanPipeline (maxSpans large enough for all); heap after a full GC, minus the heap of
//          an empty pipeline, divided by the spans held (topology_span_skeleton_spans' source, callers.stats()).
//   flood  --flood traces of 5 spans whose child agent waits for a parent that never comes (three tool spans and the
//          agent, the root never sent) into a pipeline with maxSpans = --max: the largest skeleton seen after any
//          batch, the evictions counted, the gaps handed back, and the heap after a full GC.
// Prints one JSON line (no table: two figures per part).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return Number(i >= 0 ? process.argv[i + 1] : dflt);
};
const TRACES = arg('traces', 20_000);
const SPANS = arg('spans', 10);
const FLOOD = arg('flood', 200_000);
const MAX = arg('max', 20_000);
if (typeof globalThis.gc !== 'function') {
  console.error('run with node --expose-gc');
  process.exit(2);
}
const { SpanPipeline } = await import(pathToFileURL(join(root, 'dist/ingest/pipeline.js')).href);

const NOW = Date.now();
const hex = (n, w) => n.toString(16).padStart(w, '0');
const heap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};
const span = (traceId, spanId, parent, agent, t) => ({
  traceId,
  spanId,
  parentSpanId: parent,
  name: agent ? `invoke_agent ${agent}` : 'execute_tool lookup',
  kind: 1,
  startMs: t,
  endMs: t + 1000,
  statusCode: 0,
  attrs: agent ? { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': agent } : { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' },
  events: [],
  links: [],
});

/** One trace: a root agent, SPANS - 2 tool spans in a chain below it, a child agent at the bottom (it resolves). */
function trace(no, spans) {
  const t = hex(0x10000000 + no, 32);
  const out = [span(t, hex(1, 16), null, 'planner', NOW - 60_000)];
  for (let i = 2; i < spans; i++) out.push(span(t, hex(i, 16), hex(i - 1, 16), null, NOW - 60_000 + i));
  out.push(span(t, hex(spans, 16), hex(spans - 1, 16), 'researcher', NOW - 60_000 + spans));
  return out;
}

// ---- cost per skeleton span ----
const base = heap();
let p = new SpanPipeline({ waitMs: 10_000, maxSpans: TRACES * SPANS * 2 });
const h0 = heap() - base;
for (let i = 0; i < TRACES; i++) p.process(trace(i, SPANS), NOW, 'anonymous');
const held = p.callers.stats().indexed;
const h1 = heap() - base;
const cost = { traces: TRACES, spansPerTrace: SPANS, skeletonSpans: held, heapBytes: h1 - h0, bytesPerSpan: Math.round((h1 - h0) / held) };
p = null;

// ---- flood of never-completing traces ----
const fbase = heap();
const f = new SpanPipeline({ waitMs: 10_000, maxSpans: MAX });
let maxSeen = 0;
let gaps = 0;
let edges = 0;
for (let i = 0; i < FLOOD; i++) {
  const t = hex(0x20000000 + i, 32);
  const r = f.process(
    [span(t, hex(2, 16), hex(1, 16), null, NOW - 60_000), span(t, hex(3, 16), hex(2, 16), null, NOW - 60_000), span(t, hex(4, 16), hex(3, 16), null, NOW - 60_000), span(t, hex(5, 16), hex(4, 16), 'researcher', NOW - 59_000)],
    NOW,
    'anonymous',
  );
  for (const x of r.receipts) {
    if (x.type === 'gap') gaps++;
    if (x.type === 'edge') edges++;
  }
  maxSeen = Math.max(maxSeen, f.callers.stats().indexed);
}
const s = f.callers.stats();
const flood = { traces: FLOOD, spansSent: FLOOD * 4, maxSkeletonSpans: MAX, largestSkeletonSeen: maxSeen, evicted: s.evicted, pendingAtEnd: s.pending, gapsHandedBack: gaps, edges, heapBytes: heap() - fbase };
console.log(JSON.stringify({ bench: 'skeleton', node: process.version, cost, flood }));
