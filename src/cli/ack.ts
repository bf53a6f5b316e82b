import { type Io, UsageError, runIdArg } from './io.js';
import { parseCommandArgs, specFor } from './spec.js';
import { probeAuditor, ServerUnusable } from './server-probe.js';
import './specs.js';
import { ACK_BY, ackReasonProblem } from '../core/ack.js';

/** `ack RUN [--server URL]`: POST /api/v1/runs/{run}/ack; the run leaves topology_alerting_runs until its verdict changes. */
export async function ackCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(specFor('ack')!, argv);
  if (positionals.length !== 1) throw new UsageError('give exactly one run id; see topology-audit ack --help');
  const run = runIdArg('RUN', positionals[0]);
  const base = (values.server as string).replace(/\/+$/, '');
  const by = values.by as string | undefined;
  if (by !== undefined && !ACK_BY.test(by)) throw new UsageError('--by: at most 64 of A-Z a-z 0-9 . _ @ -');
  const reason = values.reason as string | undefined;
  const bad = reason === undefined ? null : ackReasonProblem(reason);
  if (bad) throw new UsageError(`--reason: ${bad}`);
  const silence = values.silence as string | undefined;
  if (silence !== undefined && by === undefined) throw new UsageError('--silence needs --by NAME (Alertmanager records who created a silence)');
  const query = new URLSearchParams();
  if (by) query.set('by', by);
  if (reason) query.set('reason', reason);
  if (silence !== undefined) query.set('silence', silence);
  try {
    await probeAuditor(base);
  } catch (e) {
    if (e instanceof ServerUnusable) throw new UsageError(e.message);
    throw e;
  }
  const token = values.token as string | undefined;
  let res: Response;
  try {
    res = await fetch(`${base}/api/v1/runs/${encodeURIComponent(run)}/ack${query.size ? `?${query}` : ''}`, {
      method: 'POST',
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    throw new UsageError(`server ${base} unreachable: ${(e as Error).message}`);
  }
  const body = (await res.json().catch(() => ({}))) as { error?: string; at?: string; already?: boolean; ack?: { verdict: string; by: string | null }; silence?: { id: string; endsAt: string } };
  if (res.status === 401) throw new UsageError('the server refused the token (401); pass --token or set TOPOLOGY_AUDIT_TOKEN');
  if (res.status === 404) throw new UsageError(`unknown run ${run} on ${base}`);
  if (res.status === 502 || (res.status === 400 && silence !== undefined)) throw new UsageError(`${run}: ${body.error ?? `answer ${res.status}`}`);
  if (res.status !== 200) throw new UsageError(`unexpected answer ${res.status} from ${base}: ${body.error ?? ''}`);
  if (values.json) io.stdout(JSON.stringify(body) + '\n');
  else {
    const who = body.ack?.by ? ` by ${body.ack.by}` : '';
    const what = body.ack?.verdict ? ` (${body.ack.verdict})` : '';
    io.stdout(`${run}${what}: acknowledged${body.already ? ` already${who}, at ` : `${by ? ` by ${by}` : ''} at `}${body.at}; it leaves topology_alerting_runs until its verdict changes\n`);
    if (body.silence) io.stdout(`${run}: silenced in Alertmanager until ${body.silence.endsAt} (silence ${body.silence.id})\n`);
  }
  return 0;
}
