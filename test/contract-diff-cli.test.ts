/** `contract diff A@V1 B@V2`: text and JSON, exit codes as diff(1), and clear errors. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { tempDir } from './helpers/server.js';

const V1 = `contract: shop
version: "1"
owner: orchestrator
agents: [orchestrator, researcher, verifier, auditor]
allow:
  - orchestrator -> researcher : delegate
  - researcher -> verifier : handoff
  - verifier -> orchestrator : return
  - researcher -> auditor : handoff
phases:
  main:
    expect:
      - orchestrator -> researcher : delegate
      - researcher -> verifier : handoff
      - { edge: "verifier -> orchestrator : return", dependency: verifier, within: 10m }
`;
const V2 = `contract: shop
version: "2"
candidate: true
owner: orchestrator
agents: [orchestrator, researcher, verifier, search]
allow:
  - orchestrator -> researcher : delegate
  - { edge: "researcher -> verifier : handoff", max: 2 }
  - verifier -> orchestrator : return
  - researcher -> search : delegate
phases:
  main:
    outcome: optional
    expect:
      - orchestrator -> researcher : delegate
      - researcher -> search : delegate
      - { edge: "researcher -> verifier : handoff", after: ["orchestrator -> researcher : delegate"] }
      - { edge: "verifier -> orchestrator : return", dependency: verifier, within: 5m }
`;

function setup(): string {
  const dir = join(tempDir('ta-cdiff-'), 'contracts');
  mkdirSync(dir);
  writeFileSync(join(dir, 'shop-1.yaml'), V1);
  writeFileSync(join(dir, 'shop-2.yaml'), V2);
  return dir;
}

function capture() {
  let out = '';
  let err = '';
  return { io: { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) }, out: () => out, err: () => err };
}

describe('contract diff', () => {
  it('prints every change as text and exits 1', async () => {
    const dir = setup();
    const c = capture();
    expect(await main(['contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir], c.io)).toBe(1);
    expect(c.out()).toBe(
      [
        'shop@1 -> shop@2 (candidate)',
        '+ agent search',
        '- agent auditor',
        '+ allow researcher -> search : delegate',
        '- allow researcher -> auditor : handoff',
        '~ allow researcher -> verifier : handoff: max 1 -> 2',
        '~ phase main',
        '    ~ outcome required -> optional',
        '    + expect researcher -> search : delegate',
        '    ~ expect verifier -> orchestrator : return: within 10m -> 5m',
        '',
      ].join('\n'),
    );
  });

  it('answers JSON with both versions and the changes', async () => {
    const dir = setup();
    const c = capture();
    expect(await main(['contract', 'diff', 'shop@1', 'shop@2', '--contracts', dir, '--json'], c.io)).toBe(1);
    const j = JSON.parse(c.out());
    expect(j.from).toMatchObject({ contract: 'shop', version: '1', candidate: false, retired: false });
    expect(j.to).toMatchObject({ contract: 'shop', version: '2', candidate: true });
    expect(j.to.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(j.changes.agents).toEqual({ added: ['search'], removed: ['auditor'] });
    expect(j.changes.allow).toEqual({
      added: ['researcher -> search : delegate'],
      removed: ['researcher -> auditor : handoff'],
      changed: [{ item: 'researcher -> verifier : handoff', what: ['max 1 → 2'] }],
    });
    expect(j.changes.phases).toEqual([
      {
        phase: 'main',
        status: 'changed',
        outcome: { from: 'required', to: 'optional' },
        steps: { added: ['researcher -> search : delegate'], removed: [], changed: [{ item: 'verifier -> orchestrator : return', what: ['within 10m → 5m'] }] },
      },
    ]);
    expect(j.changes.same).toBe(false);
  });

  it('the reverse direction swaps added and removed; a version against itself is the same (exit 0)', async () => {
    const dir = setup();
    const r = capture();
    expect(await main(['contract', 'diff', 'shop@2', 'shop@1', '--contracts', dir, '--json'], r.io)).toBe(1);
    expect(JSON.parse(r.out()).changes.agents).toEqual({ added: ['auditor'], removed: ['search'] });
    const s = capture();
    expect(await main(['contract', 'diff', 'shop@1', 'shop@1', '--contracts', dir], s.io)).toBe(0);
    expect(s.out()).toBe('shop@1 -> shop@1\nsame content apart from the version\n');
  });

  it('refuses unknown versions and malformed references with exit 2', async () => {
    const dir = setup();
    const a = capture();
    expect(await main(['contract', 'diff', 'shop@1', 'shop@7', '--contracts', dir], a.io)).toBe(2);
    expect(a.err()).toContain('shop@7: not in');
    expect(a.err()).toContain('versions of shop: 1, 2');
    const b = capture();
    expect(await main(['contract', 'diff', 'shop', 'shop@2', '--contracts', dir], b.io)).toBe(2);
    expect(b.err()).toContain('expected CONTRACT@VERSION');
    const c = capture();
    expect(await main(['contract', 'diff', 'shop@1', '--contracts', dir], c.io)).toBe(2);
    const d = capture();
    expect(await main(['contract', 'frob'], d.io)).toBe(2);
    expect(d.err()).toContain('unknown subcommand');
  });
});
