/**
 * Exact inputs on every path (issue 28):
 * - impossible calendar dates and times (2026-02-30, 2026-04-31, 24:00:00, a 60th second) are refused with the
 *   reason, like other invalid times, wherever a time is read from text: receipt lines (replay and the server),
 *   explicit span receipts, handoff documents, `handoff audit` lines, `--now`;
 * - run and event ids: not `.` or `..`, no empty, `.` or `..` segment between `/`, with one validator on every path;
 * - a malformed percent-escape in an API path answers 400 with the reason (it was a 500), and a run id with `/`
 *   encoded as %2F still reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReceiptFileError, isRunId, parseReceiptFile, parseReceiptLine, runIdError, validateReceipt } from '../src/core/receipt.js';
import { instantTextError } from '../src/core/time.js';
import { checkedReceipt, explicitReceipt } from '../src/ingest/extract.js';
import { handoffStateDocSchema, handoffSchema } from '../src/handoff/schema.js';
import { ReceiptLineError, parseReceiptLines } from '../src/handoff/ndjson.js';
import { UsageError, parseInstantArg } from '../src/cli/io.js';
import { SpanPipeline, parseLoggedSpan } from '../src/ingest/pipeline.js';
import type { SpanRecord } from '../src/otlp/types.js';
import { runCli, startServerProcess, type ServerProcess } from './helpers/server.js';

const IMPOSSIBLE: [string, RegExp][] = [
  ['2026-02-30T00:00:00Z', /2026-02 has no day 30/],
  ['2025-02-29T12:00:00Z', /2025-02 has no day 29/],
  ['2026-04-31T00:00:00.5Z', /2026-04 has no day 31/],
  ['2026-01-01T24:00:00Z', /hour 24/],
  ['2026-01-01T23:59:60Z', /second 60/],
  ['2026-13-01T00:00:00Z', /month 13/],
  ['2026-01-01T00:00:00+24:00', /offset/],
];
const line = (at: string, extra: Record<string, unknown> = {}) => JSON.stringify({ run: 'r1', event: 'e1', type: 'edge', from: 'a', to: 'b', kind: 'delegate', at, ...extra });

describe('impossible dates are refused with the reason', () => {
  it('the one check: impossible ones refused, real ones (a leap day, 23:59:59.999999999, any case) accepted', () => {
    for (const [t, why] of IMPOSSIBLE) expect(instantTextError(t), t).toMatch(why);
    for (const t of ['2024-02-29T00:00:00Z', '2026-12-31T23:59:59.999999999Z', '2026-01-01t00:00:00z', '2026-01-01 00:00:00+23:59', '2000-02-29T00:00:00-00:00']) expect(instantTextError(t), t).toBeNull();
    expect(instantTextError('2026-01-01T00:00:00.1234567891Z')).toMatch(/at most nine fraction digits/);
  });

  it('receipt lines (server and replay), wait deadlines and handoff leases', () => {
    for (const [t, why] of IMPOSSIBLE) {
      const r = parseReceiptLine(line(t));
      expect(r.ok).toBe(false);
      expect(!r.ok && r.error).toMatch(new RegExp(`^at: .*${why.source}`));
    }
    const w = validateReceipt({ run: 'r1', event: 'w', type: 'wait', at: '2026-02-01T00:00:00Z', on: 'c', edge: 'a -> b : delegate', deadline: '2026-02-30T00:00:00Z' });
    expect(!w.ok && w.error).toMatch(/^deadline: not a calendar date: 2026-02 has no day 30/);
    const h = validateReceipt({ run: 'r1', event: 'h', type: 'handoff', at: '2026-02-01T00:00:00Z', handoff: 'h1', state: 'ADMITTED', leaseExpiresAt: '2026-02-01T24:00:00Z' });
    expect(!h.ok && h.error).toMatch(/^leaseExpiresAt: not a time of day: hour 24/);
    expect(() => parseReceiptFile(`${line('2026-02-01T00:00:00Z')}\n${line('2026-02-30T00:00:00Z', { event: 'e2' })}\n`, 'in.ndjson')).toThrow(ReceiptFileError);
    expect(() => parseReceiptFile(`${line('2026-02-30T00:00:00Z')}\n`, 'in.ndjson')).toThrow(/in\.ndjson:1: at: not a calendar date/);
  });

  it('explicit span receipts: the fast path refuses what the schema refuses', () => {
    const raw = { run: 'r1', event: 'e1', at: '2026-02-30T00:00:00Z' };
    expect(checkedReceipt('run.end', { ...raw, result: 'completed' })).toBeNull();
    expect(checkedReceipt('run.end', { ...raw, at: '2026-03-02T00:00:00Z', result: 'completed' })).not.toBeNull();
    const wait = explicitReceipt({ 'topology.event.type': 'wait', 'topology.wait.on': 'c', 'topology.wait.edge': 'a -> b : delegate', 'topology.wait.deadline': '2026-02-30T00:00:00Z' }, { run: 'r1', event: 'e1' }, Date.parse('2026-02-01T00:00:00Z'), 0);
    expect('reason' in wait && wait.reason).toMatch(/deadline: not a calendar date: 2026-02 has no day 30/);
  });

  it('handoff documents, handoff audit lines and --now', () => {
    const state = handoffStateDocSchema.safeParse({ now: '2026-02-30T00:00:00Z', stateVersion: 1, cancelled: false, activeLeases: [] });
    expect(state.success).toBe(false);
    expect(state.error!.issues[0]).toMatchObject({ path: ['now'], message: 'not a calendar date: 2026-02 has no day 30' });
    const nine = handoffStateDocSchema.safeParse({ now: '2026-02-01T00:00:00.1234567891Z', stateVersion: 1, cancelled: false, activeLeases: [] });
    expect(nine.success).toBe(false);
    expect(handoffSchema.shape.leaseExpiresAt.safeParse('2026-06-31T00:00:00Z').error!.issues[0].message).toMatch(/2026-06 has no day 31/);
    expect(() => parseReceiptLines(line('2026-02-01T24:00:00Z', { type: 'run.end', result: 'completed' }))).toThrow(/line 1: at: not an RFC 3339 time: not a time of day: hour 24/);
    expect(() => parseInstantArg('--now', '2026-02-30T00:00:00Z')).toThrow(UsageError);
    expect(() => parseInstantArg('--now', '2026-02-30T00:00:00Z')).toThrow(/--now: not an RFC 3339 time \(not a calendar date: 2026-02 has no day 30\)/);
    expect(parseInstantArg('--now', '2026-03-02T00:00:00.0004Z')).toEqual({ ms: Date.parse('2026-03-02T00:00:00Z'), ns: 400_000 });
  });
});

describe('run and event ids can be addressed', () => {
  const BAD = ['.', '..', '../x', 'x/..', 'a//b', '/a', 'a/', 'run/.', './run', 'a/./b', 'a/../b'];
  const GOOD = ['tenant-7/run-42', 'run-42/3', '.a', 'a.', 'a..b', '...', 'a/.b/..c', 'x'];

  it('one validator: refused and accepted alike by every path', () => {
    for (const id of BAD) {
      expect(isRunId(id), id).toBe(false);
      expect(runIdError(id), id).toMatch(/segment/);
      for (const field of ['run', 'event']) {
        const r = parseReceiptLine(JSON.stringify({ run: 'r1', event: 'e1', type: 'run.end', result: 'completed', at: '2026-02-01T00:00:00Z', [field]: id }));
        expect(!r.ok && r.error, `${field} ${id}`).toMatch(new RegExp(`^${field}: a run or event id`));
        expect(checkedReceipt('run.end', { run: 'r1', event: 'e1', at: '2026-02-01T00:00:00Z', result: 'completed', [field]: id })).toBeNull();
      }
      const span = explicitReceipt({ 'topology.event.type': 'run.end', 'topology.run.result': 'completed' }, { run: id, event: 'e1' }, Date.parse('2026-02-01T00:00:00Z'), 0);
      expect('code' in span && span.code, id).toBe('run_id_invalid');
      expect(() => parseReceiptLines(JSON.stringify({ run: id, event: 'e1', type: 'run.end', result: 'completed', at: '2026-02-01T00:00:00Z' }))).toThrow(ReceiptLineError);
    }
    for (const id of GOOD) {
      expect(runIdError(id), id).toBeNull();
      expect(parseReceiptLine(JSON.stringify({ run: id, event: id, type: 'run.end', result: 'completed', at: '2026-02-01T00:00:00Z' })).ok, id).toBe(true);
    }
  });

  it('a dialect span (GenAI invoke_agent) naming such a run is refused whole; the span log refuses it on replay', () => {
    const span = (run: string): SpanRecord => ({
      traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', parentSpanId: null, name: 'invoke_agent researcher', kind: 1, startMs: 1_000, endMs: 2_000, statusCode: 1,
      attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', 'topology.run.id': run }, events: [], links: [],
    });
    const logged = { t: '0af7651916cd43dd8448eb211c80319c', s: 'b7ad6b7169203331', p: null, src: 'tok', op: 'agent', st: 1, en: 2, sc: 0, agent: 'researcher' };
    for (const id of BAD) {
      const out = new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 }).process([span(id)], 0, 'tok');
      expect(out.rejected.map((r) => r.code), id).toEqual(['run_id_invalid']);
      expect(out.receipts, id).toEqual([]);
      expect(out.pendingLog, id).toEqual([]);
      expect(parseLoggedSpan({ ...logged, run: id }), id).toBeNull();
    }
    for (const id of GOOD) {
      expect(new SpanPipeline({ waitMs: 10_000, maxSpans: 1000 }).process([span(id)], 0, 'tok').rejected, id).toEqual([]);
      expect(parseLoggedSpan({ ...logged, run: id }), id).not.toBeNull();
    }
  });

  it('the CLI refuses such a run id with the reason (exit 2) before asking any server: gate, ack, diff, handoff board', async () => {
    const dead = 'http://127.0.0.1:9'; // nothing listens: the refusal must come first, not "unreachable"
    const cases: [string[], RegExp][] = [
      [['gate', '..', '--server', dead, '--timeout', '1s'], /^topology-audit gate: RUN: not a run id: a run or event id is not "\." or "\.\."/],
      [['ack', '../x', '--server', dead], /^topology-audit ack: RUN: not a run id: .*\("\.\.\/x"\)/],
      [['diff', 'a//b', '--server', dead], /^topology-audit diff: RUN: not a run id: a run or event id has no empty "\/"-separated segment/],
      [['diff', 'receipts/drift.ndjson', '--contracts', 'contracts', '--run', 'run/.'], /^topology-audit diff: --run: not a run id: /],
      [['handoff', 'board', 'run/..', '--server', dead], /^handoff board: RUN: not a run id: /],
      [['gate', 'patient Jane Doe', '--server', dead, '--timeout', '1s'], /^topology-audit gate: RUN: not a run id: a run or event id: 1-200 of letters/],
    ];
    const results = await Promise.all(cases.map(([args]) => runCli(args)));
    results.forEach((r, i) => {
      expect(r.code, cases[i][0].join(' ')).toBe(2);
      expect(r.stderr, cases[i][0].join(' ')).toMatch(cases[i][1]);
      expect(r.stderr).not.toMatch(/unreachable/);
    });
    // a valid id with '/' passes the check and reaches the (dead) server
    const ok = await runCli(['gate', 'tenant-7/run-42', '--server', dead, '--timeout', '1s']);
    expect(ok.code).toBe(2);
    expect(ok.stderr).toMatch(/unreachable/);
  });
});

describe('the API path', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a malformed percent-escape is a 400 with the reason; an encoded "/" in a run id reads; ".." is refused at ingest', async () => {
    for (const path of ['/api/v1/runs/%E0%A4%A', '/api/v1/runs/%E0%A4%A/verdict', '/api/v1/runs/%zz/handoffs', '/api/v1/contracts/%C3']) {
      const r = await fetch(`${server.api}${path}`);
      expect(r.status, path).toBe(400);
      expect((await r.json()).error, path).toMatch(/^malformed percent-escape in the path segment ".*": each % must start a valid UTF-8 escape/);
    }
    const ack = await fetch(`${server.api}/api/v1/runs/%E0%A4%A/ack`, { method: 'POST' });
    expect(ack.status).toBe(400);
    const body = [
      JSON.stringify({ run: 'tenant-7/run-42', event: 'e1', type: 'run.start', contract: 'research-publish', at: '2026-02-01T00:00:00Z' }),
      JSON.stringify({ run: '..', event: 'e1', type: 'run.start', contract: 'research-publish', at: '2026-02-01T00:00:00Z' }),
      JSON.stringify({ run: 'r-ok', event: 'e1', type: 'run.start', contract: 'research-publish', at: '2026-02-30T00:00:00Z' }),
    ].join('\n');
    const post = await fetch(`${server.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    expect(post.status).toBe(200);
    const answer = await post.json();
    expect(answer.accepted).toBe(1);
    expect(answer.rejected.map((x: { line: number }) => x.line)).toEqual([2, 3]);
    expect(answer.rejected[0].error).toMatch(/^run: a run or event id is not "\." or "\.\."/);
    expect(answer.rejected[1].error).toMatch(/^at: not a calendar date: 2026-02 has no day 30/);
    // such an id names no stored run: reading it or its verdict is an unknown run (404, as for any id never stored).
    // Encoded, it is one path segment ('../x' -> '..%2Fx'), so neither client nor server normalises it into another path.
    for (const id of ['../x', 'a//b', 'run/.', 'x/..']) {
      for (const sub of ['', '/verdict', '/handoffs']) {
        const r = await fetch(`${server.api}/api/v1/runs/${encodeURIComponent(id)}${sub}`);
        expect(r.status, `${id}${sub}`).toBe(404);
        expect((await r.json()).error, `${id}${sub}`).toBe(`unknown run ${id}`);
      }
    }
    const run = await fetch(`${server.api}/api/v1/runs/${encodeURIComponent('tenant-7/run-42')}`);
    expect(run.status).toBe(200);
    expect((await run.json()).run).toBe('tenant-7/run-42');
  });
});
