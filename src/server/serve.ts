/** Composes the auditor: store, engine, ingest pipeline, receivers, API and timers. */
import type { IncomingMessage } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import type * as grpc from '@grpc/grpc-js';
import type { ContractRegistry } from '../core/registry.js';
import type { Contract } from '../core/contract.js';
import type { RunVerdict } from '../core/types.js';
import { SpanPipeline } from '../ingest/pipeline.js';
import { sourceAgentsOf } from '../ingest/trust.js';
import { createAlertmanagerMetrics, createAuditMetrics, ingestSummary, type AuditMetrics } from '../metrics/index.js';
import { Alerting, type AlertingConfig, type SilenceView } from '../alerting/index.js';
import { ReceiptStore } from '../store/index.js';
import type { AckRecord } from '../core/types.js';
import { PgStore } from '../store/pg-store.js';
import type { Acks } from '../store/port.js';
import { SqlitePort } from '../store/sqlite/port.js';
import { PgPort } from '../store/pg/port.js';
import { ClusterCoordinator } from '../cluster/coordinator.js';
import { Coordination } from '../cluster/coordination.js';
import { TrustMismatchError } from '../cluster/heartbeat.js';
import { ClusterEngineStore } from '../cluster/engine-store.js';
import { LeasedOwnership } from '../cluster/leased-ownership.js';
import { lockDataDir } from '../store/lock.js';
import { apiHandler } from './api.js';
import { createResourceMetrics, type ListenerName, type ResourceMetrics } from './resource-metrics.js';
import { bearerOf, bindingFor, cookieToken, matchToken, type TokenEntry, type WriteAuth } from './auth.js';
import { AuditEngine, EventBus, SINGLE_OWNER, type AuditEvents, type EngineStore, type Ownership } from '../audit/engine.js';
import { subscribeMetrics } from '../metrics/events.js';
import type { Route } from './api.js';
import { Ingestor } from '../audit/ingestor.js';
import { otlpHttpHandler } from './otlp-http.js';
import { BodyBudget } from './body.js';
import { startGrpc } from './otlp-grpc.js';
import { startGrpcH2 } from './otlp-grpc-h2.js';
import { DecodePool } from './worker-pool.js';
import { createListener, grpcServerCredentials, type Listener, type TlsMaterial } from './tls.js';
import { startPeriodic, type PeriodicTask, type Scheduler } from './periodic.js';
import { createLoopMetrics } from './loop-metrics.js';
import { serveOptionDefaults, type ServeOptionConfig } from './serve-options.js';

/**
 * What `startServer` is given. The fields set by serve's options (port, limits, timeouts, tokens, ...) are typed
 * from the option table, src/server/serve-options.ts, which also holds their defaults, help and parsers; the rest
 * are composed by the command (or an embedding test).
 */
export interface ServeConfig extends ServeOptionConfig {
  /** How often the engine's timers tick. */
  tickMs: number;
  /** How long SIGTERM waits for open connections before cutting them off (in-flight commits still finish). */
  shutdownGraceMs: number;
  /** When given, every listener speaks TLS (HTTPS for OTLP/HTTP and the API, SSL for gRPC). */
  tls?: TlsMaterial;
  /** Extra routes on the API port (e.g. the web view), given the engine (and the run's Alertmanager silence). */
  extraRoutes?: (engine: AuditEngine, opts: { authenticate: (req: IncomingMessage) => boolean; tokensRequired: boolean; resources: ResourceMetrics; silenceOf?: (v: RunVerdict) => Promise<SilenceView | null>; now: () => number }) => Route;
  /** Per-run alerts to Alertmanager (serve --alertmanager-url ...), and silences read back. */
  alerting?: AlertingConfig;
  /** The runbook page served on GET /runbooks (the default runbook_url of per-run alerts). */
  runbooksHtml?: string;
  log: (event: string, fields?: Record<string, unknown>) => void;
  /** Writes of the log (and stdout) that failed and were dropped so far, per stream (served as topology_log_write_errors_total). */
  outputWriteErrors?: () => { stdout: number; stderr: number };
  version: string;
  /** Candidate versions to shadow-evaluate (`--shadow CONTRACT@VERSION`). */
  shadow?: Contract[];
  /**
   * Test hook (embedding only, no flag): this host's wall clock (default Date.now), e.g. a clock set 30 s off. In a
   * cluster, verdicts are timed on the database's clock: this clock plus the offset measured at each heartbeat.
   */
  wallClock?: () => number;
}

/** The defaults: those of the options (src/server/serve-options.ts) and of the settings no option sets. */
export const DEFAULTS = {
  ...serveOptionDefaults(),
  tickMs: 200,
  shutdownGraceMs: 5_000,
  /** Open connections of the --health-port listener. */
  healthConnections: 64,
};

/** A listener could not start (port taken, address not available, ...): the message names it and its port. */
export class ListenerError extends Error {}

export interface RunningServer {
  engine: AuditEngine;
  metrics: AuditMetrics;
  /** The per-run alerting output, when Alertmanagers are configured. */
  alerting: Alerting | null;
  ports: { api: number; otlpHttp: number; otlpGrpc: number; health?: number };
  close(): Promise<void>;
}

