/** The nine-case drift fixture as tests post it live, and a byte-level reader of a data directory. */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseReceiptFile, type Receipt } from '../../src/core/index.js';
import { ROOT } from './server.js';
import { asReceipt, type LooseReceipt } from './receipt.js';

export const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
export const expectedVerdicts: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'receipts', 'drift.expected.json'), 'utf8'));

/**
 * The drift fixture moved in time so that its latest receipt is `lead` ms before now (`wait` stays waiting, `late`
 * is past its deadline), with run ids prefixed by `prefix-` when a prefix is given.
 */
export function shiftedDrift(prefix = '', lead = 5_000): Receipt[] {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - lead - latest;
  const move = (t: string) => new Date(Date.parse(t) + delta).toISOString();
  return drift.map((r: LooseReceipt) => asReceipt({ ...r, run: prefix ? `${prefix}-${r.run}` : r.run, at: move(r.at), ...(r.deadline ? { deadline: move(r.deadline) } : {}) }));
}

/** Every file under `dir`, concatenated (tables, WAL and free space included). */
export function treeBytes(dir: string): Buffer {
  const parts: Buffer[] = [];
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    const st = statSync(p);
    if (st.isDirectory()) parts.push(treeBytes(p));
    else if (st.isFile()) parts.push(readFileSync(p));
  }
  return Buffer.concat(parts);
}
