/**
 * `diff RUN|FILE --contracts DIR --format mermaid|dot|svg [--server URL] [--now RFC3339] [--run ID]`:
 * the pinned contract's graph with one run laid over it, for a CI comment or a report. Offline from an NDJSON
 * receipts file (the verdict from replay), or from a server's run API (its verdict, the contract from --contracts,
 * else from the server's contract API).
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseCommandArgs, specFor } from './spec.js';
import './specs.js';
import { contractFromCanonical, type Contract } from '../core/contract.js';
import { parseReceiptFile } from '../core/receipt.js';
import type { Receipt, RunVerdict } from '../core/types.js';
import { toDot } from '../render/dot.js';
import { layoutOverlay } from '../render/layout.js';
import { toMermaid } from '../render/mermaid.js';
import { overlay, type Overlay } from '../render/overlay.js';
import { renderSvg } from '../render/svg.js';
import { type Io, UsageError, parseTimeArg, runIdArg } from './io.js';
import { replayReceipts } from './replay-core.js';
import { loadContractDir } from '../audit/contracts-dir.js';

export const DIFF_FORMATS = ['mermaid', 'dot', 'svg'] as const;
export type DiffFormat = (typeof DIFF_FORMATS)[number];

export interface DiffInput {
  verdict: RunVerdict;
  receipts: Receipt[];
  contract: Contract;
  now: number;
}

/** Render one run's overlay in a format. */
export async function renderDiff(input: DiffInput, format: DiffFormat): Promise<string> {
  const { verdict, receipts, contract, now } = input;
  const o: Overlay = overlay(contract, verdict.pin!.phase, verdict, receipts, now);
  const title = `${verdict.run}: ${verdict.verdict} (naive rule: ${verdict.naive})`;
  const where = `${contract.contract}@${contract.version} phase ${verdict.pin!.phase}, at ${new Date(now).toISOString()}`;
  if (format === 'mermaid') return toMermaid(o, { now, heading: `${title} · ${where}` });
  if (format === 'dot') return toDot(o, { now, heading: `${title}\n${where}` });
  const layout = await layoutOverlay(o, now);
  return renderSvg(o, layout, { now, standalone: true, heading: [title, where], idPrefix: 'diff-' });
}

/** The run to draw from a receipts file: --run, or the file's only run. */
function pickRun(receipts: Receipt[], run: string | undefined, file: string): string {
  const runs = [...new Set(receipts.map((r) => r.run))].sort();
  if (run !== undefined) {
    if (!runs.includes(run)) throw new UsageError(`diff: ${file} has no receipts for run "${run}" (runs: ${runs.join(', ') || 'none'})`);
    return run;
  }
  if (runs.length !== 1) throw new UsageError(`diff: ${file} holds ${runs.length} runs; name one with --run (${runs.slice(0, 20).join(', ')}${runs.length > 20 ? ', …' : ''})`);
  return runs[0];
}