/** The serve flag that moves each listener, named when its port is taken. */
const PORT_FLAG: Record<string, string> = { API: '--port', health: '--health-port', 'OTLP/HTTP': '--otlp-http-port', 'OTLP/gRPC': '--otlp-grpc-port' };
/** "...: EADDRINUSE (port 9464 is in use: choose another with --port)". */
export function listenProblem(name: string, host: string, port: number, code: string): string {
  const flag = PORT_FLAG[name];
  const hint = code === 'EADDRINUSE' && flag ? ` (port ${port} is in use: choose another with ${flag}, or stop what holds it)` : code === 'EADDRNOTAVAIL' ? ' (no such local address: check --host)' : '';
  return `${name} listener cannot listen on ${host}:${port}: ${code}${hint}`;
}

const listen = (srv: Listener, name: string, host: string, port: number) =>
  new Promise<number>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException) => reject(new ListenerError(listenProblem(name, host, port, e.code ?? e.message)));
    srv.once('error', onError);
    srv.listen(port, host, () => {
      srv.off('error', onError);
      resolve((srv.address() as AddressInfo).port);
    });
  });

/**
 * Per-listener limits: connections, header/request/keep-alive timeouts (checked every second). Node answers a
 * request that runs out of time with 408 and closes its connection.
 */
function limitListener(srv: Listener, name: ListenerName, cfg: ServeConfig, resources: ResourceMetrics): void {
  srv.maxConnections = cfg.maxConnections;
  srv.headersTimeout = cfg.headersTimeoutMs;
  srv.requestTimeout = cfg.requestTimeoutMs;
  srv.keepAliveTimeout = cfg.keepAliveTimeoutMs;
  srv.on('drop', () => resources.connectionDropped(name));
}

export async function startServer(registry: ContractRegistry, cfg: ServeConfig): Promise<RunningServer> {
  // One server per data directory: a second one refuses, naming the holder's pid. A shared store needs no lock.
  const lock = cfg.storeUrl ? { release() {} } : lockDataDir(cfg.dataDir);
  const cleanup: (() => void | Promise<void>)[] = [() => lock.release()];
  try {
    return await startLocked(registry, cfg, lock, cleanup);
  } catch (e) {
    // Nothing half-started stays behind: every listener that did open is closed, the store and lock released.
    for (const c of cleanup.reverse()) {
      try {
        await c();
      } catch {
        /* best effort */
      }
    }
    throw e;
  }
}

/**
 * The digest of an instance's ingest trust (--ingest-tokens: each token's SHA-256, its source name, the agents it is
 * bound to), order-free; instances of one cluster must agree on it (PgHeartbeat.joinTrust). No token leaves in clear.
 */
function ingestTrustDigest(entries: readonly TokenEntry[] | undefined): string {
  if (!entries) return 'unauthenticated';
  const lines = entries.map((e) => JSON.stringify([e.digest.toString('hex'), e.source, e.agents ? [...e.agents].sort() : null])).sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}


/** The embedded store's WAL checkpoints run in a worker thread this often (src/store/checkpointer.ts). */
const CHECKPOINT_EVERY_MS = 250;

/** The shared store (PostgreSQL, a cluster) or the embedded one (SQLite in the data directory), opened. */
async function openStores(cfg: ServeConfig, metrics: AuditMetrics, cleanup: (() => void | Promise<void>)[]): Promise<Stores> {
  if (!cfg.storeUrl) {
    const sqlite = ReceiptStore.open(cfg.dataDir, {
      groupCommitMaxDelayMs: cfg.groupCommitDelayMs,
      maxDbBytes: cfg.maxDbBytes,
      onCommit: (seconds, n) => metrics.storeCommit(seconds, n),
      checkpointEveryMs: CHECKPOINT_EVERY_MS,
      onCheckpointerLost: (e) => cfg.log('checkpoint_worker_lost', { error: e.message.slice(0, 200) }),
    });
    cleanup.push(() => sqlite.close());
    return { store: sqlite, engineStore: sqlite, acks: new SqlitePort(sqlite), storedAcks: () => sqlite.acks(), cluster: null, ownership: SINGLE_OWNER, clock: cfg.wallClock ?? Date.now };
  }
  const pg = await PgStore.open(cfg.storeUrl, {
    instance: cfg.instance ?? defaultInstanceName(),
    partitions: cfg.partitions,
    onCommit: (seconds, n) => metrics.storeCommit(seconds, n),
  });
  cleanup.push(() => pg.close());
  // The cluster's leases, heartbeat, fence and tail beside the store (src/cluster/coordination.ts).
  const coordination = new Coordination(pg, {
    // A heartbeat answers well within the lease, or it failed (the instance is not ready until one lands again).
    beatTimeoutMs: Math.min(3_000, Math.floor((cfg.leaseTtlMs ?? DEFAULTS.leaseTtlMs) / 3)),
  });
  try {
    await coordination.beats.joinTrust(ingestTrustDigest(cfg.ingestTokens), cfg.leaseTtlMs ?? DEFAULTS.leaseTtlMs);
  } catch (e) {
    if (e instanceof TrustMismatchError) cfg.log('cluster_refused', { instance: pg.instance, reason: e.message });
    throw e;
  }
  let cluster: ClusterCoordinator | null = null;
  // One clock for verdicts in a cluster: the database's, read with each heartbeat (issue 49).
  const wall = cfg.wallClock ?? Date.now;
  const clock = () => Math.round(wall() + (cluster?.clockOffsetMs() ?? 0));
  const shared = new ClusterEngineStore(pg, () => cluster?.ownedParts() ?? [], cfg.log);
  cluster = new ClusterCoordinator(pg, shared, { leaseTtlMs: cfg.leaseTtlMs ?? DEFAULTS.leaseTtlMs, spanRouting: cfg.spanRouting }, { log: cfg.log, clock, wall }, coordination);
  return {
    store: { healthy: () => pg.healthy(), sync: async () => { await shared.sync(); await pg.sync(); }, close: () => pg.close() },
    engineStore: shared,
    acks: new PgPort(pg, () => cluster?.ownedParts() ?? []),
    // A cluster's acknowledgements reach the owners through the tail (ClusterCoordinator), none restored at start.
    storedAcks: () => [],
    flushBehind: () => shared.flush(),
    cluster,
    ownership: new LeasedOwnership(cluster, pg, { spanRouting: cfg.spanRouting, unwritten: () => shared.unwritten() }),
    clock,
  };
}

