import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { handoffCommand } from '../src/cli/handoff.js';

const fixtures = fileURLToPath(new URL('./fixtures/handoff/', import.meta.url));
const receipts = fileURLToPath(new URL('../receipts/handoffs/', import.meta.url));
const f = (c: string, file: string): string => join(fixtures, c, file);

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await handoffCommand(argv, { stdout: (s) => { out += s; }, stderr: (s) => { err += s; } });
  return { code, out, err };
}

const admitArgs = (c: string): string[] => ['admit', f(c, 'handoff.json'), '--parent', f(c, 'parent.json'), '--state', f(c, 'state.json')];
const returnArgs = (c: string, result = 'result.json', h = 'handoff.json'): string[] => ['return', f(c, result), '--handoff', f(c, h), '--state', f(c, 'state.json')];

// What each failure trace must produce, in the order admission reports it.
const cases: { name: string; admit: string[]; ret: string[] }[] = [
  { name: 'happy', admit: [], ret: [] },
  { name: 'duplicate-dispatch', admit: ['duplicate_active'], ret: ['wrong_attempt'] },
  { name: 'duplicate-replacement', admit: [], ret: [] },
  { name: 'cancel-late-return', admit: ['stale_state_version', 'parent_cancelled'], ret: ['stale_incompatible', 'late', 'late_after_cancel'] },
  { name: 'stale-state-version', admit: ['stale_state_version'], ret: ['stale_incompatible'] },
  { name: 'conflicting-manuals', admit: [], ret: [] },
  { name: 'orphaned-owner', admit: ['missing_final_owner', 'missing_timeout_disposition'], ret: ['missing_citations'] },
  { name: 'capability-widening', admit: ['capability_not_in_parent', 'effects_in_read_slice'], ret: ['over_budget', 'effect_in_read_slice'] },
  { name: 'malformed-no-evidence', admit: [], ret: ['malformed_no_evidence', 'malformed_no_evidence', 'malformed_no_evidence'] },
];

const parseJson = (out: string): { admitted: boolean; denials?: { code: string; field: string; message: string }[] } => JSON.parse(out);

describe('handoff admit / return --json on the failure-trace fixtures', () => {
  it.each(cases)('$name', async ({ name, admit, ret }) => {
    const a = await cli(...admitArgs(name), '--json');
    expect(a.err).toBe('');
    expect(a.code).toBe(admit.length === 0 ? 0 : 1);
    const aj = parseJson(a.out);
    expect(aj.admitted).toBe(admit.length === 0);
    expect((aj.denials ?? []).map((d) => d.code)).toEqual(admit);
    if (admit.length === 0) expect(a.out).toBe('{"admitted":true}\n');
    for (const d of aj.denials ?? []) expect(Object.keys(d)).toEqual(['code', 'field', 'message']);

    const r = await cli(...returnArgs(name), '--json');
    expect(r.err).toBe('');
    expect(r.code).toBe(ret.length === 0 ? 0 : 1);
    expect((parseJson(r.out).denials ?? []).map((d) => d.code)).toEqual(ret);
  });

  it('the second reviewer of the conflicting manuals is admitted too', async () => {
    const r = await cli('return', f('conflicting-manuals', 'result-b.json'), '--handoff', f('conflicting-manuals', 'handoff-b.json'), '--state', f('conflicting-manuals', 'state.json'), '--json');
    expect(r).toEqual({ code: 0, out: '{"admitted":true}\n', err: '' });
  });

  it("the first attempt's late result cannot pass as the replacement's", async () => {
    const r = await cli(...returnArgs('duplicate-replacement', 'result-attempt-1.json'), '--json');
    expect(r.code).toBe(1);
    expect(parseJson(r.out).denials!.map((d) => [d.code, d.field])).toEqual([['wrong_attempt', 'attempt']]);
  });

  it('accepts the leading `handoff` word', async () => {
    expect((await cli('handoff', ...admitArgs('happy'), '--json')).out).toBe('{"admitted":true}\n');
  });
});

