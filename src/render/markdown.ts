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

/** Text for a table cell: no pipes, no line breaks, no raw HTML. */
export const mdCell = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\|/g, '\\|').replace(/\r?\n/g, '<br>');

/** Inline code that survives backticks in the text. */
export const mdCode = (s: string) => (s.includes('`') ? `\`\` ${s} \`\`` : `\`${s}\``);

export function markdownTable(header: string[], rows: string[][]): string[] {
  return [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

export function toMarkdown(doc: MarkdownDoc): string {
  const out: string[] = [`## ${doc.title}`, ''];
  if (doc.lead?.length) out.push(...doc.lead, '');
  if (doc.table) out.push(...markdownTable(doc.table.header, doc.table.rows), '');
  for (const s of doc.sections) {
    out.push(`### ${s.heading}`, '');
    if (s.text?.length) out.push(...s.text, '');
    for (const m of s.mermaid ?? []) out.push('```mermaid', m.trimEnd(), '```', '');
  }
  return out.join('\n');
}
