/**
 * --format text|json|junit|github|markdown on replay (with and without --expect), validate, contract diff and gate:
 * the drift fixture through every format, JUnit checked against the JUnit schema by xmllint, workflow commands parsed
 * back, every Mermaid block parsed by mermaid's parser; the exit code the same in every format; reports on stdout only.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { parseReceiptFile } from '../src/core/index.js';
import { escapeData, escapeProperty, workflowCommand } from '../src/render/workflow-commands.js';
import { toJunit } from '../src/render/junit.js';
import { mermaidBlocks, parseMermaid, parseWorkflowCommands, xmllintSchema, xpath } from './helpers/ci.js';
import { ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

const DRIFT = join(ROOT, 'receipts', 'drift.ndjson');
const EXPECTED = join(ROOT, 'receipts', 'drift.expected.json');
const CONTRACTS = join(ROOT, 'contracts');
const FORMATS = ['text', 'json', 'junit', 'github', 'markdown'] as const;

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

/** 1-based line of a top-level key in a file. */
const keyLine = (file: string, key: string) => readFileSync(file, 'utf8').split('\n').findIndex((l) => l.startsWith(`${key}:`)) + 1;

let savedWorkspace: string | undefined;
beforeAll(() => {
  savedWorkspace = process.env.GITHUB_WORKSPACE;
  delete process.env.GITHUB_WORKSPACE;
});
afterAll(() => {
  if (savedWorkspace !== undefined) process.env.GITHUB_WORKSPACE = savedWorkspace;
});

