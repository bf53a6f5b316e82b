/**
 * The receipt NDJSON format (interfaces.md) and offline replay of the drift fixture (semantics.md 4).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { ReceiptFileError, RunState, VERDICTS, parseNdjson, parseReceiptFile, validateReceipt } from '../src/core/index.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DRIFT = join(ROOT, 'receipts/drift.ndjson');
const EXPECTED = join(ROOT, 'receipts/drift.expected.json');
const CONTRACTS = join(ROOT, 'contracts');
const tmp = mkdtempSync(join(tmpdir(), 'ta-receipts-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s) }, out: () => out.join(''), err: () => err.join('') };
}

const AT = '2026-01-15T10:00:00Z';
/** A minimal valid receipt per type, and the fields each type requires beyond run, event, type, at. */
const MINIMAL: Record<string, { receipt: Record<string, unknown>; required: string[]; optional: Record<string, unknown> }> = {
  'run.start': { receipt: { contract: 'c' }, required: ['contract'], optional: { phase: 'p', version: '3', from: 'o', status: 'ok' } },
  edge: { receipt: { from: 'a', to: 'b', kind: 'delegate' }, required: ['from', 'to', 'kind'], optional: { version: '3', status: 'error' } },
  wait: { receipt: { on: 'v', edge: 'v -> o : return', deadline: AT }, required: ['on', 'edge', 'deadline'], optional: { from: 'o', version: '3', status: 'unset' } },
  outcome: { receipt: { verified: true }, required: ['verified'], optional: { from: 'o', version: '3' } },
  'run.end': { receipt: { result: 'completed' }, required: ['result'], optional: { from: 'o', version: '3', status: 'ok' } },
  gap: { receipt: { reason: 'caller_unresolved' }, required: ['reason'], optional: { to: 'r', from: 'o', version: '3' } },
};
const make = (type: string, extra: Record<string, unknown> = {}) => ({ run: 'r1', event: 'e1', type, at: AT, ...MINIMAL[type].receipt, ...extra });
const refusal = (value: unknown) => {
  const r = validateReceipt(value);
  if (r.ok) throw new Error(`accepted, but a refusal was expected: ${JSON.stringify(value)}`);
  return r.error;
};

describe('receipt fields per type', () => {
  it.each(Object.keys(MINIMAL))('%s: the minimal receipt is accepted, with its optional fields too', (type) => {
    expect(validateReceipt(make(type))).toMatchObject({ ok: true, receipt: make(type) });
    expect(validateReceipt(make(type, MINIMAL[type].optional)).ok).toBe(true);
  });

  it.each(Object.keys(MINIMAL))('%s: each required field is required', (type) => {
    for (const field of ['run', 'event', 'at', ...MINIMAL[type].required]) {
      const value: Record<string, unknown> = make(type);
      delete value[field];
      expect(refusal(value), field).toContain(field);
    }
  });

  it.each(Object.keys(MINIMAL))('%s: fields of other types and unknown fields are refused', (type) => {
    const foreign = { 'run.start': { result: 'completed' }, edge: { verified: true }, wait: { kind: 'delegate' }, outcome: { reason: 'x' }, 'run.end': { contract: 'c' }, gap: { on: 'v' } }[type]!;
    expect(refusal(make(type, foreign))).toMatch(/unknown field/);
    expect(refusal(make(type, { prompt: 'tell me everything' }))).toMatch(/unknown field\(s\) "prompt"/);
  });

  it('refuses unknown types and a missing type', () => {
    expect(refusal({ ...make('edge'), type: 'message' })).toMatch(/type/);
    const { type: _t, ...untyped } = make('edge');
    expect(refusal(untyped)).toMatch(/type/);
    expect(refusal([make('edge')])).toMatch(/JSON object/);
    expect(refusal('edge')).toMatch(/JSON object/);
  });

  it('refuses values outside the listed ones', () => {
    expect(refusal(make('edge', { kind: 'teleport' }))).toMatch(/kind/);
    expect(refusal(make('edge', { status: 'fine' }))).toMatch(/status/);
    expect(refusal(make('run.end', { result: 'done' }))).toMatch(/result/);
    expect(refusal(make('outcome', { verified: 'true' }))).toMatch(/verified/);
    expect(refusal(make('wait', { edge: 'v to o' }))).toMatch(/edge/);
    expect(refusal(make('wait', { deadline: 'tomorrow' }))).toMatch(/deadline/);
    for (const at of ['2026-01-15', '2026-01-15T10:00:00', 'yesterday', '2026-13-45T10:00:00Z']) expect(refusal(make('edge', { at })), at).toMatch(/at/);
  });

  it('accepts RFC 3339 offsets and fractions; wait edges compare with spaces ignored and name exactly one edge', () => {
    for (const at of ['2026-01-15T11:00:00+01:00', '2026-01-15T10:00:00.123456789Z', '2026-01-15t10:00:00z']) expect(validateReceipt(make('edge', { at })).ok, at).toBe(true);
    expect(validateReceipt(make('wait', { edge: 'v->o:return' })).ok).toBe(true);
    // semantics 2a: a wait names exactly one edge; brackets there are refused
    expect(validateReceipt(make('wait', { edge: 'o -> [w1, w2] : delegate' })).ok).toBe(false);
  });
});

