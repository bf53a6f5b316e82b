/** The HTTP API, /metrics, health endpoints and the web view, on --port. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseReceiptLine } from '../core/receipt.js';
import { verdictJson } from '../core/meaning.js';
import { shadowJson } from '../core/shadow.js';
import type { AckRecord, Receipt, RunVerdict } from '../core/types.js';
import { ACK_BY, ackReasonProblem } from '../core/ack.js';
import { contentTypeFor, type AuditMetrics } from '../metrics/index.js';
import { ListCursorError, type AuditEngine, type ListedRun } from '../audit/engine.js';
import { ConsumeError, type Consumer, type IngestSource } from '../audit/consumer.js';
import { handoffBoard } from '../handoff/board.js';
import { parseDuration } from '../core/edge.js';
import type { SilenceView } from '../alerting/index.js';
import { readBody, withinBodyBudget, type BodyBudget } from './body.js';
import { crossSiteProblem, type WriteAuth } from './auth.js';
import { httpRefusal } from './refusal.js';

/** A route a caller adds to the API server (the UI, composed by src/cli): true when it answered the request. */
export type Route = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> | boolean;

export interface ApiOptions {
  /** An unexpected failure answered 500 (e.g. the store failed a read): logged, content-free (its class and message). */
  onError?: (error: Error) => void;
  maxBodyBytes: number;
  /** The bytes of bodies being read at once across listeners (--max-body-total); past it 503 + Retry-After before reading. */
  bodyBudget?: BodyBudget;
  retryAfterSeconds: number;
  /** Longest long-poll a client may ask for. */
  maxWaitSeconds: number;
  /** Long-polls (`wait` > 0) waiting at once; past it a long-poll is answered 429 with Retry-After (--max-long-polls). */
  maxLongPolls?: number;
  /** Authenticates an ingest request (POST /v1/receipts). */
  authenticateIngest: (req: IncomingMessage) => IngestSource | null;
  /** Authenticates an API read. */
  authenticateApi: (req: IncomingMessage) => boolean;
  /** Authorizes a write under /api/ (an acknowledgement, a silence) and names the writer; absent: anyone, as named by `by`. */
  authorizeWrite?: (req: IncomingMessage) => WriteAuth;
  /** Longest silence `ack --silence` may create (serve --alertmanager-max-silence). */
  maxSilenceMs?: number;
  /** Extra routes (e.g. the web view); return true when handled. */
  extraRoutes?: Route;
  ready: () => { ready: boolean; reasons: string[] };
  /** This instance's place in a cluster on a shared store (GET /api/v1/cluster). */
  cluster?: () => unknown;
  /** Recent traces that looked like an agent framework's but gave no receipt (GET /api/v1/ingest/unmapped). */
  unmapped?: () => unknown;
  /** Traces with no agent-like signal, per instrumentation scope (GET /api/v1/ingest/coverage). */
  coverage?: () => unknown;
  /** The OTLP/HTTP port, named in the 404 hint when a span export reaches the API port. */
  otlpHttpPort?: () => number;
  /** Acknowledge a run (POST /api/v1/runs/{run}/ack): it leaves the alerting series. */
  ack?: (run: string, who: { by: string | null; reason: string | null }) => Promise<{ acked: boolean; record: AckRecord } | null>;
  /** The alert window and stall time the gauges use (the runs list's `alerting` and `stalled`). */
  alertTimes?: { windowMs: number; stallMs: number };
  /** The Alertmanager silence that matches a run's alert (serve --alertmanager-url): shown on GET /api/v1/runs/{run}. */
  silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>;
  /** Creates an Alertmanager silence of a run's alerts (POST /api/v1/runs/{run}/ack?by=NAME&silence=DUR). */
  silence?: (run: string, by: string, ms: number, verdict: string, reason: string | null) => Promise<{ id: string; endsAt: string; alertmanager: string }>;
  /** The runbook page (GET /runbooks), the default runbook_url of per-run alerts. */
  runbooksHtml?: string;
  version?: string;
  /**
   * The clock verdicts are timed on (default Date.now): serve gives its verdict clock, in a cluster the database's
   * (this host's plus the offset measured with each heartbeat), so a run another instance holds answers here as there.
   */
  clock?: () => number;
  /** Waiting long-polls changed (for the topology_api_long_polls gauge). */
  onLongPolls?: (waiting: number) => void;
  /** An ingest request was refused by a live-state cap. */
  onLiveLimit?: (limit: 'runs' | 'receipts') => void;
}

