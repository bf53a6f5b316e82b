/**
 * The composite GitHub Action (action.yml) and the GitLab CI template (ci/topology-audit.gitlab-ci.yml), run here the
 * way their runners run them: each `run:` step with bash -eo pipefail, its `env:` expressions evaluated from the inputs
 * (defaults from action.yml), earlier steps' outputs ($GITHUB_OUTPUT) and github.action_path; GITHUB_STEP_SUMMARY,
 * GITHUB_OUTPUT and GITHUB_WORKSPACE set. Both run the committed CLI bundle (ci/bundle/topology-audit.mjs) with node
 * alone; the GitLab job's script lines run in one shell, with this checkout as TOPOLOGY_AUDIT_HOME or fetched with git.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseReceiptFile } from '../src/core/index.js';
import { mermaidBlocks, parseMermaid, parseWorkflowCommands, xmllintSchema, xpath } from './helpers/ci.js';
import { ROOT, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

interface Step {
  name: string;
  id?: string;
  shell: string;
  env?: Record<string, string>;
  run: string;
  if?: string;
}
interface Action {
  inputs: Record<string, { default?: string }>;
  outputs: Record<string, { value: string }>;
  runs: { using: string; steps: Step[] };
}

const action = parse(readFileSync(join(ROOT, 'action.yml'), 'utf8')) as Action;

function sh(script: string, opts: { env: NodeJS.ProcessEnv; cwd: string; args?: string[] }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const file = join(tempDir('ta-step-'), 'step.sh');
  writeFileSync(file, script);
  return new Promise((res) => {
    const child = spawn('bash', [...(opts.args ?? ['--noprofile', '--norc', '-eo', 'pipefail']), file], { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => res({ code, stdout, stderr }));
  });
}

/** name=value lines of a $GITHUB_OUTPUT file. */
const readOutputs = (file: string) => Object.fromEntries(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));

interface ActionRun {
  steps: { name: string; code: number | null; stdout: string; stderr: string }[];
  outputs: Record<string, string>;
  summary: string;
  workspace: string;
}

/** Run the action's steps in order, as the runner does for a composite action; a failing step stops the rest. */
async function runAction(inputs: Record<string, string>, env: Record<string, string> = {}): Promise<ActionRun> {
  const tmp = tempDir('ta-action-');
  const summary = join(tmp, 'step-summary.md');
  writeFileSync(summary, '');
  const stepOutputs: Record<string, Record<string, string>> = {};
  const expr = (text: string) =>
    text.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_m, e: string) => {
      let m: RegExpExecArray | null;
      if ((m = /^inputs\.([a-z-]+)$/.exec(e))) {
        if (!(m[1] in action.inputs)) throw new Error(`action.yml uses an undeclared input ${m[1]}`);
        return inputs[m[1]] ?? action.inputs[m[1]].default ?? '';
      }
      if ((m = /^steps\.([a-z-]+)\.outputs\.([a-z-]+)$/.exec(e))) return stepOutputs[m[1]]?.[m[2]] ?? '';
      if (e === 'github.action_path') return ROOT;
      throw new Error(`expression the test runner does not evaluate: ${e}`);
    });
  const steps: ActionRun['steps'] = [];
  for (const step of action.runs.steps) {
    const output = join(tmp, `output-${steps.length}`);
    writeFileSync(output, '');
    const stepEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, GITHUB_STEP_SUMMARY: summary, GITHUB_OUTPUT: output, GITHUB_WORKSPACE: ROOT, GITHUB_ACTION_PATH: ROOT, RUNNER_TEMP: tmp, CI: 'true', GITHUB_ACTIONS: 'true', ...env };
    for (const [k, v] of Object.entries(step.env ?? {})) stepEnv[k] = expr(String(v));
    const r = await sh(step.run, { env: stepEnv, cwd: ROOT });
    steps.push({ name: step.name, ...r });
    if (step.id) stepOutputs[step.id] = readOutputs(output);
    if (r.code !== 0) break;
  }
  const outputs = Object.fromEntries(Object.entries(action.outputs).map(([k, o]) => [k, expr(o.value)]));
  return { steps, outputs, summary: readFileSync(summary, 'utf8'), workspace: ROOT };
}

