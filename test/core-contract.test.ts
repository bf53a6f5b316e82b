/**
 * Contract loading (YAML shorthand, explicit and JSON forms), every refusal with file, line, column and
 * field, the registry's one-content-per-version rule, version order, and the printed JSON Schemas.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { ContractError, ContractRegistry, compareContractVersions, contractFromCanonical, parseContract, type ContractIssue } from '../src/core/index.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'ta-contract-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s) }, out: () => out.join(''), err: () => err.join('') };
}

/** Every issue the loader reports for `text`; fails the test when the text loads. */
function issuesOf(text: string, file = 'c.yaml'): ContractIssue[] {
  try {
    parseContract(text, file);
  } catch (e) {
    if (e instanceof ContractError) return e.issues;
    throw e;
  }
  throw new Error('the contract loaded, but a refusal was expected');
}

/** 1-based line and column of the first occurrence of `needle` in `text`. */
function position(text: string, needle: string, nth = 0): { line: number; col: number } {
  let i = -1;
  for (let k = 0; k <= nth; k++) i = text.indexOf(needle, i + 1);
  if (i < 0) throw new Error(`fixture does not contain ${needle}`);
  const before = text.slice(0, i);
  return { line: before.split('\n').length, col: i - before.lastIndexOf('\n') };
}

const SHORTHAND = `contract: shop
version: "4"
owner: o
agents: [o, r, v, w1, w2]
allow:
  - o -> r : delegate
  - r -> v : handoff
    max: 2
  - v -> o : return
  - o -> [w1, w2] : delegate
    max: 3
phases:
  main:
    expect:
      - o -> r : delegate
      - r -> v : handoff
      - v -> o : return
        dependency: v
        within: 10m
      - o -> [w1, w2] : delegate
        after: []
        within: 90s
`;

const EXPLICIT = `contract: shop
version: "4"
owner: o
agents: [o, r, v, w1, w2]
allow:
  - { edge: "o->r:delegate" }
  - { from: r, to: v, kind: handoff, max: 2 }
  - "v -> o : return"
  - { from: o, to: [w1, w2], kind: delegate, max: 3 }
phases:
  main:
    outcome: required
    expect:
      - { from: o, to: r, kind: delegate }
      - { edge: "r -> v : handoff", after: ["o -> r : delegate"] }
      - { edge: "v -> o : return", dependency: v, within: 10m }
      - { edge: "o -> [w1, w2] : delegate", after: [], within: 90s }
`;

const JSON_FORM = JSON.stringify(
  {
    contract: 'shop',
    version: '4',
    retired: false,
    owner: 'o',
    agents: ['o', 'r', 'v', 'w1', 'w2'],
    allow: [{ edge: 'o -> r : delegate' }, { edge: 'r -> v : handoff', max: 2 }, { from: 'v', to: 'o', kind: 'return' }, { from: 'o', to: ['w1', 'w2'], kind: 'delegate', max: 3 }],
    phases: {
      main: {
        expect: [
          { edge: 'o -> r : delegate' },
          { edge: 'r -> v : handoff' },
          { edge: 'v -> o : return', dependency: 'v', within: '10m' },
          { from: 'o', to: ['w1', 'w2'], kind: 'delegate', after: [], within: '90s' },
        ],
      },
    },
  },
  null,
  2,
);