describe('replay: the drift fixture through every format', () => {
  type Json = { run: string; verdict: string; settled: boolean; findings: { code: string; settled: boolean; verdict: string }[] };
  let verdicts: Json[];
  beforeAll(async () => {
    const r = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', 'json');
    verdicts = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  });

  it('exits 1 in every format while a run is settled non-healthy (as conftest fails on a failed policy), 0 with --fail-on none; a report goes to stdout alone', async () => {
    for (const f of FORMATS) {
      const r = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', f);
      expect(r.code, `${f}: ${r.stderr}`).toBe(1);
      expect(r.stderr, f).toBe('6 of 9 run(s) fail (settled and not healthy): forbidden_edge 1, incomplete 1, stale_contract 1, false_complete 1, unknown_agent 1, ambiguous_route 1; --fail-on none to only report\n');
      expect(r.stdout.length, f).toBeGreaterThan(0);
      const quiet = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', f, '--fail-on', 'none');
      expect(quiet.code, f).toBe(0);
      expect(quiet.stderr, f).toBe('');
      expect(quiet.stdout, f).toBe(r.stdout);
    }
    // --fail-on names verdicts, settled or not: the open working run fails too; healthy alone passes the fixture.
    const working = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--fail-on', 'working,waiting');
    expect([working.code, working.stderr]).toEqual([1, '2 of 9 run(s) fail (--fail-on working,waiting): working 1, waiting 1; --fail-on none to only report\n']);
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--fail-on', 'forbidden_edge,unknown_agent')).code).toBe(1);
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--fail-on', 'uncertain')).code).toBe(0);
    const typo = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--fail-on', 'forbiden_edge');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown verdict "forbiden_edge"');
    // --expect keeps its meaning: the expectations decide (all met: 0) unless --fail-on is given as well.
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED)).code).toBe(0);
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED, '--fail-on', 'forbidden_edge')).code).toBe(1);
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--json')).stdout).toBe((await cli('replay', DRIFT, '--contracts', CONTRACTS, '-f', 'json')).stdout);
    expect(verdicts).toHaveLength(9);
    const bad = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', 'xml');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--format must be one of text, json, junit, github, markdown');
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--json', '--format', 'junit')).code).toBe(2);
  });

  it('junit: valid against the JUnit schema; one suite for the file, one case per run; settled bad runs fail, open ones are skipped', async () => {
    const xml = (await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', 'junit')).stdout;
    const v = xmllintSchema(xml);
    expect(v.ok, v.stderr).toBe(true);
    expect(xpath(xml, 'count(//testsuite)')).toBe('1');
    expect(xpath(xml, 'string(//testsuite/@name)')).toBe(DRIFT);
    expect(xpath(xml, 'count(//testcase)')).toBe(String(verdicts.length));
    const failing = verdicts.filter((x) => x.settled && x.verdict !== 'healthy');
    const open = verdicts.filter((x) => !x.settled && x.verdict !== 'healthy');
    expect(failing.length).toBe(6);
    expect(xpath(xml, 'count(//testcase/failure)')).toBe(String(failing.length));
    expect(xpath(xml, 'count(//testcase/skipped)')).toBe(String(open.length));
    expect(xpath(xml, 'string(//testsuite/@failures)')).toBe(String(failing.length));
    for (const x of failing) expect(xpath(xml, `string(//testcase[@name="${x.run}"]/failure/@type)`)).toBe(x.verdict);
    expect(xpath(xml, 'string(//testcase[@name="drift-direct-route"]/failure)')).toContain('researcher -> publisher : delegate is not allowed');
    expect(xpath(xml, 'count(//testcase[@name="drift-complete"]/*)')).toBe('0');
  });

  it('junit: one suite per receipts file, in command-line order; a run split over two files belongs to the first', async () => {
    const dir = tempDir('ta-two-inputs-');
    const lines = readFileSync(DRIFT, 'utf8').split('\n').filter(Boolean);
    const runOf = (l: string) => JSON.parse(l).run as string;
    const inA = new Set(['drift-complete', 'drift-direct-route', 'drift-wait']);
    const late = lines.filter((l) => runOf(l) === 'drift-late');
    expect(late.length).toBeGreaterThan(1);
    // drift-late: its first receipt in a.ndjson, the rest in b.ndjson.
    const a = [...lines.filter((l) => inA.has(runOf(l))), late[0]];
    const b = lines.filter((l) => !inA.has(runOf(l)) && l !== late[0]);
    const fileA = join(dir, 'a.ndjson');
    const fileB = join(dir, 'b.ndjson');
    writeFileSync(fileA, a.join('\n') + '\n');
    writeFileSync(fileB, b.join('\n') + '\n');
    const r = await cli('replay', fileA, fileB, '--contracts', CONTRACTS, '--format', 'junit', '--fail-on', 'none');
    expect(r.code, r.stderr).toBe(0);
    expect(xmllintSchema(r.stdout).ok).toBe(true);
    expect(xpath(r.stdout, 'count(//testsuite)')).toBe('2');
    expect(xpath(r.stdout, 'string(//testsuite[1]/@name)')).toBe(fileA);
    expect(xpath(r.stdout, 'string(//testsuite[2]/@name)')).toBe(fileB);
    expect(xpath(r.stdout, `count(//testsuite[@name="${fileA}"]/testcase)`)).toBe('4');
    expect(xpath(r.stdout, `count(//testsuite[@name="${fileB}"]/testcase)`)).toBe('5');
    expect(xpath(r.stdout, `string(//testsuite[@name="${fileA}"]/testcase[@name="drift-late"]/failure/@type)`)).toBe('incomplete');
    expect(xpath(r.stdout, `count(//testsuite[@name="${fileB}"]/testcase[@name="drift-late"])`)).toBe('0');
    // The verdicts are those of the single file: splitting the input changes the suites, not the verdicts.
    expect(xpath(r.stdout, 'count(//testcase/failure)')).toBe('6');
  });

  it('junit: the schema check is real (a report without its counts, or with a bad count, is refused)', () => {
    const good = toJunit({ name: 'x', suites: [{ name: 's', cases: [{ name: 'c', status: 'failed', summary: 'why <&> "q"', findings: [{ severity: 'error', title: 't', message: 'm\u0001\nsecond line' }] }] }] });
    expect(xmllintSchema(good).ok).toBe(true);
    expect(xpath(good, 'string(//failure/@message)')).toBe('why <&> "q"');
    expect(xmllintSchema(good.replace('<testsuite name="s" tests="1" ', '<testsuite name="s" ')).ok).toBe(false);
    expect(xmllintSchema(good.replace(/errors="0" skipped/, 'errors="-1" skipped')).ok).toBe(false);
    expect(xmllintSchema(good.replace('<failure ', '<failed ').replace('</failure>', '</failed>')).ok).toBe(false);
  });

  it('github: one workflow command per finding of a non-healthy run; error when settled, warning while waiting, notice while working', async () => {
    const r = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', 'github');
    const commands = parseWorkflowCommands(r.stdout);
    const findings = verdicts.filter((x) => x.verdict !== 'healthy').flatMap((x) => x.findings.map((f) => ({ run: x.run, ...f })));
    expect(commands).toHaveLength(findings.length);
    findings.forEach((f, i) => {
      const c = commands[i];
      expect(c.properties.title).toBe(`${f.run}: ${f.code}`);
      const want = f.verdict === 'working' ? 'notice' : f.settled ? 'error' : 'warning';
      expect(c.command, c.properties.title).toBe(want);
    });
    expect(commands.find((c) => c.properties.title === 'drift-wait: waiting')!.command).toBe('warning');
    // A forbidden edge points at the pinned contract's `allow:` key: the allow entry it lacks.
    const contractFile = join(CONTRACTS, 'research-publish.yaml');
    const forbidden = commands.filter((c) => c.properties.title.endsWith(': forbidden_edge'));
    expect(forbidden.length).toBe(2);
    for (const c of forbidden) expect(c.properties).toMatchObject({ file: contractFile, line: String(keyLine(contractFile, 'allow')) });
    expect(commands.find((c) => c.properties.title === 'drift-shadow: unknown_agent')!.properties).toMatchObject({ file: contractFile, line: String(keyLine(contractFile, 'agents')) });
    // An edge over its max points at its own allow entry.
    const entryLine = readFileSync(contractFile, 'utf8').split('\n').findIndex((l) => l === '  - orchestrator -> researcher : delegate') + 1;
    expect(entryLine).toBeGreaterThan(keyLine(contractFile, 'allow'));
    expect(commands.find((c) => c.properties.title === 'drift-twice: multiplicity')).toMatchObject({ command: 'error', properties: { file: contractFile, line: String(entryLine) } });
    // A finding about the receipts has no file.
    expect(commands.find((c) => c.properties.title === 'drift-late: missed_deadline')!.properties.file).toBeUndefined();
    expect(r.stdout).not.toContain('\x1b[');
  });

  it('github: escaping follows the runner (%25 %0D %0A in messages; also %3A %2C in properties), parsed back exactly', () => {
    const f = { severity: 'error' as const, title: 'run:1, 100%', message: '50% done\r\nnext: a,b', file: 'dir,x/c:1.yaml', line: 3, col: 2 };
    const line = workflowCommand(f);
    expect(line).toBe('::error file=dir%2Cx/c%3A1.yaml,line=3,col=2,title=run%3A1%2C 100%25::50%25 done%0D%0Anext: a,b');
    expect(line).not.toMatch(/[\r\n]/);
    const [back] = parseWorkflowCommands(line);
    expect(back).toEqual({ command: 'error', properties: { file: f.file, line: '3', col: '2', title: f.title }, message: f.message });
    expect(escapeData('%0A')).toBe('%250A');
    expect(escapeProperty('a:b,c')).toBe('a%3Ab%2Cc');
  });

  it('markdown: a table with every run, and each non-healthy run with its graph; every Mermaid block parses', async () => {
    const md = (await cli('replay', DRIFT, '--contracts', CONTRACTS, '--format', 'markdown')).stdout;
    const rows = md.split('\n').filter((l) => l.startsWith('| drift-'));
    expect(rows).toHaveLength(9);
    for (const x of verdicts) expect(rows.find((r) => r.startsWith(`| ${x.run} |`))).toContain(`**${x.verdict}**`);
    const blocks = mermaidBlocks(md);
    expect(blocks).toHaveLength(verdicts.filter((x) => x.verdict !== 'healthy').length);
    for (const b of blocks) expect((await parseMermaid(b)).diagramType).toMatch(/^flowchart/);
    // The same overlay as `diff`.
    const diff = await cli('diff', DRIFT, '--contracts', CONTRACTS, '--run', 'drift-direct-route', '--format', 'mermaid');
    expect(blocks).toContain(diff.stdout);
    expect(md).toContain('### drift-direct-route: forbidden_edge');
    expect(md).not.toContain('### drift-complete');
  });

  it('the Mermaid parser is real: a broken block is refused', async () => {
    await expect(parseMermaid('flowchart LR\n  n0 -->|"x"| \n  ]]')).rejects.toThrow();
    await expect(parseMermaid('flowchart LR\n  n0 --> n1\n  linkStyle 7 stroke:#000')).rejects.toThrow();
  });
});

