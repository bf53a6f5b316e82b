import { parseArgs } from 'node:util';
import { parseDuration } from '../core/edge.js';
import { type Io, UsageError } from './io.js';

export const EXIT_TEMPFAIL = 75;

interface VerdictBody {
  run: string;
  verdict: string;
  settled: boolean;
  findings: { verdict: string; message: string; settled: boolean }[];
}

/** `gate RUN [--server URL] [--timeout DUR]`: 0 healthy; 1 settled and not healthy; 75 still open at the timeout; 2 usage or unreachable. */
export async function gateCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      server: { type: 'string', default: process.env.TOPOLOGY_AUDIT_SERVER ?? 'http://127.0.0.1:9464' },
      timeout: { type: 'string', default: '5m' },
      token: { type: 'string', default: process.env.TOPOLOGY_AUDIT_TOKEN },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.length !== 1) throw new UsageError('gate: give exactly one run id');
  const run = positionals[0];
  const timeoutMs = parseDuration(values.timeout!);
  if (timeoutMs === null) throw new UsageError(`gate: --timeout: not a duration: ${values.timeout}`);
  const base = values.server!.replace(/\/+$/, '');
  const deadline = Date.now() + timeoutMs;
  const headers: Record<string, string> = values.token ? { authorization: `Bearer ${values.token}` } : {};
  let last: VerdictBody | null = null;
  for (;;) {
    const left = deadline - Date.now();
    const wait = Math.max(0, Math.min(30, Math.floor(left / 1000)));
    let res: Response;
    try {
      res = await fetch(`${base}/api/v1/runs/${encodeURIComponent(run)}/verdict?wait=${wait}`, { headers, signal: AbortSignal.timeout(wait * 1000 + 10_000) });
    } catch (e) {
      io.stderr(`gate: server ${base} unreachable: ${(e as Error).message}\n`);
      return 2;
    }
    if (res.status === 401) {
      io.stderr('gate: the server refused the token (401)\n');
      return 2;
    }
    if (res.status === 200) {
      last = (await res.json()) as VerdictBody;
      if (last.settled || last.verdict === 'healthy') break;
    } else if (res.status !== 404) {
      io.stderr(`gate: unexpected answer ${res.status} from ${base}\n`);
      return 2;
    } else {
      await res.arrayBuffer().catch(() => undefined);
      if (wait === 0) await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, left))));
    }
    if (Date.now() >= deadline) break;
  }
  const first = last ? last.findings.find((f) => f.verdict === last!.verdict) ?? last.findings[0] : null;
  const line = last ? `${run}: ${last.verdict}${first ? ` — ${first.message}` : ''}` : `${run}: unknown run (no receipts yet)`;
  if (values.json) io.stdout(JSON.stringify(last ?? { run, verdict: null }) + '\n');
  else {
    io.stdout(line + '\n');
    const settledBy = last && last.settled && last.verdict !== 'healthy' ? last.findings.find((f) => f.settled) : undefined;
    if (settledBy && settledBy !== first) io.stdout(`settled by ${settledBy.verdict}: ${settledBy.message}\n`);
  }
  if (!last) return EXIT_TEMPFAIL;
  if (last.verdict === 'healthy') return 0;
  if (last.settled) return 1;
  io.stderr(`gate: still ${last.verdict} at the timeout\n`);
  return EXIT_TEMPFAIL;
}
