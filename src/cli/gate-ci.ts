/**
 * `gate --format junit|github|markdown`: the run is one test case in one suite (the input: the run at the server).
 * Healthy passes; settled and not healthy fails; never seen, or still open at the timeout, is an error (the gate
 * exits 66 / 75). The Markdown summary draws the run's graph from the server's run API, as `diff RUN --server` does.
 */
import type { ContractRegistry } from '../core/registry.js';
import { toMarkdown } from '../render/markdown.js';
import type { Report, ReportCase } from '../render/report.js';
import { reportText } from './ci-format.js';
import { ContractLocator, runCase, verdictsMarkdown, type VerdictLike } from './ci-report.js';

export interface GateOutcome {
  run: string;
  server: string;
  timeout: string;
  /** The last verdict seen; null when the run was never seen. */
  last: VerdictLike | null;
  waitedSec: number;
  /** The gate's exit code (0, 1, 66 or 75). */
  exit: number;
  now: number;
}

function gateCase(o: GateOutcome, where: ContractLocator): ReportCase {
  if (!o.last) {
    const message = `no receipts for this run reached ${o.server} within ${o.timeout}`;
    return { name: o.run, status: 'error', summary: `never seen: ${message}`, type: 'never_seen', findings: [{ severity: 'error', title: `${o.run}: never seen`, message }], timeSec: o.waitedSec };
  }
  const c = { ...runCase(o.last, o.now, where), timeSec: o.waitedSec };
  if (c.status !== 'skipped') return c;
  const message = `still ${o.last.verdict} at the timeout (${o.timeout})`;
  return { ...c, status: 'error', summary: `${message}; ${c.summary}`, findings: [...c.findings, { severity: 'warning', title: `${o.run}: not settled`, message }] };
}

export function gateReport(o: GateOutcome, where: ContractLocator): Report {
  return { name: 'topology-audit gate', suites: [{ name: `${o.run} at ${o.server}`, cases: [gateCase(o, where)], timeSec: o.waitedSec }], timestamp: new Date(o.now).toISOString().slice(0, 19) };
}

async function gateGraph(o: GateOutcome, opts: { token?: string; contracts?: string }): Promise<{ mermaid?: string; missing?: string }> {
  const { fromServer, renderDiff } = await import('./diff.js');
  try {
    return { mermaid: await renderDiff(await fromServer(o.run, { server: o.server, token: opts.token, contracts: opts.contracts, now: o.now }), 'mermaid') };
  } catch (e) {
    return { missing: (e as Error).message };
  }
}

export async function gateMarkdown(o: GateOutcome, opts: { token?: string; contracts?: string }): Promise<string> {
  const exitWords: Record<number, string> = { 0: 'healthy', 1: 'settled and not healthy', 66: 'never seen by the timeout', 75: 'still open at the timeout' };
  const lead = [`Gate on run \`${o.run}\` at ${o.server} after ${Math.round(o.waitedSec)}s: exit ${o.exit} (${exitWords[o.exit] ?? 'failed'}).`];
  if (!o.last) return toMarkdown({ title: 'topology-audit gate', lead, sections: [] });
  const graphs = new Map(o.last.verdict === 'healthy' ? [] : [[o.run, await gateGraph(o, opts)]]);
  return toMarkdown(verdictsMarkdown('topology-audit gate', lead, [o.last], o.now, graphs));
}

export async function gateCiOutput(o: GateOutcome, format: 'junit' | 'github' | 'markdown', opts: { token?: string; contracts?: string; registry?: ContractRegistry }): Promise<string> {
  if (format === 'markdown') return gateMarkdown(o, opts);
  return reportText(gateReport(o, new ContractLocator(opts.registry)), format);
}