describe('readable output', () => {
  it('lists each denial with code, field and message', async () => {
    const r = await cli(...admitArgs('capability-widening'));
    expect(r.code).toBe(1);
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toBe('denied: handoff-manual-07 attempt 1 (fieldops-main -> manual-specialist), 2 reasons');
    expect(lines[1]).toMatch(/^ {2}capability_not_in_parent +allowedCapabilities\[1\] +capability 'reserve_part' is not held/);
    expect(lines[2]).toMatch(/^ {2}effects_in_read_slice +allowedCapabilities\[1\] +a read slice is granted 'reserve_part'/);
  });

  it('says admitted', async () => {
    expect(await cli(...returnArgs('happy'))).toEqual({ code: 0, out: 'admitted: result of handoff-manual-07 attempt 1 from manual-specialist\n', err: '' });
  });

  it('never prints document content (task slice, completion text, passages)', async () => {
    let all = '';
    for (const c of cases) {
      all += (await cli(...admitArgs(c.name))).out + (await cli(...returnArgs(c.name), '--json')).out;
    }
    all += (await cli('aggregate', f('conflicting-manuals', 'result.json'), f('conflicting-manuals', 'result-b.json'), '--json')).out;
    expect(all).not.toContain('find compatibility passages');
    expect(all).not.toContain('cited passages or explicit');
    expect(all).not.toContain('return ownership and continue');
    expect(all).not.toContain('sec-4.2');
  });
});

describe('bad input exits 2 and names the file and field', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'handoff-cli-'));
  const write = (name: string, body: string): string => {
    const p = join(tmp, name);
    writeFileSync(p, body);
    return p;
  };
  const happy = JSON.parse(readFileSync(f('happy', 'handoff.json'), 'utf8'));

  it('an unreadable file', async () => {
    const missing = join(tmp, 'nope.json');
    const r = await cli('admit', missing, '--parent', f('happy', 'parent.json'), '--state', f('happy', 'state.json'));
    expect(r.code).toBe(2);
    expect(r.err).toBe(`${missing}: cannot read (ENOENT)\n`);
    expect(r.out).toBe('');
  });

  it('bad JSON, without quoting the document', async () => {
    const p = write('bad.json', '{"handoffId": "secret-ish", ');
    const r = await cli('admit', p, '--parent', f('happy', 'parent.json'), '--state', f('happy', 'state.json'));
    expect(r.code).toBe(2);
    expect(r.err.startsWith(`${p}: not valid JSON`)).toBe(true);
    expect(r.err).not.toContain('secret-ish');
  });

  it('a schema error names the field path', async () => {
    const p = write('neg.json', JSON.stringify({ ...happy, budgets: { ...happy.budgets, effects: -1 }, leaseExpiresAt: '10:04Z' }));
    const r = await cli('admit', p, '--parent', f('happy', 'parent.json'), '--state', f('happy', 'state.json'), '--json');
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    const lines = r.err.trimEnd().split('\n');
    expect(lines.some((l) => l.startsWith(`${p}: budgets.effects: `))).toBe(true);
    expect(lines.some((l) => l.startsWith(`${p}: leaseExpiresAt: `))).toBe(true);
  });

  it('an unknown field is refused (strict documents)', async () => {
    const p = write('extra.json', JSON.stringify({ ...happy, delegation: { ...happy.delegation, audience: 'any' } }));
    const r = await cli('admit', p, '--parent', f('happy', 'parent.json'), '--state', f('happy', 'state.json'));
    expect(r).toEqual({ code: 2, out: '', err: `${p}: delegation.audience: unknown field (documents are strict)\n` });
  });

  it('a state whose cancellation time contradicts it', async () => {
    const p = write('state.json', JSON.stringify({ now: '2025-03-14T10:00:00Z', stateVersion: 7, cancelled: false, cancelledAt: '2025-03-14T09:59:00Z', activeLeases: [] }));
    const r = await cli('admit', f('happy', 'handoff.json'), '--parent', f('happy', 'parent.json'), '--state', p);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`${p}: cancelledAt: `);
  });

  it('usage errors', async () => {
    expect((await cli('admit', f('happy', 'handoff.json'), '--state', f('happy', 'state.json'))).code).toBe(2);
    expect((await cli('admit', f('happy', 'handoff.json'), '--parent', f('happy', 'parent.json'), '--state', f('happy', 'state.json'), '--frobnicate')).code).toBe(2);
    expect((await cli('return', f('happy', 'result.json'), '--state', f('happy', 'state.json'))).err).toContain('--handoff FILE is required');
    expect((await cli('teleport')).code).toBe(2);
    expect((await cli()).code).toBe(2);
  });
});

