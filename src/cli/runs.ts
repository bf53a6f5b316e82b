import { type Io, UsageError } from './io.js';
import { parseCommandArgs, specFor } from './spec.js';
import { probeAuditor, ServerUnusable } from './server-probe.js';
import './specs.js';

interface RunRow {
  run: string;
  verdict: string;
  settled: boolean;
  startedAt: string | null;
  updatedAt: string;
}

/** Pages read by `runs --all` at most (a bound: 10,000 pages of at most 10,000 runs). */
const MAX_PAGES = 10_000;

/**
 * `runs [--server URL]`: the server's run list, newest first, a page at a time (GET /api/v1/runs with cursor paging:
 * `--after` is the `next` of the page before; `--all` follows `next` to the last page).
 */
export async function runsCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(specFor('runs')!, argv);
  if (positionals.length !== 0) throw new UsageError('runs takes no positional arguments; see topology-audit runs --help');
  const base = (values.server as string).replace(/\/+$/, '');
  const limit = Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit: a whole number from 1 to 10000');
  await probeAuditor(base).catch((e: unknown) => {
    throw e instanceof ServerUnusable ? new UsageError(e.message) : e;
  });
  const token = values.token as string | undefined;
  const query = new URLSearchParams({ limit: String(limit) });
  for (const k of ['verdict', 'contract', 'order'] as const) if (values[k]) query.set(k, values[k] as string);
  let after = values.after as string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    if (after) query.set('after', after);
    let res: Response;
    try {
      res = await fetch(`${base}/api/v1/runs?${query}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(60_000) });
    } catch (e) {
      throw new UsageError(`server ${base} unreachable: ${(e as Error).message}`);
    }
    const body = (await res.json().catch(() => ({}))) as { error?: string; runs?: RunRow[]; next?: string | null };
    if (res.status === 401) throw new UsageError('the server refused the token (401); pass --token or set TOPOLOGY_AUDIT_TOKEN');
    if (res.status !== 200 || !Array.isArray(body.runs)) throw new UsageError(`unexpected answer ${res.status} from ${base}: ${body.error ?? ''}`);
    const next = body.next ?? null;
    if (values.json) io.stdout(JSON.stringify({ runs: body.runs, next }) + '\n');
    else for (const r of body.runs) io.stdout(`${r.run}\t${r.verdict}${r.settled ? ' (settled)' : ''}\t${r.startedAt ?? '-'}\n`);
    if (!values.all || next === null) {
      if (!values.json && next !== null) io.stderr(`more: topology-audit runs --after ${next}\n`);
      return 0;
    }
    after = next;
  }
  throw new UsageError(`--all: stopped after ${MAX_PAGES} pages`);
}
