import { parseArgs, type ParseArgsConfig } from 'node:util';
import { availableParallelism } from 'node:os';
import { parseRunKey, type RunKeyPart } from '../ingest/runkey.js';
import { resolveShadows } from '../core/shadow.js';
import { parseDuration } from '../core/edge.js';
import { loadTokenFile } from '../server/auth.js';
import { DEFAULTS, startServer, type RunningServer, type ServeConfig } from '../server/serve.js';
import { loadTlsMaterial, type TlsMaterial } from '../server/tls.js';
import { defaultWorkers } from '../server/worker-pool.js';
import { type Io, outputWriteErrors, processIo, UsageError } from './io.js';

import { packagedContractsDir, packagedRulesFile } from './paths.js';
import { alertingConfig, AlertingConfigError, type AlertingConfig } from '../alerting/index.js';
import { loadRunbooks, runbooksHtml } from '../alerting/runbooks.js';
import { VERSION } from './version.js';
import { loadContractDir } from '../audit/contracts-dir.js';

function portArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${name}: not a port: ${v}`);
  return n;
}

function durationArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const ms = parseDuration(v);
  if (ms === null) throw new UsageError(`${name}: "${v}" is not a duration; use a whole number with ms, s, m, h or d (e.g. 10s, 5m, 7d)`);
  return ms;
}

function bytesArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const m = /^(\d+)(|k|ki|m|mi|kib|mib)$/i.exec(v.trim());
  if (!m) throw new UsageError(`${name}: not a size (e.g. 20MiB): ${v}`);
  const unit = m[2].toLowerCase();
  return Number(m[1]) * (unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 * 1024 : 1);
}

/** --tls-cert and --tls-key go together; --tls-client-ca needs both. */
function tlsArgs(cert: string | undefined, key: string | undefined, clientCa: string | undefined): TlsMaterial | undefined {
  if (cert === undefined && key === undefined) {
    if (clientCa !== undefined) throw new UsageError('serve: --tls-client-ca needs --tls-cert and --tls-key');
    return undefined;
  }
  if (cert === undefined || key === undefined) throw new UsageError('serve: --tls-cert and --tls-key go together');
  try {
    return loadTlsMaterial({ certFile: cert, keyFile: key, clientCaFile: clientCa });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function grpcImplArg(v: string): 'h2' | 'grpc-js' {
  if (v !== 'h2' && v !== 'grpc-js') throw new UsageError(`--grpc-impl: expected h2 or grpc-js: ${v}`);
  return v;
}

/** --workers N: 0 (decode on the main thread) up to 256; absent: available cores - 1, at least 1. */
function workersArg(v: string | undefined): number {
  if (v === undefined) return defaultWorkers(availableParallelism());
  const n = Number(v.trim());
  if (v.trim() === '' || !Number.isInteger(n) || n < 0 || n > 256) throw new UsageError(`--workers: expected an integer from 0 to 256: ${v}`);
  return n;
}

const isLoopback = (h: string) => h === 'localhost' || h === '::1' || /^127\./.test(h);

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The level of an event: warnings and failures are named so; everything else is info. */
export function levelOf(event: string): LogLevel {
  if (/(_failed|_error|^error)$/.test(event)) return 'error';
  if (/^warn|_expired$|_refused$/.test(event)) return 'warn';
  return 'info';
}

/** Events logged once per run and verdict: many per second under load (see `log`'s `batched`). */
export const PER_RUN_EVENTS: ReadonlySet<string> = new Set(['verdict_changed']);

/**
 * Structured, content-free log lines (JSON, one per line) on stderr, at or above `min`. Lines of `batched` events
 * written to the process's own stderr are gathered and written once per event-loop turn (a synchronous pipe write
 * per verdict change took ~1.3% of an OTLP server's CPU under load, perf); any other line first writes what is
 * gathered, so lines keep their order, and the rest is written at the end of the turn or at exit (a SIGKILL can
 * lose one turn's batched lines). Any other Io (tests, embedding) gets every line at once, as before.
 */
export const log = (io: Io, min: LogLevel = 'info', batched: ReadonlySet<string> = new Set()) => {
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    io.stderr(text);
  };
  const gather = batched.size > 0 && io === processIo;
  if (gather) process.once('exit', flush);
  return (event: string, fields: Record<string, unknown> = {}) => {
    const level = (fields.level as LogLevel | undefined) ?? levelOf(event);
    if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(min)) return;
    const { level: _drop, ...rest } = fields;
    const line = JSON.stringify({ time: new Date().toISOString(), level, event, ...rest }) + '\n';
    if (gather && batched.has(event)) {
      pending += line;
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
      return;
    }
    flush();
    io.stderr(line);
  };
};

/** --run-key explicit,invocation,trace[,conversation] (src/ingest/runkey.ts). */
function runKeyArg(v: string | undefined): RunKeyPart[] | undefined {
  if (v === undefined) return undefined;
  try {
    return parseRunKey(v);
  } catch (e) {
    throw new UsageError(`serve: ${(e as Error).message}`);
  }
}

/** `--store`: a postgres:// URL (the embedded SQLite store in --data is the default). */
function storeArg(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!/^postgres(ql)?:\/\//.test(v)) throw new UsageError(`--store: expected a postgres://user@host:port/db URL (the embedded SQLite store in --data DIR is the default)`);
  try {
    new URL(v);
  } catch {
    throw new UsageError('--store: not a valid URL');
  }
  return v;
}