interface Stores {
  /** `setFlushGate`: the embedded store's group commit waits for the bodies being decoded (--workers). */
  store: { healthy(): boolean; sync(): Promise<void>; close(): void | Promise<void>; setFlushGate?(gate: () => Promise<void> | null): void };
  engineStore: EngineStore;
  /** Operators' acknowledgements (the storage port's; stored before the API answers). */
  acks: Acks;
  /** The acknowledgements to apply again at start. */
  storedAcks(): { run: string; ack: AckRecord }[];
  /** The writes the engine's store holds behind (pins, verdict states), written by the tick; absent when none. */
  flushBehind?: () => Promise<void>;
  cluster: ClusterCoordinator | null;
  /** Which runs this instance holds live: every run (SingleOwner), or a cluster's leased share (LeasedOwnership). */
  ownership: Ownership;
  /** The clock verdicts are timed on: this host's; in a cluster, the database's (this host's plus the measured offset). */
  clock: () => number;
}

/**
 * The engine's event bus with its subscribers (src/audit/events.ts): the metrics, and the logs of verdict changes and
 * failed read-backs. A subscriber that throws is counted and logged (the 1st, 2nd, 4th, 8th, ... time per event).
 */
function engineEvents(cfg: ServeConfig, metrics: AuditMetrics, cluster: ClusterCoordinator | null): EventBus<AuditEvents> {
  const events: EventBus<AuditEvents> = new EventBus<AuditEvents>({
    onError: (event, e) => {
      const failures = events.failures(event);
      if ((failures & (failures - 1)) === 0) cfg.log('event_subscriber_failed', { event, failures, error: (e as Error)?.name ?? 'Error' });
    },
  });
  subscribeMetrics(events, metrics, cluster);
  // Content-free: run id, pin, verdict and the finding code that decided it.
  events.subscribe('verdictEntered', ({ run, contract, version, verdict, previous, result }) => {
    const code = result.findings.find((f) => f.verdict === verdict)?.code;
    cfg.log('verdict_changed', { run, contract: contract || null, version: version || null, verdict, previous: previous?.verdict ?? null, ...(code ? { code } : {}) });
  });
  // Cluster mode: a re-evaluation that needed the run's receipts back from the shared store and could not read them
  // (the run keeps its last verdict; the next receipt or tick tries again). Content-free: run id and the error's class.
  events.subscribe('readBackFailed', ({ run, error: e }) => cfg.log('read_back_failed', { run, error: `${(e as Error)?.name ?? 'Error'}: ${String((e as Error)?.message ?? e).slice(0, 200)}` }));
  return events;
}

function createEngine(registry: ContractRegistry, cfg: ServeConfig, metrics: AuditMetrics, stores: Stores): AuditEngine {
  const { cluster } = stores;
  const engine: AuditEngine = new AuditEngine(registry, stores.engineStore, {
    ownership: stores.ownership,
    defaultContract: cfg.defaultContract,
    retentionMs: cfg.retentionMs,
    maxLiveRuns: cfg.maxLiveRuns,
    maxLiveReceipts: cfg.maxLiveReceipts,
    // With ingest tokens, one source's receipt never masks another's under the same event id (docs/security.md).
    sourceScopedEvents: cfg.ingestTokens !== undefined,
    // With ingest tokens, the live-run cap is shared fairly among the sources (docs/security.md, the live cap).
    fairSources: cfg.ingestTokens !== undefined,
    idleEvictMs: cfg.idleEvictMs,
    alertWindowMs: cfg.alertWindowMs ?? DEFAULTS.alertWindowMs,
    events: engineEvents(cfg, metrics, cluster),
    shadow: cfg.shadow,
  });
  return engine;
}

/** An operator's acknowledgement: stored (SQLite at once; PostgreSQL for every instance) before the API answers. */
function acknowledger(engine: AuditEngine, { acks, ownership, clock }: Stores) {
  return async (run: string, who: { by: string | null; reason: string | null }): Promise<{ acked: boolean; record: AckRecord } | null> => {
    const now = clock();
    if (ownership.single) {
      const local = engine.ack(run, now, who);
      if (local?.acked) await acks.putAck(run, local.record);
      return local;
    }
    // In a cluster the acknowledgement goes to the shared store; the run's owner applies it to its alerting series.
    const v = engine.verdictOf(run) ?? (await engine.fetchVerdict(run, now));
    if (!v) return null;
    const local = engine.ack(run, now, who);
    if (local && !local.acked) return local;
    const record: AckRecord = local?.record ?? { verdict: v.verdict, by: who.by, at: now, reason: who.reason };
    await acks.putAck(run, record);
    return { acked: true, record };
  };
}

