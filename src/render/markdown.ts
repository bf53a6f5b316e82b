/**
 * Markdown for a CI summary ($GITHUB_STEP_SUMMARY, a pull-request comment, a GitLab artifact): a title, a summary
 * table, then sections, each with text lines and optionally Mermaid graphs (GitHub and GitLab draw ```mermaid blocks).
 */

export interface MarkdownSection {
  heading: string;
  /** Paragraph lines (Markdown, already escaped where it matters). */
  text?: string[];
  /** Mermaid sources, each drawn in its own block. */
  mermaid?: string[];
}

export interface MarkdownDoc {
  title: string;
  lead?: string[];
  table?: { header: string[]; rows: string[][] };
  sections: MarkdownSection[];
}

/** U+2060 WORD JOINER: invisible, and it breaks what GitHub would otherwise turn into a mention or a link. */
const JOIN = '\u2060';

/**
 * Text for a table cell, a heading or a line: no pipes, no line breaks, no raw HTML, no Markdown syntax (code spans,
 * emphasis, links, strike-through), and no `@team` mention or `www.` / `https://` / e-mail autolink (a word joiner
 * after the `@`, inside `www.` and after the scheme's `:`). User-controlled strings (run ids, contract versions,
 * messages) go through it.
 */
export const mdCell = (s: string) =>
  s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[\\`*[\]~|]/g, (c) => `\\${c}`)
    .replace(/(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])/g, '\\_')
    .replace(/@/g, `@${JOIN}`)
    .replace(/\b(www)\./gi, `$1${JOIN}.`)
    .replace(/:\/\//g, `:${JOIN}//`)
    .replace(/\r\n|\r|\n/g, '<br>');

/**
 * Inline code whatever the text holds: a fence of more backticks than the longest run in it (padded when it starts or
 * ends with one), line breaks as spaces. Nothing in a code span is a mention, a link or HTML.
 */
export const mdCode = (s: string) => {
  const text = s.replace(/\r\n|\r|\n/g, ' ');
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((r) => r.length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
};

export function markdownTable(header: string[], rows: string[][]): string[] {
  return [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

export function toMarkdown(doc: MarkdownDoc): string {
  // Titles and headings are text (a run id, a contract version): escaped like a cell.
  const out: string[] = [`## ${mdCell(doc.title)}`, ''];
  if (doc.lead?.length) out.push(...doc.lead, '');
  if (doc.table) out.push(...markdownTable(doc.table.header, doc.table.rows), '');
  for (const s of doc.sections) {
    out.push(`### ${mdCell(s.heading)}`, '');
    if (s.text?.length) out.push(...s.text, '');
    for (const m of s.mermaid ?? []) out.push('```mermaid', m.trimEnd(), '```', '');
  }
  return out.join('\n');
}
