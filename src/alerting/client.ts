/**
 * Alertmanager's API v2, the few calls the auditor makes: POST /api/v2/alerts, GET /api/v2/silences,
 * POST /api/v2/silences. node:http(s) with the configured CA, verification switch and credentials; answers are read
 * up to a bound. Errors carry a reason (status or error code), never an alert's or a silence's content.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Alert } from './alert.js';
import { AlertingConfigError, type AlertingConfig } from './config.js';

/** A call that failed; `reason` is safe to log (an HTTP status or a network error code). */
export class AlertmanagerError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** A matcher of a silence, as API v2 gives it. */
export interface Matcher {
  name: string;
  value: string;
  isRegex: boolean;
  isEqual?: boolean;
}

/** A silence as API v2 gives it (the fields the auditor reads). */
export interface Silence {
  id: string;
  matchers: Matcher[];
  startsAt: string;
  endsAt: string;
  createdBy: string;
  comment: string;
  status: { state: string };
}

const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

function readSecret(what: string, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (e) {
    throw new AlertingConfigError(`${what}: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (text === '' || /[\r\n]/.test(text)) throw new AlertingConfigError(`${what}: ${file} must hold one non-empty line`);
  return text;
}

export class AlertmanagerClient {
  private readonly authorization?: string;
  private readonly ca?: Buffer;
  /** The Alertmanager's URL for logs (it never carries credentials: config refuses them). */
  readonly name: string;

  constructor(
    private readonly base: URL,
    private readonly cfg: Pick<AlertingConfig, 'timeoutMs' | 'tls' | 'auth'>,
  ) {
    this.name = base.href.replace(/\/+$/, '');
    if (cfg.auth && 'bearerTokenFile' in cfg.auth) this.authorization = `Bearer ${readSecret('--alertmanager-bearer-token-file', cfg.auth.bearerTokenFile)}`;
    else if (cfg.auth) this.authorization = `Basic ${Buffer.from(`${cfg.auth.username}:${readSecret('--alertmanager-basic-auth-password-file', cfg.auth.passwordFile)}`).toString('base64')}`;
    if (cfg.tls.caFile !== undefined) {
      try {
        this.ca = readFileSync(cfg.tls.caFile);
      } catch (e) {
        throw new AlertingConfigError(`--alertmanager-ca-file: cannot read ${cfg.tls.caFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    }
  }

  /** Sends alerts (firing or resolved); resolves once Alertmanager answered 200. */
  async postAlerts(alerts: readonly Alert[]): Promise<void> {
    await this.call('POST', '/api/v2/alerts', JSON.stringify(alerts));
  }

  /** Every silence Alertmanager holds (active, pending and expired). */
  async silences(): Promise<Silence[]> {
    const body = await this.call('GET', '/api/v2/silences');
    const list = JSON.parse(body) as unknown;
    if (!Array.isArray(list)) throw new AlertmanagerError('silences: not a list');
    return list as Silence[];
  }

  /** Creates a silence; returns its id. */
  async createSilence(s: { matchers: Matcher[]; startsAt: string; endsAt: string; createdBy: string; comment: string }): Promise<string> {
    const body = await this.call('POST', '/api/v2/silences', JSON.stringify(s));
    const id = (JSON.parse(body) as { silenceID?: unknown }).silenceID;
    if (typeof id !== 'string') throw new AlertmanagerError('silence: no id in the answer');
    return id;
  }

  private call(method: 'GET' | 'POST', path: string, body?: string): Promise<string> {
    const url = new URL(this.base.href.replace(/\/+$/, '') + path);
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    if (this.authorization) headers.authorization = this.authorization;
    return new Promise<string>((resolve, reject) => {
      let timedOut: AlertmanagerError | null = null;
      const req = request(
        url,
        { method, headers, ...(url.protocol === 'https:' ? { ca: this.ca, rejectUnauthorized: !this.cfg.tls.insecureSkipVerify } : {}) },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_ANSWER_BYTES) {
              req.destroy(new AlertmanagerError('answer too large'));
              return;
            }
            chunks.push(c);
          });
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if (status < 200 || status > 299) return reject(new AlertmanagerError(`HTTP ${status}`));
            resolve(Buffer.concat(chunks).toString('utf8'));
          });
          res.on('error', (e) => reject(timedOut ?? new AlertmanagerError((e as NodeJS.ErrnoException).code ?? 'answer interrupted')));
        },
      );
      // A total deadline, answer included: an Alertmanager that trickles a byte now and then cannot hold a call open.
      const deadline = setTimeout(() => req.destroy((timedOut = new AlertmanagerError(`timeout after ${this.cfg.timeoutMs} ms`))), this.cfg.timeoutMs);
      deadline.unref?.();
      req.on('close', () => clearTimeout(deadline));
      req.on('error', (e) => reject(e instanceof AlertmanagerError ? e : new AlertmanagerError((e as NodeJS.ErrnoException).code ?? 'request failed')));
      req.end(body);
    });
  }
}