/** At most this many rejected lines are listed in an NDJSON answer (the rest are only counted). */
export const MAX_LISTED_REJECTIONS = 100;
/** A listed rejection's reason is cut to this many characters. */
const MAX_REJECTION_CHARS = 300;

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

export async function runJson(engine: AuditEngine, run: string, silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>, now = Date.now()) {
  const r = await engine.fetch(run, now);
  if (!r) return null;
  const silence = silenceOf ? { silence: await silenceOf(r.verdict) } : {};
  const ack = await engine.fetchAck(run, now);
  return { ...verdictJson(r.verdict), ...(r.shadow ? { shadow: r.shadow.map(shadowJson) } : {}), ack: ack ? ackJson(ack) : null, ...silence, receipts: r.receipts, updatedAt: new Date(r.updatedAt).toISOString() };
}

/**
 * `ack --silence DUR`: an Alertmanager silence of the run's alerts, created by the server's Alertmanager client.
 * Checked before the acknowledgement; an Alertmanager that takes no silence answers 502 (the run stays acknowledged).
 */
function silenceArgs(url: URL, by: string | null, opts: ApiOptions): { ms: number } | { error: string; status: number } | null {
  const text = url.searchParams.get('silence');
  if (text === null) return null;
  const ms = parseDuration(text);
  if (ms === null || ms <= 0) return { status: 400, error: 'silence: a duration such as 30m, 4h or 2d' };
  if (opts.maxSilenceMs !== undefined && ms > opts.maxSilenceMs) return { status: 400, error: `silence: at most ${formatDays(opts.maxSilenceMs)} (serve --alertmanager-max-silence)` };
  if (!opts.silence) return { status: 400, error: 'silence: no Alertmanager is configured on this server (serve --alertmanager-url)' };
  if (by === null) return { status: 400, error: 'silence: needs by=NAME (Alertmanager records who created a silence)' };
  return { ms };
}

const formatDays = (ms: number) => (ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : `${Math.ceil(ms / 1000)}s`);

/** An acknowledgement as the API shows it (`current`: it covers the run's verdict now). */
export function ackJson(a: AckRecord & { current?: boolean }) {
  return { verdict: a.verdict, by: a.by, at: new Date(a.at).toISOString(), reason: a.reason, ...(a.current !== undefined ? { current: a.current } : {}) };
}

const flag = (v: string | null): boolean | undefined => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : undefined);

/**
 * Wait until the run's verdict is settled or `ms` pass; resolves with the latest verdict (or null if the run is
 * unknown). When `signal` aborts (the client went away), the listener and timer are released at once and the
 * promise resolves with null.
 */
export async function waitForSettled(engine: AuditEngine, run: string, ms: number, signal?: AbortSignal, clock: () => number = Date.now): Promise<RunVerdict | null> {
  const now = await engine.fetchVerdict(run, clock());
  // In a cluster a run not held here (another instance's, or not seen yet anywhere) is read again from the shared store:
  // no event reaches this instance for it (issue 32: within a poll of the owner's acknowledgement).
  if (!now?.settled && ms > 0 && engine.remote && engine.verdictOf(run) === null) return pollSettled(engine, run, now, ms, signal, clock);
  if ((now && now.settled) || ms <= 0) return Promise.resolve(now);
  if (signal?.aborted) return Promise.resolve(null);
  return new Promise((resolve) => {
    const onRun = (e: { run: string; verdict: RunVerdict }) => {
      if (e.run !== run || !e.verdict.settled) return;
      done(e.verdict);
    };
    const onAbort = () => done(null);
    const timer = setTimeout(() => done(engine.verdictOf(run)), ms);
    const done = (v: RunVerdict | null) => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      waitingPolls--;
      resolve(v);
    };
    waitingPolls++;
    const unsubscribe = engine.events.subscribe('runEvaluated', onRun);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The wait for a run another instance of the cluster holds: no event reaches this instance, so the shared store is
 * read again every 250 ms (or the run becomes live here, after a takeover).
 */
async function pollSettled(engine: AuditEngine, run: string, first: RunVerdict | null, ms: number, signal: AbortSignal | undefined, clock: () => number): Promise<RunVerdict | null> {
  const until = Date.now() + ms;
  let v: RunVerdict | null = first;
  waitingPolls++;
  try {
    while (Date.now() < until) {
      if (signal?.aborted) return null;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.min(250, Math.max(0, until - Date.now())));
        function done() {
          clearTimeout(t);
          signal?.removeEventListener('abort', done);
          resolve();
        }
        signal?.addEventListener('abort', done, { once: true });
      });
      if (signal?.aborted) return null;
      v = (await engine.fetchVerdict(run, clock(), 0)) ?? v;
      if (v?.settled) return v;
    }
    return v;
  } finally {
    waitingPolls--;
  }
}