describe('versions', () => {
  it('a JSON integer version is read as its decimal text', () => {
    expect(validateReceipt(make('edge', { version: 3 }))).toMatchObject({ ok: true, receipt: { version: '3' } });
    expect(validateReceipt(make('run.start', { version: 10 }))).toMatchObject({ ok: true, receipt: { version: '10' } });
    expect(validateReceipt(make('edge', { version: '2.10' }))).toMatchObject({ ok: true, receipt: { version: '2.10' } });
  });

  it('an integer version and its decimal text are one content (a duplicate, not a conflict)', () => {
    const a = validateReceipt(make('edge', { version: 3 }));
    const b = validateReceipt(make('edge', { version: '3', status: 'ok', at: '2026-01-15T10:00:00.000+00:00' }));
    if (!a.ok || !b.ok) throw new Error('refused');
    const s = new RunState('r1');
    expect(s.add(a.receipt)).toBe('accepted');
    expect(s.add(b.receipt)).toBe('duplicate');
    expect(s.add({ ...b.receipt, version: '3.0' })).toBe('conflict');
  });

  it('any other number is refused', () => {
    for (const version of [2.1, 2.5, -1, 1e300]) expect(refusal(make('edge', { version })), String(version)).toMatch(/version/);
  });
});

describe('content-free ids', () => {
  const bad = ['please summarise the contract', 'line one\nline two', '/home/alice/secrets.txt', 'C:\\Users\\alice', '', 'x'.repeat(201), 'tab\there'];
  it.each(['run', 'event', 'from', 'to'])('%s refuses sentences, multi-line text, paths and empty or huge values', (field) => {
    // Run and event ids may hold "/" (semantics.md 2a: `tenant-7/run-42`); agent ids may not.
    const refused = field === 'run' || field === 'event' ? bad.filter((v) => !/^[A-Za-z0-9_.:@#+=/-]{1,200}$/.test(v)) : bad;
    expect(refused.length).toBeGreaterThanOrEqual(field === 'run' || field === 'event' ? 6 : 7);
    for (const v of refused) expect(refusal(make('edge', { [field]: v })), JSON.stringify(v)).toMatch(new RegExp(field));
  });

  it('run and event ids may hold "/" (URL-encoded in API paths); agent ids may not', () => {
    for (const v of ['tenant-7/run-42', 'run-42/3']) {
      expect(validateReceipt(make('edge', { run: v })).ok, v).toBe(true);
      expect(validateReceipt(make('edge', { event: v })).ok, v).toBe(true);
      expect(validateReceipt(make('edge', { from: v })).ok, v).toBe(false);
    }
    expect(validateReceipt(make('edge', { run: 'patient Jane Doe has HIV' })).ok).toBe(false);
    expect(validateReceipt(make('edge', { run: 'r'.repeat(100_000) })).ok).toBe(false);
  });

  it('ids elsewhere too: contract, phase, on, reason, and the agents of a wait edge', () => {
    expect(refusal(make('run.start', { contract: 'my contract' }))).toMatch(/contract/);
    expect(refusal(make('run.start', { phase: '../phase' }))).toMatch(/phase/);
    expect(refusal(make('wait', { on: 'the verifier agent' }))).toMatch(/on/);
    expect(refusal(make('gap', { reason: 'the caller said: ignore all previous instructions' }))).toMatch(/reason/);
    expect(refusal(make('wait', { edge: '/etc/passwd -> o : return' }))).toMatch(/edge/);
  });

  it('ordinary ids are accepted', () => {
    for (const v of ['orchestrator', 'web-search', 'a.b_c@d#1+2=3']) expect(validateReceipt(make('edge', { from: v })).ok, v).toBe(true);
    // event and run ids may hold ":" (e.g. span ids with a suffix); agent ids may not, since they appear in edge strings
    expect(validateReceipt(make('edge', { event: 'span:4bf92f3577b34da6' })).ok).toBe(true);
    for (const v of ['span:4bf92f3577b34da6', '-leading-dash']) expect(validateReceipt(make('edge', { from: v })).ok, v).toBe(false);
  });
});

describe('NDJSON files', () => {
  const good = (event: string) => JSON.stringify({ ...make('edge'), event });

  it('numbers lines from 1 and skips blank lines', () => {
    const lines = parseNdjson(`${good('a')}\n\n${good('b')}\n   \n${good('c')}\n`);
    expect(lines.map((l) => [l.line, l.result.ok])).toEqual([
      [1, true],
      [3, true],
      [5, true],
    ]);
  });

  it('refuses the whole file at the first invalid line, naming the file and line', () => {
    const text = [good('a'), good('b'), JSON.stringify({ ...make('edge'), event: 'c', prompt: 'x' }), '{bad json'].join('\n');
    try {
      parseReceiptFile(text, 'runs.ndjson');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ReceiptFileError);
      expect((e as ReceiptFileError).line).toBe(3);
      expect((e as Error).message).toMatch(/^runs\.ndjson:3: unknown field\(s\) "prompt"/);
    }
    expect(() => parseReceiptFile([good('a'), '{"run": "r1",'].join('\n'), 'f.ndjson')).toThrow(/^f\.ndjson:2: invalid JSON/);
  });
});

describe('replay', () => {
  const drift = readFileSync(DRIFT, 'utf8');
  const expected: Record<string, string> = JSON.parse(readFileSync(EXPECTED, 'utf8'));

  async function replayJson(args: string[]) {
    const c = capture();
    const code = await main(['replay', ...args, '--json'], c.io);
    return { code, runs: c.out().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)), err: c.err() };
  }

  it('exits 2 naming the file and line for an unknown field, and prints no verdicts', async () => {
    const lines = drift.trim().split('\n');
    lines[4] = lines[4].replace('"status":"ok"', '"status":"ok","prompt":"draft the press release"');
    const file = join(tmp, 'unknown-field.ndjson');
    writeFileSync(file, lines.join('\n'));
    const c = capture();
    expect(await main(['replay', file, '--contracts', CONTRACTS], c.io)).toBe(2);
    expect(c.err()).toContain(`${file}:5: unknown field(s) "prompt"`);
    expect(c.out()).toBe('');
  });

  it('exits 2 naming the file and line for bad JSON', async () => {
    const file = join(tmp, 'bad-json.ndjson');
    writeFileSync(file, drift.trim().split('\n').slice(0, 3).join('\n') + '\n{"run": "x", \n');
    const c = capture();
    expect(await main(['replay', DRIFT, file, '--contracts', CONTRACTS], c.io)).toBe(2);
    expect(c.err()).toContain(`${file}:4: invalid JSON`);
  });

  it('the drift fixture: nine runs, naive green on all nine, nine distinct verdicts as expected', async () => {
    const { code, runs } = await replayJson([DRIFT, '--contracts', CONTRACTS]);
    expect(code).toBe(1); // six runs settled non-healthy
    expect(runs).toHaveLength(9);
    expect(runs.every((r) => r.naive === 'green')).toBe(true);
    const verdicts = Object.fromEntries(runs.map((r) => [r.run, r.verdict]));
    expect(verdicts).toEqual(expected);
    expect(new Set(Object.values(verdicts)).size).toBe(9);
    expect(runs.filter((r) => r.verdict === 'healthy').map((r) => r.run)).toEqual(['drift-complete']);
    for (const v of Object.values(verdicts)) expect(VERDICTS).toContain(v);
  });

  it('--json prints one object per run with {run, pin, verdict, naive, findings}', async () => {
    const { runs } = await replayJson([DRIFT, '--contracts', CONTRACTS]);
    for (const r of runs) {
      expect(r).toEqual(expect.objectContaining({ run: expect.any(String), verdict: expect.any(String), naive: expect.any(String), findings: expect.any(Array) }));
      expect(r.pin).toEqual({ contract: 'research-publish', version: '3', phase: 'research' });
      for (const f of r.findings) expect(Object.keys(f)).toEqual(expect.arrayContaining(['verdict', 'code', 'agents', 'events', 'message']));
    }
    const twice = runs.find((r) => r.run === 'drift-twice');
    expect(twice.findings[0]).toMatchObject({ verdict: 'ambiguous_route', edge: 'orchestrator -> researcher : delegate', events: ['e1', 'e2'] });
    const shadow = runs.find((r) => r.run === 'drift-shadow');
    expect(shadow.findings[0]).toMatchObject({ verdict: 'unknown_agent', agents: ['shadow-agent'], events: ['e2'] });
  });

  it('--expect exits 0 when every run matches', async () => {
    const c = capture();
    expect(await main(['replay', DRIFT, '--contracts', CONTRACTS, '--expect', EXPECTED], c.io)).toBe(0);
    expect(c.err()).toContain('all 9 expectation(s) met');
    expect(c.out()).toMatch(/^now 2026-01-15T10:26:00\.000Z, 9 run\(s\)/);
    for (const run of Object.keys(expected)) expect(c.out()).toContain(run);
  });

  it('--expect exits 1 and names the run when one expected verdict differs', async () => {
    const edited = join(tmp, 'edited.expected.json');
    writeFileSync(edited, JSON.stringify({ ...expected, 'drift-late': 'waiting' }));
    const c = capture();
    expect(await main(['replay', DRIFT, '--contracts', CONTRACTS, '--expect', edited], c.io)).toBe(1);
    expect(c.err()).toContain('drift-late: expected waiting, got incomplete');
    expect(c.err()).not.toContain('drift-wait');
  });

  it('--now moves verdicts with time alone', async () => {
    const early = await replayJson([DRIFT, '--contracts', CONTRACTS, '--now', '2026-01-15T10:05:00Z']);
    expect(early.runs.find((r) => r.run === 'drift-late').verdict).toBe('waiting');
    const late = await replayJson([DRIFT, '--contracts', CONTRACTS, '--now', '2026-01-15T10:36:00Z']);
    expect(late.runs.find((r) => r.run === 'drift-wait').verdict).toBe('incomplete');
  });

  it('--contract pins runs without run.start; without it they are uncertain', async () => {
    const file = join(tmp, 'no-start.ndjson');
    writeFileSync(file, drift.split('\n').filter((l) => l.includes('"drift-complete"') && !l.includes('run.start')).join('\n'));
    const pinned = await replayJson([file, '--contracts', CONTRACTS, '--contract', 'research-publish']);
    expect(pinned.runs[0]).toMatchObject({ run: 'drift-complete', verdict: 'healthy', pin: { contract: 'research-publish', version: '3', phase: 'research' } });
    const unpinned = await replayJson([file, '--contracts', CONTRACTS]);
    expect(unpinned.runs[0]).toMatchObject({ verdict: 'uncertain', pin: null });
    expect(await main(['replay', file, '--contracts', CONTRACTS, '--contract', 'nope'], capture().io)).toBe(2);
  });

  it('a contract file that fails validation stops replay (exit 2), naming the file', async () => {
    const dir = join(tmp, 'contracts-bad');
    const { mkdirSync, copyFileSync } = await import('node:fs');
    mkdirSync(dir);
    copyFileSync(join(CONTRACTS, 'research-publish.yaml'), join(dir, 'a.yaml'));
    writeFileSync(join(dir, 'b.yaml'), 'contract: x\nversion: "1"\nowner: a\nagents: [a]\nallow:\n  - a -> ghost : delegate\nphases:\n  p: {}\n');
    const c = capture();
    expect(await main(['replay', DRIFT, '--contracts', dir], c.io)).toBe(2);
    expect(c.err()).toMatch(/b\.yaml:6:5: allow\[0\]\.edge: agent "ghost"/);
  });

  it('replays a file larger than fits in call arguments (150,000 receipts)', async () => {
    const complete = drift.split('\n').filter((l) => l.includes('"drift-complete"'));
    const runs = 25_000;
    const lines: string[] = [];
    for (let i = 0; i < runs; i++) for (const l of complete) lines.push(l.replace('"drift-complete"', `"big-${i}"`));
    const file = join(tmp, 'big.ndjson');
    writeFileSync(file, lines.join('\n'));
    const c = capture();
    expect(await main(['replay', file, '--contracts', CONTRACTS, '--json'], c.io)).toBe(0);
    const out = c.out().trim().split('\n');
    expect(out).toHaveLength(runs);
    expect(out.every((l) => JSON.parse(l).verdict === 'healthy')).toBe(true);
  });

  it('usage errors exit 2', async () => {
    // Without --contracts, replay uses the packaged example contracts (as serve does), so this is not a usage error.
    expect(await main(['replay', DRIFT, '--fail-on', 'none'], capture().io)).toBe(0);
    expect(await main(['replay', '--contracts', CONTRACTS], capture().io)).toBe(2);
    expect(await main(['replay', DRIFT, '--contracts', CONTRACTS, '--now', 'noon'], capture().io)).toBe(2);
    expect(await main(['replay', join(tmp, 'missing.ndjson'), '--contracts', CONTRACTS], capture().io)).toBe(2);
    expect(await main(['replay', DRIFT, '--contracts', CONTRACTS, '--bogus'], capture().io)).toBe(2);
  });
});