describe('action.yml', () => {
  it('is a composite action whose steps are bash scripts taking inputs through env only', () => {
    expect(action.runs.using).toBe('composite');
    for (const s of action.runs.steps) {
      expect(s.shell, s.name).toBe('bash');
      expect(s.run, s.name).not.toContain('${{');
      expect(s.if, s.name).toBeUndefined();
    }
    expect(Object.keys(action.outputs)).toEqual(['exit-code', 'junit']);
  });

  it('replays the packaged drift fixture with its expectations: passes, writes the summary with the graphs and a valid JUnit report', async () => {
    const r = await runAction({ junit: join(tempDir('ta-junit-'), 'report.xml') });
    expect(r.steps.map((s) => [s.name, s.code])).toEqual(action.runs.steps.map((s) => [s.name, 0]));
    expect(r.steps[0].stderr).toMatch(/topology-audit: topology-audit \S+ from /);
    expect(r.outputs['exit-code']).toBe('0');
    const xml = readFileSync(r.outputs.junit, 'utf8');
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase)')).toBe('9');
    expect(xpath(xml, 'count(//failure)')).toBe('0');
    expect(r.summary).toContain('9 of 9 met');
    const blocks = mermaidBlocks(r.summary);
    expect(blocks.length).toBe(8);
    for (const b of blocks) await parseMermaid(b);
    expect(r.steps[1].stdout).toBe(''); // no annotations: every expectation met
  }, 120_000);

  it('fails the job on an unmet expectation, with the annotations in the log and the report written first', async () => {
    const expect2 = join(tempDir('ta-expect-'), 'expected.json');
    writeFileSync(expect2, JSON.stringify({ ...JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8')), 'drift-late': 'healthy' }));
    const r = await runAction({ receipts: 'receipts/drift.ndjson', contracts: 'contracts', expect: expect2, junit: join(tempDir('ta-junit-'), 'report.xml') });
    expect(r.steps.map((s) => s.code)).toEqual([0, 0, 1]);
    expect(r.outputs['exit-code']).toBe('1');
    const commands = parseWorkflowCommands(r.steps[1].stdout);
    expect(commands.find((c) => c.properties.title === 'drift-late: expectation not met')).toMatchObject({ command: 'error', message: 'drift-late: expected healthy, got incomplete' });
    expect(parseWorkflowCommands(r.steps[2].stdout)[0].message).toContain('exit code 1');
    expect(xpath(readFileSync(r.outputs.junit, 'utf8'), 'count(//failure)')).toBe('1');
    expect(r.summary).toContain('8 of 9 met');
  }, 120_000);

  it('installs nothing: no npm, no registry package name, the committed bundle run with node', () => {
    const scripts = action.runs.steps.map((x) => x.run).join('\n');
    expect(scripts).not.toMatch(/\bnpm\b|\bnpx\b|topology-audit@/);
    expect(action.inputs).not.toHaveProperty('version');
    expect(scripts).toContain('ci/bundle/topology-audit.mjs');
  });

  it("expect: none fails the job beside a red report (settled non-healthy runs); fail-on picks the verdicts; errors are said once", async () => {
    const red = await runAction({ receipts: 'receipts/drift.ndjson', contracts: 'contracts', expect: 'none', junit: join(tempDir('ta-junit-'), 'r.xml') });
    expect(red.steps.map((x) => x.code)).toEqual([0, 0, 1]);
    expect(red.outputs['exit-code']).toBe('1');
    expect(xpath(readFileSync(red.outputs.junit, 'utf8'), 'count(//failure)')).toBe('6');
    expect(red.steps[1].stderr.match(/6 of 9 run\(s\) fail/g)).toHaveLength(1);
    const report = await runAction({ receipts: 'receipts/drift.ndjson', contracts: 'contracts', expect: 'none', 'fail-on': 'none', junit: join(tempDir('ta-junit-'), 'r.xml') });
    expect(report.steps.map((x) => x.code)).toEqual([0, 0, 0]);
    const one = await runAction({ receipts: 'receipts/drift.ndjson', contracts: 'contracts', expect: 'none', 'fail-on': 'uncertain', junit: join(tempDir('ta-junit-'), 'r.xml') });
    expect(one.steps.map((x) => x.code)).toEqual([0, 0, 0]);
    const bad = await runAction({ receipts: 'receipts/drift.ndjson', contracts: 'contracts', expect: 'none', 'fail-on': 'nope', junit: join(tempDir('ta-junit-'), 'r.xml') });
    expect(bad.outputs['exit-code']).toBe('2');
    expect(bad.steps[1].stderr.match(/unknown verdict "nope"/g)).toHaveLength(1);
  }, 180_000);

  it('expands glob patterns in receipts (one suite per matched file, in name order); a pattern matching nothing is an error', async () => {
    const dir = tempDir('ta-glob-');
    const lines = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8').trim().split('\n');
    const runOf = (l: string) => (JSON.parse(l) as { run: string }).run;
    writeFileSync(join(dir, 'b.ndjson'), lines.filter((l) => runOf(l) !== 'drift-complete').join('\n') + '\n');
    writeFileSync(join(dir, 'a.ndjson'), lines.filter((l) => runOf(l) === 'drift-complete').join('\n') + '\n');
    const r = await runAction({ receipts: `${dir}/*.ndjson`, contracts: 'contracts', expect: 'receipts/drift.expected.json', junit: join(tempDir('ta-junit-'), 'r.xml') });
    expect(r.steps.map((x) => x.code)).toEqual([0, 0, 0]);
    const xml = readFileSync(r.outputs.junit, 'utf8');
    expect(xpath(xml, 'count(//testcase)')).toBe('9');
    const none = await runAction({ receipts: `${dir}/*.json`, contracts: 'contracts' });
    expect(none.steps.map((x) => x.code)).toEqual([0, 2]);
    expect(parseWorkflowCommands(none.steps[1].stdout)[0].message).toBe(`receipts: no file matches ${dir}/*.json`);
  }, 120_000);

  it('rejects an unknown mode and a gate without a run (exit 2, said as an annotation)', async () => {
    const bad = await runAction({ mode: 'watch' });
    expect(bad.steps.map((s) => s.code)).toEqual([0, 2]);
    expect(parseWorkflowCommands(bad.steps[1].stdout)[0].message).toContain("mode must be replay or gate, not 'watch'");
    const noRun = await runAction({ mode: 'gate' });
    expect(noRun.steps.map((s) => s.code)).toEqual([0, 2]);
  }, 60_000);

  describe('gate mode against a running auditor', () => {
    let srv: ServerProcess;
    beforeAll(async () => {
      srv = await startServerProcess();
      const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
      const delta = Date.now() - 5000 - Math.max(...drift.map((x) => Date.parse(x.at)));
      const body = drift.map((x) => JSON.stringify({ ...x, at: new Date(Date.parse(x.at) + delta).toISOString() })).join('\n') + '\n';
      const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
      expect(res.status).toBe(200);
    }, 60_000);
    afterAll(async () => {
      await srv?.stop();
    });

    it('passes a healthy run and fails a settled unsafe one with exit 1, the graph in the summary and the annotation at the contract line', async () => {
      const ok = await runAction({ mode: 'gate', run: 'drift-complete', server: srv.api, timeout: '30s', junit: join(tempDir('ta-junit-'), 'r.xml') });
      expect(ok.steps.map((s) => s.code)).toEqual([0, 0, 0]);
      expect(ok.summary).toContain('| drift-complete | **healthy** |');
      const bad = await runAction({ mode: 'gate', run: 'drift-direct-route', server: srv.api, timeout: '30s', contracts: 'contracts', junit: join(tempDir('ta-junit-'), 'r.xml') });
      expect(bad.steps.map((s) => s.code)).toEqual([0, 0, 1]);
      expect(bad.outputs['exit-code']).toBe('1');
      const forbidden = parseWorkflowCommands(bad.steps[1].stdout).find((c) => c.properties.title === 'drift-direct-route: forbidden_edge')!;
      // GITHUB_WORKSPACE makes the path relative, as annotations need it.
      expect(forbidden.properties.file).toBe('contracts/research-publish.yaml');
      const [graph] = mermaidBlocks(bad.summary);
      expect(graph).toContain('forbidden ×1 · delegate');
      await parseMermaid(graph);
      const xml = readFileSync(bad.outputs.junit, 'utf8');
      expect(xmllintSchema(xml).ok).toBe(true);
      expect(xpath(xml, 'string(//failure/@type)')).toBe('forbidden_edge');
    }, 180_000);
  });
});

describe('ci/topology-audit.gitlab-ci.yml', () => {
  const template = parse(readFileSync(join(ROOT, 'ci', 'topology-audit.gitlab-ci.yml'), 'utf8'));
  const job = template['.topology-audit'];

  it('wires the JUnit report it writes into artifacts:reports:junit, kept when the job fails', () => {
    expect(job.artifacts.when).toBe('always');
    expect(job.artifacts.reports.junit).toBe(job.variables.TOPOLOGY_AUDIT_JUNIT);
    expect(job.artifacts.paths).toEqual([job.variables.TOPOLOGY_AUDIT_SUMMARY]);
    expect(job.script.join('\n')).toContain('--format junit > "$TOPOLOGY_AUDIT_JUNIT"');
  });

  async function runJob(variables: Record<string, string>, cwd = tempDir('ta-gitlab-')) {
    // A project directory with nothing installed: the job runs the bundle of TOPOLOGY_AUDIT_HOME (this checkout).
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...job.variables, TOPOLOGY_AUDIT_HOME: ROOT, ...variables };
    const r = await sh((job.script as string[]).join('\n') + '\n', { env, cwd, args: ['-e'] });
    return { ...r, project: cwd };
  }

  it('installs nothing from a registry; without a home or a repository and ref it stops with exit 2 and says what to set', async () => {
    const text = readFileSync(join(ROOT, 'ci', 'topology-audit.gitlab-ci.yml'), 'utf8');
    expect(text).not.toMatch(/\bnpm (install|ci)\b|\bnpx\b|topology-audit@/);
    expect(job.before_script).toBeUndefined();
    const r = await runJob({ TOPOLOGY_AUDIT_HOME: '' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('set TOPOLOGY_AUDIT_REPO and TOPOLOGY_AUDIT_REF');
  });

  it('fetches TOPOLOGY_AUDIT_REPO at TOPOLOGY_AUDIT_REF and runs its bundle', async () => {
    // A release of topology-audit as a git repository: the bundle, the package file, contracts and receipts.
    const release = tempDir('ta-release-');
    for (const d of ['ci/bundle', 'contracts', 'receipts']) mkdirSync(join(release, d), { recursive: true });
    writeFileSync(join(release, 'ci/bundle/topology-audit.mjs'), readFileSync(join(ROOT, 'ci/bundle/topology-audit.mjs')));
    writeFileSync(join(release, 'package.json'), readFileSync(join(ROOT, 'package.json')));
    for (const d of ['contracts', 'receipts']) for (const f of readdirSync(join(ROOT, d))) if (/\.(ndjson|json|ya?ml)$/.test(f)) writeFileSync(join(release, d, f), readFileSync(join(ROOT, d, f)));
    const genv = { PATH: process.env.PATH, HOME: process.env.HOME, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
    const g = await sh("git init -q && git add -A && git commit -qm release && git tag v9.9.9\n", { env: genv, cwd: release });
    expect(g.code, g.stderr).toBe(0);
    const r = await runJob({ TOPOLOGY_AUDIT_HOME: '', TOPOLOGY_AUDIT_REPO: `file://${release}`, TOPOLOGY_AUDIT_REF: 'v9.9.9' });
    expect(r.code, r.stderr).toBe(0);
    expect(xpath(readFileSync(join(r.project, 'topology-audit-junit.xml'), 'utf8'), 'count(//testcase)')).toBe('9');
  }, 120_000);

  it('fails on settled non-healthy runs without expectations; TOPOLOGY_AUDIT_FAIL_ON=none only reports', async () => {
    const vars = { TOPOLOGY_AUDIT_RECEIPTS: join(ROOT, 'receipts', 'drift.ndjson'), TOPOLOGY_AUDIT_CONTRACTS: join(ROOT, 'contracts') };
    const red = await runJob(vars);
    expect(red.code).toBe(1);
    expect(xpath(readFileSync(join(red.project, 'topology-audit-junit.xml'), 'utf8'), 'count(//failure)')).toBe('6');
    expect((await runJob({ ...vars, TOPOLOGY_AUDIT_FAIL_ON: 'none' })).code).toBe(0);
  }, 120_000);

  it('runs the packaged drift fixture: exit 0, a valid JUnit report with nine passing cases, the Markdown summary', async () => {
    const r = await runJob({});
    expect(r.code, r.stderr).toBe(0);
    const xml = readFileSync(join(r.project, job.artifacts.reports.junit), 'utf8');
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase)')).toBe('9');
    expect(xpath(xml, 'count(//failure)')).toBe('0');
    expect(readFileSync(join(r.project, 'topology-audit.md'), 'utf8')).toContain('9 of 9 met');
  }, 120_000);

  it('fails with the exit code of an unmet expectation, the report written', async () => {
    const file = join(tempDir('ta-expect-'), 'e.json');
    writeFileSync(file, JSON.stringify({ 'drift-wait': 'healthy' }));
    const r = await runJob({ TOPOLOGY_AUDIT_RECEIPTS: join(ROOT, 'receipts', 'drift.ndjson'), TOPOLOGY_AUDIT_CONTRACTS: join(ROOT, 'contracts'), TOPOLOGY_AUDIT_EXPECT: file });
    expect(r.code).toBe(1);
    const xml = readFileSync(join(r.project, job.artifacts.reports.junit), 'utf8');
    expect(xpath(xml, 'count(//failure)')).toBe('1');
  }, 120_000);
});

describe("docs/ci.md's pull-request workflow", () => {
  it('its contract-diff step, run in a repository where a pull request adds a version, writes that diff as Markdown with both graphs', async () => {
    const doc = readFileSync(join(ROOT, 'docs', 'ci.md'), 'utf8');
    const m = /BASE: \$\{\{ github\.event\.pull_request\.base\.sha \}\}\n {8}run: \|\n([\s\S]*?)\n {6}- name: Comment/.exec(doc);
    expect(m, 'the step in docs/ci.md').not.toBeNull();
    const script = m![1].split('\n').map((l) => l.slice(10)).join('\n') + '\n';
    const repo = tempDir('ta-pr-');
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t', npm_config_update_notifier: 'false' };
    mkdirSync(join(repo, 'contracts'));
    // The checkout step of topology-audit at REF (path: .topology-audit): this repository.
    symlinkSync(ROOT, join(repo, '.topology-audit'));
    writeFileSync(join(repo, '.gitignore'), '.topology-audit\n');
    writeFileSync(join(repo, 'contracts', 'research-publish-v2.yaml'), readFileSync(join(ROOT, 'contracts', 'research-publish-v2.yaml')));
    const git = (...a: string[]) => sh(`git ${a.map((x) => `'${x}'`).join(' ')}\n`, { env, cwd: repo });
    for (const a of [['init', '-q'], ['add', '-A'], ['commit', '-qm', 'base']]) expect((await git(...a)).code).toBe(0);
    const base = (await git('rev-parse', 'HEAD')).stdout.trim();
    writeFileSync(join(repo, 'contracts', 'research-publish.yaml'), readFileSync(join(ROOT, 'contracts', 'research-publish.yaml')));
    writeFileSync(join(repo, 'contracts', 'supervisor-workers.yaml'), readFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml')));
    for (const a of [['add', '-A'], ['commit', '-qm', 'pull request']]) expect((await git(...a)).code).toBe(0);
    const r = await sh(script, { env: { ...env, BASE: base }, cwd: repo });
    expect(r.code, r.stderr).toBe(0);
    const comment = readFileSync(join(repo, 'comment.md'), 'utf8');
    // The heading as Markdown shows it: contract text is escaped (a word joiner after `@`, `>` as `&gt;`; issue 47).
    expect(comment).toContain('## contract diff research-publish@\u20602 (retired) -&gt; research-publish@\u20603');
    expect(comment.replaceAll('\u2060', '').replaceAll('&gt;', '>')).toContain('## contract diff research-publish@2 (retired) -> research-publish@3');
    expect(comment).toContain('New contract `supervisor-workers@1`.');
    const blocks = mermaidBlocks(comment);
    expect(blocks).toHaveLength(2);
    for (const b of blocks) await parseMermaid(b);
  }, 120_000);
});

describe("docs/ci.md's copy-paste blocks", () => {
  const doc = readFileSync(join(ROOT, 'docs', 'ci.md'), 'utf8');
  /** The fenced blocks of one `## heading` section of docs/ci.md, in order. */
  const blocks = (heading: string, lang: string) => {
    const start = doc.indexOf(`\n## ${heading}\n`);
    expect(start, heading).toBeGreaterThan(0);
    const end = doc.indexOf('\n## ', start + 1);
    const section = doc.slice(start, end < 0 ? undefined : end);
    return [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]);
  };
  /** A project directory with a checkout of topology-audit at .topology-audit (nothing installed), and the fixture's receipts and contracts copied in. */
  function project(): string {
    const dir = tempDir('ta-doc-');
    symlinkSync(ROOT, join(dir, '.topology-audit'));
    for (const d of ['receipts', 'contracts']) {
      mkdirSync(join(dir, d));
      for (const f of readdirSync(join(ROOT, d))) if (/\.(ndjson|json|ya?ml)$/.test(f)) writeFileSync(join(dir, d, f), readFileSync(join(ROOT, d, f)));
    }
    return dir;
  }
  const env = () => ({ PATH: process.env.PATH, HOME: process.env.HOME });

  it('any JUnit consumer: the sh block writes a valid JUnit report with the nine expectations and the summary, exit 0', async () => {
    const [script] = blocks('Any JUnit consumer (Jenkins, Buildkite, CircleCI, ...)', 'sh');
    expect(script).toContain('--format junit > topology-audit-junit.xml');
    const dir = project();
    const r = await sh(script, { env: env(), cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const xml = readFileSync(join(dir, 'topology-audit-junit.xml'), 'utf8');
    expect(xmllintSchema(xml).ok).toBe(true);
    expect(xpath(xml, 'count(//testcase)')).toBe('9');
    expect(xpath(xml, 'count(//failure|//error)')).toBe('0');
    expect(mermaidBlocks(readFileSync(join(dir, 'topology-audit.md'), 'utf8')).length).toBe(8);
    // The block keeps the verdict's exit code: an unmet expectation fails it, the report still written.
    writeFileSync(join(dir, 'receipts', 'drift.expected.json'), JSON.stringify({ 'drift-late': 'healthy' }));
    const bad = await sh(script, { env: env(), cwd: dir });
    expect(bad.code).toBe(1);
    expect(xpath(readFileSync(join(dir, 'topology-audit-junit.xml'), 'utf8'), 'count(//failure)')).toBe('1');
  }, 120_000);

  it('GitHub without the action: the two run steps give annotations and a summary with the graphs', async () => {
    const [plain] = blocks('GitHub Actions', 'yaml').filter((b) => b.includes('--format markdown --fail-on none >> "$GITHUB_STEP_SUMMARY"'));
    const all = parse(plain.replace(/^ {6}/gm, '')) as { run?: string; uses?: string; if?: string }[];
    expect(all[0].uses).toBe('actions/checkout@v4');
    const steps = all.filter((x): x is { run: string } => x.run !== undefined);
    expect(steps).toHaveLength(2);
    const dir = project();
    const summary = join(dir, 'summary.md');
    writeFileSync(summary, '');
    const annotate = await sh(steps[0].run + '\n', { env: { ...env(), GITHUB_STEP_SUMMARY: summary }, cwd: dir });
    expect(annotate.code, annotate.stderr).toBe(0);
    expect(parseWorkflowCommands(annotate.stdout)).toEqual([]); // every expectation met: nothing to annotate
    const write = await sh(steps[1].run + '\n', { env: { ...env(), GITHUB_STEP_SUMMARY: summary }, cwd: dir });
    expect(write.code, write.stderr).toBe(0);
    const graphs = mermaidBlocks(readFileSync(summary, 'utf8'));
    expect(graphs.length).toBe(8);
    await parseMermaid(graphs[0]);
  }, 120_000);

  it('the gate snippet uses only inputs action.yml declares; the GitLab block extends the template with files that exist', () => {
    const [gateBlock] = blocks('GitHub Actions', 'yaml').filter((b) => b.includes('mode: gate'));
    const [gateStep] = parse(gateBlock.replace(/^ {6}/gm, '')) as { uses: string; with: Record<string, string> }[];
    expect(gateStep.uses).toBe('OWNER/topology-audit@REF');
    for (const k of Object.keys(gateStep.with)) expect(action.inputs, k).toHaveProperty(k);
    const [workflow] = blocks('GitHub Actions', 'yaml');
    const wf = parse(workflow) as { jobs: Record<string, { steps: { uses?: string; with?: Record<string, string> }[] }> };
    const uses = wf.jobs['drift-fixture'].steps.find((x) => x.uses === 'OWNER/topology-audit@REF')!;
    for (const k of Object.keys(uses.with!)) expect(action.inputs, k).toHaveProperty(k);
    const [gitlab] = blocks('GitLab CI', 'yaml');
    const g = parse(gitlab) as { include: { local: string }[]; 'topology-audit': { extends: string; variables: Record<string, string> } };
    expect(g.include[0].local).toBe('ci/topology-audit.gitlab-ci.yml');
    expect(existsSync(join(ROOT, g.include[0].local))).toBe(true);
    expect(g['topology-audit'].extends).toBe('.topology-audit');
    const template = parse(readFileSync(join(ROOT, g.include[0].local), 'utf8'));
    for (const [k, v] of Object.entries(g['topology-audit'].variables)) {
      expect(template['.topology-audit'].variables, k).toHaveProperty(k);
      expect(existsSync(join(ROOT, v)), v).toBe(true);
    }
  });
});