let waitingPolls = 0;
/** Long-polls admitted under --max-long-polls and not answered yet. */
let admittedPolls = 0;
/** Long-polls currently waiting in this process. */
export const longPollsWaiting = () => waitingPolls;

/** Yield to the event loop (other connections, /healthz) between slices of CPU-bound work. */
const yieldNow = () => new Promise<void>((r) => setImmediate(r));

export function apiHandler(engine: AuditEngine, consumer: Consumer, metrics: AuditMetrics, opts: ApiOptions) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    // Lets clients (gate, ack) recognise the auditor's API, and tell it from its OTLP port.
    res.setHeader('x-topology-audit', 'api');
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        // A page on another site may post a form here (a "simple" request, no preflight): refused before anything changes.
        const crossSite = crossSiteProblem(req.headers);
        if (crossSite) {
          req.resume();
          return json(res, 403, { error: crossSite });
        }
      }
      if (path === '/healthz') return json(res, 200, { status: 'ok', service: 'topology-audit', version: opts.version });
      if (path === '/readyz') {
        const r = opts.ready();
        return json(res, r.ready ? 200 : 503, { ready: r.ready, reasons: r.reasons });
      }
      if (path === '/runbooks' && opts.runbooksHtml) {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': "default-src 'none'", 'x-content-type-options': 'nosniff' });
        res.end(opts.runbooksHtml);
        return;
      }
      if (path === '/metrics') {
        const { format, contentType } = contentTypeFor(req.headers.accept);
        res.writeHead(200, { 'content-type': contentType });
        res.end(metrics.render(format));
        return;
      }
      if (path === '/v1/receipts') {
        if (req.method !== 'POST') return json(res, 405, { error: 'use POST' }, { allow: 'POST' });
        const auth = opts.authenticateIngest(req);
        if (!auth) {
          req.resume();
          metrics.ingestRejected('ndjson', 'unauthenticated');
          return json(res, 401, { error: 'missing or invalid bearer token' }, { 'www-authenticate': 'Bearer' });
        }
        return await postReceipts(req, res, consumer, metrics, opts, auth);
      }
      if (path === '/v1/traces' || path.startsWith('/opentelemetry.proto.')) {
        req.resume();
        const port = opts.otlpHttpPort?.();
        return json(res, 404, { error: `this is the auditor's API port; send OTLP spans to the OTLP/HTTP port${port ? ` ${port}` : ''} (POST /v1/traces) or the OTLP/gRPC port` });
      }
      if (opts.extraRoutes && (await opts.extraRoutes(req, res, path))) return;
      if (path.startsWith('/api/')) {
        if (!opts.authenticateApi(req)) return json(res, 401, { error: 'missing or invalid bearer token' }, { 'www-authenticate': 'Bearer' });
        const ackMatch = /^\/api\/v1\/runs\/([^/]+)\/ack$/.exec(path);
        if (ackMatch && opts.ack) {
          if (req.method !== 'POST') return json(res, 405, { error: 'use POST' }, { allow: 'POST' });
          req.resume();
          const writer = opts.authorizeWrite?.(req) ?? { ok: true, name: null };
          if (!writer.ok) return json(res, writer.status, { error: writer.error }, writer.status === 401 ? { 'www-authenticate': 'Bearer' } : {});
          const asked = url.searchParams.get('by');
          if (asked !== null && !ACK_BY.test(asked)) return json(res, 400, { error: 'by: at most 64 of A-Z a-z 0-9 . _ @ -' });
          // With tokens, the writer is the token's name: `by` may repeat it, never name someone else.
          if (writer.name !== null && asked !== null && asked !== writer.name) return json(res, 400, { error: `by: this token acknowledges as ${writer.name}, not ${asked}` });
          const by = writer.name ?? asked;
          const reason = url.searchParams.get('reason');
          const bad = reason === null ? null : ackReasonProblem(reason);
          if (bad) return json(res, 400, { error: `reason: ${bad}` });
          const silenceReq = silenceArgs(url, by, opts);
          if (silenceReq && 'error' in silenceReq) return json(res, silenceReq.status, { error: silenceReq.error });
          const run = decodePathSegment(ackMatch[1]);
          const r = await opts.ack(run, { by, reason: reason || null });
          if (!r) return json(res, 404, { error: `unknown run ${run.slice(0, 200)}` });
          const answer = { run, acked: true, at: new Date(r.record.at).toISOString(), already: !r.acked, ack: ackJson(r.record) };
          if (!silenceReq) return json(res, 200, answer);
          const verdict = engine.verdictOf(run)?.verdict ?? (await engine.fetchVerdict(run, (opts.clock ?? Date.now)()))?.verdict ?? 'unknown';
          try {
            const silence = await opts.silence!(run, by!, silenceReq.ms, verdict, reason || null);
            return json(res, 200, { ...answer, silence });
          } catch (e) {
            return json(res, 502, { ...answer, error: `acknowledged, but no Alertmanager created the silence: ${(e as { reason?: string }).reason ?? 'request failed'}` });
          }
        }
        if (req.method !== 'GET') return json(res, 405, { error: 'use GET' }, { allow: 'GET' });
        return await apiGet(url, res, engine, opts);
      }
      return json(res, 404, { error: `no such endpoint ${path.slice(0, 80)}` });
    } catch (e) {
      const r = httpRefusal(e, opts.retryAfterSeconds);
      if (r.status !== 500) {
        // Of the refusals, only a live limit is counted as a refused NDJSON request here (as before the consumer split).
        if (r.limit) {
          metrics.ingestRejected('ndjson', 'live_limit');
          opts.onLiveLimit?.(r.limit);
        }
        return json(res, r.status, { error: r.message }, r.headers);
      }
      opts.onError?.(e as Error);
      return json(res, 500, { error: 'internal error' });
    }
  };
}