function instanceArg(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!/^[A-Za-z0-9_.:-]{1,100}$/.test(v)) throw new UsageError(`--instance: 1-100 characters of A-Z a-z 0-9 _ . : -`);
  return v;
}

function spanRoutingArg(v: string | undefined, cluster: boolean): 'trace' | 'any' | undefined {
  if (v === undefined) return undefined;
  if (v !== 'trace' && v !== 'any') throw new UsageError(`--span-routing: expected trace or any: ${v}`);
  if (!cluster) throw new UsageError('--span-routing applies to a cluster (--store postgres://...)');
  return v;
}

function partitionsArg(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 4096) throw new UsageError(`--partitions: expected an integer from 1 to 4096: ${v}`);
  return n;
}

type AlertingFlags = {
  urls: string[];
  externalUrl?: string;
  runbookUrl?: string;
  resend?: string;
  timeout?: string;
  maxSilence?: string;
  queueCapacity?: string;
  caFile?: string;
  insecureSkipVerify: boolean;
  bearerTokenFile?: string;
  basicAuthUser?: string;
  basicAuthPasswordFile?: string;
};

/** --alertmanager-url ... (docs/alerting.md): the validated configuration, or undefined without any Alertmanager. */
function alertingArgs(f: AlertingFlags, defaultExternal: string | null): AlertingConfig | undefined {
  if (f.urls.length === 0) {
    const stray = Object.entries(f).find(([k, v]) => k !== 'urls' && k !== 'insecureSkipVerify' && v !== undefined);
    if (stray || f.insecureSkipVerify) throw new UsageError('serve: the Alertmanager options need --alertmanager-url');
    return undefined;
  }
  const externalUrl = f.externalUrl ?? defaultExternal;
  if (externalUrl === null) throw new UsageError('serve: --alertmanager-url needs --external-url (the URL on-call opens for a run, e.g. https://topology-audit.example:9464) when --port is 0');
  const positive = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`${name}: expected a positive integer: ${v}`);
    return n;
  };
  try {
    return alertingConfig({
      alertmanagers: f.urls,
      externalUrl,
      runbookUrl: f.runbookUrl,
      resendMs: f.resend !== undefined ? durationArg('--alertmanager-resend', f.resend, 0) : undefined,
      timeoutMs: f.timeout !== undefined ? durationArg('--alertmanager-timeout', f.timeout, 0) : undefined,
      maxSilenceMs: f.maxSilence !== undefined ? durationArg('--alertmanager-max-silence', f.maxSilence, 0) : undefined,
      queueCapacity: positive('--alertmanager-queue-capacity', f.queueCapacity),
      caFile: f.caFile,
      insecureSkipVerify: f.insecureSkipVerify,
      bearerTokenFile: f.bearerTokenFile,
      basicAuthUser: f.basicAuthUser,
      basicAuthPasswordFile: f.basicAuthPasswordFile,
    });
  } catch (e) {
    if (e instanceof AlertingConfigError) throw new UsageError(`serve: ${e.message}`);
    throw e;
  }
}

