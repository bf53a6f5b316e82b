import { parseArgs } from 'node:util';
import { ContractRegistry } from '../core/registry.js';
import { parseDuration } from '../core/edge.js';
import { loadTokenFile } from '../server/auth.js';
import { DEFAULTS, startServer, type ServeConfig } from '../server/serve.js';
import { loadTlsMaterial, type TlsMaterial } from '../server/tls.js';
import { type Io, UsageError } from './io.js';

const VERSION = '0.1.0';

function portArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${name}: not a port: ${v}`);
  return n;
}

function durationArg(name: string, v: string | undefined, def: number): number {
  if (v === undefined) return def;
  const ms = parseDuration(v);
  if (ms === null) throw new UsageError(`${name}: not a duration (e.g. 10s, 5m, 7d): ${v}`);
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

const isLoopback = (h: string) => h === 'localhost' || h === '::1' || /^127\./.test(h);

/** Structured, content-free log lines on stderr. */
export const log = (io: Io) => (event: string, fields: Record<string, unknown> = {}) =>
  io.stderr(JSON.stringify({ time: new Date().toISOString(), event, ...fields }) + '\n');

export async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      contracts: { type: 'string', default: 'contracts' },
      contract: { type: 'string' },
      data: { type: 'string', default: DEFAULTS.dataDir },
      'otlp-http-port': { type: 'string' },
      'otlp-grpc-port': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string', default: DEFAULTS.host },
      'max-body': { type: 'string' },
      'max-grpc-message': { type: 'string' },
      retention: { type: 'string' },
      'parent-wait': { type: 'string' },
      'max-pending-receipts': { type: 'string' },
      'max-inflight': { type: 'string' },
      'ingest-tokens': { type: 'string' },
      'api-tokens': { type: 'string' },
      insecure: { type: 'boolean', default: false },
      'group-commit-delay': { type: 'string' },
      'max-db-size': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-client-ca': { type: 'string' },
      'grpc-impl': { type: 'string', default: 'h2' },
    },
  });
  const registry = ContractRegistry.loadDir(values.contracts!);
  if (values.contract && registry.versions(values.contract).length === 0) throw new UsageError(`serve: --contract ${values.contract}: no such contract in ${values.contracts}`);
  let ingestTokens, apiTokens;
  try {
    ingestTokens = values['ingest-tokens'] ? loadTokenFile(values['ingest-tokens'], true) : undefined;
    apiTokens = values['api-tokens'] ? loadTokenFile(values['api-tokens'], false) : undefined;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const tls = tlsArgs(values['tls-cert'], values['tls-key'], values['tls-client-ca']);
  const host = values.host!;
  if (!isLoopback(host) && !(ingestTokens && apiTokens) && !values.insecure) {
    throw new UsageError(`serve: refusing to bind ${host} (not loopback) without --ingest-tokens and --api-tokens; pass --insecure to accept unauthenticated traffic`);
  }
  const intArg = (name: string, v: string | undefined, def: number) => {
    if (v === undefined) return def;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`${name}: expected a positive integer: ${v}`);
    return n;
  };
  const cfg: ServeConfig = {
    ...DEFAULTS,
    host,
    port: portArg('--port', values.port, DEFAULTS.port),
    otlpHttpPort: portArg('--otlp-http-port', values['otlp-http-port'], DEFAULTS.otlpHttpPort),
    otlpGrpcPort: portArg('--otlp-grpc-port', values['otlp-grpc-port'], DEFAULTS.otlpGrpcPort),
    dataDir: values.data!,
    defaultContract: values.contract,
    maxBodyBytes: bytesArg('--max-body', values['max-body'], DEFAULTS.maxBodyBytes),
    maxGrpcMessageBytes: bytesArg('--max-grpc-message', values['max-grpc-message'], DEFAULTS.maxGrpcMessageBytes),
    retentionMs: durationArg('--retention', values.retention, DEFAULTS.retentionMs),
    parentWaitMs: durationArg('--parent-wait', values['parent-wait'], DEFAULTS.parentWaitMs),
    maxPendingReceipts: intArg('--max-pending-receipts', values['max-pending-receipts'], DEFAULTS.maxPendingReceipts),
    maxInflightRequests: intArg('--max-inflight', values['max-inflight'], DEFAULTS.maxInflightRequests),
    groupCommitDelayMs: durationArg('--group-commit-delay', values['group-commit-delay'], DEFAULTS.groupCommitDelayMs),
    maxDbBytes: values['max-db-size'] !== undefined ? bytesArg('--max-db-size', values['max-db-size'], 0) : undefined,
    ingestTokens,
    apiTokens,
    tls,
    grpcImpl: grpcImplArg(values['grpc-impl']!),
    log: log(io),
    version: VERSION,
  };
  const { createUiRoutes } = await import('../ui/routes.js');
  cfg.extraRoutes = (engine, opts) => createUiRoutes(engine, opts);
  if (!isLoopback(host) && ingestTokens && !tls) cfg.log('warning', { message: 'bearer tokens cross the network in clear text; pass --tls-cert and --tls-key' });
  const server = await startServer(registry, cfg);
  const { ports } = server;
  const scheme = tls ? 'https' : 'http';
  io.stdout(`topology-audit serving: api+ui ${scheme}://${host}:${ports.api}/  otlp-http ${scheme}://${host}:${ports.otlpHttp}/v1/traces  otlp-grpc ${host}:${ports.otlpGrpc}${tls ? ' (TLS)' : ''}\n`);
  io.stdout(JSON.stringify({ listening: { host, api: ports.api, otlpHttp: ports.otlpHttp, otlpGrpc: ports.otlpGrpc }, tls: tls !== undefined, contracts: registry.ids(), data: cfg.dataDir }) + '\n');
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
        (e) => {
          cfg.log('shutdown_failed', { error: (e as Error).message });
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