describe('replay --expect in every format', () => {
  function wrongExpectations(): string {
    const file = join(tempDir('ta-expect-'), 'expected.json');
    const e = JSON.parse(readFileSync(EXPECTED, 'utf8'));
    e['drift-wait'] = 'healthy';
    e['drift-missing'] = 'healthy';
    writeFileSync(file, JSON.stringify(e));
    return file;
  }

  it('met: exit 0; one case per expectation, none failing; no annotations; the summary says all are met', async () => {
    for (const f of FORMATS) expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED, '--format', f)).code, f).toBe(0);
    const xml = (await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED, '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase)')).toBe('9');
    expect(xpath(xml, 'count(//failure|//error|//skipped)')).toBe('0');
    expect(xpath(xml, 'string(//testsuite/@name)')).toBe(EXPECTED);
    const gh = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED, '--format', 'github');
    expect(gh.stdout).toBe('');
    expect(gh.stderr).toBe('all 9 expectation(s) met\n');
    expect((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED, '--format', 'markdown')).stdout).toContain('9 of 9 met');
  });

  it('unmet: exit 1 in every format; the unmet expectations fail (with the run findings), as errors on GitHub', async () => {
    const file = wrongExpectations();
    for (const f of FORMATS) {
      const r = await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', file, '--format', f);
      expect(r.code, f).toBe(1);
      expect(r.stderr).toContain('expectation failed: drift-wait: expected healthy, got waiting');
    }
    const xml = (await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', file, '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase)')).toBe('10');
    expect(xpath(xml, 'count(//testcase/failure)')).toBe('2');
    expect(xpath(xml, 'string(//testcase[@name="drift-wait is healthy"]/failure)')).toContain('waiting on verifier');
    const commands = parseWorkflowCommands((await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', file, '--format', 'github')).stdout);
    const unmet = commands.filter((c) => c.properties.title.endsWith('expectation not met'));
    expect(unmet.map((c) => [c.command, c.message])).toEqual([
      ['error', 'drift-wait: expected healthy, got waiting'],
      ['error', 'drift-missing: expected healthy but the input has no receipts for this run'],
    ]);
    expect(commands.find((c) => c.properties.title === 'drift-wait: waiting')!.command).toBe('warning');
    const md = (await cli('replay', DRIFT, '--contracts', CONTRACTS, '--expect', file, '--format', 'markdown')).stdout;
    expect(md).toContain('8 of 10 met');
    expect(md).toMatch(/\| drift-wait is healthy \| no: drift-wait: expected healthy, got waiting \|/);
  });
});

