/**
 * Contract integrity: (contract, version) names exactly one content. A contract file edited in place under a
 * version a stored run is pinned to stops the server at start (naming the contract, version and run); restoring
 * the file lets it start, and the run is still audited against the content it pinned. Two files holding one
 * (contract, version) with different content are refused at load, naming both files.
 */
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { parseContract } from '../src/core/index.js';
import { DATABASE_FILE } from '../src/store/index.js';
import { ROOT, getJson, runCli, startServerProcess, tempDir } from './helpers/server.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

function copyContracts(): string {
  const dir = tempDir('ta-contracts-');
  for (const n of readdirSync(join(ROOT, 'contracts'))) copyFileSync(join(ROOT, 'contracts', n), join(dir, n));
  return dir;
}

const line = (o: object) => JSON.stringify(o) + '\n';

function pinningReceipts(run: string): string {
  const at = (s: number) => new Date(Date.now() - 60_000 + s * 1000).toISOString();
  return [
    line({ run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }),
    line({ run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' }),
    line({ run, event: 'e2', type: 'edge', at: at(2), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' }),
  ].join('');
}

/** What the store holds for a run's pin: the hash and the canonical content it names. */
function storedPin(dataDir: string, run: string): { contract: string; version: string; hash: string; content: string } {
  const db = new Database(join(dataDir, DATABASE_FILE), { readonly: true, fileMustExist: true });
  try {
    const pin = db.prepare('SELECT contract, version, contract_hash AS hash FROM pins WHERE run = ?').get(run) as { contract: string; version: string; hash: string };
    const { content } = db.prepare('SELECT content FROM contracts WHERE hash = ?').get(pin.hash) as { content: string };
    return { ...pin, content };
  } finally {
    db.close();
  }
}

const serveArgs = (contracts: string, dataDir: string) => ['serve', '--contracts', contracts, '--data', dataDir, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0'];

describe('contract integrity', () => {
  it('refuses to start when a pinned version was edited in place; starts again once the file is restored, with the pinned content', async () => {
    const contracts = copyContracts();
    const dataDir = tempDir('ta-data-');
    const file = join(contracts, 'research-publish.yaml');
    const original = readFileSync(file, 'utf8');
    const run = 'integrity-run';

    const first = await startServerProcess({ contracts, dataDir });
    let pinnedHash: string;
    let verdictBefore: string;
    try {
      const posted = await fetch(`${first.api}/v1/receipts`, { method: 'POST', body: pinningReceipts(run), headers: { 'content-type': 'application/x-ndjson' } });
      expect((await posted.json()).accepted).toBe(3);
      const v = (await getJson(`${first.api}/api/v1/runs/${run}`)).body;
      expect(v.pin).toMatchObject({ contract: 'research-publish', version: '3' });
      verdictBefore = v.verdict;
      pinnedHash = (await getJson(`${first.api}/api/v1/contracts/research-publish/3`)).body.hash;
    } finally {
      expect(await first.stop()).toBe(0);
    }
    expect(storedPin(dataDir, run).hash).toBe(pinnedHash);

    // Same version, different content: the verifier's deadline doubled.
    const edited = original.replace('within: 10m', 'within: 20m');
    expect(edited).not.toBe(original);
    writeFileSync(file, edited);
    expect(parseContract(edited, file).hash).not.toBe(pinnedHash);

    const refused = await runCli(serveArgs(contracts, dataDir), { timeoutMs: 30_000 });
    expect(refused.code).not.toBe(0);
    expect(refused.code).not.toBeNull(); // it exited by itself, not by the timeout's kill
    expect(refused.stderr).toMatch(/contract file changed under an existing version: research-publish@3 \(pinned by run integrity-run\)/);
    expect(refused.stdout).not.toMatch(/"listening"/);
    // The refused start changed nothing the run depends on.
    expect(storedPin(dataDir, run).hash).toBe(pinnedHash);

    writeFileSync(file, original);
    const again = await startServerProcess({ contracts, dataDir });
    try {
      const v = (await getJson(`${again.api}/api/v1/runs/${run}`)).body;
      expect(v.pin).toMatchObject({ contract: 'research-publish', version: '3', phase: 'research' });
      expect(v.verdict).toBe(verdictBefore);
      expect(v.receipts).toHaveLength(3);
      const served = (await getJson(`${again.api}/api/v1/contracts/research-publish/3`)).body;
      expect(served.hash).toBe(pinnedHash);
      const pin = storedPin(dataDir, run);
      expect(pin).toMatchObject({ contract: 'research-publish', version: '3', hash: pinnedHash });
      // The stored content is the original's canonical form, with the 10-minute deadline.
      const { hash: _hash, ...servedContent } = served;
      expect(JSON.parse(pin.content)).toEqual(servedContent);
      expect(pin.content).toContain('"withinMs":600000');
    } finally {
      expect(await again.stop()).toBe(0);
    }
  });

  it('a run keeps its pinned content when its contract file is removed from the directory', async () => {
    const contracts = copyContracts();
    const dataDir = tempDir('ta-data-');
    const run = 'removed-file-run';
    const first = await startServerProcess({ contracts, dataDir });
    let before: { verdict: string; findings: unknown[] };
    try {
      await fetch(`${first.api}/v1/receipts`, { method: 'POST', body: pinningReceipts(run), headers: { 'content-type': 'application/x-ndjson' } });
      before = (await getJson(`${first.api}/api/v1/runs/${run}`)).body;
      expect(before.verdict).toBe('waiting');
    } finally {
      await first.stop();
    }
    rmSync(join(contracts, 'research-publish.yaml'));
    const again = await startServerProcess({ contracts, dataDir });
    try {
      const after = (await getJson(`${again.api}/api/v1/runs/${run}`)).body;
      expect(after.pin).toMatchObject({ contract: 'research-publish', version: '3', phase: 'research' });
      expect(after.verdict).toBe('waiting');
      expect(after.findings).toEqual(before.findings.map((f: any) => ({ ...f, message: expect.any(String) })));
      expect((await getJson(`${again.api}/api/v1/contracts/research-publish/3`)).status).toBe(404);
    } finally {
      await again.stop();
    }
  });

  it('refuses a contracts directory holding one (contract, version) in two files with different content, naming both', async () => {
    const contracts = copyContracts();
    const original = readFileSync(join(contracts, 'research-publish.yaml'), 'utf8');
    const copy = join(contracts, 'research-publish-copy.yaml');
    // An identical copy is the same content: accepted.
    writeFileSync(copy, original);
    expect(loadContractDir(contracts).versions('research-publish').map((c) => c.version)).toEqual(['2', '3']);
    // A different content under the same version: refused, at load, before anything listens.
    writeFileSync(copy, original.replace('max: 2', 'max: 3'));
    const r = await runCli(serveArgs(contracts, tempDir('ta-data-')), { timeoutMs: 30_000 });
    expect(r.code).toBe(2);
    expect(r.stdout).not.toMatch(/"listening"/);
    expect(r.stderr).toMatch(/contract "research-publish" version "3" already exists with different content/);
    expect(r.stderr).toContain(join(contracts, 'research-publish.yaml'));
    expect(r.stderr).toContain(copy);
  });
});
