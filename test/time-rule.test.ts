/**
 * One time rule, enforced (semantics 2a "Time"; issue 28): every instant the product reads from text goes through
 * the one nanosecond time module, src/core/time.ts (instantTextError, parseInstant, millisOf). Anywhere else in src/
 * (display-only browser code in src/ui/client/ excepted), `Date.parse(...)` and `new Date(<text>)` are refused:
 * they read milliseconds only, and run an impossible date such as 2026-02-30 on into March. `new Date(<number>)`
 * (formatting a millisecond count) and `new Date()` are fine. The argument's type comes from the TypeScript
 * checker, so a string held in a variable is caught too.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/server.js';

/** Files the rule does not apply to: the time module itself and display-only browser code. */
const EXEMPT = (file: string): boolean => file === 'src/core/time.ts' || file.startsWith('src/ui/client/');

/** Is the type text (or may it be: any, unknown, a union with a string member)? */
function textLike(t: ts.Type): boolean {
  if (t.flags & (ts.TypeFlags.StringLike | ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return true;
  if (t.isUnion()) return t.types.some(textLike);
  return false;
}

/** `file:line: what` for each Date.parse call and each `new Date(<text>)` in the program's files under `root`/src. */
function timeRuleViolations(program: ts.Program, root: string): string[] {
  const checker = program.getTypeChecker();
  const out: string[] = [];
  for (const sf of program.getSourceFiles()) {
    const file = relative(root, sf.fileName).split(sep).join('/');
    if (!file.startsWith('src/') || sf.isDeclarationFile || EXEMPT(file)) continue;
    const visit = (node: ts.Node): void => {
      const where = () => `${file}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`;
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'parse' && ts.isIdentifier(node.expression.expression) && node.expression.expression.text === 'Date') {
        out.push(`${where()}: Date.parse reads milliseconds only; use src/core/time.ts (parseInstant, millisOf, instantTextError)`);
      }
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && node.arguments?.length === 1 && textLike(checker.getTypeAtLocation(node.arguments[0]))) {
        out.push(`${where()}: new Date(<text>) reads milliseconds only; use src/core/time.ts (parseInstant, millisOf, instantTextError)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

function programOf(root: string, files: string[]): ts.Program {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile).config;
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  return ts.createProgram(files, { ...options, noEmit: true, rootDir: root });
}

describe('one time rule', () => {
  it('src/ reads no instant from text outside the time module (no Date.parse, no new Date(<text>))', () => {
    const src = ts.sys.readDirectory(join(ROOT, 'src'), ['.ts']).filter((f) => !f.endsWith('.d.ts'));
    expect(src.length).toBeGreaterThan(100);
    expect(timeRuleViolations(programOf(ROOT, src), ROOT)).toEqual([]);
  }, 180_000); // the type checker over all of src/ (about 20 s on a busy machine)

  it('the check finds Date.parse and new Date(<text>), even through a variable, and lets new Date(<number>) be', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ta-time-rule-'));
    try {
      const file = join(dir, 'src', 'cli', 'bad.ts');
      ts.sys.createDirectory(join(dir, 'src'));
      ts.sys.createDirectory(join(dir, 'src', 'cli'));
      writeFileSync(
        file,
        [
          "export const a = Date.parse('2026-02-30T00:00:00Z');",
          "const text: string = '2026-01-01T00:00:00Z';",
          'export const b = new Date(text);',
          'export const c = new Date(1_700_000_000_000).toISOString();',
          'export const d = new Date();',
          'export const e = (x: string | number) => new Date(x);',
          '',
        ].join('\n'),
      );
      const found = timeRuleViolations(programOf(dir, [file]), dir);
      expect(found.map((v) => v.split(': ')[0])).toEqual(['src/cli/bad.ts:1', 'src/cli/bad.ts:3', 'src/cli/bad.ts:6']);
      expect(found[0]).toMatch(/Date\.parse reads milliseconds only; use src\/core\/time\.ts/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
