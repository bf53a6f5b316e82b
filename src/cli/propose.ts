/**
 * `propose FILE... | --server URL [--since DUR] [--contract-id ID] [--min-share 0.05]`: prints a draft contract
 * (YAML, `candidate: true`) drafted from observed receipts. The drafting is src/propose (pure).
 */
import { parseArgs } from 'node:util';
import { parseContract } from '../core/contract.js';
import { parseDuration } from '../core/edge.js';
import { validateReceipt } from '../core/receipt.js';
import type { Receipt } from '../core/types.js';
import { millisOf } from '../core/time.js';
import { ProposeError, draftYaml, proposeDraft } from '../propose/draft.js';
import { type Io, UsageError, readReceiptFiles } from './io.js';

export const PROPOSE_USAGE = `usage: topology-audit propose FILE... | --server URL [--since DUR] [--contract-id ID] [--version V] [--phase NAME] [--min-share 0.05] [--token TOKEN]

Prints a draft contract (YAML, marked candidate: true) drafted from observed receipts: every observed edge in
allow (max = most seen in one run), bounded choices for alternative targets, one phase whose plan holds what all
but --min-share of the runs show, deadlines from the p99 of observed delays. Every entry carries its evidence.
Check each edge against the intended design, then shadow-evaluate the draft (serve/replay --shadow ID@VERSION).
`;

/** Receipts of a server's stored runs, through the API (`--since`: runs started within that long). */
async function serverReceipts(base: string, token: string | undefined, sinceMs: number | null, io: Io): Promise<Receipt[]> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const get = async (path: string) => {
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new UsageError(`server ${base} unreachable: ${(e as Error).message}`);
    }
    if (res.status === 401) throw new UsageError('the server refused the token (401)');
    if (res.status !== 200) throw new UsageError(`unexpected answer ${res.status} from ${base}${path.slice(0, 80)}`);
    return (await res.json()) as any;
  };
  const list = await get('/api/v1/runs?limit=10000');
  if (!list || !Array.isArray(list.runs)) throw new UsageError(`${base} is not a topology-audit API (no runs list)`);
  const cutoff = sinceMs === null ? -Infinity : Date.now() - sinceMs;
  const out: Receipt[] = [];
  let skipped = 0;
  for (const row of list.runs as { run: string; startedAt: string | null }[]) {
    if (row.startedAt && millisOf(row.startedAt) < cutoff) continue;
    const run = await get(`/api/v1/runs/${encodeURIComponent(row.run)}`);
    for (const r of (run.receipts ?? []) as unknown[]) {
      const v = validateReceipt(r);
      if (v.ok) out.push(v.receipt);
      else skipped++;
    }
  }
  if (skipped) io.stderr(`propose: ${skipped} receipt(s) from the server did not validate and were left out\n`);
  return out;
}

export async function proposeCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      server: { type: 'string' },
      since: { type: 'string' },
      'contract-id': { type: 'string' },
      version: { type: 'string' },
      phase: { type: 'string' },
      'min-share': { type: 'string', default: '0.05' },
      token: { type: 'string', default: process.env.TOPOLOGY_AUDIT_TOKEN },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    io.stdout(PROPOSE_USAGE);
    return 0;
  }
  const minShare = Number(values['min-share']);
  if (!Number.isFinite(minShare) || minShare < 0 || minShare >= 1) throw new UsageError(`propose: --min-share: a number from 0 up to (not including) 1, got ${values['min-share']}`);
  if (values.server && positionals.length) throw new UsageError('propose: give receipt files or --server, not both');
  if (!values.server && positionals.length === 0) throw new UsageError('propose: give at least one NDJSON receipts file, or --server URL');
  let sinceMs: number | null = null;
  if (values.since !== undefined) {
    if (!values.server) throw new UsageError('propose: --since needs --server');
    sinceMs = parseDuration(values.since);
    if (sinceMs === null) throw new UsageError(`propose: --since: not a duration (e.g. 24h, 7d): ${values.since}`);
  }
  let receipts: Receipt[] = [];
  if (values.server) receipts = await serverReceipts(values.server.replace(/\/+$/, ''), values.token, sinceMs, io);
  else receipts = readReceiptFiles(positionals);
  let yaml: string;
  try {
    const draft = proposeDraft(receipts, { minShare, contractId: values['contract-id'], version: values.version, phase: values.phase });
    yaml = draftYaml(draft);
    io.stderr(`propose: drafted ${draft.contract}@${draft.version} from ${draft.runs} run(s): ${draft.allow.length} allow entries, ${draft.plan.length} expected, ${draft.rare.length} rare edge(s) left out\n`);
  } catch (e) {
    if (e instanceof ProposeError) throw new UsageError(`propose: ${e.message}`);
    throw e;
  }
  // The draft must validate: a names clash (e.g. --contract-id with a bad character) is a usage error, not a bad file.
  try {
    parseContract(yaml, '<draft>');
  } catch (e) {
    throw new UsageError(`propose: the draft does not validate (${(e as Error).message.split('\n')[0]}); check --contract-id, --version and --phase`);
  }
  io.stdout(yaml);
  return 0;
}