/**
 * POST /v1/receipts. The admission slot is taken only once the body is complete (a slow body holds a connection,
 * never a slot); the body is parsed in slices that yield to the event loop; the answer lists at most the first
 * MAX_LISTED_REJECTIONS rejected lines and counts the rest.
 */
async function postReceipts(req: IncomingMessage, res: ServerResponse, consumer: Consumer, metrics: AuditMetrics, opts: ApiOptions, auth: IngestSource) {
  const ct = String(req.headers['content-type'] ?? 'application/x-ndjson').split(';')[0].trim().toLowerCase();
  if (!['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'application/json', 'text/plain'].includes(ct)) {
    req.resume();
    metrics.ingestRejected('ndjson', 'bad_content_type');
    return json(res, 415, { error: 'send NDJSON receipts as application/x-ndjson' });
  }
  if (consumer.saturated) {
    req.resume();
    throw ConsumeError.saturated();
  }
  const body = await withinBodyBudget(req, opts.bodyBudget, opts.maxBodyBytes, () => readBody(req, opts.maxBodyBytes));
  const release = consumer.admit();
  try {
    const { receipts, lines, invalid, invalidCount } = await parseReceiptLines(body.toString('utf8'), metrics);
    const out = await consumer.consumeReceipts(receipts, auth);
    if (out.liveLimit) opts.onLiveLimit?.(out.liveLimit);
    // The first MAX_LISTED_REJECTIONS rejected lines, unparsable or refused, in line order.
    const refused = out.refused.map((f) => ({ line: lines[f.index], error: f.reason }));
    const rejectedCount = invalidCount + refused.length;
    const rejected = mergeByLine(invalid, refused).slice(0, MAX_LISTED_REJECTIONS).map(({ line, error }) => ({ line, error: error.length > MAX_REJECTION_CHARS ? `${error.slice(0, MAX_REJECTION_CHARS)}…` : error }));
    metrics.ingestRequest('ndjson', 200);
    return json(res, 200, { accepted: out.accepted, duplicates: out.duplicates, conflicts: out.conflicts, rejected, rejectedCount, rejectedTruncated: rejectedCount > rejected.length });
  } finally {
    release();
  }
}

/** Two lists sorted by line, merged in line order. */
function mergeByLine<T extends { line: number }>(a: T[], b: T[]): T[] {
  const out: T[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) out.push(j >= b.length || (i < a.length && a[i].line <= b[j].line) ? a[i++] : b[j++]);
  return out;
}

/**
 * An NDJSON body, parsed in slices that yield to the event loop: the receipts and their line numbers, and the
 * first MAX_LISTED_REJECTIONS lines that are not valid receipts (all counted).
 */
async function parseReceiptLines(text: string, metrics: AuditMetrics) {
  const receipts: Receipt[] = [];
  const lines: number[] = [];
  const invalid: { line: number; error: string }[] = [];
  let invalidCount = 0;
  let start = 0;
  let lineNo = 0;
  let sliceStart = performance.now();
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    lineNo++;
    const l = text.slice(start, end).trim();
    start = end + 1;
    if ((lineNo & 63) === 0 && performance.now() - sliceStart > 8) {
      await yieldNow();
      sliceStart = performance.now();
    }
    if (l === '') continue;
    const result = parseReceiptLine(l);
    if (!result.ok) {
      invalidCount++;
      if (invalid.length < MAX_LISTED_REJECTIONS) invalid.push({ line: lineNo, error: result.error });
      metrics.receipt('invalid', 'rejected');
      metrics.ingestRefused('receipt_invalid');
      continue;
    }
    receipts.push(result.receipt);
    lines.push(lineNo);
  }
  return { receipts, lines, invalid, invalidCount };
}

