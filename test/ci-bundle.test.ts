/**
 * The self-contained CI bundle (ci/bundle/topology-audit.mjs): run from a directory holding only the bundle, the
 * package file, contracts/ and receipts/ (no node_modules anywhere above it), it answers as the built CLI does, in
 * every format and with the same exit code. A bundle left behind a change to src/ fails here.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runCli, tempDir } from './helpers/server.js';

const BUNDLE = join(ROOT, 'ci', 'bundle', 'topology-audit.mjs');

function runBundle(home: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res) => {
    // NODE_PATH empty and cwd outside the repository: nothing but the bundle can be loaded.
    const child = spawn(process.execPath, [join(home, 'ci', 'bundle', 'topology-audit.mjs'), ...args], { cwd: home, env: { PATH: process.env.PATH, NODE_PATH: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => res({ code, stdout, stderr }));
  });
}

describe('the CI bundle', () => {
  let home: string;
  beforeAll(() => {
    home = tempDir('ta-bundle-');
    mkdirSync(join(home, 'ci', 'bundle'), { recursive: true });
    writeFileSync(join(home, 'ci', 'bundle', 'topology-audit.mjs'), readFileSync(BUNDLE));
    writeFileSync(join(home, 'package.json'), readFileSync(join(ROOT, 'package.json')));
    for (const d of ['contracts', 'receipts']) {
      mkdirSync(join(home, d));
      for (const f of readdirSync(join(ROOT, d))) if (/\.(ndjson|json|ya?ml)$/.test(f)) writeFileSync(join(home, d, f), readFileSync(join(ROOT, d, f)));
    }
  });

  it('imports nothing outside node: builtins (every dependency inlined)', () => {
    const text = readFileSync(BUNDLE, 'utf8');
    const specifiers = [...text.matchAll(/^(?:import|export)\s[^\n]*?from\s*['"]([^'"]+)['"];?$|\bimport\(\s*['"]([^'"]+)['"]\s*\)|\brequire\(\s*['"]([^'"]+)['"]\s*\)/gm)].map((m) => m[1] ?? m[2] ?? m[3]);
    expect(specifiers.length).toBeGreaterThan(0);
    // elkjs asks for 'web-worker' only when given a workerUrl (never here), inside a try that falls back without it;
    // './elk-worker.min.js' is a key of elkjs's own inlined module map.
    for (const s of specifiers) expect(s, s).toMatch(/^node:|^(fs|path|url|util|os|crypto|module|child_process|worker_threads|web-worker|\.\/elk-(worker\.min|api)\.js)$/);
  });

  const cases: [string, string[]][] = [
    ...['text', 'json', 'junit', 'github', 'markdown'].map((f): [string, string[]] => [`replay ${f}`, ['replay', 'receipts/drift.ndjson', '--contracts', 'contracts', '--format', f]]),
    ['replay --expect junit', ['replay', 'receipts/drift.ndjson', '--contracts', 'contracts', '--expect', 'receipts/drift.expected.json', '--format', 'junit']],
    ['replay --fail-on none', ['replay', 'receipts/drift.ndjson', '--fail-on', 'none']],
    ['validate junit', ['validate', 'contracts', '--format', 'junit']],
    ['diff svg', ['diff', 'receipts/drift.ndjson', '--contracts', 'contracts', '--run', 'drift-direct-route', '--format', 'svg']],
    ['contract diff markdown', ['contract', 'diff', 'research-publish@2', 'research-publish@3', '--contracts', 'contracts', '--format', 'markdown']],
    ['--version', ['--version']],
    ['usage error', ['replay', 'receipts/drift.ndjson', '--fail-on', 'nope']],
  ];
  it.each(cases)('%s: the same output and exit code as the built CLI', async (_name, args) => {
    const [bundled, built] = await Promise.all([runBundle(home, args), runCli(args, { cwd: home })]);
    expect(bundled.stderr).toBe(built.stderr);
    expect(bundled.stdout).toBe(built.stdout);
    expect(bundled.code).toBe(built.code);
    expect(bundled.stdout.length + bundled.stderr.length).toBeGreaterThan(0);
  });

  it('names the commands it carries and refuses the others with exit 2', async () => {
    const r = await runBundle(home, ['serve']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "serve"');
    for (const c of ['replay', 'gate', 'diff', 'validate', 'contract']) expect(r.stderr).toMatch(new RegExp(`^  ${c} `, 'm'));
  });
});