describe('loading contracts', () => {
  it('reads YAML shorthand entries with their options indented beneath', () => {
    const c = parseContract(SHORTHAND, 'shop.yaml');
    expect(c.allow.map((a) => [a.key, a.max])).toEqual([
      ['o -> r : delegate', 1],
      ['r -> v : handoff', 2],
      ['v -> o : return', 1],
      ['o -> [w1, w2] : delegate', 3],
    ]);
    const plan = c.phases[0].plan;
    expect(c.phases[0]).toMatchObject({ name: 'main', outcome: 'required' });
    expect(plan.map((s) => [s.key, s.after, s.dependency, s.withinMs])).toEqual([
      ['o -> r : delegate', [], undefined, undefined],
      ['r -> v : handoff', [0], undefined, undefined],
      ['v -> o : return', [1], 'v', 600_000],
      ['o -> [w1, w2] : delegate', [], undefined, 90_000],
    ]);
    expect(c.allowByEdge.get('o\u0000w2\u0000delegate')?.index).toBe(3);
  });

  it('the explicit {edge} and {from, to, kind} forms and the JSON form are the same content as the shorthand', () => {
    const a = parseContract(SHORTHAND, 'a.yaml');
    const b = parseContract(EXPLICIT, 'b.yaml');
    const j = parseContract(JSON_FORM, 'c.json');
    expect(b.canonical).toBe(a.canonical);
    expect(j.canonical).toBe(a.canonical);
    expect(new Set([a.hash, b.hash, j.hash]).size).toBe(1);
  });

  it('contents that differ in meaning hash differently', () => {
    const a = parseContract(SHORTHAND, 'a.yaml');
    const b = parseContract(SHORTHAND.replace('within: 10m', 'within: 11m'), 'b.yaml');
    expect(b.hash).not.toBe(a.hash);
  });

  it('reads the repository contracts', () => {
    const reg = loadContractDir(join(ROOT, 'contracts'));
    expect(reg.versions('research-publish').map((c) => [c.version, c.retired])).toEqual([
      ['2', true],
      ['3', false],
    ]);
    expect(reg.newest('research-publish')?.version).toBe('3');
  });

  it('keeps phases in source order, integer-like names included (a run without phase pins the first)', () => {
    const text = SHORTHAND.replace('phases:\n  main:\n', 'phases:\n  main:\n').replace(/$/, '  "2":\n    outcome: optional\n  "1": {}\n');
    const c = parseContract(text, 'order.yaml');
    expect(c.phases.map((p) => p.name)).toEqual(['main', '2', '1']);
    expect(ContractRegistry.fromContracts([c]).resolve({ contract: 'shop' })).toMatchObject({ ok: true, pin: { phase: 'main' } });
  });

  it('a contract re-created from its canonical content (a pinned copy) is the same content', () => {
    for (const text of [SHORTHAND, SHORTHAND + '  "2":\n    outcome: optional\n']) {
      const c = parseContract(text, 'c.yaml');
      const again = contractFromCanonical(c.canonical);
      expect(again.hash).toBe(c.hash);
      expect(again.phases.map((p) => p.name)).toEqual(c.phases.map((p) => p.name));
    }
  });

  it('reads an unquoted YAML number version as its decimal text', () => {
    const v = (text: string) => parseContract(SHORTHAND.replace('version: "4"', `version: ${text}`), 'v.yaml').version;
    expect(v('4')).toBe('4');
    expect(v('10')).toBe('10');
    expect(v('2.10')).toBe('2.1'); // the YAML number 2.10 is 2.1: quote versions
    expect(v('"2.10"')).toBe('2.10');
  });
});

