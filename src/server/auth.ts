/**
 * Bearer tokens for ingest and, separately, for the API. A token file has one token per line; an ingest line may
 * be `TOKEN agent-a,agent-b` to bind the token to the agents it may speak for. Comparison is constant-time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Receipt } from '../core/types.js';
import type { SourceBinding } from '../audit/consumer.js';
import { speakerOf } from '../ingest/trust.js';

export interface TokenEntry {
  digest: Buffer;
  /** A content-free name for the source: the token's position in its file and a short hash prefix. */
  source: string;
  agents: ReadonlySet<string> | null;
  /**
   * What an API token may do: `read` (GET under /api/) or `write` (also acknowledge runs and create silences).
   * Ingest tokens are `write` (they guard everything that writes where no API tokens are configured).
   */
  scope: 'read' | 'write';
  /** Who the token acts as: an acknowledgement's `by` when tokens are on (the line's NAME, else `source`). */
  name: string;
}

/** A token's name, as `by` of an acknowledgement (the same rule as ACK_BY in src/core/ack.ts). */
const TOKEN_NAME = /^[A-Za-z0-9._@-]{1,64}$/;

const digest = (t: string) => createHash('sha256').update(t).digest();

export function parseTokenFile(text: string, file: string, allowAgents: boolean): TokenEntry[] {
  const out: TokenEntry[] = [];
  const lineOf = new Map<string, number>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const [token, second, third, ...rest] = line.split(/\s+/);
    if (allowAgents ? second !== undefined && third !== undefined : rest.length) throw new Error(`${file}:${i + 1}: expected ${allowAgents ? '"TOKEN [agent-a,agent-b]"' : '"TOKEN [read|write] [NAME]"'}`);
    if (token.length < 16) throw new Error(`${file}:${i + 1}: token too short (at least 16 characters)`);
    const agents = allowAgents ? second : undefined;
    let scope: 'read' | 'write' = allowAgents ? 'write' : 'read';
    if (!allowAgents && second !== undefined) {
      if (second !== 'read' && second !== 'write') throw new Error(`${file}:${i + 1}: API tokens take a scope ("read" or "write") and a name, no agent list`);
      scope = second;
    }
    if (third !== undefined && !TOKEN_NAME.test(third)) throw new Error(`${file}:${i + 1}: a token's name is at most 64 of A-Z a-z 0-9 . _ @ -`);
    const d = digest(token);
    // A token listed twice (bound on one line, unbound on another) would silently lose one of its bindings.
    const first = lineOf.get(d.toString('hex'));
    if (first !== undefined) throw new Error(`${file}:${i + 1}: this token is already listed on line ${first}; list each token once`);
    lineOf.set(d.toString('hex'), i + 1);
    const source = `token-${i + 1}-${d.subarray(0, 4).toString('hex')}`;
    out.push({ digest: d, source, agents: agents ? new Set(agents.split(',').filter(Boolean)) : null, scope, name: third ?? source });
  });
  if (!out.length) throw new Error(`${file}: no tokens`);
  return out;
}

export function loadTokenFile(file: string, allowAgents: boolean): TokenEntry[] {
  return parseTokenFile(readFileSync(file, 'utf8'), file, allowAgents);
}

/** The answer to a write on the API port: the writer's name (null when no tokens are configured), or a refusal. */
export type WriteAuth = { ok: true; name: string | null } | { ok: false; status: 401 | 403; error: string };

/**
 * A request a browser sent from another site (a form post, a fetch from another origin): refused before any state
 * changes. `Sec-Fetch-Site` when the browser sends it (only `same-origin` and `none`, a user's own navigation, pass),
 * else `Origin` against `Host`. Clients that are not browsers (the CLI, curl, exporters) send neither.
 */
export function crossSiteProblem(headers: { origin?: string; host?: string; 'sec-fetch-site'?: string | string[] }): string | null {
  const site = headers['sec-fetch-site'];
  if (site !== undefined) {
    const v = (Array.isArray(site) ? site[0] : site).trim().toLowerCase();
    if (v !== 'same-origin' && v !== 'none') return `a ${v} request from a browser may not change state here (Sec-Fetch-Site)`;
  }
  const origin = headers.origin;
  if (origin !== undefined) {
    let host: string | null = null;
    try {
      host = new URL(origin).host;
    } catch {
      host = null; // "null" (a sandboxed frame, a file page) or garbage: not this site
    }
    if (host === null || host !== (headers.host ?? '').toLowerCase()) return 'a request from another origin may not change state here (Origin)';
  }
  return null;
}

/** Constant-time lookup: every entry is compared, whatever matches. */
export function matchToken(entries: TokenEntry[], presented: string | undefined): TokenEntry | null {
  if (!presented) return null;
  const d = digest(presented);
  let found: TokenEntry | null = null;
  for (const e of entries) if (timingSafeEqual(e.digest, d)) found = e;
  return found;
}

export function bearerOf(header: string | string[] | undefined): string | undefined {
  const h = Array.isArray(header) ? header[0] : header;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h ?? '');
  return m ? m[1] : undefined;
}

/**
 * A token bound to agents may only deliver receipts whose reporting agent (`from`) is one of them, and must name
 * it: a bound source cannot send an anonymous outcome or run end either. Gap receipts are exempt (they can only
 * make a run uncertain, never green).
 */
export function bindingFor(entry: TokenEntry): SourceBinding | undefined {
  const agents = entry.agents;
  if (!agents) return undefined;
  return (r: Receipt) => {
    if (r.type === 'gap') return null;
    // A handoff's target records RUNNING and RETURNED; the receipt still names the source as `from` (speakerOf).
    const speaker = speakerOf(r);
    if (speaker === undefined) return `source ${entry.source} is bound to agents and must name the reporting agent ("${r.from === undefined ? 'from' : 'to'}")`;
    return agents.has(speaker) ? null : `source ${entry.source} may not speak for agent "${speaker}"`;
  };
}

/** The API token a browser sends as the `topology_audit_token` cookie (for the web view). */
export function cookieToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === 'topology_audit_token') {
      try {
        return decodeURIComponent(v.join('='));
      } catch {
        return undefined; // a malformed escape is no token
      }
    }
  }
  return undefined;
}
