// The size check (scripts/check-size.mjs, run by `npm test`): the real tree passes; a tiny fake tree over each limit
// fails, one line per violation naming file:line, the name and the size, and a tree at each limit passes.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers/server.js';

const SCRIPT = join(ROOT, 'scripts', 'check-size.mjs');
const check = (root: string) => spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});
/** A fake tree holding `files` (path under src/ -> text), plus the classes the real allow-list names, at 3 lines. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'ta-size-'));
  temps.push(root);
  const all: Record<string, string> = {
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(join(root, 'src', path, '..'), { recursive: true });
    writeFileSync(join(root, 'src', path), text);
  }
  return root;
}
/** A function spanning `lines` lines, written as `kind`. */
const fn = (name: string, lines: number, kind: 'declaration' | 'arrow' | 'method') => {
  const body = '  void 0;\n'.repeat(lines - 2);
  if (kind === 'declaration') return `export function ${name}() {\n${body}}\n`;
  if (kind === 'arrow') return `export const ${name} = () => {\n${body}};\n`;
  return `export class Holder {\n  ${name}() {\n${body}  }\n}\n`;
};
const nonNulls = (n: number) => 'declare const x: { a?: number };\n' + Array.from({ length: n }, (_, i) => `export const v${i} = x.a!;\n`).join('');

describe('the size check', () => {
  it('passes on the real tree', () => {
    const r = check(ROOT);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/size: \d+ files, \d+ classes and functions, \d+ non-null assertions in src\/core, no violations/);
  });

  it('passes a tree at each limit: functions of 120 lines, a class of 450, 15 non-null assertions in core', () => {
    const r = check(tree({
      'ui/a.ts': fn('atLimit', 120, 'declaration'),
      'ui/b.ts': fn('arrowAtLimit', 120, 'arrow'),
      'ui/c.ts': 'export class Wide {\n' + 'x = 1;\n'.repeat(448) + '}\n',
      'core/d.ts': nonNulls(15),
      'render/e.ts': nonNulls(30), // outside src/core: not counted
    }));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/15 non-null assertions in src\/core, no violations/);
  });

  it('fails one line per violation, naming file:line, the name and the size', () => {
    const r = check(tree({
      'ui/a.ts': '// a comment\n' + fn('tooLong', 121, 'declaration'),
      'ui/b.ts': fn('arrowTooLong', 130, 'arrow'),
      'ui/c.ts': fn('methodTooLong', 125, 'method'),
      'ui/d.ts': 'export class Wide {\n' + 'x = 1;\n'.repeat(449) + '}\n',
      'core/e.ts': nonNulls(16),
    }));
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toContain('src/ui/a.ts:2 function tooLong 121 lines (limit 120)');
    expect(lines).toContain('src/ui/b.ts:1 function arrowTooLong 130 lines (limit 120)');
    expect(lines).toContain('src/ui/c.ts:2 function Holder.methodTooLong 125 lines (limit 120)');
    expect(lines).toContain('src/ui/d.ts:1 class Wide 451 lines (limit 450)');
    expect(lines).toContain('src/core/e.ts:2 non-null x.a!');
    expect(lines).toContain('src/core: 16 non-null assertions (limit 15)');
    expect(lines.at(-1)).toMatch(/^size: 21 violation\(s\) in 5 files$/);
  });

  it('exempts nothing now that the allow-list is empty (issue 48: the engine and the coordinator are split)', () => {
    const r = check(tree({
      'audit/engine.ts': 'export class AuditEngine {\n' + 'x = 1;\n'.repeat(451) + '}\n',
      'cluster/coordinator.ts': 'export class ClusterCoordinator {\n' + 'x = 1;\n'.repeat(451) + '}\n',
      'cli/serve.ts': fn('serveTooLong', 200, 'declaration'),
      'server/api.ts': fn('apiTooLong', 200, 'declaration'),
    }));
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toContain('src/audit/engine.ts:1 class AuditEngine 453 lines (limit 450)');
    expect(lines).toContain('src/cluster/coordinator.ts:1 class ClusterCoordinator 453 lines (limit 450)');
    expect(lines).toContain('src/cli/serve.ts:1 function serveTooLong 200 lines (limit 120)');
    expect(lines).toContain('src/server/api.ts:1 function apiTooLong 200 lines (limit 120)');
    expect(lines).toHaveLength(5);
  });
});
