/**
 * The web view, served on the API port: a single page (run list, run page, contract pages) with client-side
 * routing, its JSON endpoints under /ui/api, and live run updates as server-sent events on /ui/events.
 * Everything is served from this process (strict Content-Security-Policy: no CDN, no external request).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunVerdict } from '../core/types.js';
import { ListCursorError, type AuditEngine } from '../audit/engine.js';
import type { SilenceView } from '../alerting/silences.js';
import { ICON_SVG, STYLE_CSS } from './style.js';
import { handoffBoard } from '../handoff/board.js';
import { contractView, contractsSummary, listRuns, rowOf, runView } from './view.js';

export type Route = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> | boolean;

export interface UiOptions {
  /** Authenticates the view's data requests (/ui/api, /ui/events); all allowed when absent. */
  authenticate?: (req: IncomingMessage) => boolean;
  /** The view's data needs a token (serve --api-tokens): the page asks for one and keeps it for the session. */
  tokensRequired?: boolean;
  /** Clock (ms since epoch). */
  now?: () => number;
  /** How often run updates are gathered into one server-sent event batch. */
  flushMs?: number;
  /** Keep-alive comment interval on the event stream. */
  keepAliveMs?: number;
  /** Above this many changed runs in one batch, clients are told to refetch instead. */
  maxBatch?: number;
  /** Open event streams at most; more are answered 503 with Retry-After. */
  maxStreams?: number;
  /** A stream whose unsent output exceeds this many bytes (a reader that stopped reading) is closed. */
  maxStreamBufferBytes?: number;
  /** Open event streams changed. */
  onStreams?: (open: number) => void;
  /** A stream was refused (too_many) or closed because its reader fell behind (slow_reader). */
  onStreamDropped?: (why: 'slow_reader' | 'too_many') => void;
  /** The Alertmanager silence that matches a run's alert, shown on the run page (serve --alertmanager-url). */
  silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>;
}

export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export function shellHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>topology-audit</title>
<link rel="icon" href="/ui/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/app.css">
<script type="module" src="/ui/client/app.js"></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar">
  <div class="topbar-inner">
    <a class="brand" href="/" data-nav><img src="/ui/icon.svg" alt="" width="22" height="22"><span>topology-audit</span></a>
    <nav aria-label="Main">
      <a href="/" data-nav data-section="runs">Runs</a>
      <a href="/contracts" data-nav data-section="contracts">Contracts</a>
      <a href="/shadow" data-nav data-section="shadow">Shadow</a>
    </nav>
    <span id="live" class="live" role="status" aria-live="polite" data-state="connecting">Connecting…</span>
  </div>
