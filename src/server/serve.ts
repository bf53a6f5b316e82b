/** Composes the auditor: store, engine, ingest pipeline, receivers, API and timers. */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as grpc from '@grpc/grpc-js';
import type { ContractRegistry } from '../core/registry.js';
import { SpanPipeline } from '../ingest/pipeline.js';
import { handoffFindings } from '../handoff/findings.js';
import { createAuditMetrics, type AuditMetrics } from '../metrics/index.js';
import { ReceiptStore } from '../store/index.js';
import { apiHandler } from './api.js';
import { bearerOf, bindingFor, cookieToken, matchToken, type TokenEntry } from './auth.js';
import { AuditEngine } from './engine.js';
import type { Route } from '../ui/routes.js';
import { Ingestor } from './ingest.js';
import { otlpHttpHandler } from './otlp-http.js';
import { startGrpc } from './otlp-grpc.js';
import { startGrpcH2 } from './otlp-grpc-h2.js';
import { createListener, grpcServerCredentials, type Listener, type TlsMaterial } from './tls.js';

export interface ServeConfig {
  host: string;
  port: number;
  otlpHttpPort: number;
  otlpGrpcPort: number;
  dataDir: string;
  defaultContract?: string;
  maxBodyBytes: number;
  maxGrpcMessageBytes: number;
  retentionMs: number;
  parentWaitMs: number;
  maxPendingSpans: number;
  maxPendingReceipts: number;
  maxInflightRequests: number;
  tickMs: number;
  /** How long SIGTERM waits for open connections before cutting them off (in-flight commits still finish). */
  shutdownGraceMs: number;
  /** Longest wait before a group commit (0: end of the event-loop turn). */
  groupCommitDelayMs: number;
  /** Cap on the database size: commits past it fail like a full disk (and are not acknowledged). */
  maxDbBytes?: number;
  ingestTokens?: TokenEntry[];
  apiTokens?: TokenEntry[];
  /** When given, every listener speaks TLS (HTTPS for OTLP/HTTP and the API, SSL for gRPC). */
  tls?: TlsMaterial;
  /** The gRPC receiver: `h2` (default, on node:http2) or `grpc-js` (the @grpc/grpc-js server). */
  grpcImpl?: 'h2' | 'grpc-js';
  /** Extra routes on the API port (e.g. the web view), given the engine. */
  extraRoutes?: (engine: AuditEngine, opts: { authenticate: (req: IncomingMessage) => boolean }) => Route;
  log: (event: string, fields?: Record<string, unknown>) => void;
  version: string;
}

export const DEFAULTS = {
  host: '127.0.0.1',
  port: 9464,
  otlpHttpPort: 4318,
  otlpGrpcPort: 4317,
  dataDir: './data',
  maxBodyBytes: 20 * 1024 * 1024,
  maxGrpcMessageBytes: 4 * 1024 * 1024,
  retentionMs: 7 * 86_400_000,
  parentWaitMs: 10_000,
  maxPendingSpans: 200_000,
  maxPendingReceipts: 200_000,
  maxInflightRequests: 256,
  tickMs: 200,
  groupCommitDelayMs: 0,
  shutdownGraceMs: 5_000,
};

export interface RunningServer {
  engine: AuditEngine;
  metrics: AuditMetrics;
  ports: { api: number; otlpHttp: number; otlpGrpc: number };
  close(): Promise<void>;
}

const listen = (srv: Listener, host: string, port: number) =>
  new Promise<number>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, () => resolve((srv.address() as AddressInfo).port));
  });

