/**
 * Every `sh` block of the README runs verbatim, in order, as one shell script in an empty folder: install the packed
 * tarball with --omit=dev, start serve in the background, post receipts, draft contracts, diff them, restart with a
 * shadow candidate, gate a run, ack one. The only substitutions: free loopback ports for 9464/4318/4317 (so a
 * busy machine's ports do not matter), and better-sqlite3's prebuilt binary served from loopback (this machine
 * cannot reach GitHub, where prebuild-install looks; without it the install compiles it, which also works, slowly).
 * Waits are on conditions: the README's own `curl --retry-connrefused`, the script's exit.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseContract } from '../src/core/index.js';
import { ROOT, tempDir } from './helpers/server.js';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

/** The README's ```sh blocks, in order. */
export function shBlocks(text: string): string[] {
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Serves this checkout's better-sqlite3 binary in prebuild-install's layout, for that exact version only. */
async function sqliteMirror(dir: string): Promise<Server> {
  const mod = join(ROOT, 'node_modules', 'better-sqlite3');
  const version = JSON.parse(readFileSync(join(mod, 'package.json'), 'utf8')).version;
  const tgz = join(dir, 'prebuilt.tar.gz');
  execFileSync('tar', ['czf', tgz, '-C', mod, 'build/Release/better_sqlite3.node']);
  const name = `/v${version}/better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const body = readFileSync(tgz);
  const server = createServer((req, res) => {
    if (req.url === name) res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': body.length }).end(body);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

describe('README, verbatim', () => {
  let mirror: Server | undefined;
  let group: number | undefined;
  afterAll(() => {
    mirror?.close();
    // The script's background servers share its process group.
    if (group) {
      try {
        process.kill(-group, 'SIGTERM');
      } catch {
        /* already gone */
      }
    }
  });

  it('has sh blocks for install, serve, exporter, propose, contract diff, shadow, gate and ack', () => {
    const all = shBlocks(readme).join('\n');
    for (const want of ['npm install --omit=dev', 'topology-audit serve', 'propose', 'contract diff my-agents@1 my-agents@2', '--shadow my-agents@2', 'gate "$RUN_ID"', 'ack ']) expect(all).toContain(want);
    expect(all).toContain(`./topology-audit-${pkg.version}.tgz`);
  });

  // A safety net for a hung install, not a budget: the script's exit is what the test waits on.
  it('runs every sh block in order in an empty folder, from the packed tarball', { timeout: 20 * 60_000 }, async () => {
    const dir = tempDir('ta-readme-');
    execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, stdio: 'ignore' });
    expect(readdirSync(dir)).toContain(`topology-audit-${pkg.version}.tgz`);
    mirror = await sqliteMirror(dir);
    const [api, http, grpc] = [await freePort(), await freePort(), await freePort()];
    // After the walk-through, the web view's data for its pages: a run with its graph, a contract page, the shadow page.
    const pages = ['curl -sf http://127.0.0.1:9464/ui/api/runs/drift-direct-route -o page-run.json', 'curl -sf http://127.0.0.1:9464/ui/api/contracts/research-publish -o page-contract.json', 'curl -sf http://127.0.0.1:9464/ui/api/shadow -o page-shadow.json'];
    const script = ['set -e', ...shBlocks(readme), ...pages]
      .join('\n')
      .replaceAll('127.0.0.1:9464', `127.0.0.1:${api}`)
      .replace(/topology-audit serve/g, `topology-audit serve --port ${api} --otlp-http-port ${http} --otlp-grpc-port ${grpc}`);
    const child = spawn('bash', ['-c', script], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        npm_config_better_sqlite3_binary_host: `http://127.0.0.1:${(mirror.address() as AddressInfo).port}`,
        npm_config_fund: 'false',
        npm_config_audit: 'false',
        npm_config_update_notifier: 'false',
      },
    });
    group = child.pid;
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(code, `${out}\n${err}`).toBe(0);

    expect(out).toContain('"status":"ok","service":"topology-audit"');
    expect(out).toContain(`"accepted":${readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8').trim().split('\n').length},`);
    const first = parseContract(readFileSync(join(dir, 'contracts', 'my-agents.yaml'), 'utf8'), 'my-agents.yaml');
    expect(first).toMatchObject({ contract: 'my-agents', version: '1' });
    expect(first.candidate).toBeFalsy();
    const second = parseContract(readFileSync(join(dir, 'contracts', 'my-agents-2.yaml'), 'utf8'), 'my-agents-2.yaml');
    expect(second).toMatchObject({ contract: 'my-agents', version: '2', candidate: true });
    expect(readFileSync(join(dir, 'contracts', 'my-agents.yaml'), 'utf8')).toContain('# forbidden under research-publish@3 in 1 run: review');
    expect(out).toMatch(/"contract":"my-agents","version":"2"/);
    // The walk-through ends on a server whose pages load: the run's pinned contract is loaded (its graph drawn), the
    // contract page answers, and the shadow page counts the runs pinned to my-agents.
    const runPage = JSON.parse(readFileSync(join(dir, 'page-run.json'), 'utf8'));
    expect(runPage.graphMissing).toBeUndefined();
    expect(runPage.graph).not.toBeNull();
    expect(JSON.parse(readFileSync(join(dir, 'page-contract.json'), 'utf8')).versions.length).toBeGreaterThan(0);
    const shadow = JSON.parse(readFileSync(join(dir, 'page-shadow.json'), 'utf8'));
    expect(shadow.candidates[0]).toMatchObject({ contract: 'my-agents', version: '2' });
    expect(shadow.candidates[0].runs).toBeGreaterThan(0);
    expect(out).toContain('drift-complete: healthy');
    expect(out).toContain('drift-direct-route (forbidden_edge): acknowledged by oncall at ');
    expect(out).toContain('same content apart from the version');
    expect(out).toMatch(/"ack":\{"verdict":"forbidden_edge","by":"oncall","at":"[^"]+","reason":"route contained, OPS-12"/);
  });
});
