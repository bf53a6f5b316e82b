// The layering check (scripts/check-layers.mjs, run by `npm test`): the real tree passes; a copy with a bad import
// fails, naming the file and line.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers/server.js';

const SCRIPT = join(ROOT, 'scripts', 'check-layers.mjs');
const check = (root: string) => spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
const temps: string[] = [];
/** A copy of src/ in a temp dir, with `edit` applied. */
function copyWith(edit: (src: string) => void): string {
  const root = mkdtempSync(join(tmpdir(), 'ta-layers-'));
  temps.push(root);
  cpSync(join(ROOT, 'src'), join(root, 'src'), { recursive: true });
  edit(join(root, 'src'));
  return root;
}
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

describe('the layering check', () => {
  it('passes on the real tree', () => {
    const r = check(ROOT);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^layers: \d+ files, \d+ folder edges, no violations/);
  });

  it('fails naming file:line when the UI imports the server', () => {
    const root = copyWith((src) => {
      const f = join(src, 'ui', 'view.ts');
      const lines = readFileSync(f, 'utf8').split('\n');
      lines.splice(1, 0, "import { startServer } from '../server/serve.js';");
      writeFileSync(f, lines.join('\n'));
    });
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("src/ui/view.ts:2: src/ui may not import src/server (../server/serve.js)");
    expect(r.stderr).toMatch(/layers: 1 violation\(s\)/);
  });

  it('fails when core imports a node: built-in, another folder, or closes a cycle', () => {
    const root = copyWith((src) => {
      appendFileSync(join(src, 'core', 'time.ts'), "\nimport { readFileSync } from 'node:fs';\nexport const _r = readFileSync;\n");
      appendFileSync(join(src, 'core', 'edge.ts'), "\nexport { ReceiptStore } from '../store/index.js';\n");
    });
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/src\/core\/time\.ts:\d+: src\/core is pure and may not import "node:fs"/);
    expect(r.stderr).toMatch(/src\/core\/edge\.ts:\d+: src\/core may not import src\/store/);
    expect(r.stderr).toMatch(/cycle: (core -> store -> core|store -> core -> store)/);
  });
});