/** The flags of `serve` (documented in src/cli/specs.ts). */
const SERVE_OPTIONS = {
  contracts: { type: 'string' },
  'log-level': { type: 'string', default: 'info' },
  'log-interval': { type: 'string' },
  'alert-window': { type: 'string' },
  'stall-after': { type: 'string' },
  contract: { type: 'string' },
  data: { type: 'string', default: DEFAULTS.dataDir },
  'otlp-http-port': { type: 'string' },
  'otlp-grpc-port': { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string', default: DEFAULTS.host },
  'max-body': { type: 'string' },
  'max-body-total': { type: 'string' },
  'max-grpc-message': { type: 'string' },
  retention: { type: 'string' },
  'parent-wait': { type: 'string' },
  'max-skeleton-spans': { type: 'string' },
  'max-trace-spans': { type: 'string' },
  'max-pending-receipts': { type: 'string' },
  'max-inflight': { type: 'string' },
  'ingest-tokens': { type: 'string' },
  'api-tokens': { type: 'string' },
  'viewer-tokens': { type: 'string' },
  insecure: { type: 'boolean', default: false },
  'group-commit-delay': { type: 'string' },
  'max-db-size': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'tls-client-ca': { type: 'string' },
  'run-key': { type: 'string' },
  shadow: { type: 'string', multiple: true, default: [] },
  'max-connections': { type: 'string' },
  'headers-timeout': { type: 'string' },
  'request-timeout': { type: 'string' },
  'keep-alive-timeout': { type: 'string' },
  'max-grpc-streams': { type: 'string' },
  'max-live-runs': { type: 'string' },
  'idle-evict-after': { type: 'string' },
  'max-long-polls': { type: 'string' },
  'health-port': { type: 'string' },
  'max-live-receipts': { type: 'string' },
  'max-event-streams': { type: 'string' },
  'grpc-impl': { type: 'string', default: 'h2' },
  workers: { type: 'string' },
  store: { type: 'string' },
  instance: { type: 'string' },
  'lease-ttl': { type: 'string' },
  partitions: { type: 'string' },
  'span-routing': { type: 'string' },
  'alertmanager-url': { type: 'string', multiple: true, default: [] },
  'external-url': { type: 'string' },
  'runbook-url': { type: 'string' },
  'alertmanager-resend': { type: 'string' },
  'alertmanager-timeout': { type: 'string' },
  'alertmanager-max-silence': { type: 'string' },
  'alertmanager-queue-capacity': { type: 'string' },
  'alertmanager-ca-file': { type: 'string' },
  'alertmanager-insecure-skip-verify': { type: 'boolean', default: false },
  'alertmanager-bearer-token-file': { type: 'string' },
  'alertmanager-basic-auth-user': { type: 'string' },
  'alertmanager-basic-auth-password-file': { type: 'string' },
} satisfies NonNullable<ParseArgsConfig['options']>;

/** The web view on the API port (src/ui), composed here: the server never imports the UI. */
async function uiRoutes(maxEventStreams: number): Promise<NonNullable<ServeConfig['extraRoutes']>> {
  const { createUiRoutes } = await import('../ui/routes.js');
  return (engine, opts) =>
    createUiRoutes(engine, {
      authenticate: opts.authenticate,
      tokensRequired: opts.tokensRequired,
      silenceOf: opts.silenceOf,
      now: opts.now,
      maxStreams: maxEventStreams,
      onStreams: (n) => opts.resources.setSseClients(n),
      onStreamDropped: (why) => opts.resources.sseDropped(why),
    });
}

/** A positive integer flag, or its default. */
function intArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${name}: expected a positive integer: ${v}`);
  return n;
}

export async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseArgs({ args: argv, options: SERVE_OPTIONS });
  const level = values['log-level'] as LogLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`--log-level: "${level}" is not one of ${LOG_LEVELS.join(', ')}`);
  const logger = log(io, level, PER_RUN_EVENTS);
  const contractsDir = values.contracts ?? packagedContractsDir();
  const registry = loadContractDir(contractsDir);
  if (values.contract && registry.versions(values.contract).length === 0) throw new UsageError(`serve: --contract ${values.contract}: no such contract in ${contractsDir}`);
  let shadow;
  try {
    shadow = resolveShadows(registry, values.shadow as string[]);
  } catch (e) {
    throw new UsageError(`serve: ${(e as Error).message}`);
  }
  let ingestTokens, apiTokens, viewerTokens;
  try {
    ingestTokens = values['ingest-tokens'] ? loadTokenFile(values['ingest-tokens'], true) : undefined;
    apiTokens = values['api-tokens'] ? loadTokenFile(values['api-tokens'], false) : undefined;
    viewerTokens = values['viewer-tokens'] ? loadTokenFile(values['viewer-tokens'], false) : undefined;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (viewerTokens && !apiTokens) throw new UsageError('serve: --viewer-tokens needs --api-tokens (without it the web view is open to all)');
  const tls = tlsArgs(values['tls-cert'], values['tls-key'], values['tls-client-ca']);
  const host = values.host!;
  if (!isLoopback(host) && !(ingestTokens && apiTokens) && !values.insecure) {
    throw new UsageError(`serve: refusing to bind ${host} (not loopback) without --ingest-tokens and --api-tokens; pass --insecure to accept unauthenticated traffic`);
  }
  const cfg: ServeConfig = {
    ...DEFAULTS,
    host,
    port: portArg('--port', values.port, DEFAULTS.port),
    otlpHttpPort: portArg('--otlp-http-port', values['otlp-http-port'], DEFAULTS.otlpHttpPort),
    otlpGrpcPort: portArg('--otlp-grpc-port', values['otlp-grpc-port'], DEFAULTS.otlpGrpcPort),
    dataDir: values.data!,
    storeUrl: storeArg(values.store),
    instance: instanceArg(values.instance),
    leaseTtlMs: durationArg('--lease-ttl', values['lease-ttl'], DEFAULTS.leaseTtlMs),
    partitions: values.partitions !== undefined ? partitionsArg(values.partitions) : undefined,
    spanRouting: spanRoutingArg(values['span-routing'], values.store !== undefined),
    defaultContract: values.contract,
    maxBodyBytes: bytesArg('--max-body', values['max-body'], DEFAULTS.maxBodyBytes),
    maxBodyTotalBytes: values['max-body-total'] !== undefined ? bytesArg('--max-body-total', values['max-body-total'], 0) : undefined,
    maxGrpcMessageBytes: bytesArg('--max-grpc-message', values['max-grpc-message'], DEFAULTS.maxGrpcMessageBytes),
    retentionMs: durationArg('--retention', values.retention, DEFAULTS.retentionMs),
    parentWaitMs: durationArg('--parent-wait', values['parent-wait'], DEFAULTS.parentWaitMs),
    maxPendingSpans: intArg('--max-skeleton-spans', values['max-skeleton-spans'], DEFAULTS.maxPendingSpans),
    maxTraceSpans: intArg('--max-trace-spans', values['max-trace-spans'], DEFAULTS.maxTraceSpans),
    maxPendingReceipts: intArg('--max-pending-receipts', values['max-pending-receipts'], DEFAULTS.maxPendingReceipts),
    maxInflightRequests: intArg('--max-inflight', values['max-inflight'], DEFAULTS.maxInflightRequests),
    groupCommitDelayMs: durationArg('--group-commit-delay', values['group-commit-delay'], DEFAULTS.groupCommitDelayMs),
    maxDbBytes: values['max-db-size'] !== undefined ? bytesArg('--max-db-size', values['max-db-size'], 0) : undefined,
    maxConnections: intArg('--max-connections', values['max-connections'], DEFAULTS.maxConnections),
    headersTimeoutMs: durationArg('--headers-timeout', values['headers-timeout'], DEFAULTS.headersTimeoutMs),
    requestTimeoutMs: durationArg('--request-timeout', values['request-timeout'], DEFAULTS.requestTimeoutMs),
    keepAliveTimeoutMs: durationArg('--keep-alive-timeout', values['keep-alive-timeout'], DEFAULTS.keepAliveTimeoutMs),
    maxGrpcStreams: intArg('--max-grpc-streams', values['max-grpc-streams'], DEFAULTS.maxGrpcStreams),
    maxLiveRuns: intArg('--max-live-runs', values['max-live-runs'], DEFAULTS.maxLiveRuns),
    idleEvictMs: durationArg('--idle-evict-after', values['idle-evict-after'], DEFAULTS.idleEvictMs),
    maxLongPolls: intArg('--max-long-polls', values['max-long-polls'], DEFAULTS.maxLongPolls),
    healthPort: values['health-port'] === undefined ? undefined : portArg('--health-port', values['health-port'], 0),
    maxLiveReceipts: intArg('--max-live-receipts', values['max-live-receipts'], DEFAULTS.maxLiveReceipts),
    ingestTokens,
    apiTokens,
    viewerTokens,
    tls,
    runKey: runKeyArg(values['run-key']),
    grpcImpl: grpcImplArg(values['grpc-impl']!),
    workers: workersArg(values.workers),
    log: logger,
    outputWriteErrors: () => ({ ...outputWriteErrors }),
    version: VERSION,
    shadow,
    alertWindowMs: durationArg('--alert-window', values['alert-window'], DEFAULTS.alertWindowMs),
    stallAfterMs: durationArg('--stall-after', values['stall-after'], DEFAULTS.stallAfterMs),
    logIntervalMs: durationArg('--log-interval', values['log-interval'], DEFAULTS.logIntervalMs),
  };
  if (cfg.maxBodyTotalBytes !== undefined && cfg.maxBodyTotalBytes < cfg.maxBodyBytes) throw new UsageError(`--max-body-total: at least --max-body (${cfg.maxBodyBytes} bytes), or no body of the largest size is ever read`);
  const apiPort = portArg('--port', values.port, DEFAULTS.port);
  cfg.alerting = alertingArgs(
    {
      urls: values['alertmanager-url'] as string[],
      externalUrl: values['external-url'],
      runbookUrl: values['runbook-url'],
      resend: values['alertmanager-resend'],
      timeout: values['alertmanager-timeout'],
      maxSilence: values['alertmanager-max-silence'],
      queueCapacity: values['alertmanager-queue-capacity'],
      caFile: values['alertmanager-ca-file'],
      insecureSkipVerify: values['alertmanager-insecure-skip-verify'] as boolean,
      bearerTokenFile: values['alertmanager-bearer-token-file'],
      basicAuthUser: values['alertmanager-basic-auth-user'],
      basicAuthPasswordFile: values['alertmanager-basic-auth-password-file'],
    },
    apiPort === 0 ? null : `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${apiPort}`,
  );
  // GET /runbooks: the shipped rules' runbooks, the runbook_url of the Prometheus rules and of per-run alerts.
  try {
    cfg.runbooksHtml = runbooksHtml(loadRunbooks(packagedRulesFile()));
  } catch (e) {
    cfg.log('warning', { message: `the packaged rules file cannot be read, so /runbooks is not served: ${(e as Error).message}` });
  }
  if (cfg.alerting) {
    cfg.log('alertmanager', { alertmanagers: cfg.alerting.alertmanagers.map((u) => u.href), externalUrl: cfg.alerting.externalUrl, resendMs: cfg.alerting.resendMs });
  }
  // Start-up: which contracts (the packaged examples unless --contracts), counted; never file contents.
  cfg.log('starting', { version: VERSION, contractsDir: values.contracts === undefined ? 'packaged examples' : 'given', contracts: registry.ids().length, logLevel: level });
  if (values.contracts === undefined) io.stdout(`topology-audit: no --contracts given; using the packaged example contracts (${registry.ids().join(', ')}); pass --contracts DIR for your own\n`);
  if (registry.ids().length === 0) cfg.log('warning', { message: 'the contract registry is empty: every run will be unpinned (add contract YAML files to --contracts DIR)' });
  if (cfg.headersTimeoutMs <= 0 || cfg.requestTimeoutMs < cfg.headersTimeoutMs) throw new UsageError('serve: --request-timeout must be at least --headers-timeout, and both above zero');
  const maxEventStreams = intArg('--max-event-streams', values['max-event-streams'], 64);
  cfg.extraRoutes = await uiRoutes(maxEventStreams);
  if (!isLoopback(host) && ingestTokens && !tls) cfg.log('warning', { message: 'bearer tokens cross the network in clear text; pass --tls-cert and --tls-key' });
  if (shadow.length) cfg.log('shadow', { candidates: shadow.map((c) => `${c.contract}@${c.version}`) });
  let server;
  try {
    server = await startServer(registry, cfg);
  } catch (e) {
    // Any listener that cannot start, a locked data directory or an unreadable row: say why and exit 2, as --help
    // says (never half-started: whatever did open was closed again).
    cfg.log('start_failed', { error: (e as Error).message });
    io.stderr(`topology-audit serve: cannot start: ${(e as Error).message}\n`);
    setTimeout(() => process.exit(2), 300).unref();
    return 2;
  }
  return announceAndWait(server, cfg, io, registry.ids());
}

/** Logs and prints where the server listens, then serves until SIGTERM or SIGINT (0 once everything is closed). */
function announceAndWait(server: RunningServer, cfg: ServeConfig, io: Io, contracts: string[]): Promise<number> {
  const { host, tls } = cfg;
  const { ports } = server;
  cfg.log('listening', { host, api: ports.api, otlpHttp: ports.otlpHttp, otlpGrpc: ports.otlpGrpc, ...(ports.health !== undefined ? { health: ports.health } : {}), tls: tls !== undefined });
  const scheme = tls ? 'https' : 'http';
  io.stdout(`topology-audit serving: api+ui ${scheme}://${host}:${ports.api}/  otlp-http ${scheme}://${host}:${ports.otlpHttp}/v1/traces  otlp-grpc ${host}:${ports.otlpGrpc}${tls ? ' (TLS)' : ''}\n`);
  io.stdout(JSON.stringify({ listening: { host, api: ports.api, otlpHttp: ports.otlpHttp, otlpGrpc: ports.otlpGrpc, ...(ports.health !== undefined ? { health: ports.health } : {}) }, tls: tls !== undefined, contracts, ...(cfg.storeUrl ? { store: 'postgres' } : { data: cfg.dataDir }) }) + '\n');
  return new Promise<number>((resolve) => {
    let closing = false;
    const stop = (signal: string) => {
      if (closing) return;
      closing = true;
      cfg.log('shutdown', { signal });
      server.close().then(
        () => {
          cfg.log('stopped', { signal });
          resolve(0);
          // Everything is committed and closed; do not wait for library timers (e.g. HTTP/2 keepalives) to lapse.
          setTimeout(() => process.exit(0), 300).unref();
        },
        (e: unknown) => {
          cfg.log('shutdown_failed', { error: (e as Error).message });
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