async function fromFile(file: string, opts: { contracts: string; run?: string; now?: number; contract?: string }): Promise<DiffInput> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${file}: ${(e as Error).message}`);
  }
  const all = parseReceiptFile(text, file);
  const run = pickRun(all, opts.run, file);
  const receipts = all.filter((r) => r.run === run);
  const registry = loadContractDir(opts.contracts);
  // As `replay FILE` does: every run of the file is audited at one `now` (by default the file's latest receipt).
  const { verdicts, now } = replayReceipts(all, registry, { now: opts.now, defaultContract: opts.contract });
  const verdict = verdicts.find((v) => v.run === run)!;
  if (!verdict.pin) throw new NoGraphError(verdict);
  return { verdict, receipts, contract: registry.get(verdict.pin.contract, verdict.pin.version)!, now };
}

class NoGraphError extends Error {
  constructor(readonly verdict: RunVerdict) {
    super(`run ${verdict.run} has no pinned contract (${verdict.findings.map((f) => f.message).join('; ')}): there is no graph to draw`);
  }
}

class ServerError extends Error {}

export async function fromServer(run: string, opts: { server: string; token?: string; contracts?: string; now?: number }): Promise<DiffInput> {
  const base = opts.server.replace(/\/+$/, '');
  const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
  const get = async (path: string) => {
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new ServerError(`server ${base} unreachable: ${(e as Error).message}`);
    }
    const body = await res.json().catch(() => null);
    return { status: res.status, body };
  };
  const r = await get(`/api/v1/runs/${encodeURIComponent(run)}`);
  if (r.status === 404) throw new ServerError(`server ${base} knows no run "${run}"`);
  if (r.status === 401) throw new ServerError('the server refused the token (401)');
  if (r.status !== 200 || !r.body) throw new ServerError(`unexpected answer ${r.status} from ${base}`);
  const b = r.body as { run: string; pin: RunVerdict['pin']; verdict: RunVerdict['verdict']; naive: RunVerdict['naive']; settled: boolean; findings: RunVerdict['findings']; receipts: Receipt[] };
  const verdict: RunVerdict = { run: b.run, pin: b.pin, verdict: b.verdict, naive: b.naive, findings: b.findings, settled: b.settled, nextChangeAt: null };
  if (!verdict.pin) throw new NoGraphError(verdict);
  let contract = opts.contracts ? loadContractDir(opts.contracts).get(verdict.pin.contract, verdict.pin.version) : undefined;
  if (!contract) {
    const c = await get(`/api/v1/contracts/${encodeURIComponent(verdict.pin.contract)}/${encodeURIComponent(verdict.pin.version)}`);
    if (c.status !== 200 || !c.body) throw new ServerError(`contract ${verdict.pin.contract}@${verdict.pin.version} is neither in ${opts.contracts ?? '(no --contracts)'} nor served by ${base} (${c.status})`);
    contract = contractFromCanonical(JSON.stringify(c.body), `${base} ${verdict.pin.contract}@${verdict.pin.version}`);
  }
  return { verdict, receipts: b.receipts, contract, now: opts.now ?? Date.now() };
}

export async function diffCommand(argv: string[], io: Io): Promise<number> {
  const parsed = parseCommandArgs(specFor('diff')!, argv);
  const values = parsed.values as { contracts?: string; contract?: string; format: string; server: string; token?: string; now?: string; run?: string };
  const positionals = parsed.positionals;
  // A positional that is not a file is a run id, read from --server (default: $TOPOLOGY_AUDIT_SERVER or the local auditor).
  const serverGiven = argv.some((a) => a === '--server' || a === '-s' || a.startsWith('--server='));
  const fromRunApi = serverGiven || (positionals.length === 1 && !existsSync(positionals[0]));
  if (positionals.length !== 1) throw new UsageError('diff: give one run id (with --server) or one NDJSON receipts file');
  const format = values.format as DiffFormat;
  if (!(DIFF_FORMATS as readonly string[]).includes(format)) throw new UsageError(`diff: --format must be one of ${DIFF_FORMATS.join(', ')}`);
  const now = values.now !== undefined ? parseTimeArg('--now', values.now) : undefined;
  let input: DiffInput;
  try {
    if (fromRunApi) {
      if (values.run && values.run !== positionals[0]) throw new UsageError('diff: with --server, the run is the positional argument');
      runIdArg(serverGiven ? 'RUN' : 'RUN|FILE (no such file, so a run id)', positionals[0]);
      input = await fromServer(positionals[0], { server: values.server, token: values.token ?? process.env.TOPOLOGY_AUDIT_TOKEN, contracts: values.contracts, now });
    } else {
      if (!values.contracts) throw new UsageError('diff: --contracts DIR is required for a receipts file');
      if (values.run !== undefined) runIdArg('--run', values.run);
      input = await fromFile(positionals[0], { contracts: values.contracts, run: values.run, now, contract: values.contract });
    }
  } catch (e) {
    if (e instanceof ServerError) {
      io.stderr(`topology-audit diff: ${e.message}\n`);
      return 2;
    }
    if (e instanceof NoGraphError) {
      io.stderr(`topology-audit diff: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  io.stdout(await renderDiff(input, format));
  return 0;
}