describe('validate in every format', () => {
  const BAD = `contract: x\nversion: "1"\nowner: a\nagents: [a, b]\nallow:\n  - a -> c : delegate\nphases:\n  p:\n    expect: []\n`;

  it('the packaged contracts: exit 0 everywhere, one suite per file, no warning (every phase bounds its silence)', async () => {
    for (const f of FORMATS) expect((await cli('validate', CONTRACTS, '--format', f)).code, f).toBe(0);
    const xml = (await cli('validate', CONTRACTS, '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(Number(xpath(xml, 'count(//testsuite)'))).toBe(4);
    expect(xpath(xml, 'count(//failure)')).toBe('0');
    const text = await cli('validate', CONTRACTS);
    expect(text.stderr.split('\n').filter((l) => l.includes(': warning: '))).toEqual([]);
    expect(parseWorkflowCommands((await cli('validate', CONTRACTS, '--format', 'github')).stdout)).toEqual([]);
    // A copy without the phases' progress_within: each unbounded expected edge warns, as ::warning at its line and column.
    const dir = tempDir('ta-unbounded-');
    writeFileSync(join(dir, 'research-publish.yaml'), readFileSync(join(CONTRACTS, 'research-publish.yaml'), 'utf8').replace(/^ *progress_within:.*\n/gm, ''));
    expect((await cli('validate', dir)).code).toBe(0);
    const warnings = (await cli('validate', dir)).stderr.split('\n').filter((l) => l.includes(': warning: '));
    expect(warnings.length).toBe(5);
    const commands = parseWorkflowCommands((await cli('validate', dir, '--format', 'github')).stdout);
    expect(commands.map((c) => `${c.properties.file}:${c.properties.line}:${c.properties.col}`)).toEqual(warnings.map((w) => w.split(': ')[0]));
    expect(commands.every((c) => c.command === 'warning')).toBe(true);
    const json = JSON.parse((await cli('validate', CONTRACTS, '--json')).stdout);
    expect(json.ok).toBe(true);
    expect(json.files.map((f: { contract: string; version: string }) => `${f.contract}@${f.version}`)).toContain('research-publish@3');
  });

  it('an invalid contract: exit 1 everywhere; a failing case; ::error at the same file:line:col as the text', async () => {
    const file = join(tempDir('ta-validate-'), 'bad.yaml');
    writeFileSync(file, BAD);
    for (const f of FORMATS) expect((await cli('validate', file, '--format', f)).code, f).toBe(1);
    const text = await cli('validate', file);
    const [where, field] = text.stderr.trim().split(': ');
    expect(where).toBe(`${file}:6:5`);
    const [c] = parseWorkflowCommands((await cli('validate', file, '--format', 'github')).stdout);
    expect(c).toMatchObject({ command: 'error', properties: { file, line: '6', col: '5', title: field }, message: 'agent "c" is not declared in agents' });
    const xml = (await cli('validate', file, '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase/failure)')).toBe('1');
    expect((await cli('validate', file, '--format', 'markdown')).stdout).toContain('**invalid** (1 issue(s))');
    expect((await cli('validate', file, '--bogus')).code).toBe(2);
  });

  it('replay with an invalid contract directory: still exit 2 in every format; with github each issue is an ::error at its line', async () => {
    const dir = tempDir('ta-badcontracts-');
    writeFileSync(join(dir, 'bad.yaml'), BAD);
    for (const f of FORMATS) {
      const r = await cli('replay', DRIFT, '--contracts', dir, '--format', f);
      expect(r.code, f).toBe(2);
      expect(r.stderr, f).toContain(`${join(dir, 'bad.yaml')}:6:5: allow[0].edge: agent "c" is not declared in agents`);
      if (f !== 'github') expect(r.stdout, f).toBe('');
    }
    const [c, ...more] = parseWorkflowCommands((await cli('replay', DRIFT, '--contracts', dir, '--format', 'github')).stdout);
    expect(more).toEqual([]);
    expect(c).toMatchObject({ command: 'error', properties: { file: join(dir, 'bad.yaml'), line: '6', col: '5', title: 'invalid contract: allow[0].edge' } });
  });
});

describe('contract diff --format markdown on two versions', () => {
  const V1 = `contract: shop\nversion: "1"\nowner: orchestrator\nagents: [orchestrator, researcher, verifier, auditor]\nallow:\n  - orchestrator -> researcher : delegate\n  - researcher -> verifier : handoff\n  - verifier -> orchestrator : return\n  - researcher -> auditor : handoff\nphases:\n  main:\n    expect:\n      - orchestrator -> researcher : delegate\n`;
  const V2 = `contract: shop\nversion: "2"\nowner: orchestrator\nagents: [orchestrator, researcher, verifier, search]\nallow:\n  - orchestrator -> researcher : delegate\n  - { edge: "researcher -> verifier : handoff", max: 2 }\n  - verifier -> orchestrator : return\n  - researcher -> search : delegate\nphases:\n  main:\n    expect:\n      - orchestrator -> researcher : delegate\n`;
  let dir: string;
  beforeAll(() => {
    dir = join(tempDir('ta-cdiff-md-'), 'contracts');
    mkdirSync(dir);
    writeFileSync(join(dir, 'shop-1.yaml'), V1);
    writeFileSync(join(dir, 'shop-2.yaml'), V2);
  });

  it('draws both versions with the removed edge marked in the old one and the added one in the new; both parse', async () => {
    const r = await cli('contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir, '--format', 'markdown');
    expect(r.code).toBe(1);
    const [from, to] = mermaidBlocks(r.stdout);
    expect(from).toMatch(/n1 -\.->\|"handoff · removed"\| n3/); // researcher -> auditor, gone in 2
    expect(from).toContain('auditor<br/>removed agent');
    expect(to).toMatch(/n1 ==>\|"delegate · added"\| n3/); // researcher -> search, new in 2
    expect(to).toContain('handoff (max 2) · max 1 → 2');
    expect(from).not.toContain('added');
    expect(to).not.toContain('removed');
    for (const b of [from, to]) expect((await parseMermaid(b)).diagramType).toMatch(/^flowchart/);
    expect(r.stdout).toContain('| removed | allow researcher -&gt; auditor : handoff |');
    expect(r.stdout).toContain('| added | allow researcher -&gt; search : delegate |');
  });

  it('junit and github report the differences (exit 1); the same content passes (exit 0)', async () => {
    for (const f of FORMATS) expect((await cli('contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir, '--format', f)).code, f).toBe(1);
    for (const f of FORMATS) expect((await cli('contract', 'diff', 'shop@1', 'shop@1', '--contracts', dir, '--format', f)).code, f).toBe(0);
    const xml = (await cli('contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir, '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//failure)')).toBe('1');
    const commands = parseWorkflowCommands((await cli('contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir, '--format', 'github')).stdout);
    expect(commands.find((c) => c.message === 'allow added: researcher -> search : delegate')!.properties).toMatchObject({ file: join(dir, 'shop-2.yaml'), line: '9' });
    expect(commands.find((c) => c.message === 'allow removed: researcher -> auditor : handoff')!.properties).toMatchObject({ file: join(dir, 'shop-1.yaml'), line: '9' });
    expect(commands.find((c) => c.message.startsWith('allow changed: researcher -> verifier : handoff'))!.properties.line).toBe('7');
  });
});

describe('gate in every format against a running auditor', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess();
    const drift = parseReceiptFile(readFileSync(DRIFT, 'utf8'), 'drift.ndjson');
    const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
    const delta = Date.now() - 5000 - latest;
    const body = drift.map((r) => JSON.stringify({ ...r, at: new Date(Date.parse(r.at) + delta).toISOString() })).join('\n') + '\n';
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
    expect((await res.json()).accepted).toBe(drift.length);
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
  });

  const gate = (run: string, ...args: string[]) => runCli(['gate', run, '--server', srv.api, '-t', '10s', ...args], { env: { ...process.env, FORCE_COLOR: '1', NO_COLOR: '' } });

  it('the exit code is the same in every format (0 healthy, 1 settled unsafe, 66 never seen); no colour outside text', async () => {
    for (const f of FORMATS) {
      const ok = await gate('drift-complete', '--format', f);
      expect(ok.code, `${f}: ${ok.stderr}`).toBe(0);
      const bad = await gate('drift-direct-route', '--format', f);
      expect(bad.code, `${f}: ${bad.stderr}`).toBe(1);
      if (f !== 'text') expect(bad.stdout, f).not.toContain('\x1b[');
    }
    const never = await gate('no-such-run', '-t', '1s', '--format', 'junit', '-q');
    expect(never.code).toBe(66);
    expect(xmllintSchema(never.stdout).ok).toBe(true);
    expect(xpath(never.stdout, 'string(//testcase/error/@type)')).toBe('never_seen');
    expect(never.stderr).toContain('was never seen by the timeout');
  }, 180_000);

  it('never seen (66) and still open at the timeout (75): the same code in every format, the reason on stderr', async () => {
    for (const f of FORMATS) {
      const open = await gate('drift-current', '-t', '1s', '--format', f);
      expect(open.code, `${f}: ${open.stderr}`).toBe(75);
      expect(open.stderr, f).toContain('drift-current still working at the timeout (1s)');
      const never = await gate('no-such-run', '-t', '1s', '--format', f);
      expect(never.code, `${f}: ${never.stderr}`).toBe(66);
      expect(never.stderr, f).toContain('run no-such-run was never seen by the timeout');
      if (f === 'junit') {
        for (const x of [open, never]) expect(xmllintSchema(x.stdout).ok, x.stdout).toBe(true);
        expect(xpath(open.stdout, 'string(//testcase[@name="drift-current"]/error/@message)')).toMatch(/^still working at the timeout \(1s\)/);
        expect(xpath(never.stdout, 'string(//testcase[@name="no-such-run"]/error/@type)')).toBe('never_seen');
      }
      if (f === 'github') {
        expect(parseWorkflowCommands(open.stdout).find((c) => c.properties.title === 'drift-current: not settled')!.command).toBe('warning');
        expect(parseWorkflowCommands(never.stdout)).toMatchObject([{ command: 'error', properties: { title: 'no-such-run: never seen' } }]);
      }
      if (f === 'markdown') {
        expect(open.stdout).toContain('exit 75 (still open at the timeout)');
        expect(never.stdout).toContain('exit 66 (never seen by the timeout)');
      }
      if (f === 'json') expect(JSON.parse(never.stdout)).toEqual({ run: 'no-such-run', verdict: null, seen: false });
    }
  }, 180_000);

  it('progress lines go to stderr while the gate waits; the report alone to stdout', async () => {
    const complete = parseReceiptFile(readFileSync(DRIFT, 'utf8'), 'drift.ndjson').filter((r) => r.run === 'drift-complete');
    const shift = Date.now() - Math.max(...complete.map((r) => Date.parse(r.at)));
    for (const f of ['junit', 'github', 'markdown'] as const) {
      const run = `ci-progress-${f}`;
      const child = spawn(process.execPath, [join(ROOT, 'bin', 'topology-audit.js'), 'gate', run, '--server', srv.api, '-t', '5m', '--format', f], {
        env: { ...process.env, FORCE_COLOR: '1', NO_COLOR: '', TOPOLOGY_AUDIT_PROGRESS_MS: '100' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      const sawProgress = new Promise<void>((res) =>
        child.stderr.on('data', (d) => {
          stderr += d;
          if (stderr.includes(`topology-audit gate: ${run}: not seen yet after`)) res();
        }),
      );
      const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
      await sawProgress;
      // The run appears only once a progress line was written: the gate then ends on its healthy verdict.
      const body = complete.map((r) => JSON.stringify({ ...r, run, at: new Date(Date.parse(r.at) + shift - 1000).toISOString() })).join('\n') + '\n';
      const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
      expect((await res.json()).accepted).toBe(complete.length);
      expect(await exited, `${f}: ${stderr}`).toBe(0);
      expect(stdout, f).not.toContain('not seen yet');
      expect(stdout, f).not.toContain('\x1b[');
      if (f === 'junit') {
        expect(xmllintSchema(stdout).ok).toBe(true);
        expect(xpath(stdout, `count(//testcase[@name="${run}"])`)).toBe('1');
        expect(xpath(stdout, 'count(//failure|//error|//skipped)')).toBe('0');
      }
      if (f === 'github') expect(parseWorkflowCommands(stdout)).toEqual([]);
      if (f === 'markdown') expect(stdout).toContain(`| ${run} | **healthy** |`);
    }
  }, 180_000);

  it('junit, github (pointed at the contract with --contracts) and markdown with the graph from the run API', async () => {
    const xml = (await gate('drift-direct-route', '--format', 'junit')).stdout;
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'string(//testcase[@name="drift-direct-route"]/failure/@type)')).toBe('forbidden_edge');
    const commands = parseWorkflowCommands((await gate('drift-direct-route', '--format', 'github', '--contracts', CONTRACTS)).stdout);
    const contractFile = join(CONTRACTS, 'research-publish.yaml');
    expect(commands.find((c) => c.properties.title === 'drift-direct-route: forbidden_edge')).toMatchObject({ command: 'error', properties: { file: contractFile, line: String(keyLine(contractFile, 'allow')) } });
    const md = (await gate('drift-direct-route', '--format', 'markdown')).stdout;
    expect(md).toContain('exit 1 (settled and not healthy)');
    const blocks = mermaidBlocks(md);
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toContain('forbidden ×1 · delegate');
    expect((await parseMermaid(blocks[0])).diagramType).toMatch(/^flowchart/);
    const healthy = (await gate('drift-complete', '--format', 'markdown')).stdout;
    expect(mermaidBlocks(healthy)).toHaveLength(0);
    expect(healthy).toContain('| drift-complete | **healthy** |');
  }, 120_000);
});
