/** docs/cli.md's command reference is the --help table itself: regenerate with `node scripts/gen-cli-docs.mjs`. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandsReference } from '../src/cli/specs.js';
import { ROOT } from './helpers/server.js';

describe('docs/cli.md', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');

  it('ends with the --help of every command, as rendered from src/cli/specs.ts', () => {
    const at = doc.indexOf('## Commands\n');
    expect(at).toBeGreaterThan(0);
    expect(doc.slice(at)).toBe(commandsReference());
  });

  it('covers propose, contract diff, explain, handoff board and replay --shadow', () => {
    for (const s of ['### propose', 'topology-audit contract diff A@V1 B@V2', '### explain', 'topology-audit handoff board RUN', '--shadow CONTRACT@VERSION', 'did you mean']) expect(doc, s).toContain(s);
  });
});