/** What the listeners and the periodic tasks are built from. */
interface Parts extends Stores {
  cfg: ServeConfig;
  /** The bytes of request bodies being read at once, shared by the API and OTLP/HTTP listeners. */
  bodyBudget: BodyBudget;
  metrics: AuditMetrics;
  resources: ResourceMetrics;
  alerting: Alerting | null;
  engine: AuditEngine;
  pipeline: SpanPipeline;
  ingestor: Ingestor;
  /** Readiness (GET /readyz) reads it. */
  stopping: { now: boolean };
  /** The span log replay after a restart (readiness): under way, or failed (the error; not ready until a restart). */
  replay: { running: boolean; failed?: string };
  /** `--workers N`: the decode workers of OTLP/HTTP and the node:http2 gRPC receiver; null: decode on the main thread. */
  decodePool: DecodePool | null;
  /** The event-loop delay probe (src/server/loop-metrics.ts), set once its metrics exist. */
  loop: { probe(): void };
}

async function startLocked(registry: ContractRegistry, cfg: ServeConfig, lock: { release(): void }, cleanup: (() => void | Promise<void>)[]): Promise<RunningServer> {
  const metrics = createAuditMetrics({ version: cfg.version });
  const resources = createResourceMetrics(metrics, cfg.outputWriteErrors);
  let alerting: Alerting | null = null;
  if (cfg.alerting) {
    const am = createAlertmanagerMetrics(metrics);
    const a = (alerting = new Alerting(cfg.alerting, { sent: am.sent, dropped: am.dropped, queueLength: am.queueLength, silencesSkipped: am.silencesSkipped, log: cfg.log }));
    cleanup.push(() => a.close());
  }
  const phases = startupPhases();
  const stores = await openStores(cfg, metrics, cleanup);
  phases.mark('open_store');
  const { cluster } = stores;
  if (cluster) {
    // The measured offset of this host's clock from the database's (verdicts use the database's), and its bound.
    const offset = metrics.registry.gauge({ name: 'topology_cluster_clock_offset_seconds', help: "The database's clock minus this host's, measured with each heartbeat (verdicts are timed on the database's clock; past 60 s the instance holds no partition)." });
    metrics.registry.onCollect(() => offset.set([], cluster.clockOffsetMs() / 1000));
  }
  const engine = createEngine(registry, cfg, metrics, stores);
  // A single instance rebuilds its live runs from its store; a cluster's instance takes its runs over with its partitions.
  const single = stores.ownership.single;
  const restored = single ? engine.restore(stores.clock()) : { runs: 0, receipts: 0 };
  phases.mark('restore');
  // Acknowledgements outlive a restart: each applies again while its run is still in the acknowledged verdict.
  for (const { run, ack } of stores.storedAcks()) engine.applyAck(run, ack.verdict, ack.at, ack);
  phases.mark('acks');
  if (single) cfg.log('restored', restored);
  if (restored.runs > cfg.maxLiveRuns || engine.liveReceipts > cfg.maxLiveReceipts) {
    // Everything stored was acknowledged, so it is all restored; new runs wait until pruning brings it under the caps.
    cfg.log('warning', { message: 'restored live state is above --max-live-runs or --max-live-receipts: receipts of new runs are refused until settled runs are pruned', runs: restored.runs, receipts: engine.liveReceipts });
  }
  const pipeline = new SpanPipeline({ waitMs: cfg.parentWaitMs, maxSpans: cfg.maxPendingSpans, maxTraceSpans: cfg.maxTraceSpans, runKey: cfg.runKey, deferLangGraphRoots: stores.ownership.forwarding });
  pipeline.unmapped.onReport = (r) => metrics.unmappedTrace(r.dialect, r.reason);
  // With --span-routing any, a partition that leaves: the pending spans of its traces are its new owner's (adopted
  // from the shared span log): the ownership tells the ingestor's pipeline to drop them.
  const ingestor = new Ingestor(engine, pipeline, metrics, { maxPendingReceipts: cfg.maxPendingReceipts, maxInflightRequests: cfg.maxInflightRequests }, stores.clock, sourceAgentsOf(cfg.ingestTokens), stores.ownership);
  if (cluster) {
    const c = cluster;
    await c.start(engine, () => ingestor.replaySpanLog(), (before) => ingestor.readLangGraphRoots(before));
    cleanup.push(() => c.stop());
    cfg.log('cluster_joined', { instance: c.pg.instance, ...c.stats() });
  }
  // --workers N: inflate + decode off the main thread. Its queue holds admitted requests only (at most
  // --max-inflight), and at most 4 bodies of the largest size.
  const decodePool = cfg.workers
    ? new DecodePool(cfg.workers, {
        maxQueued: cfg.maxInflightRequests,
        maxQueuedBytes: Math.max(64 * 1024 * 1024, 4 * Math.max(cfg.maxBodyBytes, cfg.maxGrpcMessageBytes)),
        onWorkerLost: (w) => cfg.log('decode_worker_lost', w),
      })
    : null;
  if (decodePool) {
    cleanup.push(() => decodePool.close());
    // A group commit waits for the bodies being decoded at that moment (at most one decode): their receipts ride in it.
    stores.store.setFlushGate?.(() => decodePool.decoding());
  }
  const bodyBudget = new BodyBudget(cfg.maxBodyTotalBytes ?? Math.max(64 * 1024 * 1024, 4 * cfg.maxBodyBytes));
  const parts: Parts = { ...stores, cfg, bodyBudget, metrics, resources, alerting, engine, pipeline, ingestor, stopping: { now: false }, replay: { running: false }, decodePool, loop: { probe: () => {} } };
  const listeners = await startListeners(parts, cleanup);
  phases.mark('listen');
  cfg.log('startup', phases.done());
  // Agent spans that were waiting for their caller when the process stopped wait again (their exports were
  // acknowledged): replayed in batches while the listeners serve; /readyz answers 503 until it is done. In a cluster,
  // the owner of a trace's partition adopts the span log of an instance that is gone (ClusterCoordinator).
  if (single) replayInBackground(parts);
  const tasks = periodicTasks(parts);
  const loop = createLoopMetrics(metrics, tasks.map((t) => t.name));
  parts.loop.probe = loop.probe;
  cleanup.push(() => loop.stop());
  const scheduler = startPeriodic(tasks, cfg.tickMs, cfg.log, stores.clock, { observer: loop.periodic });
  return { engine, metrics, alerting, ports: listeners.ports, close: closer(parts, listeners, scheduler, lock) };
}

