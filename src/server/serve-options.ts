/**
 * The one definition of `serve`'s options: flag name, value placeholder, default, help and, for an option that sets
 * a `ServeConfig` field, the field and the parser of its text. From this table come the command-line parser and
 * `--help` of serve (src/cli/specs.ts), the flag-set part of `ServeConfig` and its `DEFAULTS` (src/server/serve.ts),
 * and the serve section of docs/cli.md (generated from --help by scripts/gen-cli-docs.mjs).
 *
 * An option without `key` is read by the command itself (src/cli/serve.ts), because it is combined with others
 * (TLS files, the Alertmanager options), loads something the server does not take (contracts, shadows) or sets the
 * command's own behaviour (log level, --insecure, the web view's stream cap).
 */
import { formatDuration, parseDuration } from '../core/edge.js';
import { ALERTING_DEFAULTS } from '../alerting/index.js';
import { parseRunKey, type RunKeyPart } from '../ingest/runkey.js';
import { loadTokenFile, type TokenEntry } from './auth.js';

/** A bad option value; the command turns it into a usage error (exit 2) with this message. */
export class OptionError extends Error {}

/** Parses the text of an option (its given value or its default) into the value the config holds. */
export type OptionParser<T> = (text: string, flag: string) => T;

export interface ServeOption {
  /** Placeholder shown in help, e.g. "DUR" (string options). */
  value?: string;
  type?: 'boolean';
  multiple?: boolean;
  /** The default as a user would type it: parsed like a given value, applied, and shown in help. */
  default?: string | boolean;
  /** How the default is shown when it is not one literal value (e.g. "4 x --max-body, at least 64MiB"). */
  shown?: string;
  help: string;
  /** The `ServeConfig` field this option sets (with `parse`). */
  key?: string;
  parse?: OptionParser<unknown>;
}

// The parsers, named by what they accept. Their messages are the ones serve has always printed.

export const port: OptionParser<number> = (v, flag) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new OptionError(`${flag}: not a port: ${v}`);
  return n;
};

export const duration: OptionParser<number> = (v, flag) => {
  const ms = parseDuration(v);
  if (ms === null) throw new OptionError(`${flag}: "${v}" is not a duration; use a whole number with ms, s, m, h or d (e.g. 10s, 5m, 7d)`);
  return ms;
};

export const size: OptionParser<number> = (v, flag) => {
  const m = /^(\d+)(|k|ki|m|mi|kib|mib)$/i.exec(v.trim());
  if (!m) throw new OptionError(`${flag}: not a size (e.g. 20MiB): ${v}`);
  const unit = m[2].toLowerCase();
  return Number(m[1]) * (unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 * 1024 : 1);
};

export const count: OptionParser<number> = (v, flag) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new OptionError(`${flag}: expected a positive integer: ${v}`);
  return n;
};

export const text: OptionParser<string> = (v) => v;

/** One of a fixed list of words. */
export const oneOf =
  <const W extends string>(words: readonly W[]): OptionParser<W> =>
  (v, flag) => {
    if (!(words as readonly string[]).includes(v)) throw new OptionError(`${flag}: expected ${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}: ${v}`);
    return v as W;
  };

/** An integer in [lo, hi]. */
const integerIn =
  (lo: number, hi: number): OptionParser<number> =>
  (v, flag) => {
    const n = Number(v.trim());
    if (v.trim() === '' || !Number.isInteger(n) || n < lo || n > hi) throw new OptionError(`${flag}: expected an integer from ${lo} to ${hi}: ${v}`);
    return n;
  };

