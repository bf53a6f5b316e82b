/**
 * Issue 31 item 3, "the pin inside the append's commit" (embedded SQLite store): the first pin of a run, and its
 * contract's content, are committed in the transaction of the append that brings the run's receipts. A second,
 * read-only connection on the same file sees them as soon as the ingest resolves, and a copy of the files taken
 * then (what a kill -9 right after the COMMIT leaves) restores the run with its pinned content even though the
 * contract files changed meanwhile. The PostgreSQL side is in pg-store.test.ts ("pins inside the append").
 */
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditEngine } from '../src/audit/engine.js';
import { DATABASE_FILE, ReceiptStore, type AppendPin } from '../src/store/index.js';
import { edge, end, ms, registryOf, start, tinyContract } from './helpers/receipts.js';
import { tempDir } from './helpers/server.js';

const contract = tinyContract;

const dirs: string[] = [];
const stores: ReceiptStore[] = [];
const readers: Database.Database[] = [];

afterEach(() => {
  for (const r of readers.splice(0)) r.close();
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function openStore(dir = tempDir('ta-pin-')): { dir: string; store: ReceiptStore } {
  if (!dirs.includes(dir)) dirs.push(dir);
  const store = ReceiptStore.open(dir);
  stores.push(store);
  return { dir, store };
}

/** A second connection on the same file, read-only: it sees only what is committed. */
function reader(dir: string): Database.Database {
  const db = new Database(join(dir, DATABASE_FILE), { readonly: true, fileMustExist: true });
  readers.push(db);
  return db;
}

function pinRow(db: Database.Database, run: string): { contract: string; version: string; phase: string; contract_hash: string } | undefined {
  return db.prepare('SELECT contract, version, phase, contract_hash FROM pins WHERE run = ?').get(run) as never;
}

function contentOf(db: Database.Database, hash: string): string | undefined {
  return (db.prepare('SELECT content FROM contracts WHERE hash = ?').get(hash) as { content: string } | undefined)?.content;
}

describe('the first pin inside the append (SQLite)', () => {
  it('is committed with the receipts of a new run: a second connection sees the pin and its content once ingest resolves', async () => {
    const registry = registryOf(contract('1'));
    const { dir, store } = openStore();
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    const db = reader(dir);
    // A first run warms the engine up, so the run measured below is ingested in one slice (no yield to the event
    // loop inside ingest, where a write queued behind the append could land before the check).
    await engine.ingest([start('s', 0, { run: 'p0' })], 'test', ms(2));
    await store.sync();
    await engine.ingest([start('s', 0, { run: 'p1' }), edge('e1', 1, 'o -> r : delegate', { run: 'p1' })], 'test', ms(2));
    const c = registry.get('t', '1')!;
    expect(pinRow(db, 'p1')).toEqual({ contract: 't', version: '1', phase: 'main', contract_hash: c.hash });
    expect(contentOf(db, c.hash)).toBe(c.canonical);
    expect(engine.verdictOf('p1')?.pin).toMatchObject({ contract: 't', version: '1' });
    // The pin step found the pin in force and wrote nothing more: one pin row, still the same after every queued write.
    await store.sync();
    expect(db.prepare('SELECT count(*) AS n FROM pins').get()).toEqual({ n: 2 });
    expect(pinRow(db, 'p1')?.contract_hash).toBe(c.hash);
  });

  it('a batch committed in chunks (over 2,048 receipts) carries each run\'s first pin with the chunk of its first receipt', async () => {
    const registry = registryOf(contract('1'));
    const { dir, store } = openStore();
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    const db = reader(dir);
    await engine.ingest([start('s', 0, { run: 'w0' })], 'test', ms(2));
    await store.sync();
    // 2,500 runs of two receipts each: 5,000 receipts, three chunks; run c1023's two receipts straddle the first cut.
    const batch = [];
    for (let i = 0; i < 2_500; i++) batch.push(start('s', 0, { run: `c${i}` }), edge('e1', 1, 'o -> r : delegate', { run: `c${i}` }));
    await engine.ingest(batch, 'test', ms(2));
    const c = registry.get('t', '1')!;
    expect(db.prepare("SELECT count(*) AS n FROM pins WHERE run LIKE 'c%' AND contract_hash = ?").get(c.hash)).toEqual({ n: 2_500 });
    expect(pinRow(db, 'c1023')).toEqual({ contract: 't', version: '1', phase: 'main', contract_hash: c.hash });
    expect(pinRow(db, 'c2499')?.contract_hash).toBe(c.hash);
    expect(engine.verdictOf('c1023')?.pin).toMatchObject({ contract: 't', version: '1' });
  });

  it('pins a run without a run.start to the default contract with its first receipts, and a later run.start still governs', async () => {
    const registry = registryOf(contract('1'), contract('2'));
    const { dir, store } = openStore();
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000, defaultContract: 't' });
    const db = reader(dir);
    await engine.ingest([edge('e1', 1, 'o -> r : delegate', { run: 'd1' })], 'test', ms(2));
    // The default resolves to the newest version of t.
    expect(pinRow(db, 'd1')).toMatchObject({ contract: 't', version: '2' });
    // A run.start naming another version arrives later: it governs at evaluation (pinGoverns); the stored pin stays.
    await engine.ingest([start('s', 0, { run: 'd1', version: '1' })], 'test', ms(3));
    expect(engine.verdictOf('d1')?.pin).toMatchObject({ contract: 't', version: '1' });
    await store.sync();
    expect(pinRow(db, 'd1')).toMatchObject({ contract: 't', version: '2' });
  });

  it('a run that arrives unpinnable gets its pin with the append that makes it pinnable', async () => {
    const registry = registryOf(contract('1'));
    const { dir, store } = openStore();
    const engine = new AuditEngine(registry, store, { retentionMs: 3_600_000 });
    const db = reader(dir);
    await engine.ingest([edge('e1', 1, 'o -> r : delegate', { run: 'u1' })], 'test', ms(2));
    await store.sync();
    expect(pinRow(db, 'u1')).toBeUndefined(); // no run.start, no default contract: no pin
    await engine.ingest([start('s', 0, { run: 'u1' })], 'test', ms(3));
    expect(pinRow(db, 'u1')).toMatchObject({ contract: 't', version: '1' });
  });

  it('a copy of the files taken right after ingest (a kill -9 after the COMMIT) restores the run with its pinned content though the file changed', async () => {
    const { dir, store } = openStore();
    const engine = new AuditEngine(registryOf(contract('1')), store, { retentionMs: 3_600_000 });
    await engine.ingest([start('s', 0, { run: 'k1' }), edge('e1', 1, 'o -> r : delegate', { run: 'k1' })], 'test', ms(2));
    // The bytes a process killed now leaves: the database file and its WAL (committed frames are in the WAL).
    const crashed = tempDir('ta-pin-crash-');
    dirs.push(crashed);
    for (const suffix of ['', '-wal']) {
      if (existsSync(join(dir, DATABASE_FILE + suffix))) copyFileSync(join(dir, DATABASE_FILE + suffix), join(crashed, DATABASE_FILE + suffix));
    }
    // The contract files now hold only version 2: the run (its run.start names `t` without a version) keeps version 1,
    // read back from the stored content (before: no pin was stored, and the run was judged by version 2).
    const { store: after } = openStore(crashed);
    const restarted = new AuditEngine(registryOf(contract('2')), after, { retentionMs: 3_600_000 });
    restarted.restore(ms(3));
    expect(restarted.verdictOf('k1')?.pin).toMatchObject({ contract: 't', version: '1' });
  });

  it('ReceiptStore.append: a pin written before wins; the result carries the pin in force', async () => {
    const registry = registryOf(contract('1'), contract('2'));
    const { dir, store } = openStore();
    const db = reader(dir);
    const pinOf = (run: string, version: string): AppendPin => {
      const c = registry.get('t', version)!;
      return { run, pin: { contract: 't', version, phase: 'main' }, contractHash: c.hash, contract: 't', version, content: c.canonical };
    };
    const first = await store.append([{ receipt: start('s', 0, { run: 'w1' }), source: 'test', receivedAt: 1 }], [], [pinOf('w1', '1')]);
    expect(first.pins?.get('w1')).toMatchObject({ pin: { version: '1' }, contractHash: registry.get('t', '1')!.hash });
    const second = await store.append([{ receipt: end('x', 1, 'completed', { run: 'w1' }), source: 'test', receivedAt: 2 }], [], [pinOf('w1', '2')]);
    expect(second.pins?.get('w1')).toMatchObject({ pin: { version: '1' }, contractHash: registry.get('t', '1')!.hash });
    expect(pinRow(db, 'w1')?.version).toBe('1');
    expect(store.getPin('w1')?.pin.version).toBe('1');
    // A run pinned with a later append after its row was created without one: the store's answer follows the commit.
    await store.append([{ receipt: start('s', 0, { run: 'w2' }), source: 'test', receivedAt: 3 }]);
    expect(store.getPin('w2')).toBeNull();
    await store.append([{ receipt: end('x', 1, 'completed', { run: 'w2' }), source: 'test', receivedAt: 4 }], [], [pinOf('w2', '2')]);
    expect(store.getPin('w2')?.pin.version).toBe('2');
  });
});