describe('aggregate, audit and schema', () => {
  it('aggregate escalates the conflicting manuals (exit 1) and aggregates a single result (exit 0)', async () => {
    const r = await cli('aggregate', f('conflicting-manuals', 'result.json'), f('conflicting-manuals', 'result-b.json'), '--json');
    expect(r.code).toBe(1);
    const j = JSON.parse(r.out);
    expect(j.decision).toBe('escalate');
    expect(j.conflicts.map((c: { code: string; editions: string[] }) => [c.code, c.editions])).toEqual([['conflicting_evidence', ['rev-B-2019', 'rev-C-2023']]]);
    expect((await cli('aggregate', f('conflicting-manuals', 'result-b.json'))).code).toBe(0);
  });

  it('audit prints one JSON line per run and exits 1 when there are findings', async () => {
    const r = await cli('audit', join(receipts, 'ho-duplicate-dispatch.ndjson'), join(receipts, 'ho-duplicate-active.ndjson'), '--json');
    expect(r.code).toBe(1);
    const lines = r.out.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.run, l.findings.map((x: { code: string }) => x.code)])).toEqual([
      ['ho-duplicate-active', ['duplicate_active']],
      ['ho-duplicate-dispatch', []],
    ]);
    expect(lines[1].funnel.admitted).toBe(1);
    const clean = await cli('audit', join(receipts, 'ho-duplicate-dispatch.ndjson'));
    expect(clean.code).toBe(0);
    expect(clean.out).toContain('run ho-duplicate-dispatch: no handoff findings');
  });

  it('audit --now moves lease expiry', async () => {
    const file = join(receipts, 'ho-orphaned-dispatch.ndjson');
    const early = JSON.parse((await cli('audit', file, '--now', '2025-03-14T10:03:00Z', '--json')).out);
    const late = JSON.parse((await cli('audit', file, '--now', '2025-03-14T10:04:00Z', '--json')).out);
    expect(early.findings.map((x: { code: string }) => x.code)).not.toContain('lease_expired_open');
    expect(late.findings.map((x: { code: string }) => x.code)).toContain('lease_expired_open');
  });

  it('audit refuses a bad receipt line with file, line and field', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'handoff-audit-'));
    const p = join(tmp, 'bad.ndjson');
    writeFileSync(p, '{"run":"r","event":"e1","type":"handoff","at":"2025-03-14T10:00:00Z","handoff":"h","state":"RUNNING"}\n{"run":"r","event":"e2","type":"handoff","at":"2025-03-14T10:00:01Z","handoff":"h","state":"LIMBO"}\n');
    const r = await cli('audit', p);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(new RegExp(`^${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: line 2: state: `));
  });

  it('schema prints the JSON Schemas', async () => {
    const r = await cli('schema', 'handoff');
    expect(r.code).toBe(0);
    const s = JSON.parse(r.out);
    expect(s.additionalProperties).toBe(false);
    expect(s.required).toContain('duplicateKey');
    expect((await cli('schema', 'nonsense')).code).toBe(2);
  });
});
