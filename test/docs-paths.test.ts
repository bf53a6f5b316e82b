/**
 * docs/architecture.md cites only files that exist (issue 48: it cited files that no longer did): every repository
 * path it names (src/..., test/..., bench/..., scripts/..., packages/..., docs/...) is in the tree.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

describe('docs/architecture.md', () => {
  it('names only files and folders that exist', () => {
    const text = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
    const paths = new Set([...text.matchAll(/\b((?:src|test|bench|scripts|packages|docs|contracts|receipts|collector)\/[\w./{},*-]+)/g)].map((m) => m[1].replace(/[.,)]+$/, '')));
    // Brace and glob forms (src/audit/{a,b}.ts, test/cluster-*.test.ts) name several files: each alternative, or the glob's folder.
    const expand = (p: string): string[] => {
      const brace = /\{([^}]*)\}/.exec(p);
      if (brace) return brace[1].split(',').flatMap((alt) => expand(p.replace(brace[0], alt.trim())));
      if (p.includes('*')) return [p.slice(0, p.lastIndexOf('/', p.indexOf('*')))];
      return [p];
    };
    expect(paths.size).toBeGreaterThan(40);
    const missing = [...paths].flatMap(expand).filter((p) => !existsSync(join(ROOT, p)));
    expect(missing).toEqual([]);
  });
});
