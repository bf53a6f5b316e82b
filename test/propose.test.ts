/**
 * `propose`: a draft contract from 50 generated runs of one shape validates, accepts the common runs (healthy, or
 * working where no run ends), refuses an edge never observed, and keeps a rare edge as a commented line.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseContract, parseReceiptFile, type Receipt } from '../src/core/index.js';
import { main } from '../src/cli/main.js';
import { draftYaml, nextVersion, proposeDraft, roundUpDuration, percentile } from '../src/propose/draft.js';
import { receipt } from './helpers/receipts.js';
import { ROOT, tempDir } from './helpers/server.js';

const T0 = Date.parse('2026-03-01T09:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

interface Shape {
  run: string;
  /** The search target chosen by the researcher. */
  search: 'web-search' | 'doc-search';
  /** A rare extra edge. */
  extra?: boolean;
  /** Run ends (completed) with a verified outcome. */
  ends?: boolean;
  /** Run starts (run.start from the orchestrator). */
  start?: boolean;
  /** Swap the order of the two parallel delegations. */
  swap?: boolean;
  /** Seconds of jitter. */
  jitter: number;
}

/** One run: orchestrator delegates to researcher and (in parallel) to publisher; the researcher searches, hands to the verifier, who returns. */
function runReceipts(s: Shape, base: number): Receipt[] {
  const out: Receipt[] = [];
  let n = 0;
  const add = (ms: number, body: Record<string, unknown>) => out.push(receipt({ run: s.run, event: `e${++n}`, at: iso(base + ms), ...body }));
  const edge = (ms: number, from: string, to: string, kind: string) => add(ms, { type: 'edge', from, to, kind });
  if (s.start) add(0, { type: 'run.start', contract: 'research', phase: 'work', version: '1', from: 'orchestrator' });
  const j = s.jitter * 1000;
  edge(1000, 'orchestrator', s.swap ? 'publisher' : 'researcher', 'delegate');
  edge(1500 + j, 'orchestrator', s.swap ? 'researcher' : 'publisher', 'delegate');
  edge(3000 + j, 'researcher', s.search, 'delegate');
  edge(5000 + 2 * j, s.search, 'researcher', 'return');
  if (s.extra) edge(5500 + 2 * j, 'researcher', 'archivist', 'delegate');
  edge(7000 + 2 * j, 'researcher', 'verifier', 'handoff');
  edge(9000 + 3 * j, 'verifier', 'orchestrator', 'return');
  if (s.ends !== false) {
    add(9500 + 3 * j, { type: 'outcome', from: 'orchestrator', verified: true });
    add(10_000 + 3 * j, { type: 'run.end', from: 'orchestrator', result: 'completed' });
  }
  return out;
}

/** 50 runs: 40 search the web, 10 the documents; 2 of the web runs also call a rare archivist; order of the parallel delegations varies. */
function fiftyRuns(opts: { start?: boolean; ends?: boolean } = {}): { all: Receipt[]; common: Receipt[]; shapes: Shape[] } {
  const shapes: Shape[] = [];
  for (let i = 0; i < 50; i++) {
    shapes.push({ run: `run-${String(i).padStart(2, '0')}`, search: i % 5 === 4 ? 'doc-search' : 'web-search', extra: i === 3 || i === 17, swap: i % 7 === 2, jitter: (i * 37) % 11, start: opts.start, ends: opts.ends });
  }
  const all: Receipt[] = [];
  const common: Receipt[] = [];
  shapes.forEach((s, i) => {
    const rs = runReceipts(s, T0 + i * 60_000);
    all.push(...rs);
    if (!s.extra) common.push(...rs);
  });
  return { all, common, shapes };
}

function capture() {
  let out = '';
  let err = '';
  return { io: { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) }, out: () => out, err: () => err };
}

const ndjson = (rs: Receipt[]) => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

