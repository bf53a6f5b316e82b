#!/usr/bin/env node
/**
 * Generates N runs of exactly 10 receipts each for the drift contract (research-publish@3, phase research),
 * cycling through the nine drift cases plus an evidence gap, so every verdict appears.
 *
 *   node bench/gen-runs.mjs N [OUT.ndjson] [--now RFC3339]
 *
 * Every run is timed relative to `now` (default 2026-01-15T12:00:00Z) so that the waiting run is still
 * within its deadline and the late run is past it when replayed with `--now` at that instant.
 * Library use: `generateRuns(n, {now})` returns receipt objects; `generateNdjson(n, {now})` the NDJSON text.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const DEFAULT_NOW = '2026-01-15T12:00:00Z';
export const RECEIPTS_PER_RUN = 10;

/** The verdict each case is built to produce (at `now`). */
export const CASES = [
  ['complete', 'healthy'],
  ['current', 'working'],
  ['wait', 'waiting'],
  ['late', 'incomplete'],
  ['old', 'stale_contract'],
  ['direct', 'forbidden_edge'],
  ['shadow', 'unknown_agent'],
  ['twice', 'ambiguous_route'],
  ['premature', 'false_complete'],
  ['gap', 'uncertain'],
];

const O = 'orchestrator';
const R = 'researcher';
const V = 'verifier';

/** One run: `[offsetSeconds, fields]` pairs, offsets relative to the run's start; padded to 10 receipts. */
function runShape(kind) {
  const s = [[0, { type: 'run.start', contract: 'research-publish', version: '3', phase: 'research', from: O }]];
  const e1 = [5, { type: 'edge', from: O, to: R, kind: 'delegate' }];
  const search1 = [10, { type: 'edge', from: O, to: 'web-search', kind: 'delegate' }];
  const search2 = [12, { type: 'edge', from: O, to: 'doc-search', kind: 'delegate' }];
  const e2 = [60, { type: 'edge', from: R, to: V, kind: 'handoff' }];
  const waitV = [61, { type: 'wait', from: R, on: V, edge: `${V} -> ${O} : return`, deadlineOffset: 600 }];
  const e3 = [300, { type: 'edge', from: V, to: O, kind: 'return' }];
  const outcome = [330, { type: 'outcome', from: O, verified: true }];
  const end = [360, { type: 'run.end', from: O, result: 'completed' }];
  switch (kind) {
    case 'complete':
      return [...s, e1, search1, search2, e2, waitV, e3, outcome, end];
    case 'current':
      return [...s, e1, search1, search2];
    case 'wait':
      return [...s, e1, search1, search2, e2, waitV];
    case 'late':
      return [...s, e1, search1, search2, e2];
    case 'old':
      return [...s, [5, { ...e1[1], version: '2' }], search1, search2, e2, waitV, e3, outcome, end];
    case 'direct':
      return [...s, e1, search1, search2, [60, { type: 'edge', from: R, to: 'publisher', kind: 'delegate' }]];
    case 'shadow':
      return [...s, e1, search1, search2, [60, { type: 'edge', from: R, to: 'shadow-agent', kind: 'handoff' }]];
    case 'twice':
      return [...s, e1, [40, { ...e1[1] }], search1, search2, e2, waitV, e3, outcome, end];
    case 'premature':
      return [...s, e1, search1, search2, e2, [90, { type: 'run.end', from: O, result: 'completed' }]];
    case 'gap':
      return [...s, e1, search1, search2, e2, [70, { type: 'gap', reason: 'caller_unresolved', to: V }]];
    default:
      throw new Error(`unknown case ${kind}`);
  }
}

/** How long before `now` each case's run starts, in seconds: waits stay ahead, late runs are past the deadline. */
const START_BEFORE_NOW = { wait: 240, late: 3600, current: 30 };

/** Receipt objects of `n` runs (10 receipts each), cycling through CASES. */
export function generateRuns(n, { now = DEFAULT_NOW, prefix = 'run' } = {}) {
  const nowMs = Date.parse(now);
  const out = [];
  for (let i = 0; i < n; i++) {
    const [kind] = CASES[i % CASES.length];
    const run = `${prefix}-${i}-${kind}`;
    const startMs = nowMs - (START_BEFORE_NOW[kind] ?? 1800) * 1000 - (i % 997) * 10;
    const shape = runShape(kind);
    let pad = 0;
    while (shape.length < RECEIPTS_PER_RUN) shape.push([20 + pad++, { type: 'outcome', from: O, verified: false }]);
    if (shape.length !== RECEIPTS_PER_RUN) throw new Error(`case ${kind} has ${shape.length} receipts`);
    shape.forEach(([offset, fields], k) => {
      const { deadlineOffset, ...rest } = fields;
      const r = { run, event: `ev${k}`, at: new Date(startMs + offset * 1000).toISOString(), version: '3', status: 'ok', ...rest };
      if (deadlineOffset !== undefined) r.deadline = new Date(startMs + (offset + deadlineOffset) * 1000).toISOString();
      out.push(r);
    });
  }
  return out;
}

/** NDJSON text of `n` runs. */
export function generateNdjson(n, opts = {}) {
  return generateRuns(n, opts).map((r) => JSON.stringify(r)).join('\n') + '\n';
}

/** The verdict each generated run is built to have: { runId: verdict }. */
export function expectedVerdicts(n, { prefix = 'run' } = {}) {
  const out = {};
  for (let i = 0; i < n; i++) {
    const [kind, verdict] = CASES[i % CASES.length];
    out[`${prefix}-${i}-${kind}`] = verdict;
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const nowIdx = args.indexOf('--now');
  const now = nowIdx >= 0 ? args.splice(nowIdx, 2)[1] : DEFAULT_NOW;
  const n = Number(args[0] ?? 10);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write('usage: node bench/gen-runs.mjs N [OUT.ndjson] [--now RFC3339]\n');
    process.exit(2);
  }
  const text = generateNdjson(n, { now });
  if (args[1]) writeFileSync(args[1], text);
  else process.stdout.write(text);
}