/** `--store`: a postgres:// URL (the embedded SQLite store in --data is the default). */
const storeUrl: OptionParser<string> = (v, flag) => {
  if (!/^postgres(ql)?:\/\//.test(v)) throw new OptionError(`${flag}: expected a postgres://user@host:port/db URL (the embedded SQLite store in --data DIR is the default)`);
  try {
    new URL(v);
  } catch {
    throw new OptionError(`${flag}: not a valid URL`);
  }
  return v;
};

const instanceName: OptionParser<string> = (v, flag) => {
  if (!/^[A-Za-z0-9_.:-]{1,100}$/.test(v)) throw new OptionError(`${flag}: 1-100 characters of A-Z a-z 0-9 _ . : -`);
  return v;
};

/** --run-key explicit,invocation,trace[,conversation] (src/ingest/runkey.ts). */
const runKey: OptionParser<RunKeyPart[]> = (v) => {
  try {
    return parseRunKey(v);
  } catch (e) {
    throw new OptionError(`serve: ${(e as Error).message}`);
  }
};

/** A bearer token file (src/server/auth.ts); ingest tokens may bind sources to agents. */
const tokenFile =
  (allowAgents: boolean): OptionParser<TokenEntry[]> =>
  (v) => {
    try {
      return loadTokenFile(v, allowAgents);
    } catch (e) {
      throw new OptionError((e as Error).message);
    }
  };

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const logLevel: OptionParser<LogLevel> = (v, flag) => {
  if (!(LOG_LEVELS as readonly string[]).includes(v)) throw new OptionError(`${flag}: "${v}" is not one of ${LOG_LEVELS.join(', ')}`);
  return v as LogLevel;
};

/** serve's options, in the order of its --help. */
export const SERVE_OPTIONS = {
  contracts: { value: 'DIR', shown: "the package's contracts/ examples", help: 'directory of contract YAML files' },
  contract: { key: 'defaultContract', parse: text, value: 'ID', help: 'contract for runs whose run.start names none' },
  data: { key: 'dataDir', parse: text, value: 'DIR', default: './data', help: 'SQLite data directory' },
  store: { key: 'storeUrl', parse: storeUrl, value: 'URL', help: 'shared PostgreSQL store (postgres://user@host:port/db) instead of --data: any number of instances share it (password via PGPASSWORD or ~/.pgpass; docs/scaling.md)' },
  instance: { key: 'instance', parse: instanceName, value: 'NAME', shown: 'host-pid-random', help: "this instance's name in a cluster (--store)" },
  'lease-ttl': { key: 'leaseTtlMs', parse: duration, value: 'DUR', default: '10s', help: "cluster: how long a partition lease lasts unrenewed (a crashed instance's runs are taken over within this plus 0.5 s)" },
  // Shown, not applied: given without --store it is refused (src/cli/serve.ts); unset means trace.
  'span-routing': { key: 'spanRouting', parse: oneOf(['trace', 'any']), value: 'MODE', shown: 'trace', help: "cluster: 'trace' when the Collector routes spans by trace id; 'any' when a span may reach any instance (spans of other instances' traces are forwarded through the shared store)" },
  // Shown, not applied: an existing shared schema keeps its own count (src/store/pg-store.ts makes 64 for a new one).
  partitions: { key: 'partitions', parse: integerIn(1, 4096), value: 'N', shown: '64', help: 'cluster: hash partitions of runs, fixed when the shared schema is created' },
  port: { key: 'port', parse: port, value: 'N', default: '9464', help: 'API, web view and /metrics port' },
  'otlp-http-port': { key: 'otlpHttpPort', parse: port, value: 'N', default: '4318', help: 'OTLP/HTTP receiver port (POST /v1/traces)' },
  'otlp-grpc-port': { key: 'otlpGrpcPort', parse: port, value: 'N', default: '4317', help: 'OTLP/gRPC receiver port' },
  host: { key: 'host', parse: text, value: 'ADDR', default: '127.0.0.1', help: 'listen address (non-loopback needs tokens or --insecure)' },
  'log-level': { parse: logLevel, value: 'LEVEL', default: 'info', help: 'debug, info, warn or error (JSON lines on stderr)' },
  'log-interval': { key: 'logIntervalMs', parse: duration, value: 'DUR', default: '60s', help: 'how often the ingest summary is logged' },
  'alert-window': { key: 'alertWindowMs', parse: duration, value: 'DUR', default: '1h', help: 'how long a new bad verdict stays in topology_alerting_runs (unless acknowledged)' },
  'stall-after': { key: 'stallAfterMs', parse: duration, value: 'DUR', default: '30m', help: 'an unsettled run with no receipt for this long counts in topology_stalled_runs' },
  retention: { key: 'retentionMs', parse: duration, value: 'DUR', default: '7d', help: 'settled runs idle this long are pruned' },
  'parent-wait': { key: 'parentWaitMs', parse: duration, value: 'DUR', default: '10s', help: "how long an agent span waits for its caller's span" },
  'max-skeleton-spans': { key: 'maxPendingSpans', parse: count, value: 'N', default: '200000', help: 'spans of recent traces kept for caller resolution (span ids, parents, agent ids); past it the oldest traces go and their waiting spans become gaps' },
  'max-trace-spans': { key: 'maxTraceSpans', parse: count, value: 'N', default: '10000', help: 'of those, spans one trace may keep (its oldest go first)' },
  'max-body': { key: 'maxBodyBytes', parse: size, value: 'SIZE', default: '20MiB', help: 'largest HTTP request body' },
  'max-body-total': { key: 'maxBodyTotalBytes', parse: size, value: 'SIZE', shown: '4 x --max-body, at least 64MiB', help: 'request bodies being read at once, across the HTTP listeners; past it 503 + Retry-After before reading' },
  'max-grpc-message': { key: 'maxGrpcMessageBytes', parse: size, value: 'SIZE', default: '4MiB', help: 'largest gRPC message' },
  'max-pending-receipts': { key: 'maxPendingReceipts', parse: count, value: 'N', default: '200000', help: 'receipts queued before ingest answers 429' },
  'max-inflight': { key: 'maxInflightRequests', parse: count, value: 'N', default: '256', help: 'concurrent ingest requests' },
  'group-commit-delay': { key: 'groupCommitDelayMs', parse: duration, value: 'DUR', default: '0ms', help: 'longest wait before a group commit' },
  'max-db-size': { key: 'maxDbBytes', parse: size, value: 'SIZE', help: 'cap on the database size (commits past it fail like a full disk)' },
  'ingest-tokens': { key: 'ingestTokens', parse: tokenFile(true), value: 'FILE', help: 'ingest bearer tokens (JSON, with source bindings)' },
  'api-tokens': { key: 'apiTokens', parse: tokenFile(false), value: 'FILE', help: 'API bearer tokens (also open the web view: it asks for one once per browser session)' },
  'viewer-tokens': { key: 'viewerTokens', parse: tokenFile(false), value: 'FILE', help: 'read-only tokens that open the web view only, never the API (needs --api-tokens)' },
  insecure: { type: 'boolean', default: false, help: 'allow a non-loopback --host without tokens' },
  'tls-cert': { value: 'FILE', help: 'PEM certificate (with --tls-key): every listener speaks TLS' },
  'tls-key': { value: 'FILE', help: 'PEM private key' },
  'tls-client-ca': { value: 'FILE', help: 'require client certificates signed by this CA' },
  shadow: { value: 'CONTRACT@VERSION', multiple: true, help: 'also evaluate runs against this candidate version (repeatable; never pinned; docs/contracts.md)' },
  'grpc-impl': { key: 'grpcImpl', parse: oneOf(['h2', 'grpc-js']), value: 'IMPL', default: 'h2', help: 'gRPC receiver: h2 (node:http2) or grpc-js' },
  // Shown, not applied here: the default depends on the machine (src/cli/serve.ts, defaultWorkers).
  workers: {
    key: 'workers',
    parse: integerIn(0, 256),
    value: 'N',
    shown: 'available cores - 1 (at least 1)',
    help: 'threads that inflate and decode compressed (gzip, deflate) OTLP/HTTP and OTLP/gRPC (h2) bodies beside the main thread (the engine and the store stay on it); 0: on the main thread (docs/internals/performance.md)',
  },
  'max-connections': { key: 'maxConnections', parse: count, value: 'N', default: '1024', help: 'open connections per HTTP listener' },
  'headers-timeout': { key: 'headersTimeoutMs', parse: duration, value: 'DUR', default: '10s', help: 'time to receive request headers (and the TLS handshake)' },
  'request-timeout': { key: 'requestTimeoutMs', parse: duration, value: 'DUR', default: '60s', help: 'time to receive a whole request, body included' },
  'keep-alive-timeout': { key: 'keepAliveTimeoutMs', parse: duration, value: 'DUR', default: '5s', help: 'idle keep-alive connections are closed after this' },
  'max-grpc-streams': { key: 'maxGrpcStreams', parse: count, value: 'N', default: '100', help: 'concurrent gRPC streams per connection' },
  'max-live-runs': { key: 'maxLiveRuns', parse: count, value: 'N', default: '100000', help: 'live runs held in memory; past it receipts of new runs get 503 + Retry-After' },
  'max-live-receipts': { key: 'maxLiveReceipts', parse: count, value: 'N', default: '2000000', help: 'receipts held by live runs; past it ingest answers 503 + Retry-After' },
  'max-long-polls': { key: 'maxLongPolls', parse: count, value: 'N', default: '512', help: 'long-polls (verdict?wait=) waiting at once on the API port; past it 429 + Retry-After' },
  'health-port': { key: 'healthPort', parse: port, value: 'PORT', shown: 'none', help: 'a separate listener serving only /healthz, /readyz and /metrics (64 connections), answered while the API port is flooded' },
  'idle-evict-after': { key: 'idleEvictMs', parse: duration, value: 'DUR', default: '15m', help: 'at a live cap, runs with no receipt for this long leave memory (oldest idle first; kept in the store, loaded again on their next receipt)' },
  'gc-percent': {
    parse: integerIn(0, 1000),
    value: 'N',
    default: '100',
    help: "the JavaScript heap grows at most N% over what the last full garbage collection kept, as Go's GOGC (V8's --heap-growing-percent); 0: V8's own choice, up to 300% under steady load (docs/operations.md)",
  },
  'max-event-streams': { parse: count, value: 'N', default: '64', help: 'open web-view event streams (SSE)' },
  'run-key': { key: 'runKey', parse: runKey, value: 'ORDER', default: 'explicit,invocation,trace', help: "where a span's run id comes from, first match wins: explicit, invocation, trace, conversation (docs/dialects.md)" },
  // The Alertmanager options make one AlertingConfig; their defaults are ALERTING_DEFAULTS (src/alerting/config.ts), shown from there.
  'alertmanager-url': { value: 'URL', multiple: true, help: 'send each alerting run as an alert to this Alertmanager (repeatable: an HA pair; docs/alerting.md)' },
  'external-url': { value: 'URL', shown: 'http://HOST:PORT', help: "the auditor's URL as on-call opens it (run_url and runbook_url of alerts)" },
  'runbook-url': { value: 'URL', shown: 'EXTERNAL-URL/runbooks', help: "runbook page of alerts (the alert's name is appended as #fragment)" },
  'alertmanager-resend': { parse: duration, value: 'DUR', shown: formatDuration(ALERTING_DEFAULTS.resendMs), help: 'firing alerts are sent again this often (valid for 4 intervals)' },
  'alertmanager-timeout': { parse: duration, value: 'DUR', shown: formatDuration(ALERTING_DEFAULTS.timeoutMs), help: 'one request to an Alertmanager, answer included (a total deadline)' },
  'alertmanager-max-silence': { parse: duration, value: 'DUR', shown: formatDuration(ALERTING_DEFAULTS.maxSilenceMs), help: 'longest silence `ack --silence` may create' },
  'alertmanager-queue-capacity': { parse: count, value: 'N', shown: String(ALERTING_DEFAULTS.queueCapacity), help: 'alerts waiting for Alertmanager; past it the oldest are dropped (counted)' },
  'alertmanager-ca-file': { value: 'FILE', help: 'CA certificate(s) to verify an https Alertmanager' },
  'alertmanager-insecure-skip-verify': { type: 'boolean', default: false, help: "do not verify an https Alertmanager's certificate" },
  'alertmanager-bearer-token-file': { value: 'FILE', help: 'bearer token sent to Alertmanager' },
  'alertmanager-basic-auth-user': { value: 'NAME', help: 'basic auth user for Alertmanager (with --alertmanager-basic-auth-password-file)' },
  'alertmanager-basic-auth-password-file': { value: 'FILE', help: 'basic auth password file for Alertmanager' },
} as const satisfies Record<string, ServeOption>;

type Options = typeof SERVE_OPTIONS;
type Keyed = { [F in keyof Options]: Options[F] extends { key: string; parse: OptionParser<unknown> } ? F : never }[keyof Options];
type ValueOf<O> = O extends { parse: OptionParser<infer T> } ? T : never;
type KeyOf<O> = O extends { key: infer K extends string } ? K : never;
type WithDefault = { [F in Keyed]: Options[F] extends { default: string } ? F : never }[Keyed];

/**
 * The `ServeConfig` fields set by options, typed from the table: required when the option has a default, else
 * optional (unset: the server's own behaviour, e.g. no health listener).
 */
export type ServeOptionConfig = { [F in WithDefault as KeyOf<Options[F]>]: ValueOf<Options[F]> } & { [F in Exclude<Keyed, WithDefault> as KeyOf<Options[F]>]?: ValueOf<Options[F]> };

/** The values of the options the command reads itself (those without `key`), parsed where the table has a parser. */
export type ServeOptionFlags = { [F in Exclude<keyof Options, Keyed>]?: Options[F] extends { parse: OptionParser<infer T> } ? T : Options[F] extends { multiple: true } ? string[] : Options[F] extends { type: 'boolean' } ? boolean : string };

const entries = () => Object.entries(SERVE_OPTIONS) as [string, ServeOption][];

/**
 * Reads parsed flag values (`--name` -> text, after the command-line parser) through the table: a given value or
 * else the default text, parsed; a bad value throws OptionError naming the flag.
 */
export function readServeOptions(values: Record<string, string | boolean | string[] | undefined>): { config: Partial<ServeOptionConfig>; flags: ServeOptionFlags } {
  const config: Record<string, unknown> = {};
  const flags: Record<string, unknown> = {};
  for (const [name, o] of entries()) {
    const given = values[name] ?? (typeof o.default === 'string' ? o.default : undefined);
    const parsed = typeof given === 'string' && o.parse ? o.parse(given, `--${name}`) : given ?? (o.type === 'boolean' ? o.default : undefined);
    if (o.key) {
      if (parsed !== undefined) config[o.key] = parsed;
    } else flags[name] = parsed;
  }
  return { config: config as Partial<ServeOptionConfig>, flags: flags as ServeOptionFlags };
}

/** The defaults of the options that set a config field, parsed (the flag-set part of `DEFAULTS`). */
export function serveOptionDefaults(): { [F in WithDefault as KeyOf<Options[F]>]: ValueOf<Options[F]> } {
  const out: Record<string, unknown> = {};
  for (const [name, o] of entries()) if (o.key && o.parse && typeof o.default === 'string') out[o.key] = o.parse(o.default, `--${name}`);
  return out as never;
}
