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

describe('README as a fast start', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

  it("names every Debian package .ci/run installs for npm test (a machine prepared as the README says passes it)", () => {
    const ci = readFileSync(join(ROOT, '.ci', 'run'), 'utf8');
    const packages = [...ci.matchAll(/need_apt\+=\(([a-z0-9.+-]+)\)/g)].map((m) => m[1]);
    expect(packages).toEqual(expect.arrayContaining(['prometheus', 'chromium', 'prometheus-alertmanager', 'postgresql', 'libxml2-utils']));
    const setUp = readme.slice(readme.indexOf('## Set up'), readme.indexOf('\n## ', readme.indexOf('## Set up') + 1));
    for (const p of packages) expect(setUp, p).toContain(`\`${p}\``);
  });

  it('stays short and leaves reference material to docs/, every link resolving', () => {
    expect(readme.split('\n').length).toBeLessThan(250);
    const links = [...readme.matchAll(/\]\((docs\/[^)#]+)(#[^)]*)?\)/g)];
    expect(links.length).toBeGreaterThanOrEqual(10);
    for (const [, file, anchor] of links) {
      const doc = readFileSync(join(ROOT, file), 'utf8');
      if (anchor) {
        const slugs = [...doc.matchAll(/^#+ (.+)$/gm)].map((m) => '#' + m[1].toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-'));
        expect(slugs, `${file}${anchor}`).toContain(anchor);
      }
    }
  });

  it('documents every topology.* attribute the emitter writes and the gate exit codes the CLI uses', async () => {
    const { receiptSpanAttributes } = await import('@topology-audit/emitter');
    const attrs = receiptSpanAttributes({ run: 'r', event: 'e', type: 'edge', at: '2026-01-01T00:00:00Z', version: '3', contract: 'c', phase: 'p', from: 'a', to: 'b', kind: 'delegate', on: 'a', edge: 'a -> b : delegate', deadline: '2026-01-01T00:00:00Z', verified: true, result: 'completed', reason: 'x' } as never);
    for (const key of Object.keys(attrs)) expect(readme, key).toContain(`\`${key}\``);
    const { GATE_SPEC } = await import('../src/cli/specs.js');
    for (const [code] of GATE_SPEC.exits!) expect(readme).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
  });
});
