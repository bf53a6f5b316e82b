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
}

const digest = (t: string) => createHash('sha256').update(t).digest();

export function parseTokenFile(text: string, file: string, allowAgents: boolean): TokenEntry[] {
  const out: TokenEntry[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const [token, agents, ...rest] = line.split(/\s+/);
    if (rest.length) throw new Error(`${file}:${i + 1}: expected "TOKEN [agent-a,agent-b]"`);
    if (token.length < 16) throw new Error(`${file}:${i + 1}: token too short (at least 16 characters)`);
    if (agents && !allowAgents) throw new Error(`${file}:${i + 1}: API tokens take no agent list`);
    const d = digest(token);
    out.push({ digest: d, source: `token-${i + 1}-${d.subarray(0, 4).toString('hex')}`, agents: agents ? new Set(agents.split(',').filter(Boolean)) : null });
  });
  if (!out.length) throw new Error(`${file}: no tokens`);
  return out;
}

export function loadTokenFile(file: string, allowAgents: boolean): TokenEntry[] {
  return parseTokenFile(readFileSync(file, 'utf8'), file, allowAgents);
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