describe('propose: drafting', () => {
  it('rounds deadlines up and takes nearest-rank percentiles', () => {
    expect(roundUpDuration(1)).toBe(1000);
    expect(roundUpDuration(1000)).toBe(1000);
    expect(roundUpDuration(1001)).toBe(2000);
    expect(roundUpDuration(61_000)).toBe(120_000);
    expect(roundUpDuration(3_600_001)).toBe(7_200_000);
    expect(percentile([5, 1, 3, 2, 4], 99)).toBe(5);
    expect(percentile([5, 1, 3, 2, 4], 50)).toBe(3);
  });

  it('drafts allow, bounded choice, plan with parallel branches, deadlines, outcome and owner from 50 runs', () => {
    const { all } = fiftyRuns();
    const d = proposeDraft(all, { contractId: 'research' });
    expect(d.runs).toBe(50);
    expect(d.owner).toBe('orchestrator');
    expect(d.ownerRuns).toBe(50);
    expect(d.agents[0]).toBe('orchestrator');
    expect(d.agents).not.toContain('archivist');
    const choice = d.allow.find((e) => e.to.length > 1)!;
    expect(choice).toMatchObject({ from: 'researcher', kind: 'delegate', max: 1, runs: 50 });
    expect(choice.to).toEqual(['web-search', 'doc-search']);
    expect(choice.perTarget).toEqual([40, 10]);
    // Returns of whichever search ran: allowed, not expected.
    const returns = d.allow.filter((e) => e.kind === 'return' && e.to[0] === 'researcher');
    expect(returns.map((e) => [e.from, e.runs])).toEqual([
      ['web-search', 40],
      ['doc-search', 10],
    ]);
    expect(d.plan.map((s) => s.key)).not.toContain('web-search -> researcher : return');
    expect(d.rare).toEqual([{ from: 'researcher', to: ['archivist'], kind: 'delegate', max: 1, runs: 2, perTarget: [2] }]);
    // The plan: the two delegations from the orchestrator are parallel branches (their order varies).
    const keys = d.plan.map((s) => s.key);
    expect(keys).toContain('researcher -> [web-search, doc-search] : delegate');
    const step = (k: string) => d.plan.find((s) => s.key === k)!;
    expect(step('orchestrator -> researcher : delegate').after).toEqual([]);
    expect(step('orchestrator -> publisher : delegate').after).toEqual([]);
    // The search always comes after both delegations.
    expect(step('researcher -> [web-search, doc-search] : delegate').after).toEqual(['orchestrator -> researcher : delegate', 'orchestrator -> publisher : delegate']);
    expect(step('researcher -> verifier : handoff').after).toEqual(['researcher -> [web-search, doc-search] : delegate']);
    // Deadlines: p99 of observed delays, rounded up to a second (handoff: 4 s + up to 10 s jitter after the delegation).
    expect(step('researcher -> verifier : handoff').withinMs).toBe(14_000);
    expect(d.outcome).toBe('required');
    expect(d.outcomeRuns).toBe(50);
  });

  it('writes YAML that validates, is a candidate, and carries evidence for every entry', () => {
    const { all } = fiftyRuns();
    const yaml = draftYaml(proposeDraft(all, { contractId: 'research', version: '2' }));
    const c = parseContract(yaml, 'draft.yaml');
    expect(c.candidate).toBe(true);
    expect(c.version).toBe('2');
    expect(yaml).toMatch(/^candidate: true/m);
    for (const line of yaml.split('\n').filter((l) => /^\s+- /.test(l))) expect(line, line).toMatch(/# seen in \d+ of 50 runs/);
    expect(yaml).toContain('# - { edge: "researcher -> archivist : delegate", max: 1 }   # seen in 2 of 50 runs (below --min-share 0.05): left out; archivist would need adding to agents');
    expect(yaml).toContain('# seen in 50 of 50 runs, at most 1 per run; bounded choice: web-search in 40, doc-search in 10');
    // A larger --min-share drops the doc-search target into a rare line; a zero share keeps the archivist.
    const strict = proposeDraft(all, { minShare: 0.25 });
    expect(strict.rare.map((e) => `${e.from}>${e.to.join(',')}:${e.runs}`).sort()).toEqual(['doc-search>researcher:10', 'researcher>archivist:2', 'researcher>doc-search:10']);
    expect(proposeDraft(all, { minShare: 0 }).rare).toEqual([]);
  });

  it('refuses input without any edge', () => {
    const r = receipt({ run: 'x', event: 'a', type: 'run.start', at: iso(T0), contract: 'c' });
    expect(() => proposeDraft([r])).toThrow(/no run with an edge/);
  });
});

describe('propose: the CLI and replaying against the draft', () => {
  it('a published draft gives healthy for the common runs, forbidden_edge for an unseen edge, and the rare runs are forbidden', async () => {
    const dir = tempDir('ta-propose-');
    const { all, common } = fiftyRuns();
    writeFileSync(join(dir, 'runs.ndjson'), ndjson(all));
    const c = capture();
    expect(await main(['propose', join(dir, 'runs.ndjson'), '--contract-id', 'research'], c.io)).toBe(0);
    const yaml = c.out();
    expect(c.err()).toContain('from 50 run(s)');
    expect(yaml).toMatch(/# - .*archivist.*# seen in 2 of 50 runs/);

    // validate accepts it.
    const contracts = join(dir, 'contracts');
    mkdirSync(contracts);
    writeFileSync(join(contracts, 'draft.yaml'), yaml);
    const v = capture();
    expect(await main(['validate', join(contracts, 'draft.yaml')], v.io)).toBe(0);

    // As a candidate it is never a pin: --contract finds no version to pin.
    const unpinned = capture();
    expect(await main(['replay', join(dir, 'runs.ndjson'), '--contracts', contracts, '--contract', 'research', '--json', '--fail-on', 'none'], unpinned.io)).toBe(0);
    expect(unpinned.out().trim().split('\n').map((l) => JSON.parse(l).verdict)).toEqual(new Array(50).fill('uncertain'));

    // A person removes the mark and publishes it: the common runs are healthy.
    writeFileSync(join(contracts, 'draft.yaml'), yaml.replace(/^candidate: true.*\n/m, ''));
    writeFileSync(join(dir, 'common.ndjson'), ndjson(common));
    const r = capture();
    expect(await main(['replay', join(dir, 'common.ndjson'), '--contracts', contracts, '--contract', 'research', '--json'], r.io)).toBe(0);
    const lines = r.out().trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(48);
    for (const l of lines) expect(l.verdict, `${l.run}: ${JSON.stringify(l.findings)}`).toBe('healthy');

    // The runs with the rare edge, and a run with an edge never observed, are forbidden_edge.
    const rogue = runReceipts({ run: 'rogue', search: 'web-search', jitter: 0 }, T0);
    rogue.push(receipt({ run: 'rogue', event: 'x1', type: 'edge', at: iso(T0 + 8000), from: 'verifier', to: 'publisher', kind: 'handoff' }));
    writeFileSync(join(dir, 'rogue.ndjson'), ndjson([...all.filter((x) => x.run === 'run-03' || x.run === 'run-17'), ...rogue]));
    const f = capture();
    expect(await main(['replay', join(dir, 'rogue.ndjson'), '--contracts', contracts, '--contract', 'research', '--json'], f.io)).toBe(1); // a forbidden_edge fails replay
    const byRun = Object.fromEntries(f.out().trim().split('\n').map((l) => JSON.parse(l)).map((l) => [l.run, l]));
    expect(byRun.rogue.verdict).toBe('forbidden_edge');
    expect(byRun.rogue.findings.find((x: any) => x.code === 'forbidden_edge').edge).toBe('verifier -> publisher : handoff');
    // archivist is not even declared: the agent check comes first.
    expect(byRun['run-03'].verdict).toBe('unknown_agent');
  });

  it('runs that never end: run.start names contract, phase and the next version; shadow-replay agrees with the published twin', async () => {
    const dir = tempDir('ta-propose-');
    const { common } = fiftyRuns({ start: true, ends: false });
    writeFileSync(join(dir, 'runs.ndjson'), ndjson(common));
    const c = capture();
    expect(await main(['propose', join(dir, 'runs.ndjson')], c.io)).toBe(0);
    const draft = parseContract(c.out(), 'draft.yaml');
    expect(draft.contract).toBe('research');
    expect(draft.version).toBe('2');
    expect(draft.phases.map((p) => p.name)).toEqual(['work']);
    expect(draft.phases[0].outcome).toBe('optional');
    // Cut every run before its last edge: the draft has them working (the return is pending, no deadline passed).
    const cut = common.filter((x) => !(x.type === 'edge' && x.from === 'verifier'));
    writeFileSync(join(dir, 'cut.ndjson'), ndjson(cut));
    // Shadow-replay against the candidate (the runs are pinned to version 1, published separately).
    const contracts = join(dir, 'contracts');
    mkdirSync(contracts);
    writeFileSync(join(contracts, 'v2.yaml'), c.out());
    writeFileSync(join(contracts, 'v1.yaml'), c.out().replace(/^version: "2"/m, 'version: "1"').replace(/^candidate: true.*\n/m, ''));
    const r = capture();
    expect(await main(['replay', join(dir, 'runs.ndjson'), '--contracts', contracts, '--shadow', 'research@2', '--json', '--fail-on', 'none'], r.io)).toBe(0);
    const lines = r.out().trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(48);
    const w = capture();
    // --now: right after the last cut receipt, before any deadline of the pending return passes.
    const lastCut = Math.max(...cut.map((x) => Date.parse(x.at)));
    expect(await main(['replay', join(dir, 'cut.ndjson'), '--contracts', contracts, '--shadow', 'research@2', '--now', new Date(lastCut).toISOString(), '--json', '--fail-on', 'none'], w.io)).toBe(0);
    const cutLines = w.out().trim().split('\n').map((l) => JSON.parse(l));
    expect(cutLines.filter((l) => l.verdict === 'working').length).toBeGreaterThan(0);
    for (const l of cutLines) {
      expect(['working', 'incomplete']).toContain(l.verdict);
      expect(l.shadow[0].verdict).toBe(l.verdict);
    }
    for (const l of lines) {
      expect(l.pin).toMatchObject({ contract: 'research', version: '1', phase: 'work' });
      // No run carries an outcome (optional) and every expected edge is observed: healthy without an end.
      expect(l.verdict).toBe('healthy');
      expect(l.shadow).toEqual([{ contract: 'research', version: '2', verdict: 'healthy', findings: l.findings, disagrees: false }]);
    }
  });

  it('versions: a new contract starts at "1", an existing one gets its own next version, never another contract\'s', async () => {
    const dir = tempDir('ta-propose-');
    const contracts = join(dir, 'contracts');
    mkdirSync(contracts);
    const drift = join(ROOT, 'receipts', 'drift.ndjson');
    // The drift runs pin research-publish@3; a draft for a new id is version 1 of that id.
    const first = capture();
    expect(await main(['propose', drift, '--contract-id', 'my-agents', '--contracts', contracts], first.io)).toBe(0);
    expect(parseContract(first.out(), 'a.yaml')).toMatchObject({ contract: 'my-agents', version: '1', candidate: true });
    // Once my-agents@1 is among the contracts, the next draft of it is version 2.
    writeFileSync(join(contracts, 'my-agents.yaml'), first.out());
    const second = capture();
    expect(await main(['propose', drift, '--contract-id', 'my-agents', '--contracts', contracts], second.io)).toBe(0);
    expect(parseContract(second.out(), 'b.yaml').version).toBe('2');
    // Without an id, the runs' own contract: one above its newest shipped version (research-publish 2 and 3).
    const own = capture();
    expect(await main(['propose', drift], own.io)).toBe(0);
    expect(parseContract(own.out(), 'c.yaml')).toMatchObject({ contract: 'research-publish', version: '4' });
    expect(nextVersion([], [], 'x')).toBe('1');
    expect(nextVersion(['1', '10', '9'], [], 'x')).toBe('11');
    expect(nextVersion(['beta'], [], 'x')).toBe('candidate-1');
  });

  it('an edge the version in force forbids is marked with its pin and run count and kept out of allow and plan', async () => {
    const c = capture();
    expect(await main(['propose', join(ROOT, 'receipts', 'drift.ndjson'), '--contract-id', 'my-agents'], c.io)).toBe(0);
    const yaml = c.out();
    expect(yaml).toContain('  # - { edge: "researcher -> publisher : delegate", max: 1 }   # forbidden under research-publish@3 in 1 run: review');
    expect(c.err()).toContain('2 forbidden edge(s) marked for review');
    expect(parseContract(yaml, 'd.yaml').agents).not.toContain('publisher');
    expect(yaml.split('\n').filter((l) => l.includes('researcher -> publisher') && !l.trimStart().startsWith('#'))).toEqual([]);
    // Pure: the same edge seen in every run is still kept out of the plan when runs were forbidden for it.
    const { all } = fiftyRuns();
    const forbidden = ['run-00', 'run-01'].map((run) => ({ run, edge: 'researcher -> verifier : handoff', under: 'research@1' }));
    const d = proposeDraft(all, { contractId: 'research', forbidden });
    expect(d.plan.map((s) => s.key)).not.toContain('researcher -> verifier : handoff');
    expect(d.allow.map((e) => e.to.join())).not.toContain('verifier');
    expect(draftYaml(d)).toContain('# forbidden under research@1 in 2 runs: review (seen in 50 of 50 runs)');
  });

  it('runs with no run.start (as from OTLP) are judged under --contract, or the --contract-id the directory publishes: their forbidden edges are marked, as --server marks them', async () => {
    const dir = tempDir('ta-propose-otlp-');
    const lines = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8').trim().split('\n');
    // The current version only (research-publish@3), and the runs as an OTLP dialect delivers them: no run.start.
    const contracts = join(dir, 'contracts');
    mkdirSync(contracts);
    writeFileSync(join(contracts, 'research-publish.yaml'), readFileSync(join(ROOT, 'contracts', 'research-publish.yaml')));
    const runs = join(dir, 'runs.ndjson');
    writeFileSync(runs, lines.filter((l) => JSON.parse(l).type !== 'run.start').join('\n') + '\n');
    const mark = '# - { edge: "researcher -> publisher : delegate", max: 1 }   # forbidden under research-publish@3 in 1 run: review';
    for (const args of [['--contract-id', 'research-publish'], ['--contract', 'research-publish', '--contract-id', 'app-agents'], ['--contract-id', 'app-agents']]) {
      const c = capture();
      expect(await main(['propose', runs, '--contracts', contracts, ...args], c.io), args.join(' ')).toBe(0);
      expect(c.out(), args.join(' ')).toContain(mark);
      expect(c.out().split('\n').filter((l) => l.includes('researcher -> publisher') && !l.trimStart().startsWith('#'))).toEqual([]);
    }
    // Two published contracts and no --contract naming one: no default, so the unpinned runs are not judged and nothing is marked.
    writeFileSync(join(contracts, 'supervisor-workers.yaml'), readFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml')));
    const open = capture();
    expect(await main(['propose', runs, '--contracts', contracts, '--contract-id', 'app-agents'], open.io)).toBe(0);
    expect(open.out()).not.toContain('forbidden under');
    const bad = capture();
    expect(await main(['propose', runs, '--contracts', contracts, '--contract', 'nope'], bad.io)).toBe(2);
    expect(bad.err()).toContain('--contract nope: no such contract');
  });

  it('an edge some runs were judged ambiguous_route on is drafted with the max of the other runs and marked for review', async () => {
    const c = capture();
    expect(await main(['propose', join(ROOT, 'receipts', 'drift.ndjson'), '--contracts', join(ROOT, 'contracts'), '--contract-id', 'research-publish'], c.io)).toBe(0);
    const line = c.out().split('\n').find((l) => l.includes('"orchestrator -> researcher : delegate", max:'))!;
    expect(line).toBe(
      '  - { edge: "orchestrator -> researcher : delegate", max: 1 }   # seen in 9 of 9 runs, at most 1 per run in the 8 others; REVIEW: ambiguous_route under research-publish@3 in 1 run (up to 2 per run): raise max only if the repeats are intended',
    );
    expect(c.err()).toContain('1 ambiguous route(s) marked for review');
    // Only ambiguous runs show the edge: their count is drafted, still marked.
    const d = proposeDraft(fiftyRuns().all, { contractId: 'research', ambiguous: fiftyRuns().all.filter((r) => r.type === 'edge').map((r) => ({ run: r.run, edge: `${(r as { from: string }).from} -> ${(r as { to: string }).to} : ${(r as { kind: string }).kind}`, under: 'research@1' })) });
    expect(d.allow.every((e) => e.ambiguous && e.max === e.ambiguous.max)).toBe(true);
  });

  it('bad usage is a clear error with exit 2', async () => {
    const c = capture();
    expect(await main(['propose'], c.io)).toBe(2);
    expect(c.err()).toContain('give at least one NDJSON receipts file');
    const d = capture();
    expect(await main(['propose', 'x.ndjson', '--min-share', '1.5'], d.io)).toBe(2);
    expect(d.err()).toContain('--min-share');
    const e = capture();
    expect(await main(['propose', '/nonexistent/x.ndjson'], e.io)).toBe(2);
  });
});