export async function startServer(registry: ContractRegistry, cfg: ServeConfig): Promise<RunningServer> {
  const metrics = createAuditMetrics({ version: cfg.version });
  const store = ReceiptStore.open(cfg.dataDir, {
    groupCommitMaxDelayMs: cfg.groupCommitDelayMs,
    maxDbBytes: cfg.maxDbBytes,
    onCommit: (seconds, n) => metrics.storeCommit(seconds, n),
  });
  const engine = new AuditEngine(registry, store, {
    defaultContract: cfg.defaultContract,
    retentionMs: cfg.retentionMs,
    extraFindings: handoffFindings,
    hooks: {
      verdictEntered: (run, contract, _version, verdict) => metrics.verdictEntered(contract, verdict, run),
      receipts: (type, result, n) => metrics.receipt(type, result, n),
    },
  });
  const restored = engine.restore(Date.now());
  cfg.log('restored', restored);
  const pipeline = new SpanPipeline({ waitMs: cfg.parentWaitMs, maxSpans: cfg.maxPendingSpans });
  const ingestor = new Ingestor(engine, pipeline, metrics, { maxPendingReceipts: cfg.maxPendingReceipts, maxInflightRequests: cfg.maxInflightRequests });
  // Agent spans that were waiting for their caller when the process stopped wait again (their exports were acknowledged).
  const replayed = await ingestor.replaySpanLog();
  if (replayed) cfg.log('span_log_replayed', { entries: replayed, pending: pipeline.callers.stats().pending });

  const ingestAuth = (token: string | undefined) => {
    if (!cfg.ingestTokens) return { source: 'anonymous' };
    const e = matchToken(cfg.ingestTokens, token);
    return e ? { source: e.source, bind: bindingFor(e) } : null;
  };
  const httpAuth = (req: IncomingMessage) => ingestAuth(bearerOf(req.headers.authorization));
  const apiAuth = (req: IncomingMessage) => !cfg.apiTokens || matchToken(cfg.apiTokens, bearerOf(req.headers.authorization)) !== null;
  // The web view's browser requests (and its event stream, which cannot send headers) may carry the API token as a cookie.
  const uiAuth = (req: IncomingMessage) => apiAuth(req) || (!!cfg.apiTokens && matchToken(cfg.apiTokens, cookieToken(req.headers.cookie)) !== null);

  let stopping = false;
  const ready = () => {
    const reasons: string[] = [];
    if (stopping) reasons.push('shutting down');
    if (!store.healthy()) reasons.push('store cannot commit');
    if (ingestor.saturated) reasons.push('ingest saturated');
    return { ready: reasons.length === 0, reasons };
  };

  const otlpHttp = createListener(otlpHttpHandler(ingestor, metrics, { maxBodyBytes: cfg.maxBodyBytes, retryAfterSeconds: 1 }, httpAuth), cfg.tls);
  const api = createListener(
    apiHandler(engine, ingestor, metrics, {
      maxBodyBytes: cfg.maxBodyBytes,
      retryAfterSeconds: 1,
      maxWaitSeconds: 300,
      authenticateIngest: httpAuth,
      authenticateApi: apiAuth,
      extraRoutes: cfg.extraRoutes?.(engine, { authenticate: uiAuth }),
      ready,
    }),
    cfg.tls,
  );
  const grpcAuth = (md: grpc.Metadata) => {
    const v = md.get('authorization')[0];
    return ingestAuth(bearerOf(typeof v === 'string' ? v : v?.toString()));
  };
  const ports = {
    api: await listen(api, cfg.host, cfg.port),
    otlpHttp: await listen(otlpHttp, cfg.host, cfg.otlpHttpPort),
    otlpGrpc: 0,
  };
  const grpcServer =
    cfg.grpcImpl === 'grpc-js'
      ? await startGrpc(ingestor, metrics, cfg.host, cfg.otlpGrpcPort, { maxMessageBytes: cfg.maxGrpcMessageBytes, credentials: grpcServerCredentials(cfg.tls) }, grpcAuth)
      : await startGrpcH2(ingestor, metrics, cfg.host, cfg.otlpGrpcPort, { maxMessageBytes: cfg.maxGrpcMessageBytes, tls: cfg.tls }, (v) => ingestAuth(bearerOf(v)));
  ports.otlpGrpc = grpcServer.port;

  let lastPrune = Date.now();
  let lastSpanLogPrune = Date.now();
  const spanLogPruneEveryMs = Math.max(cfg.tickMs, Math.min(5_000, cfg.parentWaitMs / 2));
  // Prune at least every minute, and often enough for short retentions.
  const pruneEveryMs = Math.max(cfg.tickMs, Math.min(60_000, cfg.retentionMs / 2));
  let ticking = false;
  const timer = setInterval(() => {
    if (ticking) return;
    ticking = true;
    const now = Date.now();
    try {
      engine.tick(now);
      const gaps = pipeline.expire(now);
      if (gaps.length) {
        metrics.callerUnresolved(gaps.length);
        ingestor.internal(gaps).catch((e) => cfg.log('gap_commit_failed', { error: (e as Error).message }));
      }
      if (now - lastSpanLogPrune >= spanLogPruneEveryMs) {
        lastSpanLogPrune = now;
        try {
          ingestor.pruneSpanLog(now, cfg.parentWaitMs);
        } catch (e) {
          cfg.log('span_log_prune_failed', { error: (e as Error).message });
        }
      }
      if (now - lastPrune >= pruneEveryMs) {
        lastPrune = now;
        engine.prune(now);
      }
      metrics.setRunsGauge(engine.gauge().map((g) => ({ contract: g.contract, version: g.version, verdict: g.verdict, runs: g.count })));
      metrics.setLiveRuns(engine.liveRuns);
      metrics.setPendingParentSpans(pipeline.callers.stats().pending);
      metrics.setIngestQueueDepth(ingestor.queueDepth);
      metrics.setIngestSaturated(ingestor.saturated);
      metrics.setStoreHealthy(store.healthy());
    } finally {
      ticking = false;
    }
  }, cfg.tickMs);
  timer.unref();

  // Stop accepting; idle keep-alive connections close now, busy ones once their answer is sent.
  const closeHttp = (s: Listener) =>
    new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeIdleConnections();
      const idle = setInterval(() => s.closeIdleConnections(), 100);
      idle.unref();
      s.once('close', () => clearInterval(idle));
    });
  return {
    engine,
    metrics,
    ports,
    async close() {
      stopping = true;
      clearInterval(timer);
      // Stop accepting, let in-flight exports finish and commit, then close the store. A client that holds a
      // connection open past the grace period (a stalled upload, a lingering stream) is cut off then.
      const graceful = Promise.all([
        closeHttp(otlpHttp),
        closeHttp(api),
        new Promise<void>((resolve) => grpcServer.server.tryShutdown(() => resolve())),
      ]);
      let graceTimer: NodeJS.Timeout | undefined;
      const expired = new Promise<'expired'>((resolve) => (graceTimer = setTimeout(() => resolve('expired'), cfg.shutdownGraceMs)));
      if ((await Promise.race([graceful, expired])) === 'expired') {
        cfg.log('shutdown_grace_expired', { graceMs: cfg.shutdownGraceMs });
        otlpHttp.closeAllConnections();
        api.closeAllConnections();
        grpcServer.server.forceShutdown();
        await graceful;
      }
      clearTimeout(graceTimer);
      try {
        await store.sync();
      } catch (e) {
        cfg.log('final_sync_failed', { error: (e as Error).message });
      }
      store.close();
    },
  };
}
