// The layering check (scripts/check-layers.mjs, run by `npm test`): the real tree passes; a copy with a bad import
// fails, naming the file and line.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

  it('fails when a store is tested with instanceof, or a backend is named outside the storage folder and serve', () => {
    const root = copyWith((src) => {
      appendFileSync(join(src, 'audit', 'acks.ts'), "\nimport pg from 'pg';\nexport const _pg = pg;\n");
      appendFileSync(join(src, 'server', 'api.ts'), "\n// PgStore in a comment is fine\nexport type _S = import('../store/index.js').PgStore;\n");
      appendFileSync(join(src, 'server', 'serve.ts'), "\nexport const _isSqlite = (s: unknown): boolean => s instanceof ReceiptStore;\n");
    });
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/src\/audit\/acks\.ts:\d+: imports the database driver "pg" outside src\/store/);
    expect(r.stderr).toMatch(/src\/server\/api\.ts:\d+: names the storage backend PgStore outside src\/store and serve's composition/);
    expect(r.stderr).toMatch(/src\/server\/serve\.ts:\d+: a store is not tested with instanceof \(instanceof ReceiptStore\)/);
    expect(r.stderr).toMatch(/layers: 3 violation\(s\)/);
  });

  it('fails when the cluster\'s coordination SQL (leases, the heartbeat) is written outside src/cluster', () => {
    const root = copyWith((src) => {
      appendFileSync(join(src, 'store', 'pg', 'run-rows.ts'), "\nexport const _renew = `UPDATE leases SET expires_at = now() WHERE owner = $1`;\n");
      appendFileSync(join(src, 'store', 'pg', 'span-log.ts'), "\n// INSERT INTO instances in a comment is fine\nexport const _beat = 'INSERT INTO instances (id) VALUES ($1)';\n");
      appendFileSync(join(src, 'store', 'pg', 'run-reads.ts'), "\nexport const _held = 'SELECT part FROM leases WHERE owner = $1';\n");
    });
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/src\/store\/pg\/run-rows\.ts:\d+: writes the cluster's leases table outside src\/cluster \(UPDATE leases\)/);
    expect(r.stderr).toMatch(/src\/store\/pg\/span-log\.ts:\d+: writes the cluster's instances table outside src\/cluster \(INSERT INTO instances\)/);
    expect(r.stderr).toMatch(/src\/store\/pg\/run-reads\.ts:\d+: reads the cluster's leases outside src\/cluster \(FROM leases\)/);
    expect(r.stderr).toMatch(/layers: 3 violation\(s\)/);
  });

  it('fails when code outside src/store infers a store\'s kind from the methods it has', () => {
    const root = copyWith((src) => {
      appendFileSync(join(src, 'audit', 'acks.ts'), "\nexport const _sync = (store: { runReceipts?: unknown }): boolean => store.runReceipts !== undefined;\n");
      appendFileSync(join(src, 'server', 'api.ts'), "\nexport const _lists = (store: object): boolean => 'listRuns' in store;\n");
      appendFileSync(join(src, 'cluster', 'remote.ts'), "\nexport const _prunes = (engineStore: { prune?: unknown }): boolean => typeof engineStore.prune === 'function';\n");
    });
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/src\/audit\/acks\.ts:\d+: a store's kind is not inferred from its methods \(store\.runReceipts\)/);
    expect(r.stderr).toMatch(/src\/server\/api\.ts:\d+: a store's kind is not inferred from its methods \('listRuns' in store\)/);
    expect(r.stderr).toMatch(/src\/cluster\/remote\.ts:\d+: a store's kind is not inferred from its methods \(typeof engineStore\.prune === 'function'\)/);
    expect(r.stderr).toMatch(/layers: 3 violation\(s\)/);
  });

  it('reports a file cycle with its path, and a deep import of a core-internal module, in a tiny fake tree', () => {
    const root = mkdtempSync(join(tmpdir(), 'ta-layers-fake-'));
    temps.push(root);
    const put = (path: string, text: string) => {
      mkdirSync(join(root, 'src', path, '..'), { recursive: true });
      writeFileSync(join(root, 'src', path), text);
    };
    put('core/index.ts', "export * from './state.js';\n");
    put('core/state.ts', "import type { Rule } from './rules/a.js';\nexport type State = { rules: Rule[] };\n");
    put('core/rules/a.ts', "import type { State } from '../state.js';\nexport type Rule = (s: State) => void;\n");
    put('render/view.ts', "import type { Rule } from '../core/rules/a.js';\nimport type { State } from '../core/index.js';\nexport const view = (r: Rule, s: State) => r(s);\n");
    const r = check(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/file cycle: src\/core\/(state\.ts -> src\/core\/rules\/a\.ts -> src\/core\/state\.ts|rules\/a\.ts -> src\/core\/state\.ts -> src\/core\/rules\/a\.ts) \(closing import at src\/core\/[a-z/]+\.ts:1\)/);
    expect(r.stderr).toContain('src/render/view.ts:1: src/render may not import ../core/rules/a.js: core/rules/ is internal to src/core (import src/core/index.ts)');
    expect(r.stderr).not.toContain('view.ts:2');
    expect(r.stderr).toMatch(/layers: 2 violation\(s\) in 4 files/);
  });

  it('the real tree has no file cycle anywhere in src/ and no deep import of core internals', () => {
    const r = check(ROOT);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).not.toContain('cycle');
  });
});