/** Milliseconds spent in each start-up phase before the listeners answer (the `startup` log line). */
function startupPhases(): { mark(phase: string): void; done(): Record<string, number> } {
  const t0 = performance.now();
  let last = t0;
  const ms: Record<string, number> = {};
  return {
    mark(phase) {
      const t = performance.now();
      ms[phase] = Math.round(t - last);
      last = t;
    },
    done: () => ({ ...ms, total: Math.round(last - t0), since_process_start: Math.round(last) }),
  };
}

/** The span log replay after a restart, while serving (readiness: `replay.failed`, Ingestor.replayProgress). */
function replayInBackground(p: Parts): void {
  const { cfg, ingestor, pipeline } = p;
  p.replay.running = true;
  ingestor.replaySpanLog().then(
    (replayed) => {
      p.replay.running = false;
      if (replayed) cfg.log('span_log_replayed', { entries: replayed, pending: pipeline.callers.stats().pending, langgraphWaiting: pipeline.langgraph.waiting });
    },
    (e: unknown) => {
      p.replay.running = false;
      p.replay.failed = (e as Error).message;
      cfg.log('span_log_replay_failed', { error: (e as Error).message });
    },
  );
}

/**
 * Who may acknowledge runs and create silences (writes on the API port): with --api-tokens, an API token of scope
 * `write`; with only --ingest-tokens, an ingest token; with neither, anyone who reaches the port (loopback by
 * default). A bearer token only: a cookie is sent by the browser on cross-site requests too. The writer acts as the
 * token's name (an acknowledgement's `by`).
 */
export function apiWriter(cfg: Pick<ServeConfig, 'apiTokens' | 'ingestTokens'>, token: string | undefined): WriteAuth {
  const tokens = cfg.apiTokens ?? cfg.ingestTokens;
  if (!tokens) return { ok: true, name: null };
  const e = matchToken(tokens, token);
  if (!e) return { ok: false, status: 401, error: 'missing or invalid bearer token' };
  if (e.scope !== 'write') return { ok: false, status: 403, error: 'this token may read, not write: acknowledging a run or creating a silence needs a token of scope write (--api-tokens: "TOKEN write NAME")' };
  return { ok: true, name: e.name };
}

/** Bearer-token authentication of each listener (ingest tokens bind a source; API tokens, or the web view's cookie). */
function authenticators(cfg: ServeConfig) {
  const ingest = (token: string | undefined) => {
    if (!cfg.ingestTokens) return { source: 'anonymous' };
    const e = matchToken(cfg.ingestTokens, token);
    return e ? { source: e.source, bind: bindingFor(e) } : null;
  };
  const api = (req: IncomingMessage) => !cfg.apiTokens || matchToken(cfg.apiTokens, bearerOf(req.headers.authorization)) !== null;
  return {
    ingest,
    writer: (req: IncomingMessage) => apiWriter(cfg, bearerOf(req.headers.authorization)),
    http: (req: IncomingMessage) => ingest(bearerOf(req.headers.authorization)),
    api,
    // The web view's browser requests (and its event stream, which cannot send headers) carry an API or viewer token
    // as the session cookie, or as a bearer when the page hands it over (POST /ui/session).
    ui: (req: IncomingMessage) => {
      if (api(req)) return true;
      const viewer = [...(cfg.apiTokens ?? []), ...(cfg.viewerTokens ?? [])];
      return matchToken(viewer, bearerOf(req.headers.authorization)) !== null || matchToken(viewer, cookieToken(req.headers.cookie)) !== null;
    },
    grpc: (md: grpc.Metadata) => {
      const v = md.get('authorization')[0];
      return ingest(bearerOf(typeof v === 'string' ? v : v?.toString()));
    },
  };
}