</header>
<main id="main" tabindex="-1"><p class="muted">Loading…</p></main>
<noscript><p class="noscript">This view needs JavaScript. The same data is served by the API at <a href="/api/v1/runs">/api/v1/runs</a>.</p></noscript>
</body>
</html>
`;
}

/** Where the compiled browser modules are: next to this file once built, else in dist/ (running from src). */
function findClientDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, 'client'), join(here, '..', '..', 'dist', 'ui', 'client')];
  return candidates.find((d) => existsSync(join(d, 'app.js'))) ?? null;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, extra: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': type, ...SECURITY_HEADERS, ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(body), { 'cache-control': 'no-store', ...extra });
}

/** Live run updates to every open page, gathered into batches. */
class RunEvents {
  private readonly clients = new Set<ServerResponse>();
  private readonly dirty = new Set<string>();
  private flushTimer: NodeJS.Timeout | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  private readonly servers = new Set<Server>();
  /** Subscribed to the engine's evaluations while a page is open (the unsubscribe). */
  private unsubscribe: (() => void) | null = null;
  private readonly onRun = ({ run }: { run: string }) => {
    this.dirty.add(run);
    if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), this.opts.flushMs);
  };

  constructor(
    private readonly engine: AuditEngine,
    private readonly opts: Required<Pick<UiOptions, 'flushMs' | 'keepAliveMs' | 'maxBatch' | 'maxStreams' | 'maxStreamBufferBytes'>> & Pick<UiOptions, 'onStreams' | 'onStreamDropped'>,
  ) {}

  /**
   * Write to one stream, respecting backpressure: output the socket has not taken yet is buffered up to
   * maxStreamBufferBytes; a reader that falls further behind is disconnected (it reconnects and refetches).
   */
  private send(c: ServerResponse, payload: string): void {
    if (c.destroyed) return;
    if (c.writableLength + payload.length > this.opts.maxStreamBufferBytes) {
      this.opts.onStreamDropped?.('slow_reader');
      this.drop(c);
      c.destroy();
      return;
    }
    c.write(payload);
  }

  private drop(c: ServerResponse): void {
    if (!this.clients.delete(c)) return;
    this.opts.onStreams?.(this.clients.size);
    if (this.clients.size === 0) this.idle();
  }

  open(req: IncomingMessage, res: ServerResponse): void {
    if (this.clients.size >= this.opts.maxStreams) {
      this.opts.onStreamDropped?.('too_many');
      send(res, 503, 'text/plain; charset=utf-8', 'too many open event streams; retry later', { 'retry-after': '5', 'cache-control': 'no-store' });
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      // The stream is the connection's last response: when it ends (client gone, server stopping) the socket
      // closes with it instead of idling in keep-alive and holding a shutdown open.
      connection: 'close',
      'x-accel-buffering': 'no',
      ...SECURITY_HEADERS,
    });
    res.write(`retry: 1500\nevent: hello\ndata: ${JSON.stringify({ now: new Date().toISOString() })}\n\n`);
    if (this.clients.size === 0) this.unsubscribe ??= this.engine.events.subscribe('runEvaluated', this.onRun);
    this.clients.add(res);
    this.opts.onStreams?.(this.clients.size);
    const server = (req.socket as unknown as { server?: Server }).server;
    if (server) this.servers.add(server);
    this.watch();
    const close = () => this.drop(res);
    req.on('close', close);
    res.on('close', close);
  }

  /** Keep-alives, and end every stream once the server stops listening (so a shutdown is not held open). */
  private watch(): void {
    if (this.watchTimer) return;
    let sinceKeepAlive = 0;
    const step = 500;
    this.watchTimer = setInterval(() => {
      if ([...this.servers].some((s) => !s.listening)) {
        for (const c of [...this.clients]) c.end();
        this.clients.clear();
        this.opts.onStreams?.(0);
        this.idle();
        return;
      }
      sinceKeepAlive += step;
      if (sinceKeepAlive >= this.opts.keepAliveMs) {
        sinceKeepAlive = 0;
        for (const c of [...this.clients]) this.send(c, ': keep-alive\n\n');
      }
    }, step);
    this.watchTimer.unref();
  }

  private idle(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    if (this.watchTimer) clearInterval(this.watchTimer);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.watchTimer = null;
    this.flushTimer = null;
    this.dirty.clear();
    this.servers.clear();
  }

  private flush(): void {
    this.flushTimer = null;
    const runs = [...this.dirty];
    this.dirty.clear();
    if (!runs.length || !this.clients.size) return;
    let payload: string;
    if (runs.length > this.opts.maxBatch) {
      payload = `event: refresh\ndata: ${JSON.stringify({ changed: runs.length })}\n\n`;
    } else {
      payload = '';
      for (const run of runs) {
        const row = rowOf(this.engine, run);
        if (row) payload += `event: run\ndata: ${JSON.stringify(row)}\n\n`;
      }
    }
    for (const c of [...this.clients]) this.send(c, payload);
  }
}

/** The web view's session: GET says whether a token is needed and held; POST (the token as a bearer) keeps it; DELETE forgets it. */
export const SESSION_PATH = '/ui/session';
/** The cookie the view's requests and event stream carry the token in (read by serve's authenticator). */
export const SESSION_COOKIE = 'topology_audit_token';

/** The token of an `Authorization: Bearer TOKEN` header. */
function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1];
}

/**
 * The session cookie: HttpOnly (scripts never read it), SameSite=Strict (never sent from another site), scoped to
 * /ui (the view's data and event stream, not the API), Secure on TLS, and with no Max-Age: it ends with the browser
 * session. The token is checked before it is kept.
 */
export function sessionCookie(token: string | null, secure: boolean): string {
  const value = token === null ? '' : encodeURIComponent(token);
  return `${SESSION_COOKIE}=${value}; Path=/ui; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}${token === null ? '; Max-Age=0' : ''}`;
}

function session(req: IncomingMessage, res: ServerResponse, options: UiOptions): void {
  const required = !!options.tokensRequired;
  const secure = !!(req.socket as { encrypted?: boolean }).encrypted;
    if (req.method === 'GET' || req.method === 'HEAD') {
    sendJson(res, 200, { required, signedIn: !required || !options.authenticate || options.authenticate(req) });
  } else if (req.method === 'POST') {
    req.resume();
    const token = bearerToken(req.headers.authorization);
    if (!required) sendJson(res, 200, { required, signedIn: true });
    else if (!token || !options.authenticate?.(req)) sendJson(res, 401, { error: 'that token is not accepted: give a viewer or API token of this auditor' });
    else sendJson(res, 200, { required, signedIn: true }, { 'set-cookie': sessionCookie(token, secure) });
  } else if (req.method === 'DELETE') {
    req.resume();
    sendJson(res, 200, { required, signedIn: !required }, { 'set-cookie': sessionCookie(null, secure) });
  } else {
    req.resume();
    send(res, 405, 'text/plain; charset=utf-8', 'use GET, POST or DELETE', { allow: 'GET, HEAD, POST, DELETE' });
  }
}

function segments(path: string): string[] | null {
  try {
    return path.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return null;
  }
}

/** The view's static files (its style, icon and client modules, read once from the build); false for other paths. */
function sendAsset(res: ServerResponse, path: string, clientDir: string | null, assets: Map<string, Buffer>): boolean {
  if (path === '/ui/app.css') {
    send(res, 200, 'text/css; charset=utf-8', STYLE_CSS, { 'cache-control': 'no-cache' });
    return true;
  }
  if (path === '/ui/icon.svg') {
    send(res, 200, 'image/svg+xml', ICON_SVG, { 'cache-control': 'max-age=86400' });
    return true;
  }
  const m = /^\/ui\/client\/([a-z][a-z0-9-]*\.js(?:\.map)?)$/.exec(path);
  if (!m) return false;
  let body = assets.get(m[1]);
  if (!body && clientDir && existsSync(join(clientDir, m[1]))) {
    body = readFileSync(join(clientDir, m[1]));
    assets.set(m[1], body);
  }
  if (!body) send(res, 404, 'text/plain; charset=utf-8', clientDir ? 'no such file' : 'the web view is not built: run npm run build');
  else send(res, 200, m[1].endsWith('.map') ? 'application/json' : 'text/javascript; charset=utf-8', body, { 'cache-control': 'no-cache' });
  return true;
}

/** GET /ui/api/runs: a page of the run list, filtered by verdict, contract and the alert state flags (true or false; absent: either). */
async function sendRunList(res: ServerResponse, q: URLSearchParams, engine: AuditEngine, now: () => number, silenceOf: UiOptions['silenceOf']): Promise<void> {
  const limit = Number(q.get('limit') ?? 200) || 200;
  const flags: Record<'acked' | 'alerting' | 'silenced', boolean | undefined> = { acked: undefined, alerting: undefined, silenced: undefined };
  for (const k of ['acked', 'alerting', 'silenced'] as const) {
    const v = q.get(k);
    if (v === null || v === '') continue;
    if (v !== 'true' && v !== 'false') {
      sendJson(res, 400, { error: `${k}: true or false` });
      return;
    }
    flags[k] = v === 'true';
  }
  try {
    const after = q.get('after') || undefined;
    const list = await listRuns(engine, { verdict: q.get('verdict') || undefined, contract: q.get('contract') || undefined, limit, after, ...flags }, now(), silenceOf);
    sendJson(res, 200, { ...list, silences: !!silenceOf, now: new Date(now()).toISOString() });
  } catch (e) {
    if (!(e instanceof ListCursorError)) throw e;
    sendJson(res, 400, { error: e.message });
  }
}

/** The web view's routes. Returns false for paths it does not own (the API handles them). */
export function createUiRoutes(engine: AuditEngine, options: UiOptions = {}): Route {
  const now = options.now ?? Date.now;
  const events = new RunEvents(engine, {
    flushMs: options.flushMs ?? 150,
    keepAliveMs: options.keepAliveMs ?? 15_000,
    maxBatch: options.maxBatch ?? 200,
    maxStreams: options.maxStreams ?? 64,
    maxStreamBufferBytes: options.maxStreamBufferBytes ?? 1024 * 1024,
    onStreams: options.onStreams,
    onStreamDropped: options.onStreamDropped,
  });
  const clientDir = findClientDir();
  const assets = new Map<string, Buffer>();
  const shell = shellHtml();

  const isShell = (p: string) => p === '/' || p === '/runs' || p.startsWith('/runs/') || p === '/contracts' || p.startsWith('/contracts/') || p === '/shadow';
  const isUi = (p: string) => p === '/ui' || p.startsWith('/ui/');

  return async (req, res, path) => {
    if (!isShell(path) && !isUi(path)) return false;
    if (path === SESSION_PATH) {
      session(req, res, options);
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'text/plain; charset=utf-8', 'use GET', { allow: 'GET, HEAD' });
      return true;
    }
    if (isShell(path)) {
      send(res, 200, 'text/html; charset=utf-8', shell, { 'cache-control': 'no-cache' });
      return true;
    }
    if (sendAsset(res, path, clientDir, assets)) return true;
    if (path === '/ui/events' || path.startsWith('/ui/api/')) {
      if (options.authenticate && !options.authenticate(req)) {
        sendJson(res, 401, { error: 'missing or invalid bearer token' });
        return true;
      }
    }
    if (path === '/ui/events') {
      if (req.method === 'HEAD') send(res, 200, 'text/event-stream; charset=utf-8', '', { 'cache-control': 'no-store' });
      else events.open(req, res);
      return true;
    }
    const parts = segments(path);
    if (!parts) {
      sendJson(res, 400, { error: 'malformed path' });
      return true;
    }
    const [, api, resource, id, ...rest] = parts; // ui api <resource> <id>
    if (api === 'api' && resource === 'runs' && id !== undefined && rest.length === 1 && rest[0] === 'handoffs') {
      const r = await engine.fetch(id, now()); // the handoff board panel (src/ui/client/handoffs.ts)
      if (r) sendJson(res, 200, handoffBoard(id, r.receipts, now()));
      else sendJson(res, 404, { error: `unknown run ${id}` });
      return true;
    }
    if (api !== 'api' || rest.length) {
      sendJson(res, 404, { error: `no such endpoint ${path.slice(0, 80)}` });
      return true;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (resource === 'runs' && id === undefined) {
      await sendRunList(res, url.searchParams, engine, now, options.silenceOf);
      return true;
    }
    if (resource === 'runs' && id !== undefined) {
      const view = await runView(engine, id, now(), options.silenceOf);
      if (view) sendJson(res, 200, view);
      else sendJson(res, 404, { error: `unknown run ${id}` });
      return true;
    }
    if (resource === 'shadow' && id === undefined) {
      sendJson(res, 200, { candidates: engine.shadowSummary() });
      return true;
    }
    if (resource === 'contracts' && id === undefined) {
      sendJson(res, 200, { contracts: contractsSummary(engine.registry) });
      return true;
    }
    if (resource === 'contracts' && id !== undefined) {
      const view = await contractView(engine.registry, id);
      if (view) sendJson(res, 200, view);
      else sendJson(res, 404, { error: `unknown contract ${id}` });
      return true;
    }
    sendJson(res, 404, { error: `no such endpoint ${path.slice(0, 80)}` });
    return true;
  };
}
