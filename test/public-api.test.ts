/**
 * The library's public API (src/index.ts, the package's "." export) is an explicit list: these names and no more.
 * Loaded through the package's own name in a child process, as a user's `import 'topology-audit'` is, from the build.
 * The emitter depends on the shared receipt package, not on the server package.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/server.js';

const PUBLIC_NAMES = [
  // the verdict
  'classify', 'groupByRun', 'VERDICTS', 'PRECEDENCE', 'verdictJson', 'displayMessage',
  // formats
  'parseReceiptFile', 'parseReceiptLine', 'parseNdjson', 'ReceiptFileError', 'MAX_LISTED_LINE_ERRORS', 'parseDuration', 'formatDuration', 'formatInstant',
  // contracts
  'parseContract', 'contractJsonSchema', 'compareContractVersions', 'formatIssue', 'ContractError', 'ContractRegistry', 'loadContractDir',
  // validators and ids (@topology-audit/receipt)
  'validateReceipt', 'receiptJsonSchema', 'ReceiptSchema', 'parseEdge', 'EdgeSyntaxError', 'ID_PATTERN', 'RUN_ID_PATTERN', 'AGENT_ID_PATTERN', 'VERSION_PATTERN',
  'RFC3339_TEXT', 'isRunId', 'isAgentId', 'runIdError', 'instantTextError', 'isInstantText', 'EDGE_KINDS', 'RECEIPT_TYPES', 'HANDOFF_STATES', 'EFFECT_STATUSES',
].sort();

/** Run a module body with node from the package root, as a dependant of the package would load it. */
const node = (code: string) => execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: ROOT, encoding: 'utf8' });

describe('the public API', () => {
  it("import 'topology-audit' gives exactly the curated names, and they work", () => {
    const out = node(`
      const m = await import('topology-audit');
      const ok = m.validateReceipt({ run: 'r1', event: 'e1', at: '2026-01-02T03:04:05Z', type: 'edge', from: 'a', to: 'b', kind: 'delegate' }).ok;
      console.log(JSON.stringify({ names: Object.keys(m).sort(), ok, agent: m.AGENT_ID_PATTERN.test('a:b') }));
    `);
    const got = JSON.parse(out) as { names: string[]; ok: boolean; agent: boolean };
    expect(got.names).toEqual(PUBLIC_NAMES);
    expect(got.ok).toBe(true);
    expect(got.agent).toBe(false);
  });

  it('deep imports of dist/ are not exported', () => {
    const out = node(`try { await import('topology-audit/dist/cli/main.js'); console.log('imported'); } catch (e) { console.log(e.code); }`);
    expect(out.trim()).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('the emitter depends on @topology-audit/receipt, not on the server package; the receipt package on zod only', () => {
    const emitter = JSON.parse(readFileSync(join(ROOT, 'packages', 'emitter', 'package.json'), 'utf8'));
    expect(Object.keys(emitter.dependencies)).not.toContain('topology-audit');
    expect(emitter.dependencies['@topology-audit/receipt']).toBeDefined();
    const receipt = JSON.parse(readFileSync(join(ROOT, 'packages', 'receipt', 'package.json'), 'utf8'));
    expect(Object.keys(receipt.dependencies)).toEqual(['zod']);
    // The emitter's validator and the server's are one function (one schema), loaded through the packages' names.
    const same = node(`const [a, b] = await Promise.all([import('@topology-audit/receipt'), import('topology-audit')]); console.log(a.validateReceipt === b.validateReceipt && a.ReceiptSchema === b.ReceiptSchema);`);
    expect(same.trim()).toBe('true');
  });
});