/** The API's request handler: /healthz, /readyz, /metrics, POST /v1/receipts, /api/v1/... and the extra routes. */
function apiRoutes(p: Parts, auth: ReturnType<typeof authenticators>, bound: { api: number; otlpHttp: number }) {
  const { cfg, engine, ingestor, metrics, resources, alerting, pipeline, cluster, store } = p;
  const ready = () => {
    const reasons: string[] = [];
    if (p.stopping.now) reasons.push('shutting down');
    if (!store.healthy()) reasons.push('store cannot commit');
    if (ingestor.saturated) reasons.push('ingest saturated');
    const replay = ingestor.replayProgress;
    if (p.replay.running || replay) reasons.push(replay ? `replaying the span log (${replay.done} of ${replay.total} entries)` : 'replaying the span log');
    if (p.replay.failed) reasons.push(`span log replay failed: ${p.replay.failed}`);
    return { ready: reasons.length === 0, reasons };
  };
  const acknowledge = acknowledger(engine, p);
  return apiHandler(engine, ingestor, metrics, {
    onError: (e) => cfg.log('api_error', { error: `${e?.name ?? 'Error'}: ${String(e?.message ?? e).slice(0, 200)}` }),
    maxBodyBytes: cfg.maxBodyBytes,
    bodyBudget: p.bodyBudget,
    retryAfterSeconds: 1,
    maxWaitSeconds: 300,
    maxLongPolls: cfg.maxLongPolls ?? DEFAULTS.maxLongPolls,
    authenticateIngest: auth.http,
    authenticateApi: auth.api,
    authorizeWrite: auth.writer,
    maxSilenceMs: alerting?.cfg.maxSilenceMs,
    clock: p.clock,
    extraRoutes: cfg.extraRoutes?.(engine, { authenticate: auth.ui, tokensRequired: !!cfg.apiTokens, resources, now: p.clock, ...(alerting ? { silenceOf: (v: RunVerdict) => alerting.silenceOf(v) } : {}) }),
    ...(alerting ? { silenceOf: (v: RunVerdict) => alerting.silenceOf(v), silence: (run: string, by: string, ms: number, verdict: string, reason: string | null) => alerting.silenceRun(run, by, ms, Date.now(), verdict, reason) } : {}),
    runbooksHtml: cfg.runbooksHtml,
    ready,
    unmapped: () => pipeline.unmapped.snapshot(),
    coverage: () => pipeline.coverage.snapshot(),
    cluster: cluster ? () => ({ store: 'postgres', instance: cluster.pg.instance, ...cluster.stats(), ownedPartitions: cluster.ownedParts() }) : undefined,
    otlpHttpPort: () => bound.otlpHttp,
    ack: async (run, who) => {
      const r = await acknowledge(run, who);
      if (r) cfg.log('ack', { run, verdict: r.record.verdict, by: r.record.by, at: new Date(r.record.at).toISOString(), ...(r.record.reason ? { reason: r.record.reason } : {}), already: !r.acked });
      return r;
    },
    alertTimes: { windowMs: cfg.alertWindowMs ?? DEFAULTS.alertWindowMs, stallMs: cfg.stallAfterMs ?? DEFAULTS.stallAfterMs },
    version: cfg.version,
    onLongPolls: (n) => resources.setLongPolls(n),
    onLiveLimit: (l) => resources.liveLimited(l, 'ndjson'),
  });
}

interface Listeners {
  api: Listener;
  otlpHttp: Listener;
  grpcServer: { server: { tryShutdown(cb: (err?: Error) => void): void; forceShutdown(): void }; port: number };
  ports: RunningServer['ports'];
}

/** The API (and --health-port), OTLP/HTTP and OTLP/gRPC listeners, listening; each is closed again by `cleanup`. */
async function startListeners(p: Parts, cleanup: (() => void | Promise<void>)[]): Promise<Listeners> {
  const { cfg, ingestor, metrics, resources, decodePool } = p;
  const auth = authenticators(cfg);
  const bound = { api: 0, otlpHttp: 0 };
  const listenerOptions = { connectionsCheckingInterval: Math.min(1000, cfg.headersTimeoutMs), ...(cfg.tls ? { handshakeTimeout: cfg.headersTimeoutMs } : {}) };
  const otlpHttp = createListener(
    otlpHttpHandler(ingestor, metrics, { maxBodyBytes: cfg.maxBodyBytes, bodyBudget: p.bodyBudget, retryAfterSeconds: 1, apiPort: () => bound.api, onLiveLimit: (l) => resources.liveLimited(l, 'http'), decodePool }, auth.http),
    cfg.tls,
    listenerOptions,
  );
  const apiHandle = apiRoutes(p, auth, bound);
  const api = createListener(apiHandle, cfg.tls, listenerOptions);
  limitListener(api, 'api', cfg, resources);
  // --health-port: the health endpoints on a listener of their own (a flood of the API port's connections leaves it).
  const health =
    cfg.healthPort === undefined
      ? null
      : createListener(
          (req, res) => {
            const path = (req.url ?? '/').split('?')[0];
            if (path === '/healthz' || path === '/readyz' || path === '/metrics') return void apiHandle(req, res);
            req.resume();
            res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'the health port serves /healthz, /readyz and /metrics' }));
          },
          cfg.tls,
          listenerOptions,
        );
  if (health) limitListener(health, 'api', { ...cfg, maxConnections: DEFAULTS.healthConnections, headersTimeoutMs: Math.min(cfg.headersTimeoutMs, 2_000) }, resources);
  limitListener(otlpHttp, 'otlp_http', cfg, resources);
  const closeNow = (s: Listener) => () => {
    s.closeAllConnections();
    return new Promise<void>((r) => s.close(() => r()));
  };
  const ports: RunningServer['ports'] = { api: 0, otlpHttp: 0, otlpGrpc: 0 };
  ports.api = await listen(api, 'API', cfg.host, cfg.port);
  cleanup.push(closeNow(api));
  if (health && cfg.healthPort !== undefined) {
    ports.health = await listen(health, 'health', cfg.host, cfg.healthPort);
    cleanup.push(closeNow(health));
  }
  ports.otlpHttp = await listen(otlpHttp, 'OTLP/HTTP', cfg.host, cfg.otlpHttpPort);
  cleanup.push(closeNow(otlpHttp));
  const grpcServer = await startGrpcListener(p, auth);
  ports.otlpGrpc = grpcServer.port;
  bound.api = ports.api;
  bound.otlpHttp = ports.otlpHttp;
  return { api, otlpHttp, grpcServer, ports };
}

