/**
 * `propose FILE... | --server URL [--since DUR] [--contract-id ID] [--min-share 0.05]`: prints a draft contract
 * (YAML, `candidate: true`) drafted from observed receipts. The drafting is src/propose (pure).
 */
import { parseContract } from '../core/contract.js';
import { parseDuration } from '../core/edge.js';
import { validateReceipt } from '../core/receipt.js';
import type { Receipt } from '../core/types.js';
import { millisOf } from '../core/time.js';
import { type ForbiddenObservation, ProposeError, draftYaml, proposeDraft } from '../propose/draft.js';
import { loadContractDir } from '../audit/contracts-dir.js';
import type { ContractRegistry } from '../core/registry.js';
import { type Io, UsageError, readReceiptFiles } from './io.js';
import { packagedContractsDir } from './paths.js';
import { replayReceipts } from './replay.js';
import { parseCommandArgs, specFor } from './spec.js';
import './specs.js';


interface Observed {
  receipts: Receipt[];
  forbidden: ForbiddenObservation[];
  ambiguous: ForbiddenObservation[];
  knownVersions: (contract: string) => string[];
}

type RunFindings = { pin: { contract: string; version: string } | null; findings: { code: string; edge?: string }[] };

/** The findings of one run's verdict with `code` (forbidden_edge; multiplicity: ambiguous_route), with the pin it was judged under. */
function findingsOf(code: 'forbidden_edge' | 'multiplicity', run: string, v: RunFindings): ForbiddenObservation[] {
  if (!v.pin) return [];
  const under = `${v.pin.contract}@${v.pin.version}`;
  return v.findings.filter((f) => f.code === code && f.edge).map((f) => ({ run, edge: f.edge!, under }));
}

