import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { ROOT } from './helpers/server.js';

const io = () => {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: (s: string) => void (out.stdout += s), stderr: (s: string) => void (out.stderr += s) } };
};

describe('the handoff failure traces replay to their expected findings', () => {
  const dir = join(ROOT, 'receipts', 'handoffs');
  const files = readdirSync(dir).filter((f) => f.endsWith('.ndjson')).map((f) => join(dir, f));

  it('topology-audit replay --expect passes on every fixture', async () => {
    expect(files.length).toBeGreaterThanOrEqual(6);
    const { out, io: cap } = io();
    const code = await main(['replay', ...files, '--contracts', join(ROOT, 'contracts'), '--expect', join(dir, 'expected.json')], cap);
    expect(out.stderr).toMatch(/all \d+ expectation\(s\) met/);
    expect(code).toBe(0);
  });

  it('fails naming the run when an expected finding code is missing', async () => {
    const { out, io: cap } = io();
    const { writeFileSync, readFileSync, mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'));
    expected['ho-duplicate-active'] = { verdict: expected['ho-duplicate-active'].verdict, codes: ['resurrection'] };
    const f = join(mkdtempSync(join(tmpdir(), 'ta-exp-')), 'expected.json');
    writeFileSync(f, JSON.stringify(expected));
    const code = await main(['replay', ...files, '--contracts', join(ROOT, 'contracts'), '--expect', f], cap);
    expect(code).toBe(1);
    expect(out.stderr).toContain('ho-duplicate-active: expected a finding "resurrection"');
  });
});