describe('refusals name the file, line, column and field', () => {
  const at = (text: string, needle: string, nth = 0) => position(text, needle, nth);

  it('an undeclared agent in allow (shorthand, {edge}, {from, to, kind})', () => {
    const text = SHORTHAND.replace('  - v -> o : return\n', '  - v -> o : return\n  - o -> ghost : delegate\n');
    const [i] = issuesOf(text, 'shop.yaml');
    expect(i).toMatchObject({ file: 'shop.yaml', field: 'allow[3].edge', ...at(text, 'o -> ghost') });
    expect(i.message).toMatch(/agent "ghost" is not declared/);
    const obj = EXPLICIT.replace('{ from: r, to: v, kind: handoff, max: 2 }', '{ from: r, to: ghost, kind: handoff, max: 2 }');
    expect(issuesOf(obj, 'x.yaml')[0]).toMatchObject({ field: 'allow[1].to', line: at(obj, 'to: ghost').line });
  });

  it('overlapping allow entries', () => {
    const text = SHORTHAND.replace('  - v -> o : return\n', '  - v -> o : return\n  - { from: o, to: [w2, r], kind: delegate }\n');
    const issues = issuesOf(text);
    expect(issues.map((i) => i.field)).toEqual(['allow[3]', 'allow[4]']);
    expect(issues[0].message).toMatch(/"o -> r : delegate" is already allowed by allow\[0\]/);
    expect(issues[0].line).toBe(at(text, '{ from: o, to: [w2, r]').line);
  });

  it('an expected edge that is not allowed', () => {
    const text = SHORTHAND.replace('      - r -> v : handoff\n', '      - r -> v : handoff\n      - r -> o : return\n');
    const [i] = issuesOf(text);
    expect(i).toMatchObject({ field: 'phases.main.expect[2]', line: at(text, 'r -> o : return').line });
    expect(i.message).toMatch(/not allowed by any allow entry/);
  });

  it('an edge twice in a plan (also inside a bounded choice)', () => {
    const text = SHORTHAND + '      - edge: "o -> r : delegate"\n        after: []\n';
    const [i] = issuesOf(text);
    expect(i.field).toBe('phases.main.expect[4]');
    expect(i.message).toMatch(/appears twice in the plan/);
    const choice = SHORTHAND + '      - { edge: "o -> w2 : delegate", after: [] }\n';
    expect(issuesOf(choice)[0].message).toMatch(/"o -> w2 : delegate" appears twice/);
  });

  it('`after` naming an edge that is not in the plan', () => {
    const text = SHORTHAND.replace('        dependency: v\n', '        dependency: v\n        after: ["o -> [w1] : delegate"]\n');
    const [i] = issuesOf(text);
    expect(i).toMatchObject({ field: 'phases.main.expect[2].after[0]', ...at(text, '"o -> [w1] : delegate"') });
    expect(i.message).toMatch(/is not an edge of phase "main"/);
  });

  it('`after` cycles', () => {
    const text = EXPLICIT.replace('{ from: o, to: r, kind: delegate }', '{ from: o, to: r, kind: delegate, after: ["v -> o : return"] }');
    const [i] = issuesOf(text);
    expect(i.field).toBe('phases.main.expect');
    expect(i.message).toBe('`after` forms a cycle: o -> r : delegate -> v -> o : return -> r -> v : handoff -> o -> r : delegate');
    const self = EXPLICIT.replace('{ edge: "r -> v : handoff", after: ["o -> r : delegate"] }', '{ edge: "r -> v : handoff", after: ["r->v:handoff"] }');
    expect(issuesOf(self)[0]).toMatchObject({ field: 'phases.main.expect[1].after[0]', message: 'an edge cannot come after itself' });
  });

  it('a dependency without `within`', () => {
    const text = SHORTHAND.replace('        within: 10m\n', '');
    const [i] = issuesOf(text);
    expect(i).toMatchObject({ field: 'phases.main.expect[2].dependency', ...at(text, 'dependency: v') });
    expect(i.message).toMatch(/unbounded wait/);
  });

  it.each(['10 minutes', '1.5h', '10M', '-5m', '10'])('a bad duration: %s', (d) => {
    const text = SHORTHAND.replace('within: 10m', `within: "${d}"`);
    const [i] = issuesOf(text);
    expect(i).toMatchObject({ field: 'phases.main.expect[2].within', ...at(text, 'within: "') });
    expect(i.message).toMatch(/duration/);
  });

  it('a bad edge kind, in the shorthand and in {from, to, kind}', () => {
    const text = SHORTHAND.replace('  - v -> o : return\n', '  - v -> o : teleport\n');
    const [i] = issuesOf(text);
    expect(i).toMatchObject({ field: 'allow[2].edge', ...at(text, 'v -> o : teleport') });
    expect(i.message).toMatch(/unknown edge kind "teleport"/);
    const obj = EXPLICIT.replace('{ from: r, to: v, kind: handoff, max: 2 }', '{ from: r, to: v, kind: teleport, max: 2 }');
    const [j] = issuesOf(obj);
    expect(j).toMatchObject({ field: 'allow[1].kind', ...at(obj, 'kind: teleport') });
    expect(j.message).toMatch(/delegate.*handoff.*return/);
  });

  it('an unknown field at the top, in a phase, and in an entry', () => {
    const top = SHORTHAND + 'prompt: "summarise the secret plan"\n';
    // At the top: one issue per field, at the field's own line, with the field meant when one is near.
    expect(issuesOf(top)[0]).toMatchObject({ field: 'prompt', message: 'unknown field "prompt"', line: at(top, 'prompt:').line });
    expect(issuesOf(SHORTHAND.replace(/^owner:/m, 'onwer:')).map((i) => i.message)).toContain('unknown field "onwer": did you mean "owner"?');
    const phase = SHORTHAND.replace('  main:\n', '  main:\n    owner: o\n');
    expect(issuesOf(phase)[0]).toMatchObject({ field: 'phases.main', message: 'unknown field(s): owner' });
    const entry = SHORTHAND.replace('    max: 2\n', '    max: 2\n    budget: 5\n');
    expect(issuesOf(entry)[0]).toMatchObject({ field: 'allow[1]', message: 'unknown field(s): budget', line: at(entry, 'r -> v : handoff').line });
  });

  it('a YAML syntax error, with its line and column', () => {
    const text = 'contract: t\nversion: "1"\nowner: a\nagents: [a, b\nphases:\n  p: {}\n';
    const [i] = issuesOf(text, 'broken.yaml');
    expect(i.file).toBe('broken.yaml');
    expect(i.line).toBeGreaterThanOrEqual(4);
    expect(i.message).toMatch(/^invalid YAML/);
  });

  it('JSON: a syntax error and a semantic error, each at its own line', () => {
    const broken = JSON_FORM.replace('"owner": "o",', '"owner": "o"');
    const [s] = issuesOf(broken, 'c.json');
    expect(s.message).toMatch(/^invalid JSON/);
    expect(s.line).toBe(at(broken, '"agents"').line);
    const ghost = JSON_FORM.replace('"kind": "return"', '"kind": "return", "max": 0').replace('"v -> o : return"', '"v -> ghost : return"');
    const issues = issuesOf(ghost, 'c.json');
    expect(issues.map((i) => [i.field, i.line])).toEqual([['allow[2].max', at(ghost, '"max": 0').line], ['phases.main.expect[2].edge', at(ghost, '"edge": "v -> ghost').line]]);
    const late = JSON_FORM.replace('"edge": "v -> o : return"', '"edge": "v -> ghost : return"');
    expect(issuesOf(late, 'c.json')[0]).toMatchObject({ field: 'phases.main.expect[2].edge', ...at(late, '"edge": "v -> ghost') });
  });

  it('an owner that is not an agent, and an agent listed twice', () => {
    const issues = issuesOf(SHORTHAND.replace('owner: o', 'owner: boss').replace('agents: [o, r, v, w1, w2]', 'agents: [o, r, v, w1, w2, r]'));
    expect(issues.map((i) => i.field).sort()).toEqual(['agents', 'owner']);
  });

  it('reports every issue, not just the first', () => {
    const text = SHORTHAND.replace('  - v -> o : return\n', '  - v -> o : return\n  - o -> ghost : delegate\n').replace('        within: 10m\n', '');
    expect(issuesOf(text).map((i) => i.field)).toEqual(['allow[3].edge', 'phases.main.expect[2].dependency']);
  });
});