async function startGrpcListener(p: Parts, auth: ReturnType<typeof authenticators>): Promise<Listeners['grpcServer']> {
  const { cfg, ingestor, metrics, resources } = p;
  const onLiveLimit = (l: 'runs' | 'receipts') => resources.liveLimited(l, 'grpc');
  try {
    return cfg.grpcImpl === 'grpc-js'
      ? await startGrpc(ingestor, metrics, cfg.host, cfg.otlpGrpcPort, { maxMessageBytes: cfg.maxGrpcMessageBytes, credentials: grpcServerCredentials(cfg.tls), maxConcurrentStreams: cfg.maxGrpcStreams, onLiveLimit }, auth.grpc)
      : await startGrpcH2(ingestor, metrics, cfg.host, cfg.otlpGrpcPort, { maxMessageBytes: cfg.maxGrpcMessageBytes, tls: cfg.tls, maxConcurrentStreams: cfg.maxGrpcStreams, handshakeTimeoutMs: cfg.headersTimeoutMs, maxConnections: cfg.maxConnections, onLiveLimit, decodePool: p.decodePool }, (v) => auth.ingest(bearerOf(v)));
  } catch (e) {
    const m = /EADDRINUSE|EACCES|EADDRNOTAVAIL/.exec(String((e as { errors?: unknown[] }).errors ?? '') + (e as Error).message);
    throw new ListenerError(listenProblem('OTLP/gRPC', cfg.host, cfg.otlpGrpcPort, m ? m[0] : (e as Error).message));
  }
}

/**
 * The periodic work, in the order it runs each tick: the cluster guard first (a paused instance whose leases ran out
 * drops its partitions before its timers act on them, issue 32), then the engine's deadlines, caller expiry, pruning,
 * and the gauges and logs that report them.
 */
