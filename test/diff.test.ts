/**
 * `topology-audit diff`: for every drift case (and a few more shapes), the Mermaid output shows every finding's
 * edge with its marking, as the classifier (replay) found them; DOT and SVG outputs are well-formed.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffCommand } from '../src/cli/diff.js';
import { replayReceipts } from '../src/cli/replay.js';
import { parseEdge, parseReceiptFile, type Finding, type Receipt, type RunVerdict } from '../src/core/index.js';
import { ROOT, startServerProcess, type ServerProcess } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import type { LooseReceipt } from './helpers/receipt.js';

const CONTRACTS = join(ROOT, 'contracts');
const DRIFT = join(ROOT, 'receipts', 'drift.ndjson');
const registry = loadContractDir(CONTRACTS);
const drift = parseReceiptFile(readFileSync(DRIFT, 'utf8'), DRIFT);
const expected: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8'));

async function diff(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await diffCommand(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

// ---------------------------------------------------------------------------------------------
// Readers for the three formats (written here, independent of the renderers).
// ---------------------------------------------------------------------------------------------

interface MermaidEdge {
  from: string;
  to: string;
  kind: string;
  arrow: string;
  label: string;
}

function readMermaid(text: string): { nodes: Map<string, string>; edges: MermaidEdge[]; comments: string[] } {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  expect(lines[0]).toBe('flowchart LR');
  const nodes = new Map<string, string>();
  const edges: MermaidEdge[] = [];
  const comments: string[] = [];
  for (const line of lines.slice(1)) {
    let m: RegExpExecArray | null;
    if ((m = /^ {2}%% (.*)$/.exec(line))) comments.push(m[1]);
    else if ((m = /^ {2}(n\d+)\["([^"]*)"\](?::::\w+)?$/.exec(line))) nodes.set(m[1], m[2]);
    else if ((m = /^ {2}(n\d+) (-->|-\.->|==>)\|"([^"]*)"\| (n\d+)$/.exec(line))) {
      const [from, to] = [nodes.get(m[1]), nodes.get(m[4])];
      expect(from, `node ${m[1]} declared before use`).toBeDefined();
      expect(to, `node ${m[4]} declared before use`).toBeDefined();
      const agent = (label: string) => label.split('<br/>')[0].replace(/ \(owner\)$/, '');
      const parts = m[3].split(' · ');
      edges.push({ from: agent(from!), to: agent(to!), kind: parts[1], arrow: m[2], label: m[3] });
    } else if (/^ {2}linkStyle \d+ [\w-]+:[^\s,]+(,[\w-]+:[^,]+)*$/.test(line)) continue;
    else if (/^ {2}classDef \w+ /.test(line)) continue;
    else throw new Error(`not a Mermaid flowchart line: ${line}`);
  }
  return { nodes, edges, comments };
}

/** A small DOT reader: digraph, attribute statements, node and edge statements with attribute lists. */
function readDot(text: string): { nodes: Map<string, Record<string, string>>; edges: { from: string; to: string; attrs: Record<string, string> }[] } {
  const tokens: string[] = [];
  const re = /\s*(?:("(?:[^"\\]|\\.)*")|(->|[{}[\];,=])|([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?))/y;
  let i = 0;
  while (i < text.length) {
    if (/^\s*$/.test(text.slice(i))) break;
    re.lastIndex = i;
    const m = re.exec(text);
    if (!m) throw new Error(`DOT: unexpected text at ${i}: ${text.slice(i, i + 40)}`);
    tokens.push(m[1] ?? m[2] ?? m[3]);
    i = re.lastIndex;
  }
  let p = 0;
  const next = () => tokens[p++];
  const peek = () => tokens[p];
  const expectTok = (t: string) => {
    const got = next();
    if (got !== t) throw new Error(`DOT: expected ${t}, got ${got} at token ${p}`);
  };
  const id = () => {
    const t = next();
    if (!t || /^(->|[{}[\];,=])$/.test(t)) throw new Error(`DOT: expected an id, got ${t}`);
    return t.startsWith('"') ? JSON.parse(t.replace(/\\(?!["\\n])/g, '\\\\')) : t;
  };
  const attrs = () => {
    const out: Record<string, string> = {};
    if (peek() !== '[') return out;
    next();
    while (peek() !== ']') {
      const k = id();
      expectTok('=');
      if (k in out) throw new Error(`DOT: attribute ${k} given twice`);
      out[k] = id();
      if (peek() === ',' || peek() === ';') next();
    }
    expectTok(']');
    return out;
  };
  expectTok('digraph');
  if (peek() !== '{') id();
  expectTok('{');
  const nodes = new Map<string, Record<string, string>>();
  const edges: { from: string; to: string; attrs: Record<string, string> }[] = [];
  while (peek() !== '}') {
    if (peek() === undefined) throw new Error('DOT: unclosed {');
    const first = id();
    if (['graph', 'node', 'edge'].includes(first)) attrs();
    else if (peek() === '->') {
      next();
      const to = id();
      edges.push({ from: first, to, attrs: attrs() });
    } else nodes.set(first, attrs());
    if (peek() === ';') next();
  }
  expectTok('}');
  if (p !== tokens.length) throw new Error('DOT: text after the graph');
  for (const e of edges) {
    expect(nodes.has(e.from), e.from).toBe(true);
    expect(nodes.has(e.to), e.to).toBe(true);
  }
  return { nodes, edges };
}

/** Strict XML well-formedness for the SVG: one root, balanced tags, quoted unique attributes, valid entities. */
function readXml(text: string): { root: string; elements: { name: string; attrs: Record<string, string>; text: string }[] } {
  const entity = /&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/;
  let i = 0;
  const decl = /^<\?xml version="1\.0" encoding="UTF-8"\?>\n?/.exec(text);
  if (decl) i = decl[0].length;
  const stack: { name: string; attrs: Record<string, string>; text: string }[] = [];
  const elements: { name: string; attrs: Record<string, string>; text: string }[] = [];
  let root = '';
  let closedRoot = false;
  while (i < text.length) {
    const lt = text.indexOf('<', i);
    const chunk = text.slice(i, lt === -1 ? text.length : lt);
    if (entity.test(chunk)) throw new Error(`XML: bad entity in text near ${i}`);
    if (!stack.length && chunk.trim() !== '') throw new Error(`XML: text outside the root near ${i}`);
    for (const e of stack) e.text += chunk;
    if (lt === -1) break;
    const rest = text.slice(lt);
    let m: RegExpExecArray | null;
    if ((m = /^<\/([A-Za-z][\w:.-]*)\s*>/.exec(rest))) {
      const open = stack.pop();
      if (!open || open.name !== m[1]) throw new Error(`XML: </${m[1]}> closes <${open?.name}>`);
      if (!stack.length) closedRoot = true;
    } else if ((m = /^<([A-Za-z][\w:.-]*)((?:\s+[A-Za-z_:][\w:.-]*="[^"<]*")*)\s*(\/?)>/.exec(rest))) {
      if (closedRoot || (!stack.length && root)) throw new Error('XML: more than one root element');
      if (!root) root = m[1];
      const attrs: Record<string, string> = {};
      for (const a of m[2].matchAll(/([A-Za-z_:][\w:.-]*)="([^"]*)"/g)) {
        if (a[1] in attrs) throw new Error(`XML: attribute ${a[1]} twice on <${m[1]}>`);
        if (entity.test(a[2])) throw new Error(`XML: bad entity in ${a[1]} of <${m[1]}>`);
        attrs[a[1]] = a[2].replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
      }
      const el = { name: m[1], attrs, text: '' };
      elements.push(el);
      if (!m[3]) stack.push(el);
      else if (!stack.length) closedRoot = true;
    } else throw new Error(`XML: malformed markup at ${lt}: ${rest.slice(0, 60)}`);
    i = lt + m[0].length;
  }
  if (stack.length) throw new Error(`XML: <${stack[stack.length - 1].name}> never closed`);
  return { root, elements };
}

// ---------------------------------------------------------------------------------------------
// What each finding's edge must say (independent of the renderer's code).
// ---------------------------------------------------------------------------------------------

function allowMax(v: RunVerdict, key: string): number {
  const c = registry.get(v.pin!.contract, v.pin!.version)!;
  return c.allow.find((r) => r.key === key)!.max;
}

const MARKS: Record<string, (e: MermaidEdge, f: Finding, v: RunVerdict) => void> = {
  forbidden_edge: (e) => {
    expect(e.label).toMatch(/^forbidden/);
    expect(e.arrow).toBe('==>');
  },
  multiplicity: (e, f, v) => {
    expect(e.label).toContain(`×${f.events.length} of max ${allowMax(v, f.edge!)}`);
    expect(e.arrow).toBe('==>');
  },
  waiting: (e, f) => {
    expect(e.label).toMatch(/waiting/);
    expect(e.label).toContain(`on ${f.agents[0]}`);
    expect(e.label).toMatch(/\d+(ms|s|m|h|d)\S* left$/);
  },
  declared_wait: (e, f) => {
    expect(e.label).toMatch(/waiting/);
    expect(e.label).toContain(`on ${f.agents[0]}`);
    expect(e.label).toMatch(/ left$/);
  },
  missed_deadline: (e) => {
    expect(e.label).toMatch(/^absent, late/);
    expect(e.label).toMatch(/deadline passed \S+ ago$/);
  },
  missed_wait: (e) => {
    expect(e.label).toMatch(/^absent, late/);
    expect(e.label).toMatch(/deadline passed/);
  },
  late_edge: (e) => expect(e.label).toMatch(/^observed late/),
  late_wait: (e) => expect(e.label).toMatch(/^observed late/),
  pending: (e) => expect(e.label).toMatch(/^absent/),
  false_complete: (e) => expect(e.label).toMatch(/^absent/),
};

function checkMermaid(out: string, v: RunVerdict, receipts: Receipt[]): MermaidEdge[] {
  const { nodes, edges, comments } = readMermaid(out);
  expect(comments.join(' ')).toContain(`${v.run}: ${v.verdict} (naive rule: ${v.naive})`);
  const find = (from: string, to: string, kind: string) => edges.filter((e) => e.from === from && e.to === to && e.kind === kind);
  // Every finding's edge is drawn once, with its marking.
  for (const f of v.findings) {
    if (f.code === 'unknown_agent') {
      for (const a of f.agents) expect([...nodes.values()], a).toContain(`${a}<br/>unknown agent`);
      continue;
    }
    if (!f.edge) continue;
    const mark = MARKS[f.code];
    expect(mark, `a marking is defined for finding code ${f.code}`).toBeDefined();
    const spec = parseEdge(f.edge);
    const drawn = spec.to.flatMap((t) => find(spec.from, t, spec.kind));
    expect(drawn, `${v.run}: ${f.edge}`).toHaveLength(spec.to.length);
    const marked = f.code === 'multiplicity' ? drawn.filter((e) => receipts.some((r) => r.type === 'edge' && r.from === e.from && r.to === e.to)) : drawn;
    expect(marked.length).toBeGreaterThan(0);
    for (const e of marked) mark(e, f, v);
  }
  // Every observed edge is drawn; an edge with no finding is never marked as a problem.
  for (const r of receipts.filter((x) => x.type === 'edge')) expect(find(r.from!, r.to!, r.kind!), `${r.from} -> ${r.to}`).toHaveLength(1);
  const named = new Set(v.findings.flatMap((f) => (f.edge ? parseEdge(f.edge).to.map((t) => `${parseEdge(f.edge!).from}>${t}>${parseEdge(f.edge!).kind}`) : [])));
  for (const e of edges) if (!named.has(`${e.from}>${e.to}>${e.kind}`)) expect(e.label, `${e.from} -> ${e.to}`).not.toMatch(/forbidden|of max|waiting|late/);
  return edges;
}

describe('diff --format mermaid, offline from receipts/drift.ndjson', () => {
  const { verdicts } = replayReceipts(drift, registry, {});

  it('covers the nine drift cases', () => {
    expect(verdicts.map((v) => v.run).sort()).toEqual(Object.keys(expected).sort());
  });

  for (const v of verdicts) {
    it(`${v.run}: every finding's edge appears with its marking`, async () => {
      const { code, out, err } = await diff([DRIFT, '--contracts', CONTRACTS, '--run', v.run, '--format', 'mermaid']);
      expect(code, err).toBe(0);
      expect(v.verdict).toBe(expected[v.run]);
      const edges = checkMermaid(out, v, drift.filter((r) => r.run === v.run));
      if (v.verdict === 'healthy') expect(edges.filter((e) => /absent|forbidden|late|waiting|of max/.test(e.label))).toEqual([]);
    });
  }

  it('draws late edges, declared waits (kept and missed) and a bounded choice over its max', async () => {
    const t = (m: number) => new Date(Date.parse('2026-02-01T09:00:00Z') + m * 60_000).toISOString();
    const extra: Receipt[] = [
      // late: the verifier returns 12 minutes after the handoff (within 10m).
      { run: 'x-late', event: 's', type: 'run.start', at: t(0), contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'x-late', event: 'e1', type: 'edge', at: t(1), from: 'orchestrator', to: 'researcher', kind: 'delegate' },
      { run: 'x-late', event: 'e2', type: 'edge', at: t(2), from: 'researcher', to: 'verifier', kind: 'handoff' },
      { run: 'x-late', event: 'e3', type: 'edge', at: t(14), from: 'verifier', to: 'orchestrator', kind: 'return' },
      // a declared wait still ahead, on an edge outside the plan
      { run: 'x-wait', event: 's', type: 'run.start', at: t(0), contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'x-wait', event: 'w', type: 'wait', at: t(1), from: 'orchestrator', on: 'publisher', edge: 'publisher -> orchestrator : return', deadline: t(60) },
      // a declared wait whose deadline passed
      { run: 'x-missed', event: 's', type: 'run.start', at: t(0), contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'x-missed', event: 'w', type: 'wait', at: t(1), from: 'orchestrator', on: 'publisher', edge: 'publisher -> orchestrator : return', deadline: t(5) },
      // a bounded choice used three times with max 2
      { run: 'x-choice', event: 's', type: 'run.start', at: t(0), contract: 'research-publish', version: '3', phase: 'research' },
      { run: 'x-choice', event: 'c1', type: 'edge', at: t(1), from: 'orchestrator', to: 'web-search', kind: 'delegate' },
      { run: 'x-choice', event: 'c2', type: 'edge', at: t(2), from: 'orchestrator', to: 'web-search', kind: 'delegate' },
      { run: 'x-choice', event: 'c3', type: 'edge', at: t(3), from: 'orchestrator', to: 'doc-search', kind: 'delegate' },
    ];
    const file = join(mkdtempSync(join(tmpdir(), 'ta-diff-')), 'extra.ndjson');
    writeFileSync(file, extra.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const now = t(20);
    const { verdicts: vs } = replayReceipts(extra, registry, { now: Date.parse(now) });
    const codes = new Set(vs.flatMap((v) => v.findings.map((f) => f.code)));
    for (const c of ['late_edge', 'declared_wait', 'missed_wait', 'multiplicity']) expect(codes, c).toContain(c);
    for (const v of vs) {
      const { code, out, err } = await diff([file, '--contracts', CONTRACTS, '--run', v.run, '--now', now]);
      expect(code, err).toBe(0);
      checkMermaid(out, v, extra.filter((r) => r.run === v.run));
    }
    const choice = readMermaid((await diff([file, '--contracts', CONTRACTS, '--run', 'x-choice', '--now', now])).out).edges;
    expect(choice.find((e) => e.to === 'web-search')!.label).toContain('×3 of max 2');
    expect(choice.find((e) => e.to === 'doc-search')!.label).toContain('×3 of max 2');
  });
});

describe('diff --format dot and svg are well-formed', () => {
  const { verdicts } = replayReceipts(drift, registry, {});

  it('dot: a digraph with every agent and edge, labels and styles', async () => {
    for (const v of verdicts) {
      const { code, out } = await diff([DRIFT, '--contracts', CONTRACTS, '--run', v.run, '--format', 'dot']);
      expect(code).toBe(0);
      const g = readDot(out);
      const c = registry.get(v.pin!.contract, v.pin!.version)!;
      for (const a of c.agents) expect(g.nodes.has(a), a).toBe(true);
      for (const e of g.edges) {
        expect(e.attrs.label, `${e.from} -> ${e.to}`).toMatch(/\n(delegate|handoff|return)/);
        expect(e.attrs.style).toMatch(/^(solid|dashed|dotted|bold)$/);
        expect(e.attrs.color).toMatch(/^#[0-9a-f]{6}$/);
      }
      for (const f of v.findings.filter((x) => x.code === 'forbidden_edge')) {
        const spec = parseEdge(f.edge!);
        const e = g.edges.find((x) => x.from === spec.from && x.to === spec.to[0])!;
        expect(e.attrs.label).toMatch(/^forbidden/);
        expect(e.attrs.style).toBe('bold');
      }
    }
  });

  it('svg: standalone, well-formed XML with an accessible edge group per edge', async () => {
    for (const v of verdicts) {
      const { code, out } = await diff([DRIFT, '--contracts', CONTRACTS, '--run', v.run, '--format', 'svg']);
      expect(code).toBe(0);
      expect(out.startsWith('<?xml version="1.0" encoding="UTF-8"?>')).toBe(true);
      const { root, elements } = readXml(out);
      expect(root).toBe('svg');
      const svg = elements[0];
      expect(svg.attrs.xmlns).toBe('http://www.w3.org/2000/svg');
      expect(Number(svg.attrs.width)).toBeGreaterThan(100);
      const ids = elements.filter((e) => e.attrs.id).map((e) => e.attrs.id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const e of elements) for (const ref of Object.values(e.attrs).flatMap((a) => [...a.matchAll(/url\(#([^)]+)\)/g)].map((m) => m[1]))) expect(ids).toContain(ref);
      const groups = elements.filter((e) => e.name === 'g' && e.attrs.class?.startsWith('edge '));
      for (const r of drift) {
        if (r.run !== v.run || r.type !== 'edge') continue;
        const g = groups.find((x) => x.attrs['data-edge'] === `${r.from} -> ${r.to} : ${r.kind}`);
        expect(g, `${v.run} ${r.event}`).toBeDefined();
        expect(g!.attrs['aria-label']).toContain(`${r.from} to ${r.to}`);
        expect(g!.attrs.tabindex).toBe('0');
      }
      for (const f of v.findings.filter((x) => x.code === 'forbidden_edge')) {
        const g = groups.find((x) => x.attrs['data-edge'] === f.edge)!;
        expect(g.attrs['data-states'].split(' ')).toContain('forbidden');
        expect(g.text).toContain('forbidden');
      }
    }
  });
});

describe('diff from a server', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    srv = await startServerProcess();
    const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
    const delta = Date.now() - 5000 - latest;
    const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
    const body = drift.map((r: LooseReceipt) => JSON.stringify({ ...r, run: `srv-${r.run}`, at: move(r.at), ...(r.deadline ? { deadline: move(r.deadline) } : {}) })).join('\n');
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    expect((await res.json()).accepted).toBe(drift.length);
  });
  afterAll(async () => {
    if (srv) expect(await srv.stop()).toBe(0);
  });

  it('draws the server\'s verdict, with the contract from --contracts or from the server', async () => {
    for (const args of [['--contracts', CONTRACTS], []]) {
      const { code, out, err } = await diff(['srv-drift-direct-route', '--server', srv.api, '--format', 'mermaid', ...args]);
      expect(code, err).toBe(0);
      const api = await (await fetch(`${srv.api}/api/v1/runs/srv-drift-direct-route`)).json();
      checkMermaid(out, { ...api, nextChangeAt: null }, api.receipts);
    }
    const wait = await diff(['srv-drift-wait', '--server', srv.api]);
    expect(wait.code).toBe(0);
    expect(readMermaid(wait.out).edges.find((e) => e.from === 'verifier')!.label).toMatch(/waiting · return · on verifier · \d+m\S* left/);
  });

  it('answers 2 for an unknown run or an unreachable server', async () => {
    const unknown = await diff(['no-such-run', '--server', srv.api]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('no-such-run');
    const down = await diff(['x', '--server', 'http://127.0.0.1:9']);
    expect(down.code).toBe(2);
    expect(down.err).toContain('unreachable');
  });
});

describe('diff usage', () => {
  it('refuses a file of several runs without --run, an unknown run, a bad format and a missing --contracts', async () => {
    await expect(diff([DRIFT, '--contracts', CONTRACTS])).rejects.toThrow(/holds 9 runs; name one with --run/);
    await expect(diff([DRIFT, '--contracts', CONTRACTS, '--run', 'nope'])).rejects.toThrow(/no receipts for run "nope"/);
    await expect(diff([DRIFT, '--contracts', CONTRACTS, '--run', 'drift-late', '--format', 'png'])).rejects.toThrow(/--format must be one of/);
    await expect(diff([DRIFT, '--run', 'drift-late'])).rejects.toThrow(/--contracts DIR is required/);
    await expect(diff([DRIFT, '--contracts', CONTRACTS, '--run', 'drift-late', '--now', 'yesterday'])).rejects.toThrow(/RFC 3339/);
  });

  it('--now moves the deadline countdown and the verdict with it', async () => {
    const early = await diff([DRIFT, '--contracts', CONTRACTS, '--run', 'drift-late', '--now', '2026-01-15T10:05:00Z']);
    expect(readMermaid(early.out).comments[0]).toContain('drift-late: waiting');
    expect(readMermaid(early.out).edges.find((e) => e.from === 'verifier')!.label).toContain('6m left');
    const late = await diff([DRIFT, '--contracts', CONTRACTS, '--run', 'drift-late', '--now', '2026-01-15T10:20:00Z']);
    expect(readMermaid(late.out).comments[0]).toContain('drift-late: incomplete');
    expect(readMermaid(late.out).edges.find((e) => e.from === 'verifier')!.label).toContain('deadline passed 9m ago');
  });
});
