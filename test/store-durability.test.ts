/**
 * Real crash durability: a child Node process appends receipts and prints each one only after `append`
 * resolved; we SIGKILL it mid-stream, reopen the store and require every acknowledged receipt, exactly once.
 * The child runs the store compiled by tsc (just src/store and what it imports) into test-artifacts/.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReceiptStore } from '../src/store/index.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const buildDir = join(repo, 'test-artifacts', 'store-durability-build');
const compiledStore = join(buildDir, 'out', 'store', 'index.js');
const writer = join(repo, 'test', 'fixtures', 'store-kill-writer.mjs');
let dataDir = '';

/** Newest modification time of the sources the compiled store is built from. */
function newestSourceMtime(): number {
  const dirs = [join(repo, 'src', 'store'), join(repo, 'src', 'core')];
  return Math.max(...dirs.flatMap((d) => readdirSync(d).map((f) => statSync(join(d, f)).mtimeMs)));
}

function compileStore(): void {
  if (existsSync(compiledStore) && statSync(compiledStore).mtimeMs > newestSourceMtime()) return;
  mkdirSync(buildDir, { recursive: true });
  writeFileSync(join(buildDir, 'tsconfig.json'), JSON.stringify({
    extends: '../../tsconfig.json',
    compilerOptions: { rootDir: '../../src', outDir: './out', noEmit: false, sourceMap: false },
    files: ['../../src/store/index.ts'],
    include: [],
  }));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(buildDir, 'tsconfig.json')], { stdio: 'pipe' });
}

interface KilledWriter {
  acked: string[];
  bad: string[];
  exitedOnItsOwn: boolean;
  signal: NodeJS.Signals | null;
}

/** Runs the writer until it has acknowledged `minAcks` receipts, then kills it with SIGKILL. */
function runAndKill(prefix: string, minAcks: number): Promise<KilledWriter> {
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, [writer, compiledStore, dataDir, '8', prefix], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acked: string[] = [];
    const bad: string[] = [];
    let buffered = '';
    let stderr = '';
    let killed = false;
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) (line.startsWith('BAD') ? bad : acked).push(line);
      if (!killed && acked.length >= minAcks) {
        killed = true;
        child.kill('SIGKILL');
      }
    });
    const guard = setTimeout(() => { child.kill('SIGKILL'); rejectRun(new Error(`writer too slow: ${acked.length} acks; ${stderr}`)); }, 20_000);
    child.on('exit', (_code, signal) => {
      clearTimeout(guard);
      if (!killed) rejectRun(new Error(`writer exited on its own: ${stderr}`));
      else resolveRun({ acked, bad, exitedOnItsOwn: !killed, signal });
    });
  });
}

function storedCounts(): Map<string, number> {
  const db = new Database(join(dataDir, 'receipts.db'), { readonly: true });
  const rows = db.prepare('SELECT run, event, count(*) AS n FROM receipts GROUP BY run, event').all() as { run: string; event: string; n: number }[];
  db.close();
  return new Map(rows.map((r) => [`${r.run} ${r.event}`, r.n]));
}

beforeAll(() => {
  compileStore();
  dataDir = mkdtempSync(join(tmpdir(), 'store-durability-'));
}, 60_000);

afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

describe('ReceiptStore durability under kill -9', () => {
  it('keeps every acknowledged receipt exactly once after SIGKILL, twice in a row', async () => {
    const rounds: KilledWriter[] = [];
    for (const prefix of ['first', 'second']) {
      const round = await runAndKill(prefix, 3_000);
      expect(round.signal).toBe('SIGKILL');
      expect(round.bad).toEqual([]);
      expect(round.acked.length).toBeGreaterThanOrEqual(3_000);
      // The process died with committed frames still in the WAL: recovery must read them from there.
      expect(existsSync(join(dataDir, 'receipts.db-wal'))).toBe(true);
      expect(statSync(join(dataDir, 'receipts.db-wal')).size).toBeGreaterThan(0);
      rounds.push(round);

      const counts = storedCounts();
      const missing = round.acked.filter((key) => counts.get(key) !== 1);
      expect(missing).toEqual([]);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
    }

    const store = ReceiptStore.open(dataDir);
    try {
      const integrity = new Database(join(dataDir, 'receipts.db'), { readonly: true });
      expect(integrity.pragma('integrity_check', { simple: true })).toBe('ok');
      integrity.close();
      const everyAck = rounds.flatMap((r) => r.acked);
      const byRun = new Map<string, string[]>();
      for (const run of new Set(everyAck.map((key) => key.split(' ')[0]))) {
        byRun.set(run, store.runReceipts(run).map((r) => r.event));
      }
      for (const key of everyAck) {
        const [run, event] = key.split(' ');
        expect(byRun.get(run)!.filter((e) => e === event)).toHaveLength(1);
      }
      expect(store.counts().receipts).toBeGreaterThanOrEqual(everyAck.length);
    } finally {
      store.close();
    }
  }, 60_000);
});