function periodicTasks(p: Parts): PeriodicTask[] {
  const { cfg, engine, flushBehind, cluster, pipeline, ingestor, metrics, resources, alerting, store } = p;
  const alertWindowMs = cfg.alertWindowMs ?? DEFAULTS.alertWindowMs;
  const stallAfterMs = cfg.stallAfterMs ?? DEFAULTS.stallAfterMs;
  const logIntervalMs = cfg.logIntervalMs ?? DEFAULTS.logIntervalMs;
  let summary = { at: Date.now(), base: metrics.ingestTotals() };
  /** The skeleton's eviction counts already added to topology_pending_parent_spans_evicted_total. */
  let evictedSeen = { total: 0, trace: 0 };
  // The gauges of live state: every tick, and at once after the retention prune forgot runs (a job on a turn of its own).
  const runsGauge = () => metrics.setRunsGauge(engine.gauge().map((g) => ({ contract: g.contract, version: g.version, verdict: g.verdict, runs: g.count })));
  const liveGauges = () => {
    metrics.setLiveRuns(engine.liveRuns);
    resources.setLiveReceipts(engine.liveReceipts);
    const cs = pipeline.callers.stats();
    metrics.setPendingParentSpans(cs.pending);
    metrics.setSkeletonSpans(cs.indexed);
    if (cs.evicted > evictedSeen.total) metrics.pendingParentEvicted(cs.evicted - evictedSeen.total, 'total');
    if (cs.evictedPerTrace > evictedSeen.trace) metrics.pendingParentEvicted(cs.evictedPerTrace - evictedSeen.trace, 'trace');
    evictedSeen = { total: cs.evicted, trace: cs.evictedPerTrace };
    metrics.setIngestQueueDepth(ingestor.queueDepth);
    metrics.setIngestSaturated(ingestor.saturated);
    metrics.setStoreHealthy(store.healthy());
  };
  const tasks: (PeriodicTask | false)[] = [
    { name: 'event_loop_probe', everyMs: 0, run: () => p.loop.probe() },
    cluster !== null && { name: 'cluster_guard', everyMs: 0, run: () => cluster.guard() },
    { name: 'engine_deadlines', everyMs: 0, run: (now) => engine.tick(now) },
    flushBehind !== undefined && { name: 'cluster_flush', everyMs: 0, run: () => void flushBehind() },
    cluster !== null && { name: 'cluster_partitions_gauge', everyMs: 0, run: () => metrics.setClusterPartitions(cluster.stats().owned) },
    {
      // Walks the waiting spans and the followed traces (skeleton, unmapped, coverage): every min(1 s, parent-wait / 10),
      // not every tick; a wait ends at most that much later than its parent wait.
      name: 'caller_expiry',
      everyMs: Math.max(cfg.tickMs, Math.min(1_000, cfg.parentWaitMs / 10)),
      run: (now) => {
        const gaps = pipeline.expire(now);
        if (gaps.length === 0) return;
        metrics.callerUnresolved(gaps.length);
        ingestor.internal(gaps).catch((e) => cfg.log('gap_commit_failed', { error: (e as Error).message }));
      },
    },
    // Sliced jobs (src/server/periodic.ts): each pass costs what changed since the last, in slices that yield.
    { name: 'span_log_prune', job: true, everyMs: Math.max(cfg.tickMs, Math.min(5_000, cfg.parentWaitMs / 2)), run: (now, slicer) => ingestor.pruneSpanLog(now, cfg.parentWaitMs, slicer) },
    // Prune at least every minute, and often enough for short retentions: memory first (with the store's first batch),
    // then the store's other batches, of runs memory no longer holds (a late receipt of one starts it anew in both).
    {
      name: 'retention_prune',
      job: true,
      everyMs: Math.max(cfg.tickMs, Math.min(60_000, cfg.retentionMs / 2)),
      run: async (now, slicer) => {
        await engine.pruneSliced(now, slicer);
        runsGauge();
        liveGauges();
      },
    },
    { name: 'runs_gauge', everyMs: 0, run: () => runsGauge() },
    {
      // The alerting gauges move in seconds (window, stall): once a second is enough.
      name: 'alerting',
      everyMs: 1000,
      atStart: true,
      run: (now) => {
        const al = engine.alerting(now, alertWindowMs, stallAfterMs);
        metrics.setAlertingGauges(new Set([...engine.registry.ids(), ...al.alerting.map((g) => g.contract), ...al.stalled.map((g) => g.contract)]), al.alerting, al.stalled);
        // Per-run alerts from the same rows: new and ended alerts are queued now, firing ones re-sent when due. Between
        // resends only the runs whose alert inputs changed are looked at (issue 44).
        const changed = engine.alertChanges();
        alerting?.tick(now, changed, () => engine.alertingRuns(), (run) => engine.alertingRun(run), (run) => engine.verdictOf(run) !== null);
      },
    },
    logIntervalMs > 0 && {
      name: 'ingest_summary',
      everyMs: logIntervalMs,
      run: (now) => {
        const cur = metrics.ingestTotals();
        cfg.log('ingest_summary', { intervalSeconds: Math.round((now - summary.at) / 1000), ...ingestSummary(cur, summary.base), liveRuns: engine.liveRuns });
        summary = { at: now, base: cur };
      },
    },
    { name: 'live_gauges', everyMs: 0, run: () => liveGauges() },
  ];
  return tasks.filter((t): t is PeriodicTask => t !== false);
}

/**
 * Shutdown: stop accepting, let in-flight exports finish and commit, then close the store. A client that holds a
 * connection open past the grace period (a stalled upload, a lingering stream) is cut off then.
 */
function closer(p: Parts, l: Listeners, scheduler: Scheduler, lock: { release(): void }): () => Promise<void> {
  const { cfg, alerting, store, cluster } = p;
  // Stop accepting; idle keep-alive connections close now, busy ones once their answer is sent.
  const closeHttp = (s: Listener) =>
    new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeIdleConnections();
      const idle = setInterval(() => s.closeIdleConnections(), 100);
      idle.unref();
      s.once('close', () => clearInterval(idle));
    });
  return async () => {
    p.stopping.now = true;
    // A cluster takeover in progress stops at its next group of runs (it could hold the exit past 10 s).
    cluster?.beginLeave();
    // A job in flight ends at its next pause (a slice, ~20 ms): what it deleted so far stays deleted.
    const jobsStopped = scheduler.stop();
    alerting?.close();
    const graceful = Promise.all([closeHttp(l.otlpHttp), closeHttp(l.api), new Promise<void>((resolve) => l.grpcServer.server.tryShutdown(() => resolve()))]);
    let graceTimer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => (graceTimer = setTimeout(() => resolve('expired'), cfg.shutdownGraceMs)));
    if ((await Promise.race([graceful, expired])) === 'expired') {
      cfg.log('shutdown_grace_expired', { graceMs: cfg.shutdownGraceMs });
      l.otlpHttp.closeAllConnections();
      l.api.closeAllConnections();
      l.grpcServer.server.forceShutdown();
      await graceful;
    }
    clearTimeout(graceTimer);
    await jobsStopped;
    await p.decodePool?.close();
    try {
      await store.sync();
    } catch (e) {
      cfg.log('final_sync_failed', { error: (e as Error).message });
    }
    if (cluster) await cluster.stop();
    await store.close();
    lock.release();
  };
}

function defaultInstanceName(): string {
  return `${hostname().replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 40) || 'host'}-${process.pid}-${randomBytes(3).toString('hex')}`;
}
