/**
 * Third-round attacks on CI outputs (issue 47, item 5): user-controlled strings (a contract's version, a run id, an
 * expectations file) reach Markdown summaries and GitHub workflow commands escaped for their format. The Markdown is
 * rendered by a real GFM renderer (marked, autolinks on); Mermaid blocks by mermaid's own parser; workflow commands are
 * read back line by line as the runner reads stdout and stderr.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { marked } from 'marked';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { mermaidBlocks, parseMermaid } from './helpers/ci.js';
import { ROOT, tempDir } from './helpers/server.js';

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

/** The HTML GitHub-flavoured Markdown makes of it: the elements found, and the text with tags removed. */
function rendered(md: string): { tags: string[]; text: string } {
  const html = marked.parse(md, { gfm: true, async: false }) as string;
  const tags = [...html.matchAll(/<([a-zA-Z][a-zA-Z0-9-]*)/g)].map((m) => m[1].toLowerCase());
  // Text outside code: GitHub makes no mention or link inside code (nor of a Mermaid block, which it draws).
  return { tags, text: html.replace(/<pre>[\s\S]*?<\/pre>|<code>[\s\S]*?<\/code>/g, '').replace(/<[^>]*>/g, '') };
}
/** Elements the summaries are made of; anything else came from the input. */
const OURS = new Set(['h2', 'h3', 'p', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'pre', 'code', 'strong', 'em', 'br', 'ul', 'li']);
/** A GitHub mention: `@` then a name character (a word joiner in between breaks it). */
const MENTION = /(^|[^\w`])@[A-Za-z0-9]/;

const V1 = `contract: shop\nversion: "<img src=x onerror=alert(1)>"\nowner: o\nagents: [o, a]\nallow:\n  - o -> a : delegate\nphases:\n  main:\n    expect: []\n`;
const V2 = `contract: shop\nversion: "2\\r\\n\`\`\`\\n<b>raw</b> www.evil.example [x](https://evil.example) | col"\nowner: o\nagents: [o, a, b]\nallow:\n  - o -> a : delegate\n  - a -> b : delegate\nphases:\n  main:\n    expect: []\n`;

describe('CI outputs escape what users control', () => {
  it('contract diff --format markdown: a version is text, never HTML, a link, a mention or the end of a Mermaid block', async () => {
    const dir = join(tempDir('ta-esc-'), 'contracts');
    mkdirSync(dir);
    writeFileSync(join(dir, 'shop-1.yaml'), V1);
    writeFileSync(join(dir, 'shop-2.yaml'), V2);
    const v2 = '2\r\n```\n<b>raw</b> www.evil.example [x](https://evil.example) | col';
    const r = await cli('contract', 'diff', 'shop@<img src=x onerror=alert(1)>', `shop@${v2}`, '--contracts', dir, '--format', 'markdown');
    expect(r.code, r.stderr).toBe(1);
    const { tags, text } = rendered(r.stdout);
    expect(tags.filter((t) => !OURS.has(t))).toEqual([]); // no img, b, a (no autolink, no link)
    expect(text).not.toMatch(MENTION);
    const blocks = mermaidBlocks(r.stdout);
    expect(blocks).toHaveLength(2);
    for (const b of blocks) expect((await parseMermaid(b)).diagramType).toMatch(/^flowchart/);
  });

  it('replay --format markdown: a run id is never a bare @team mention or a www. autolink', async () => {
    const drift = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8');
    const dir = tempDir('ta-esc-run-');
    const file = join(dir, 'runs.ndjson');
    writeFileSync(file, drift.replaceAll('"drift-direct-route"', '"@team"').replaceAll('"drift-wait"', '"www.evil.example"'));
    const r = await cli('replay', file, '--contracts', join(ROOT, 'contracts'), '--format', 'markdown', '--fail-on', 'none');
    expect(r.code, r.stderr).toBe(0);
    const { tags, text } = rendered(r.stdout);
    expect(tags.filter((t) => !OURS.has(t))).toEqual([]);
    expect(text).not.toMatch(MENTION);
    expect(text).not.toContain('www.evil');
    // Still readable: the ids are there, with an invisible joiner.
    expect(text).toContain('@\u2060team');
  });

  it('replay --expect X --format github: the expectations file cannot inject a workflow command (stdout or stderr)', async () => {
    const dir = tempDir('ta-esc-expect-');
    const receipts = join(ROOT, 'receipts', 'drift.ndjson');
    const commandLines = (s: string) => s.split(/\r\n|\r|\n/).filter((l) => l.trimStart().startsWith('::'));
    for (const expectations of [{ 'drift-complete': 'healthy', 'x\n::error::pwned': 'healthy' }, { 'drift-complete': { verdict: 'healthy', codes: ['a\n::add-mask::x'] } }, { 'drift-complete': 'healthy\n::error::pwned' }]) {
      const file = join(dir, 'expected.json');
      writeFileSync(file, JSON.stringify(expectations));
      const r = await cli('replay', receipts, '--contracts', join(ROOT, 'contracts'), '--expect', file, '--format', 'github');
      expect(r.code).toBe(2);
      expect(commandLines(r.stdout)).toEqual([]);
      expect(commandLines(r.stderr)).toEqual([]);
    }
  });
});
