import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { resolveShadows } from '../core/shadow.js';
import { LOG_LEVELS, OptionError, readServeOptions, type LogLevel } from '../server/serve-options.js';
import { DEFAULTS, startServer, type RunningServer, type ServeConfig } from '../server/serve.js';
import { loadTlsMaterial, type TlsMaterial } from '../server/tls.js';
import { defaultWorkers } from '../server/worker-pool.js';
import { type Io, outputWriteErrors, processIo, UsageError } from './io.js';
import { parseFlags } from './spec.js';
import { SERVE_SPEC } from './specs.js';

import { packagedContractsDir, packagedRulesFile } from './paths.js';
import { alertingConfig, AlertingConfigError, type AlertingConfig } from '../alerting/index.js';
import { loadRunbooks, runbooksHtml } from '../alerting/runbooks.js';
import { VERSION } from './version.js';
import { loadContractDir } from '../audit/contracts-dir.js';

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

export { LOG_LEVELS, type LogLevel };

const isLoopback = (h: string) => h === 'localhost' || h === '::1' || /^127\./.test(h);

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

type AlertingFlags = {
  urls: string[];
  externalUrl?: string;
  runbookUrl?: string;
  resendMs?: number;
  timeoutMs?: number;
  maxSilenceMs?: number;
  queueCapacity?: number;
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
  try {
    return alertingConfig({
      alertmanagers: f.urls,
      externalUrl,
      runbookUrl: f.runbookUrl,
      resendMs: f.resendMs,
      timeoutMs: f.timeoutMs,
      maxSilenceMs: f.maxSilenceMs,
      queueCapacity: f.queueCapacity,
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

/** serve's argv read through its one option table (src/server/serve-options.ts): config fields and the command's own flags. */
export function readServeArgs(argv: string[]): ReturnType<typeof readServeOptions> {
  const { values } = parseFlags(SERVE_SPEC, argv);
  try {
    return readServeOptions(values);
  } catch (e) {
    if (e instanceof OptionError) throw new UsageError(e.message);
    throw e;
  }
}

export async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { config: options, flags } = readServeArgs(argv);
  // The heap's growth over its live set between full collections (V8 reads the flag at each collection): bounded by
  // default, so the process's memory follows what it holds (docs/operations.md, "Memory").
  const gcPercent = flags['gc-percent'] ?? 100;
  if (gcPercent > 0) setFlagsFromString(`--heap-growing-percent=${gcPercent}`);
  const level = flags['log-level'] ?? 'info';
  const logger = log(io, level, PER_RUN_EVENTS);
  const contractsDir = flags.contracts ?? packagedContractsDir();
  const registry = loadContractDir(contractsDir);
  if (options.defaultContract && registry.versions(options.defaultContract).length === 0) throw new UsageError(`serve: --contract ${options.defaultContract}: no such contract in ${contractsDir}`);
  let shadow;
  try {
    shadow = resolveShadows(registry, flags.shadow ?? []);
  } catch (e) {
    throw new UsageError(`serve: ${(e as Error).message}`);
  }
  if (options.viewerTokens && !options.apiTokens) throw new UsageError('serve: --viewer-tokens needs --api-tokens (without it the web view is open to all)');
  const tls = tlsArgs(flags['tls-cert'], flags['tls-key'], flags['tls-client-ca']);
  const cfg: ServeConfig = {
    ...DEFAULTS,
    ...options,
    tls,
    workers: options.workers ?? defaultWorkers(availableParallelism()),
    log: logger,
    outputWriteErrors: () => ({ ...outputWriteErrors }),
    version: VERSION,
    shadow,
  };
  const host = cfg.host;
  if (!isLoopback(host) && !(cfg.ingestTokens && cfg.apiTokens) && !flags.insecure) {
    throw new UsageError(`serve: refusing to bind ${host} (not loopback) without --ingest-tokens and --api-tokens; pass --insecure to accept unauthenticated traffic`);
  }
  if (cfg.spanRouting !== undefined && cfg.storeUrl === undefined) throw new UsageError('--span-routing applies to a cluster (--store postgres://...)');
  if (cfg.maxBodyTotalBytes !== undefined && cfg.maxBodyTotalBytes < cfg.maxBodyBytes) throw new UsageError(`--max-body-total: at least --max-body (${cfg.maxBodyBytes} bytes), or no body of the largest size is ever read`);
  const apiPort = cfg.port;
  cfg.alerting = alertingArgs(
    {
      urls: flags['alertmanager-url'] ?? [],
      externalUrl: flags['external-url'],
      runbookUrl: flags['runbook-url'],
      resendMs: flags['alertmanager-resend'],
      timeoutMs: flags['alertmanager-timeout'],
      maxSilenceMs: flags['alertmanager-max-silence'],
      queueCapacity: flags['alertmanager-queue-capacity'],
      caFile: flags['alertmanager-ca-file'],
      insecureSkipVerify: flags['alertmanager-insecure-skip-verify'] ?? false,
      bearerTokenFile: flags['alertmanager-bearer-token-file'],
      basicAuthUser: flags['alertmanager-basic-auth-user'],
      basicAuthPasswordFile: flags['alertmanager-basic-auth-password-file'],
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
  cfg.log('starting', { version: VERSION, gcPercent, contractsDir: flags.contracts === undefined ? 'packaged examples' : 'given', contracts: registry.ids().length, logLevel: level });
  if (flags.contracts === undefined) io.stdout(`topology-audit: no --contracts given; using the packaged example contracts (${registry.ids().join(', ')}); pass --contracts DIR for your own\n`);
  if (registry.ids().length === 0) cfg.log('warning', { message: 'the contract registry is empty: every run will be unpinned (add contract YAML files to --contracts DIR)' });
  if (cfg.headersTimeoutMs <= 0 || cfg.requestTimeoutMs < cfg.headersTimeoutMs) throw new UsageError('serve: --request-timeout must be at least --headers-timeout, and both above zero');
  const maxEventStreams = flags['max-event-streams'] ?? 64;
  cfg.extraRoutes = await uiRoutes(maxEventStreams);
  if (!isLoopback(host) && cfg.ingestTokens && !tls) cfg.log('warning', { message: 'bearer tokens cross the network in clear text; pass --tls-cert and --tls-key' });
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