/**
 * One URL-encoded path segment (a run id carries `/` as `%2F`). A malformed percent-escape (`%E0%A4%A`, `%zz`) is
 * the client's error: 400 with the reason, never a 500.
 */
export function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ConsumeError('bad_request', `malformed percent-escape in the path segment ${JSON.stringify(segment.slice(0, 200))}: each % must start a valid UTF-8 escape (%XX)`);
  }
}

async function apiGet(url: URL, res: ServerResponse, engine: AuditEngine, opts: ApiOptions) {
  const clock = opts.clock ?? Date.now;
  const parts = url.pathname.split('/').filter(Boolean).map(decodePathSegment); // api v1 ...
  if (parts[0] !== 'api' || parts[1] !== 'v1') return json(res, 404, { error: 'unknown API version' });
  const [, , resource, id, sub] = parts;
  if (resource === 'runs' && id === undefined) {
    const limit = Math.min(Math.max(Number(url.searchParams.get('limit') ?? 100) || 100, 1), 10_000);
    const q = url.searchParams;
    const order = q.get('order') ?? 'newest';
    if (order !== 'newest' && order !== 'oldest') return json(res, 400, { error: 'order: newest or oldest' });
    for (const k of ['acked', 'alerting', 'stalled']) if (q.has(k) && flag(q.get(k)) === undefined) return json(res, 400, { error: `${k}: true or false` });
    // Cursor paging: `after` is the `next` of the page before (null on the last page).
    let page: { runs: ListedRun[]; next: string | null };
    try {
      page = await engine.listPage(
        { verdict: q.get('verdict') || undefined, contract: q.get('contract') || undefined, limit, oldest: order === 'oldest', acked: flag(q.get('acked')), alerting: flag(q.get('alerting')), stalled: flag(q.get('stalled')), after: q.get('after') || undefined, ...opts.alertTimes },
        clock(),
      );
    } catch (e) {
      if (e instanceof ListCursorError) return json(res, 400, { error: e.message });
      throw e;
    }
    const rows = page.runs;
    return json(res, 200, {
      next: page.next,
      runs: rows.map((r) => ({
        run: r.verdict.run,
        pin: r.verdict.pin,
        verdict: r.verdict.verdict,
        naive: r.verdict.naive,
        settled: r.verdict.settled,
        findings: r.verdict.findings.length,
        firstFinding: r.verdict.findings.find((f) => f.verdict === r.verdict.verdict)?.message ?? null,
        startedAt: Number.isFinite(r.firstAt) ? new Date(r.firstAt).toISOString() : null,
        updatedAt: new Date(r.updatedAt).toISOString(),
        acked: r.alert?.acked ?? null,
        alerting: r.alert?.alerting ?? null,
        stalled: r.alert?.stalled ?? null,
      })),
    });
  }
  if (resource === 'runs' && id !== undefined && sub === undefined) {
    const body = await runJson(engine, id, opts.silenceOf, clock());
    return body ? json(res, 200, body) : json(res, 404, { error: `unknown run ${id}` });
  }
  if (resource === 'runs' && id !== undefined && sub === 'verdict') {
    const wait = Math.min(Math.max(Number(url.searchParams.get('wait') ?? 0) || 0, 0), opts.maxWaitSeconds);
    if (wait > 0 && opts.maxLongPolls !== undefined && admittedPolls >= opts.maxLongPolls) {
      // Bounded: long-polls cannot take every connection of the API port (health checks, reads, ingest need some).
      return json(res, 429, { error: `${opts.maxLongPolls} long-polls are waiting (--max-long-polls); retry later, or ask without wait` }, { 'retry-after': String(opts.retryAfterSeconds) });
    }
    // A client that goes away releases its wait (listener and timer) at once.
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.once('close', onClose);
    opts.onLongPolls?.(waitingPolls + 1);
    let v: RunVerdict | null;
    const counted = wait > 0;
    if (counted) admittedPolls++; // counted at once: the cap holds for a burst arriving in one turn
    try {
      v = await waitForSettled(engine, id, wait * 1000, gone.signal, clock);
    } finally {
      if (counted) admittedPolls--;
      res.off('close', onClose);
      opts.onLongPolls?.(waitingPolls);
    }
    if (gone.signal.aborted) return;
    return v ? json(res, 200, verdictJson(v)) : json(res, 404, { error: `unknown run ${id}` });
  }
  if (resource === 'ingest' && id === 'unmapped' && sub === undefined && opts.unmapped) return json(res, 200, opts.unmapped());
  if (resource === 'ingest' && id === 'coverage' && sub === undefined && opts.coverage) return json(res, 200, opts.coverage());
  if (resource === 'cluster' && id === undefined) return json(res, 200, opts.cluster?.() ?? { store: 'sqlite', instances: 1 });
  if (resource === 'shadow' && id === undefined) {
    return json(res, 200, { candidates: engine.shadowSummary() });
  }
  if (resource === 'runs' && id !== undefined && sub === 'handoffs') {
    const r = await engine.fetch(id, clock()); // the operator's handoff board (docs/handoffs.md)
    return r ? json(res, 200, handoffBoard(id, r.receipts, clock())) : json(res, 404, { error: `unknown run ${id}` });
  }
  if (resource === 'contracts' && id === undefined) {
    return json(res, 200, {
      contracts: engine.registry.all().map((c) => ({ contract: c.contract, version: c.version, retired: c.retired, hash: c.hash, owner: c.owner, phases: c.phases.map((p) => p.name) })),
    });
  }
  if (resource === 'contracts' && id !== undefined && sub !== undefined) {
    const c = engine.registry.get(id, sub);
    if (!c) return json(res, 404, { error: `unknown contract ${id} version ${sub}` });
    return json(res, 200, { ...JSON.parse(c.canonical), hash: c.hash });
  }
  if (resource === 'contracts' && id !== undefined) {
    const versions = engine.registry.versions(id);
    if (!versions.length) return json(res, 404, { error: `unknown contract ${id}` });
    return json(res, 200, { contract: id, versions: versions.map((c) => ({ version: c.version, retired: c.retired, hash: c.hash })) });
  }
  return json(res, 404, { error: `no such endpoint ${url.pathname.slice(0, 80)}` });
}
