/** The per-run alerting output's configuration: typed, with defaults, validated once at start (serve's flags). */

export interface AlertingConfig {
  /** Alertmanager base URLs (http or https, optional path prefix); alerts go to every one (an HA pair). */
  alertmanagers: URL[];
  /** The auditor's URL as users reach it (links in alerts), without a trailing slash. */
  externalUrl: string;
  /** The runbook page (the alert name is appended as the fragment); default: the auditor's /runbooks. */
  runbookUrl: string;
  /** Firing alerts are sent again this often, each valid for 4 intervals (as Prometheus does). */
  resendMs: number;
  /** One request to an Alertmanager. */
  timeoutMs: number;
  /** Alerts waiting to be sent; past it the oldest are dropped (and counted). */
  queueCapacity: number;
  /** Alerts per POST. */
  maxBatch: number;
  /** Longest pause between retries while no Alertmanager takes alerts. */
  maxBackoffMs: number;
  /** How long the list of silences read from Alertmanager is reused. */
  silenceCacheMs: number;
  /** Silences held from one read at most (the rest are ignored, and logged). */
  maxSilences: number;
  /** Longest silence `ack --silence` may create (--alertmanager-max-silence). */
  maxSilenceMs: number;
  tls: { caFile?: string; insecureSkipVerify: boolean };
  /** Bearer token file, or basic auth with a password file (as Prometheus' alertmanager_config). */
  auth?: { bearerTokenFile: string } | { username: string; passwordFile: string };
}

export const ALERTING_DEFAULTS = {
  resendMs: 60_000,
  timeoutMs: 10_000,
  queueCapacity: 10_000,
  maxBatch: 64,
  maxBackoffMs: 10_000,
  silenceCacheMs: 5_000,
  maxSilences: 10_000,
  maxSilenceMs: 7 * 86_400_000,
} as const;

/** A setting that cannot work; the message names it. */
export class AlertingConfigError extends Error {}

export interface AlertingInput {
  alertmanagers: readonly string[];
  externalUrl: string;
  runbookUrl?: string;
  resendMs?: number;
  timeoutMs?: number;
  queueCapacity?: number;
  maxBatch?: number;
  maxBackoffMs?: number;
  silenceCacheMs?: number;
  maxSilences?: number;
  maxSilenceMs?: number;
  caFile?: string;
  insecureSkipVerify?: boolean;
  bearerTokenFile?: string;
  basicAuthUser?: string;
  basicAuthPasswordFile?: string;
}

function httpUrl(what: string, v: string): URL {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new AlertingConfigError(`${what}: not a URL: ${v.slice(0, 200)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new AlertingConfigError(`${what}: expected an http:// or https:// URL: ${v.slice(0, 200)}`);
  if (u.search || u.hash) throw new AlertingConfigError(`${what}: no query or fragment: ${v.slice(0, 200)}`);
  return u;
}

function positive(what: string, v: number | undefined, def: number, min = 1): number {
  if (v === undefined) return def;
  if (!Number.isInteger(v) || v < min) throw new AlertingConfigError(`${what}: expected an integer of at least ${min}: ${v}`);
  return v;
}

/** The validated configuration, defaults filled in. */
export function alertingConfig(input: AlertingInput): AlertingConfig {
  if (input.alertmanagers.length === 0) throw new AlertingConfigError('--alertmanager-url: give at least one Alertmanager');
  const alertmanagers = input.alertmanagers.map((u) => httpUrl('--alertmanager-url', u));
  const keys = new Set(alertmanagers.map((u) => u.href.replace(/\/+$/, '')));
  if (keys.size !== alertmanagers.length) throw new AlertingConfigError('--alertmanager-url: the same Alertmanager is given twice');
  for (const u of alertmanagers) if (u.username || u.password) throw new AlertingConfigError('--alertmanager-url: put credentials in --alertmanager-basic-auth-user and --alertmanager-basic-auth-password-file, not in the URL');
  const externalUrl = httpUrl('--external-url', input.externalUrl).href.replace(/\/+$/, '');
  const runbookUrl = input.runbookUrl !== undefined ? httpUrl('--runbook-url', input.runbookUrl).href : `${externalUrl}/runbooks`;
  const resendMs = positive('--alertmanager-resend', input.resendMs, ALERTING_DEFAULTS.resendMs, 1000);
  if (input.bearerTokenFile !== undefined && (input.basicAuthUser !== undefined || input.basicAuthPasswordFile !== undefined)) {
    throw new AlertingConfigError('--alertmanager-bearer-token-file and basic auth exclude each other');
  }
  if ((input.basicAuthUser === undefined) !== (input.basicAuthPasswordFile === undefined)) {
    throw new AlertingConfigError('--alertmanager-basic-auth-user and --alertmanager-basic-auth-password-file go together');
  }
  if (input.basicAuthUser !== undefined && (input.basicAuthUser === '' || input.basicAuthUser.includes(':'))) throw new AlertingConfigError('--alertmanager-basic-auth-user: a non-empty name without ":"');
  const auth =
    input.bearerTokenFile !== undefined
      ? { bearerTokenFile: input.bearerTokenFile }
      : input.basicAuthUser !== undefined
        ? { username: input.basicAuthUser, passwordFile: input.basicAuthPasswordFile! }
        : undefined;
  const maxBackoffDefault = Math.max(250, Math.min(ALERTING_DEFAULTS.maxBackoffMs, Math.floor(resendMs / 4)));
  return {
    alertmanagers,
    externalUrl,
    runbookUrl,
    resendMs,
    timeoutMs: positive('alertmanager timeout', input.timeoutMs, ALERTING_DEFAULTS.timeoutMs),
    queueCapacity: positive('alertmanager queue capacity', input.queueCapacity, ALERTING_DEFAULTS.queueCapacity),
    maxBatch: positive('alertmanager batch size', input.maxBatch, ALERTING_DEFAULTS.maxBatch),
    // Retries come at least four times per resend interval, so alerts are back well within one interval of a restart.
    maxBackoffMs: positive('alertmanager backoff', input.maxBackoffMs, maxBackoffDefault),
    silenceCacheMs: positive('silence cache', input.silenceCacheMs, ALERTING_DEFAULTS.silenceCacheMs),
    maxSilences: positive('silence bound', input.maxSilences, ALERTING_DEFAULTS.maxSilences),
    maxSilenceMs: positive('--alertmanager-max-silence', input.maxSilenceMs, ALERTING_DEFAULTS.maxSilenceMs, 1000),
    tls: { caFile: input.caFile, insecureSkipVerify: input.insecureSkipVerify ?? false },
    ...(auth ? { auth } : {}),
  };
}
