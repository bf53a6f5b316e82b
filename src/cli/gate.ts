import { type Io, UsageError, runIdArg } from './io.js';
import { colorEnabled, durationFlag, paintVerdict, parseCommandArgs } from './spec.js';
import { displayMessage } from '../core/meaning.js';
import { GATE_SPEC } from './specs.js';
import { probeAuditor, ServerUnusable } from './server-probe.js';
import { outputFormat } from './output-format.js';
import type { Pin } from '../core/types.js';

export const EXIT_TEMPFAIL = 75;
/** EX_NOINPUT: the run was never seen by the timeout. */
export const EXIT_NEVER_SEEN = 66;

interface VerdictBody {
  run: string;
  verdict: string;
  settled: boolean;
  pin?: Pin | null;
  findings: { verdict: string; code: string; message: string; settled: boolean; deadline?: string; since?: string; edge?: string }[];
}

const PROGRESS_EVERY_MS = 10_000;

/** `gate RUN [--server URL] [--timeout DUR]`: 0 healthy; 1 settled and not healthy; 66 never seen; 75 still open at the timeout; 2 usage or unusable server. */
export async function gateCommand(argv: string[], io: Io, opts: { progressEveryMs?: number } = {}): Promise<number> {
  const { values, positionals } = parseCommandArgs(GATE_SPEC, argv);
  const format = outputFormat(values, 'gate');
  if (positionals.length !== 1) throw new UsageError('give exactly one run id; see topology-audit gate --help');
  const run = runIdArg('RUN', positionals[0]);
  const timeoutMs = durationFlag('timeout', values.timeout as string);
  const base = (values.server as string).replace(/\/+$/, '');
  const token = values.token as string | undefined;
  const quiet = values.quiet === true;
  const progressEvery = opts.progressEveryMs ?? (Number(process.env.TOPOLOGY_AUDIT_PROGRESS_MS) || PROGRESS_EVERY_MS);
  const started = Date.now();
  const deadline = started + timeoutMs;
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  // Contracts for the annotations and the graph: read (and refused when invalid) before waiting.
  const registry = values.contracts !== undefined ? (await import('./ci-format.js')).loadContractsFor(values.contracts as string, format, io) : undefined;
  try {
    await probeAuditor(base);
  } catch (e) {
    if (e instanceof ServerUnusable) throw new UsageError(e.message);
    throw e;
  }
  let last: VerdictBody | null = null;
  let lastProgress = started;
  const progress = () => {
    if (quiet) return;
    const now = Date.now();
    if (now - lastProgress < progressEvery) return;
    lastProgress = now;
    const waited = Math.round((now - started) / 1000);
    const left = Math.max(0, Math.round((deadline - now) / 1000));
    io.stderr(`topology-audit gate: ${run}: ${last ? `${last.verdict}${last.settled ? ' (settled)' : ''}` : 'not seen yet'} after ${waited}s, ${left}s left\n`);
  };
  for (;;) {
    const left = deadline - Date.now();
    // Short long-polls so progress lines keep coming while waiting.
    const wait = Math.max(0, Math.min(Math.ceil(progressEvery / 1000), 30, Math.floor(left / 1000)));
    let res: Response;
    try {
      res = await fetch(`${base}/api/v1/runs/${encodeURIComponent(run)}/verdict?wait=${wait}`, { headers, signal: AbortSignal.timeout(wait * 1000 + 10_000) });
    } catch (e) {
      throw new UsageError(`server ${base} unreachable: ${(e as Error).message}`);
    }
    if (res.status === 401) throw new UsageError(`the server refused the token (401); pass --token or set TOPOLOGY_AUDIT_TOKEN`);
    if (res.status === 200) {
      last = (await res.json()) as VerdictBody;
      if (last.settled || last.verdict === 'healthy') break;
    } else if (res.status !== 404) {
      throw new UsageError(`unexpected answer ${res.status} from ${base}`);
    } else {
      await res.arrayBuffer().catch(() => undefined);
      if (wait === 0) await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, left))));
    }
    if (Date.now() >= deadline) break;
    progress();
  }
  const exit = !last ? EXIT_NEVER_SEEN : last.verdict === 'healthy' ? 0 : last.settled ? 1 : EXIT_TEMPFAIL;
  if (format === 'text' || format === 'json') printVerdict(io, { run, base, timeout: values.timeout as string, last, json: format === 'json' });
  else {
    const { gateCiOutput } = await import('./gate-ci.js');
    const outcome = { run, server: base, timeout: values.timeout as string, last, waitedSec: (Date.now() - started) / 1000, exit, now: Date.now() };
    io.stdout(await gateCiOutput(outcome, format, { token, contracts: values.contracts as string | undefined, registry }));
  }
  if (exit === EXIT_NEVER_SEEN) {
    io.stderr(`topology-audit gate: run ${run} was never seen by the timeout; check the run id and that the agents' exporter points at this auditor's OTLP port\n`);
  } else if (exit === EXIT_TEMPFAIL) {
    io.stderr(`topology-audit gate: ${run} still ${last!.verdict} at the timeout (${values.timeout}); retry later or raise --timeout\n`);
  }
  return exit;
}

/** The text (or --format json) answer: the verdict line, and what settled it. */
function printVerdict(io: Io, o: { run: string; base: string; timeout: string; last: VerdictBody | null; json: boolean }): void {
  const { run, last } = o;
  const color = colorEnabled();
  const now = Date.now();
  const first = last ? last.findings.find((f) => f.verdict === last.verdict) ?? last.findings[0] : null;
  if (o.json) io.stdout(JSON.stringify(last ?? { run, verdict: null, seen: false }) + '\n');
  else if (last) {
    io.stdout(`${run}: ${paintVerdict(last.verdict, color)}${first ? ` — ${displayMessage(first, last, now)}` : ''}\n`);
    const settledBy = last.settled && last.verdict !== 'healthy' ? last.findings.find((f) => f.settled) : undefined;
    if (settledBy && settledBy !== first) io.stdout(`settled by ${paintVerdict(settledBy.verdict, color)}: ${displayMessage(settledBy, last, now)}\n`);
  } else io.stdout(`${run}: never seen (no receipts for this run reached ${o.base} within ${o.timeout})\n`);
}
