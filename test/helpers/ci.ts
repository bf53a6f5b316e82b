/**
 * Readers of the CI formats, for tests: the JUnit XML checked by libxml2's xmllint against test/fixtures/junit/junit.xsd,
 * GitHub workflow commands parsed back by the runner's rules, and Mermaid blocks parsed by mermaid's own parser
 * (jsdom supplies the DOM its sanitiser needs in Node; nothing is drawn).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tempDir } from './server.js';

export const JUNIT_XSD = join(ROOT, 'test', 'fixtures', 'junit', 'junit.xsd');

/** xmllint --schema: status 0 when valid; stderr says why not. */
export function xmllintSchema(xml: string): { ok: boolean; stderr: string } {
  const file = join(tempDir('ta-junit-'), 'report.xml');
  writeFileSync(file, xml);
  const r = spawnSync('xmllint', ['--noout', '--schema', JUNIT_XSD, file], { encoding: 'utf8' });
  if (r.error) throw r.error;
  return { ok: r.status === 0, stderr: r.stderr };
}

/** An XPath expression evaluated by xmllint (e.g. count(//testcase/failure)). */
export function xpath(xml: string, expr: string): string {
  const file = join(tempDir('ta-junit-'), 'report.xml');
  writeFileSync(file, xml);
  const r = spawnSync('xmllint', ['--xpath', expr, file], { encoding: 'utf8' });
  if (r.error) throw r.error;
  return r.stdout.trim();
}

export interface WorkflowCommand {
  command: string;
  properties: Record<string, string>;
  message: string;
}

const unescapeData = (s: string) => s.replace(/%0D/g, '\r').replace(/%0A/g, '\n').replace(/%25/g, '%');
const unescapeProperty = (s: string) => s.replace(/%0D/g, '\r').replace(/%0A/g, '\n').replace(/%3A/g, ':').replace(/%2C/g, ',').replace(/%25/g, '%');

/** `::command k=v,k=v::message` lines back into their parts; a line that is not a command throws. */
export function parseWorkflowCommands(text: string): WorkflowCommand[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((line) => {
      const m = /^::([a-z-]+)(?: ([^:]*))?::(.*)$/.exec(line);
      if (!m) throw new Error(`not a workflow command: ${JSON.stringify(line)}`);
      const properties: Record<string, string> = {};
      for (const kv of (m[2] ?? '').split(',').filter(Boolean)) {
        const i = kv.indexOf('=');
        if (i < 1) throw new Error(`bad property ${JSON.stringify(kv)} in ${JSON.stringify(line)}`);
        properties[kv.slice(0, i)] = unescapeProperty(kv.slice(i + 1));
      }
      return { command: m[1], properties, message: unescapeData(m[3]) };
    });
}

/** The ```mermaid blocks of a Markdown text. */
export const mermaidBlocks = (md: string) => [...md.matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1]);

let mermaidParse: ((text: string) => Promise<unknown>) | null = null;

/** mermaid.parse from the mermaid package; rejects on a syntax error. */
export async function parseMermaid(text: string): Promise<{ diagramType: string }> {
  if (!mermaidParse) {
    const { JSDOM } = await import('jsdom');
    const g = globalThis as unknown as { window?: unknown };
    g.window ??= new JSDOM('').window;
    const mermaid = (await import('mermaid')).default;
    mermaidParse = (t) => mermaid.parse(t);
  }
  return (await mermaidParse(text)) as { diagramType: string };
}
