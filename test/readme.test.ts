import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { ROOT } from './helpers/server.js';

describe('README', () => {
  it('shows the real replay output of the drift fixture', async () => {
    let out = '';
    const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (out += s) };
    const code = await main(['replay', join(ROOT, 'receipts', 'drift.ndjson'), '--contracts', join(ROOT, 'contracts'), '--expect', join(ROOT, 'receipts', 'drift.expected.json')], io);
    expect(code).toBe(0);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const line of out.trim().split('\n')) expect(readme).toContain(line);
  });
});
