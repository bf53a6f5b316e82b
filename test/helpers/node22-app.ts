/**
 * Framework apps that need Node 22 (Mastra 1.x, AI SDK 7) run as a Node 22 child of this Node 20 suite: Node 22 and
 * the app's locked dependencies come from the npm registry once, into a cache under node_modules/.cache.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './server.js';

/** The Node 22 release the framework apps run on. */
export const NODE_VERSION = '22.23.3';

/** A child process to its end (killed after timeoutMs), with its output. */
export function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', rej);
    child.on('exit', (code) => {
      clearTimeout(t);
      res({ code, stdout, stderr });
    });
  });
}

async function must(cmd: string, args: string[], opts: { cwd?: string; timeoutMs: number }): Promise<void> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}:\n${r.stderr.slice(-4000)}`);
}

/**
 * Node 22 (the npm registry's `node` package) and a fixture app's locked dependencies, installed once into
 * node_modules/.cache/<cacheName>/<hash of the Node version, package.json and lock>/ and reused; the fixture's
 * app.mjs is copied next to its dependencies on every call.
 */
export async function prepareNode22App(fixture: string, cacheName: string): Promise<{ node: string; appDir: string }> {
  const lock = readFileSync(join(fixture, 'package-lock.json'));
  const key = createHash('sha256').update(NODE_VERSION).update(readFileSync(join(fixture, 'package.json'))).update(lock).digest('hex').slice(0, 16);
  const base = join(ROOT, 'node_modules', '.cache', cacheName, key);
  const node = join(base, 'node', 'node_modules', '.bin', 'node');
  const appDir = join(base, 'app');
  if (!existsSync(join(base, 'ready'))) {
    // Installed into a private staging directory, then renamed into place: an interrupted install (or one
    // still running from a killed test process) never leaves a half-filled cache that a later run trusts.
    const stage = `${base}.stage-${process.pid}-${Date.now()}`;
    mkdirSync(join(stage, 'node'), { recursive: true });
    mkdirSync(join(stage, 'app'), { recursive: true });
    copyFileSync(join(fixture, 'package.json'), join(stage, 'app', 'package.json'));
    copyFileSync(join(fixture, 'package-lock.json'), join(stage, 'app', 'package-lock.json'));
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const quiet = ['--no-audit', '--no-fund', '--loglevel=error'];
    try {
      await Promise.all([
        must(npm, ['install', '--no-save', '--prefix', join(stage, 'node'), `node@${NODE_VERSION}`, ...quiet], { timeoutMs: 280_000 }),
        must(npm, ['ci', '--ignore-scripts', '--engine-strict=false', ...quiet], { cwd: join(stage, 'app'), timeoutMs: 280_000 }),
      ]);
    } catch (e) {
      rmSync(stage, { recursive: true, force: true });
      throw e;
    }
    writeFileSync(join(stage, 'ready'), `node@${NODE_VERSION}\n`);
    rmSync(base, { recursive: true, force: true }); // a stale, never-finished copy
    try {
      renameSync(stage, base);
    } catch (e) {
      if (!existsSync(join(base, 'ready'))) throw e; // else another run finished first: use its copy
      rmSync(stage, { recursive: true, force: true });
    }
  }
  copyFileSync(join(fixture, 'app.mjs'), join(appDir, 'app.mjs')); // always the checked-in app, next to its deps
  return { node, appDir };
}
