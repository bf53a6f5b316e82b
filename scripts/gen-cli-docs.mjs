#!/usr/bin/env node
// Rewrites the "## Commands" section of docs/cli.md (to the end of the file) from the --help table in
// src/cli/specs.ts, through the build (run `npm run build` first). test/cli-docs.test.ts checks they agree.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const { commandsReference } = await import('../dist/cli/specs.js');
const file = fileURLToPath(new URL('../docs/cli.md', import.meta.url));
const text = readFileSync(file, 'utf8');
const at = text.indexOf('## Commands\n');
if (at < 0) throw new Error('docs/cli.md has no "## Commands" section');
writeFileSync(file, text.slice(0, at) + commandsReference());