describe('validate (CLI)', () => {
  const ghost = SHORTHAND.replace('  - v -> o : return\n', '  - v -> o : return\n  - o -> ghost : delegate\n');
  const ghostFile = join(tmp, 'ghost.yaml');
  writeFileSync(ghostFile, ghost);
  const okFile = join(tmp, 'ok.yaml');
  writeFileSync(okFile, SHORTHAND);
  const { line, col } = position(ghost, 'o -> ghost');

  it('exits 1 naming the file, line, column and field of an undeclared agent in allow (through main)', async () => {
    const c = capture();
    expect(await main(['validate', ghostFile], c.io)).toBe(1);
    expect(c.err()).toContain(`${ghostFile}:${line}:${col}: allow[3].edge: agent "ghost" is not declared in agents`);
  });

  it('exits 0 for valid files and reports them', async () => {
    const c = capture();
    expect(await main(['validate', okFile, join(ROOT, 'contracts/research-publish.yaml'), join(ROOT, 'contracts/research-publish-v2.yaml')], c.io)).toBe(0);
    expect(c.out()).toContain(`${okFile}: ok (shop@4`);
    // only warnings (a plan that can stay working forever), never errors
    for (const line of c.err().trim().split('\n').filter(Boolean)) expect(line).toMatch(/^\S+:\d+:\d+: phases\.\S+: warning: .*neither progress_within nor max_duration/);
  });

  it('exits 1 when two files publish different content under one (contract, version)', async () => {
    const other = join(tmp, 'ok-changed.yaml');
    writeFileSync(other, SHORTHAND.replace('max: 3', 'max: 4'));
    const c = capture();
    expect(await main(['validate', okFile, other], c.io)).toBe(1);
    expect(c.err()).toMatch(/version: contract "shop" version "4" already exists with different content/);
    const same = join(tmp, 'ok-same.json');
    writeFileSync(same, JSON_FORM);
    expect(await main(['validate', okFile, same], capture().io)).toBe(0);
  });

  it('the built bin exits 1 with file:line:col and the field', () => {
    const bin = join(ROOT, 'bin/topology-audit.js');
    expect(existsSync(join(ROOT, 'dist/cli/main.js')), 'build first: npx tsc -p tsconfig.build.json').toBe(true);
    const r = spawnSync(process.execPath, [bin, 'validate', ghostFile], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${ghostFile}:${line}:${col}: allow[3].edge:`);
    const ok = spawnSync(process.execPath, [bin, 'validate', okFile], { encoding: 'utf8' });
    expect(ok.status).toBe(0);
  });

  it('reports semantic errors beside schema errors, and a bare-number `within` as a duration without a unit', async () => {
    // schema errors: `within: 10` (a number) and an entry without its kind; semantic errors: the undeclared
    // owner and agent "ghost", which a schema error used to hide.
    const both = SHORTHAND.replace('owner: o', 'owner: boss').replace('within: 10m', 'within: 10').replace('  - v -> o : return\n', '  - v -> o : return\n  - o -> ghost : delegate\n  - { from: o, to: w1 }\n');
    const file = join(tmp, 'both.yaml');
    writeFileSync(file, both);
    const c = capture();
    expect(await main(['validate', file], c.io)).toBe(1);
    const lines = c.err().trim().split('\n');
    const at = (needle: string) => `${file}:${position(both, needle).line}:${position(both, needle).col}`;
    expect(lines).toContain(`${at('within: 10')}: phases.main.expect[2].within: a duration needs a unit: write "10s" (seconds) or "10ms", "10m", "10h", "10d"; a bare number is not a duration`);
    expect(lines.filter((l) => l.startsWith(`${at('{ from: o, to: w1 }')}: allow[4].kind: `))).toHaveLength(1);
    expect(lines).toContain(`${at('owner: boss')}: owner: owner "boss" is not declared in agents`);
    expect(lines).toContain(`${at('o -> ghost')}: allow[3].edge: agent "ghost" is not declared in agents`);
    // the entry with the bad `within` is left out of the semantic checks: no "needs a deadline" echo
    expect(c.err()).not.toMatch(/needs a deadline/);
    // issues in file order
    const lineNos = lines.map((l) => Number(l.split(':')[1]));
    expect(lineNos).toEqual([...lineNos].sort((a, b) => a - b));
  });

  it('exits 2 for a file that does not exist (no made-up position), and 2 without files', async () => {
    const c = capture();
    expect(await main(['validate', join(tmp, 'missing.yaml')], c.io)).toBe(2);
    expect(c.err()).toBe(`topology-audit validate: ${join(tmp, 'missing.yaml')}: no such file or directory\n`);
    expect(await main(['validate'], capture().io)).toBe(2);
  });
});

describe('registry', () => {
  it('refuses two different contents under one (contract, version) and accepts identical content', () => {
    const a = parseContract(SHORTHAND, 'a.yaml');
    const b = parseContract(SHORTHAND.replace('max: 3', 'max: 4'), 'b.yaml');
    try {
      ContractRegistry.fromContracts([a, b]);
      expect.unreachable('different content under one version must be refused');
    } catch (e) {
      expect(e).toBeInstanceOf(ContractError);
      expect((e as ContractError).issues[0]).toMatchObject({ file: 'b.yaml', field: 'version' });
      expect((e as ContractError).message).toMatch(/already exists with different content \(in a\.yaml\)/);
    }
    const reg = ContractRegistry.fromContracts([a, parseContract(EXPLICIT, 'b.yaml'), parseContract(JSON_FORM, 'c.json')]);
    expect(reg.versions('shop')).toHaveLength(1);
    expect(reg.add(b)).toMatchObject({ field: 'version' });
    expect(reg.get('shop', '4')?.hash).toBe(a.hash);
  });

  it('loading a directory stops at an invalid file with every issue', () => {
    const dir = join(tmp, 'dir');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.yaml'), SHORTHAND);
    writeFileSync(join(dir, 'b.yaml'), SHORTHAND.replace('within: 10m', 'within: soon'));
    expect(() => loadContractDir(dir)).toThrow(/b\.yaml:\d+:\d+: phases\.main\.expect\[2\]\.within/);
  });

  it('compares versions numerically by dot-separated parts, else as text', () => {
    expect(compareContractVersions('10', '9')).toBeGreaterThan(0);
    expect(compareContractVersions('1.10', '1.9')).toBeGreaterThan(0);
    expect(compareContractVersions('2', '10')).toBeLessThan(0);
    expect(compareContractVersions('3', '3')).toBe(0);
    expect(compareContractVersions('b', 'a')).toBeGreaterThan(0);
    expect(compareContractVersions('v10', 'v9')).toBeLessThan(0); // not numeric: text order
  });

  it('newest is the highest non-retired version ("10" after "9"); resolve fills version and phase', () => {
    const v = (version: string, retired = false) => parseContract(SHORTHAND.replace('version: "4"', `version: "${version}"\nretired: ${retired}`), `${version}.yaml`);
    const reg = ContractRegistry.fromContracts([v('9'), v('10'), v('2'), v('11', true)]);
    expect(reg.newest('shop')?.version).toBe('10');
    expect(reg.versions('shop').map((c) => c.version)).toEqual(['2', '9', '10', '11']);
    expect(reg.resolve({ contract: 'shop' })).toMatchObject({ ok: true, pin: { contract: 'shop', version: '10', phase: 'main' } });
    expect(reg.resolve({ contract: 'shop', version: '11' })).toMatchObject({ ok: true, pin: { version: '11' } });
    expect(reg.resolve({ contract: 'shop', version: '12' }).ok).toBe(false);
    expect(reg.resolve({ contract: 'shop', phase: 'nope' }).ok).toBe(false);
    expect(reg.resolve({ contract: 'nope' }).ok).toBe(false);
    expect(ContractRegistry.fromContracts([v('1', true)]).resolve({ contract: 'shop' }).ok).toBe(false);
  });
});

describe('schema', () => {
  async function schemaOf(which: string): Promise<Record<string, unknown>> {
    const c = capture();
    expect(await main(['schema', which], c.io)).toBe(0);
    return JSON.parse(c.out());
  }

  it('`schema contract` prints a JSON Schema that accepts the explicit and JSON forms and refuses unknown fields', async () => {
    const s = await schemaOf('contract');
    expect(s.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(s.type).toBe('object');
    expect(s.required).toEqual(expect.arrayContaining(['contract', 'version', 'owner', 'agents', 'phases']));
    expect(s.additionalProperties).toBe(false);
    const validator = z.fromJSONSchema(s as never);
    expect(validator.safeParse(JSON.parse(JSON_FORM)).success).toBe(true);
    expect(validator.safeParse(parseYaml(EXPLICIT)).success).toBe(true);
    expect(validator.safeParse({ ...JSON.parse(JSON_FORM), prompt: 'x' }).success).toBe(false);
    expect(validator.safeParse({ ...JSON.parse(JSON_FORM), agents: 'o' }).success).toBe(false);
  });

  it('`schema receipt` prints a JSON Schema that accepts the drift fixture and refuses unknown fields', async () => {
    const s = await schemaOf('receipt');
    expect(s.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    const validator = z.fromJSONSchema(s as never);
    const lines = readFileSync(join(ROOT, 'receipts/drift.ndjson'), 'utf8').trim().split('\n');
    for (const l of lines) expect(validator.safeParse(JSON.parse(l)).success, l).toBe(true);
    const edge = JSON.parse(lines[1]);
    expect(validator.safeParse({ ...edge, prompt: 'hello' }).success).toBe(false);
    expect(validator.safeParse({ ...edge, kind: 'teleport' }).success).toBe(false);
    expect(validator.safeParse({ ...edge, type: 'outcome' }).success).toBe(false);
  });

  it('`schema` without a format prints the contract schema; an unknown format is a usage error (2)', async () => {
    const c = capture();
    expect(await main(['schema'], c.io)).toBe(0);
    expect(JSON.parse(c.out()).required).toContain('agents');
    expect(await main(['schema', 'nope'], capture().io)).toBe(2);
  });
});

describe('the pure contract hash', () => {
  it('sha256Hex equals node:crypto SHA-256 on empty, ASCII, multi-block and non-ASCII texts', async () => {
    const { createHash } = await import('node:crypto');
    const { sha256Hex } = await import('../src/core/sha256.js');
    const texts = ['', 'abc', 'a'.repeat(55), 'a'.repeat(56), 'a'.repeat(64), 'x'.repeat(1000), 'agents: [üñï, 東京, 🚀]\n'];
    for (let i = 0; i < 200; i++) texts.push(String.fromCharCode(...Array.from({ length: i * 3 }, (_, k) => 32 + ((k * 7919 + i) % 2000))));
    for (const t of texts) expect(sha256Hex(t)).toBe(createHash('sha256').update(t).digest('hex'));
  });
});
