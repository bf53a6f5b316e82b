// The throwaway PostgreSQL cluster of the tests (test/helpers/pg-cluster.ts: initdb in a temp dir, loopback port,
// run as the `postgres` user when root) for the benchmarks, which are plain JavaScript: the helper is transpiled
// (TypeScript's transpileModule, types stripped, nothing else changed) into a temp module whose `pg` import points
// at this checkout's package, and imported from there. One source for tests and benchmarks.
//
// Also: the CPU of a running cluster, every process of it (postmaster, backends, background workers, and the
// exited children the postmaster reaped), from /proc.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { ROOT, procStat } from './otlp-load.mjs';

/** The module test/helpers/pg-cluster.ts: { startPgCluster, pgAvailable, pgBinDir }. */
export async function loadPgCluster() {
  const source = readFileSync(join(ROOT, 'test', 'helpers', 'pg-cluster.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
    fileName: 'pg-cluster.ts',
  });
  const pgUrl = pathToFileURL(createRequire(join(ROOT, 'package.json')).resolve('pg')).href;
  const code = outputText.replace(/from ['"]pg['"]/g, `from ${JSON.stringify(pgUrl)}`);
  const dir = mkdtempSync(join(os.tmpdir(), 'ta-bench-pg-helper-'));
  try {
    writeFileSync(join(dir, 'pg-cluster.mjs'), code);
    return await import(pathToFileURL(join(dir, 'pg-cluster.mjs')).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The postmaster's pid: the first line of postmaster.pid in the data dir (`<cluster.dir>/data`). */
export function postmasterPid(dataDir) {
  return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'latin1').split('\n')[0]);
}

/**
 * CPU seconds (user + system) of a PostgreSQL cluster so far: the postmaster's own and its reaped children's
 * (cutime, cstime), plus every live child's (`byPid`: each live process's own, the postmaster's included). A
 * backend that exits between two readings moves from the children's sum to the postmaster's, so differences of
 * `seconds` stay whole.
 */
export function clusterCpuSeconds(postmaster) {
  const pm = procStat(`/proc/${postmaster}/stat`);
  const byPid = new Map([[postmaster, pm.user + pm.system]]);
  const kindByPid = new Map([[postmaster, 'postmaster']]);
  let seconds = pm.user + pm.system + pm.childUser + pm.childSystem;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === postmaster) continue;
    try {
      const s = procStat(`/proc/${entry}/stat`);
      if (s.ppid !== postmaster) continue;
      byPid.set(Number(entry), s.user + s.system);
      kindByPid.set(Number(entry), processKind(entry));
      seconds += s.user + s.system;
    } catch {
      // gone meanwhile
    }
  }
  return { seconds, byPid, kindByPid };
}

/** What a PostgreSQL child process is, by its process title: a backend (client connection) or the auxiliary's name. */
function processKind(pid) {
  let title = '';
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ').trim();
  } catch {
    return 'gone';
  }
  for (const kind of ['walwriter', 'checkpointer', 'background writer', 'autovacuum worker', 'autovacuum launcher', 'stats collector', 'logical replication launcher']) {
    if (title.includes(kind)) return kind;
  }
  return 'backend';
}

/**
 * PostgreSQL's CPU between two clusterCpuSeconds readings by kind of process: backends (the client connections,
 * where the statements run), each auxiliary process, and `exited`: the postmaster's own and its children that exited
 * meanwhile (autovacuum workers, closed connections). Seconds.
 */
export function cpuByKind(before, after) {
  const out = {};
  let live = 0;
  for (const [pid, s] of after.byPid) {
    if (after.kindByPid.get(pid) === 'postmaster') continue; // counted in `exited`
    const d = s - (before.byPid.get(pid) ?? 0);
    const kind = after.kindByPid.get(pid) ?? 'backend';
    out[kind] = (out[kind] ?? 0) + d;
    live += d;
  }
  out.exited = after.seconds - before.seconds - live;
  for (const k of Object.keys(out)) out[k] = Math.round(out[k] * 100) / 100;
  return out;
}
