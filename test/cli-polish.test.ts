/**
 * Operator papercuts of issue 46 item 8, each as a user meets it: help examples that run, clear errors for a missing
 * or non-OTLP file, an unknown contract field said at its line with the field meant, a typo in a serve flag, a port
 * in use naming the flag that moves it, and a lock file only the auditor's user reads.
 */
import { createServer, type Server } from 'node:net';
import { existsSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { allSpecs } from '../src/cli/spec.js';
import '../src/cli/specs.js';
import { ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

describe('operator papercuts', () => {
  let srv: ServerProcess | undefined;
  let blocker: Server | undefined;
  afterAll(async () => {
    await srv?.stop();
    blocker?.close();
  });

  it('every --help example names files that exist (run from the package root)', () => {
    const missing: string[] = [];
    for (const spec of allSpecs()) {
      for (const ex of spec.examples) {
        const words = ex.split(/\s+/);
        for (let i = 0; i < words.length; i++) {
          const w = words[i];
          if (w === '>' || w === '>>') {
            i++; // an output file the example writes
            continue;
          }
          if (/^(https?:|\$|")/.test(w) || w.startsWith('-')) continue;
          if (/\.(ndjson|json|ya?ml|pb)$/.test(w) || (w.includes('/') && w.endsWith('/'))) if (!existsSync(join(ROOT, w))) missing.push(`${spec.name}: ${w}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('the explain example explains: its sample holds topology spans and an unmapped one', async () => {
    const r = await runCli(['explain', 'receipts/otlp-sample.json'], { cwd: ROOT });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('2 receipt(s) in run otlp-sample');
  });

  it('explain on a file that is not an OTLP export, or is missing, exits 2 saying so', async () => {
    const dir = tempDir('ta-explain-');
    writeFileSync(join(dir, 'x.json'), '{"x": 1}\n');
    const r = await runCli(['explain', join(dir, 'x.json')]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('holds no spans: expected an OTLP trace export');
    const m = await runCli(['explain', join(dir, 'missing.json')]);
    expect(m.code).toBe(2);
    expect(m.stderr).toContain('cannot read');
    expect(m.stderr).toContain('no such file');
  });

  it('validate on a missing file exits 2 with no made-up position and no raw ENOENT', async () => {
    const file = join(tempDir('ta-validate-'), 'missing.yaml');
    const r = await runCli(['validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`topology-audit validate: ${file}: no such file or directory\n`);
  });

  it('validate says each unknown field at its own line with the field meant, and a missing field as missing', async () => {
    const file = join(tempDir('ta-validate-'), 'c.yaml');
    const text = readFileSync(join(ROOT, 'contracts', 'supervisor-workers.yaml'), 'utf8').replace(/^owner:/m, 'ownr:').replace(/^agents:/m, 'agnets:');
    writeFileSync(file, text);
    const lineOf = (key: string) => text.split('\n').findIndex((l) => l.startsWith(`${key}:`)) + 1;
    const r = await runCli(['validate', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}:${lineOf('ownr')}:1: ownr: unknown field "ownr": did you mean "owner"?`);
    expect(r.stderr).toContain(`${file}:${lineOf('agnets')}:1: agnets: unknown field "agnets": did you mean "agents"?`);
    expect(r.stderr).toContain('owner: required field is missing');
  });

  it('a pending edge says "useful work may continue" only on a working run, never beside forbidden_edge', async () => {
    const r = await runCli(['replay', 'receipts/drift.ndjson', '--contracts', 'contracts', '--json', '--fail-on', 'none'], { cwd: ROOT });
    expect(r.code, r.stderr).toBe(0);
    const byRun = new Map(r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { run: string; verdict: string; findings: { code: string; message: string }[] }).map((v) => [v.run, v]));
    const pendingOf = (run: string) => byRun.get(run)!.findings.find((f) => f.code === 'pending')!.message;
    expect(byRun.get('drift-direct-route')!.verdict).toBe('forbidden_edge');
    expect(pendingOf('drift-direct-route')).toMatch(/^researcher -> verifier : handoff is due since \S+$/);
    expect(byRun.get('drift-current')!.verdict).toBe('working');
    expect(pendingOf('drift-current')).toMatch(/: useful work may continue$/);
  });

  it('replay says every invalid line of a receipts file in one run (bounded), not one error per run', async () => {
    const dir = tempDir('ta-lines-');
    const good = readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8').trim().split('\n');
    const file = join(dir, 'b.ndjson');
    writeFileSync(file, [good[0], '{"run":"x"}', good[1], 'nope', good[2]].join('\n') + '\n');
    const r = await runCli(['replay', file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`${file}:2: type:`);
    expect(r.stderr).toContain(`${file}:4: invalid JSON`);
    const many = join(dir, 'many.ndjson');
    writeFileSync(many, Array.from({ length: 25 }, () => 'nope').join('\n') + '\n');
    const m = await runCli(['replay', many]);
    expect(m.code).toBe(2);
    expect(m.stderr.split('\n').filter((l) => l.includes('invalid JSON'))).toHaveLength(20);
    expect(m.stderr).toContain(`${many}: 5 more invalid line(s)`);
  });

  it('serve suggests the flag meant for a typo', async () => {
    const r = await runCli(['serve', '--contrats', 'contracts']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("topology-audit serve: Unknown option '--contrats'; did you mean --contracts?\n");
  });

  it('a port in use names the flag that moves it', async () => {
    blocker = createServer();
    const port = await new Promise<number>((res) => blocker!.listen(0, '127.0.0.1', () => res((blocker!.address() as { port: number }).port)));
    const r = await runCli(['serve', '--data', tempDir('ta-port-'), '--port', String(port), '--otlp-http-port', '0', '--otlp-grpc-port', '0']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`port ${port} is in use: choose another with --port`);
  }, 60_000);

  it('serve.lock is readable by the auditor user only (0600)', async () => {
    srv = await startServerProcess();
    const lock = join(srv.dataDir, 'serve.lock');
    expect(existsSync(lock)).toBe(true);
    expect(statSync(lock).mode & 0o777).toBe(0o600);
  }, 60_000);
});
