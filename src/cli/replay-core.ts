/**
 * The pure part of `replay`: receipts and contracts in, verdicts out, and expectations checked against them. Its own
 * module so that `diff` and the CI formats use it without importing the command (no file cycle: replay -> replay-ci ->
 * diff -> replay).
 */
import { groupByRun, resolvePin, evaluate, runIdError, shadowEvaluate, VERDICTS, type Contract, type ContractRegistry, type Receipt, type RunVerdict, type ShadowVerdict, type Verdict } from '../core/index.js';
import { toInstant, type Instant } from '../core/time.js';
import { UsageError } from './io.js';

export type Expectation = { verdict?: Verdict; codes?: string[] };

/** A finding code as an expectations file may name it (`forbidden_edge`). */
const FINDING_CODE = /^[a-z][a-z0-9_]{0,63}$/;

/** `{ "<run id>": "<verdict>" }`, or `{ "<run id>": { "verdict": ..., "codes": [...] } }` to also expect finding codes. */
export function parseExpectFile(text: string, file: string): Map<string, Expectation> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file}: invalid JSON: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new UsageError(`${file}: expected a JSON object {"<run id>": "<verdict>"}`);
  const out = new Map<string, Expectation>();
  // What the file says reaches stderr and CI annotations: only ids, verdicts and finding codes, quoted as JSON.
  const quote = (x: unknown) => JSON.stringify(String(x).slice(0, 200));
  for (const [run, v] of Object.entries(raw as Record<string, unknown>)) {
    const bad = runIdError(run);
    if (bad) throw new UsageError(`${file}: run ${quote(run)}: not a run id (${bad})`);
    const e: Expectation = typeof v === 'string' ? { verdict: v as Verdict } : (v as Expectation);
    if (!e || typeof e !== 'object') throw new UsageError(`${file}: run "${run}": expected a verdict or {verdict, codes}`);
    if (e.verdict !== undefined && !(VERDICTS as readonly string[]).includes(e.verdict)) throw new UsageError(`${file}: run "${run}": unknown verdict ${quote(e.verdict)}`);
    if (e.codes !== undefined && !(Array.isArray(e.codes) && e.codes.every((c) => typeof c === 'string' && FINDING_CODE.test(c)))) throw new UsageError(`${file}: run "${run}": codes must be a list of finding codes (a-z, 0-9, _)`);
    out.set(run, e);
  }
  return out;
}

export interface ReplayResult {
  verdicts: RunVerdict[];
  /** The evaluation time: whole ms since the epoch (-Infinity for no receipts), and the sub-ms nanoseconds. */
  now: number;
  nowNs: number;
  /** Shadow verdicts per run (only with `shadow` candidates). */
  shadows: Map<string, ShadowVerdict[]>;
}

/** Audit receipts offline. Pure apart from the registry passed in. */
export function replayReceipts(receipts: Receipt[], registry: ContractRegistry, opts: { now?: number | Instant; defaultContract?: string; shadow?: Contract[] }): ReplayResult {
  const runs = groupByRun(receipts);
  // Without --now: the latest receipt instant, exact to the nanosecond.
  const now: Instant = opts.now !== undefined ? toInstant(opts.now) : { ms: -Infinity, ns: 0 };
  if (opts.now === undefined) {
    for (const s of runs.values()) {
      if (s.lastAt > now.ms || (s.lastAt === now.ms && s.lastNs > now.ns)) {
        now.ms = s.lastAt;
        now.ns = s.lastNs;
      }
    }
  }
  const shadows = new Map<string, ShadowVerdict[]>();
  const evalOpts = { registry };
  const verdicts = [...runs.values()].map((s) => {
    const pinning = resolvePin(s, registry, opts.defaultContract);
    const v = evaluate(s, pinning, now, evalOpts);
    if (opts.shadow?.length) shadows.set(s.run, shadowEvaluate(s, pinning, v, opts.shadow, now, evalOpts));
    return v;
  });
  verdicts.sort((a, b) => (a.run < b.run ? -1 : a.run > b.run ? 1 : 0));
  return { verdicts, now: now.ms, nowNs: now.ns, shadows };
}

/** What is wrong with one expectation (nothing when it is met). */
export function checkExpectation(run: string, e: Expectation, byRun: ReadonlyMap<string, RunVerdict>): string[] {
  const v = byRun.get(run);
  if (!v) return [`${run}: expected ${e.verdict ?? 'a verdict'} but the input has no receipts for this run`];
  const problems: string[] = [];
  if (e.verdict !== undefined && v.verdict !== e.verdict) problems.push(`${run}: expected ${e.verdict}, got ${v.verdict}`);
  for (const c of e.codes ?? []) if (!v.findings.some((f) => f.code === c)) problems.push(`${run}: expected a finding "${c}", found ${v.findings.map((f) => f.code).join(', ') || 'none'}`);
  return problems;
}

export function checkExpectations(verdicts: RunVerdict[], expect: Map<string, Expectation>): string[] {
  const byRun = new Map(verdicts.map((v) => [v.run, v]));
  return [...expect].flatMap(([run, e]) => checkExpectation(run, e, byRun));
}

/**
 * `replay --fail-on`: which runs fail the command (exit 1), as a failed policy fails conftest. Without the flag, every
 * run settled on a verdict other than healthy (what `gate` exits 1 on); with a list of verdicts, every run whose
 * verdict is in it, settled or not (so `--fail-on working` fails on a run that never ended); `none` fails on nothing.
 */
export type FailOn = { kind: 'settled-non-healthy' } | { kind: 'verdicts'; verdicts: ReadonlySet<Verdict> };

export function parseFailOn(text: string | undefined): FailOn {
  if (text === undefined) return { kind: 'settled-non-healthy' };
  const names = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 1 && names[0] === 'none') return { kind: 'verdicts', verdicts: new Set() };
  if (names.length === 0) throw new UsageError('--fail-on: give verdicts separated by commas, or none');
  for (const n of names) if (!(VERDICTS as readonly string[]).includes(n)) throw new UsageError(`--fail-on: unknown verdict "${n}" (one of ${VERDICTS.join(', ')}, or none)`);
  return { kind: 'verdicts', verdicts: new Set(names as Verdict[]) };
}

/** The runs that fail `replay` under `failOn`, in run order. */
export function failingRuns(verdicts: readonly RunVerdict[], failOn: FailOn): RunVerdict[] {
  return verdicts.filter((v) => (failOn.kind === 'verdicts' ? failOn.verdicts.has(v.verdict) : v.settled && v.verdict !== 'healthy'));
}