/** Receipts, verdicts and contract versions of a server's stored runs, through the API (`--since`: runs started within that long). */
async function fromServer(base: string, token: string | undefined, sinceMs: number | null, io: Io): Promise<Observed> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const get = async (path: string, missingOk = false) => {
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new UsageError(`server ${base} unreachable: ${(e as Error).message}`);
    }
    if (res.status === 401) throw new UsageError('the server refused the token (401)');
    if (missingOk && res.status === 404) return null;
    if (res.status !== 200) throw new UsageError(`unexpected answer ${res.status} from ${base}${path.slice(0, 80)}`);
    return (await res.json()) as any;
  };
  // Every run, page by page (cursor paging: `next` until null; bounded).
  const listed: { run: string; startedAt: string | null }[] = [];
  let after: string | null = null;
  for (let page = 0; page < 10_000; page++) {
    const list = await get(`/api/v1/runs?limit=10000${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    if (!list || !Array.isArray(list.runs)) throw new UsageError(`${base} is not a topology-audit API (no runs list)`);
    listed.push(...(list.runs as { run: string; startedAt: string | null }[]));
    after = typeof list.next === 'string' ? list.next : null;
    if (after === null) break;
  }
  const cutoff = sinceMs === null ? -Infinity : Date.now() - sinceMs;
  const receipts: Receipt[] = [];
  const forbidden: ForbiddenObservation[] = [];
  const ambiguous: ForbiddenObservation[] = [];
  let skipped = 0;
  for (const row of listed) {
    if (row.startedAt && millisOf(row.startedAt) < cutoff) continue;
    const run = await get(`/api/v1/runs/${encodeURIComponent(row.run)}`);
    const judged: RunFindings = { pin: run.pin ?? null, findings: Array.isArray(run.findings) ? run.findings : [] };
    forbidden.push(...findingsOf('forbidden_edge', row.run, judged));
    ambiguous.push(...findingsOf('multiplicity', row.run, judged));
    for (const r of (run.receipts ?? []) as unknown[]) {
      const v = validateReceipt(r);
      if (v.ok) receipts.push(v.receipt);
      else skipped++;
    }
  }
  if (skipped) io.stderr(`propose: ${skipped} receipt(s) from the server did not validate and were left out\n`);
  const contracts = await get('/api/v1/contracts', true);
  const loaded = new Map<string, string[]>();
  for (const c of (contracts?.contracts ?? []) as { contract: string; version: string }[]) loaded.set(c.contract, [...(loaded.get(c.contract) ?? []), c.version]);
  return { receipts, forbidden, ambiguous, knownVersions: (id) => loaded.get(id) ?? [] };
}

/**
 * The contract runs whose run.start names none (OTLP runs carry no run.start) are judged under offline, as serve's
 * --contract does: --contract, else the draft's --contract-id when the directory publishes it, else the directory's
 * only published contract; none when that leaves a choice.
 */
export function defaultContractFor(registry: ContractRegistry, contract: string | undefined, contractId: string | undefined): string | undefined {
  if (contract !== undefined) {
    if (registry.versions(contract).length === 0) throw new UsageError(`--contract ${contract}: no such contract in --contracts`);
    return contract;
  }
  if (contractId !== undefined && registry.newest(contractId) !== undefined) return contractId;
  const published = registry.ids().filter((id) => registry.newest(id) !== undefined);
  return published.length === 1 ? published[0] : undefined;
}

/** Receipts of files, judged against a contracts directory (the version in force for each run), exactly as a server with the same contracts would. */
function fromFiles(files: string[], contractsDir: string, contract: string | undefined, contractId: string | undefined): Observed {
  const receipts = readReceiptFiles(files);
  const registry = loadContractDir(contractsDir);
  const { verdicts } = replayReceipts(receipts, registry, { defaultContract: defaultContractFor(registry, contract, contractId) });
  return {
    receipts,
    forbidden: verdicts.flatMap((v) => findingsOf('forbidden_edge', v.run, v)),
    ambiguous: verdicts.flatMap((v) => findingsOf('multiplicity', v.run, v)),
    knownVersions: (id) => registry.versions(id).map((c) => c.version),
  };
}

export async function proposeCommand(argv: string[], io: Io): Promise<number> {
  const { values: v, positionals } = parseCommandArgs(specFor('propose')!, argv);
  const values = v as { server?: string; since?: string; contracts?: string; contract?: string; 'contract-id'?: string; version?: string; phase?: string; 'min-share': string; token?: string };
  const minShare = Number(values['min-share']);
  if (!Number.isFinite(minShare) || minShare < 0 || minShare >= 1) throw new UsageError(`--min-share: a number from 0 up to (not including) 1, got ${values['min-share']}`);
  if (values.server && positionals.length) throw new UsageError('give receipt files or --server, not both');
  if (!values.server && positionals.length === 0) throw new UsageError('give at least one NDJSON receipts file, or --server URL');
  let sinceMs: number | null = null;
  if (values.since !== undefined) {
    if (!values.server) throw new UsageError('--since needs --server');
    sinceMs = parseDuration(values.since);
    if (sinceMs === null) throw new UsageError(`--since: not a duration (e.g. 24h, 7d): ${values.since}`);
  }
  const token = values.token ?? process.env.TOPOLOGY_AUDIT_TOKEN;
  if (values.server && values.contract !== undefined) throw new UsageError('--contract is for receipt files: with --server, the server judged the runs (serve --contract)');
  const seen = values.server ? await fromServer(values.server.replace(/\/+$/, ''), token, sinceMs, io) : fromFiles(positionals, values.contracts ?? packagedContractsDir(), values.contract, values['contract-id']);
  if (values.server && values.contracts) {
    // Versions in a local directory count too (a draft published there, not yet served).
    const local = loadContractDir(values.contracts);
    const served = seen.knownVersions;
    seen.knownVersions = (id) => [...served(id), ...local.versions(id).map((c) => c.version)];
  }
  let yaml: string;
  try {
    const draft = proposeDraft(seen.receipts, { minShare, contractId: values['contract-id'], version: values.version, phase: values.phase, knownVersions: seen.knownVersions, forbidden: seen.forbidden, ambiguous: seen.ambiguous });
    yaml = draftYaml(draft);
    const ambiguous = draft.allow.filter((e) => e.ambiguous).length;
    const marked = (draft.forbidden.length ? `, ${draft.forbidden.length} forbidden edge(s) marked for review` : '') + (ambiguous ? `, ${ambiguous} ambiguous route(s) marked for review` : '');
    io.stderr(`propose: drafted ${draft.contract}@${draft.version} from ${draft.runs} run(s): ${draft.allow.length} allow entries, ${draft.plan.length} expected, ${draft.rare.length} rare edge(s) left out${marked}\n`);
  } catch (e) {
    if (e instanceof ProposeError) throw new UsageError(e.message);
    throw e;
  }
  // The draft must validate: a names clash (e.g. --contract-id with a bad character) is a usage error, not a bad file.
  try {
    parseContract(yaml, '<draft>');
  } catch (e) {
    throw new UsageError(`the draft does not validate (${(e as Error).message.split('\n')[0]}); check --contract-id, --version and --phase`);
  }
  io.stdout(yaml);
  return 0;
}
