/**
 * A throwaway PostgreSQL cluster for tests: `initdb` in a temp dir, `postgres` listening on 127.0.0.1 only (a free
 * port) with its unix socket in the same temp dir, database `audit` created. Needs Debian's `postgresql` package
 * (.ci/run installs it); without the binaries `startPgCluster` throws, so the tests fail rather than skip.
 *
 * initdb and postgres refuse to run as root: as root, the temp dir is handed to the `postgres` system user and the
 * binaries run with its uid/gid (spawn's uid/gid options, which also drop root's supplementary groups).
 *
 * `kill()` SIGKILLs the postmaster and every backend (a crash: nothing is flushed or shut down cleanly), and
 * `restart()` starts it again on the same data dir and port, which runs crash recovery from the WAL. Clusters still running when the test process exits are killed and removed.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface PgCluster {
  /** postgres://postgres@127.0.0.1:PORT/audit */
  url: string;
  port: number;
  /** The temp dir: the data dir `data/` and the unix socket (the server's stderr is kept in memory, see log()). */
  dir: string;
  /** A URL for another database of this cluster, created when missing (a fresh database per test). */
  database(name: string): Promise<string>;
  /** Fast shutdown, then removes the temp dir. */
  stop(): Promise<void>;
  /** Fast shutdown (a shutdown checkpoint is written), keeping the data dir for restart() or a scan of its files. */
  shutdown(): Promise<void>;
  /** SIGKILL of the postmaster and all its backends, returning once they are dead; the data dir stays for restart(). */
  kill(): void;
  /** Starts the server again on the same data dir and port (after kill()); resolves when it accepts connections. */
  restart(): Promise<void>;
  /** The server's stderr so far (last 64 KiB), for failure messages. */
  log(): string;
}

const VERSIONS_DIR = '/usr/lib/postgresql';

function hasServerBinaries(dir: string): boolean {
  return existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'));
}

/** The bin dir of the newest installed server (Debian layout), else `pg_config --bindir`; null when none. */
export function pgBinDir(): string | null {
  if (existsSync(VERSIONS_DIR)) {
    const versions = readdirSync(VERSIONS_DIR)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const bin = join(VERSIONS_DIR, v, 'bin');
      if (hasServerBinaries(bin)) return bin;
    }
  }
  try {
    const bin = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (bin && hasServerBinaries(bin)) return bin;
  } catch {
    // no pg_config on PATH
  }
  return null;
}

/** True when initdb and postgres are installed. */
export function pgAvailable(): boolean {
  return pgBinDir() !== null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

interface RunAs {
  uid?: number;
  gid?: number;
}

/** As root: the uid/gid of the `postgres` system user (Debian's postgresql package creates it). */
function runAs(): RunAs {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return {};
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error('pg-cluster: running as root but there is no `postgres` system user to run initdb/postgres as (install Debian\'s postgresql package)');
  }
}

const live = new Set<() => void>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const cleanup of live) cleanup();
  });
}

/** The major version of the server in `bin` (from `postgres --version`). */
function serverMajor(bin: string): number {
  const out = execFileSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' });
  const m = /(\d+)(?:\.\d+)?/.exec(out);
  return m ? Number(m[1]) : 0;
}

interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
}

/** Every process from /proc (Linux): pid, state and parent. */
function processes(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.push({ pid: Number(name), state: fields[0], ppid: Number(fields[1]) });
  }
  return out;
}

/** True while a process of `pids` is alive (zombies count as dead). */
function anyAlive(pids: ReadonlySet<number>): boolean {
  return processes().some((p) => pids.has(p.pid) && p.state !== 'Z' && p.state !== 'X');
}

async function connectable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Starts a throwaway cluster. `fsync` (default true): the server's fsync setting. `settings`: more server settings
 * (`name=value`, each passed as `-c`), e.g. for a benchmark's statement statistics.
 */
export async function startPgCluster(opts: { fsync?: boolean; settings?: readonly string[] } = {}): Promise<PgCluster> {
  const bin = pgBinDir();
  if (bin === null) {
    throw new Error(`pg-cluster: PostgreSQL server binaries not found (looked in ${VERSIONS_DIR}/*/bin and \`pg_config --bindir\`); install Debian's postgresql package`);
  }
  const ids = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'pg-cluster-'));
  const data = join(dir, 'data');
  if (ids.uid !== undefined) chownSync(dir, ids.uid, ids.gid!);
  const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  try {
    execFileSync(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--no-instructions'], {
      ...ids, cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`pg-cluster: initdb failed: ${(err as Error).message}\n${stderr}`);
  }

  let port = 0;
  let child: ChildProcess | null = null;
  let logText = '';
  let exited: { code: number | null; signal: string | null } | null = null;

  const spawnServer = (): void => {
    exited = null;
    const proc = spawn(join(bin, 'postgres'), [
      '-D', data,
      '-p', String(port),
      '-k', dir,
      '-c', 'listen_addresses=127.0.0.1',
      '-c', `fsync=${opts.fsync === false ? 'off' : 'on'}`,
      '-c', 'max_connections=100',
      '-c', 'log_min_messages=warning',
      // After a crash, recovery first fsyncs the data dir: one syncfs() instead of one fsync per file (PostgreSQL 14+).
      ...(serverMajor(bin) >= 14 ? ['-c', 'recovery_init_sync_method=syncfs'] : []),
      ...(opts.settings ?? []).flatMap((setting) => ['-c', setting]),
    ], { ...ids, cwd: dir, env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => {
      logText = (logText + chunk).slice(-65536);
    });
    proc.on('exit', (code, signal) => {
      exited = { code, signal };
    });
    child = proc;
  };

  /**
   * SIGKILL of the postmaster and every backend (each backend leads its own process group, so one group signal is
   * not enough): the postmaster is stopped first so it forks no new child, then its children and it are killed.
   * Returns once none of them runs (zombies aside).
   */
  const killGroup = (): void => {
    const pid = child?.pid;
    if (pid === undefined || exited !== null) return;
    try {
      process.kill(pid, 'SIGSTOP');
    } catch {
      return; // already gone
    }
    const victims = new Set<number>([pid, ...processes().filter((p) => p.ppid === pid).map((p) => p.pid)]);
    for (const victim of victims) {
      try {
        process.kill(victim, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
    }
    const deadline = Date.now() + 10_000;
    while (anyAlive(victims) && Date.now() < deadline) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  };

  const waitReady = async (url: string): Promise<void> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exited !== null) {
        const e = exited as { code: number | null; signal: string | null };
        throw new Error(`pg-cluster: postgres exited (code ${e.code}, signal ${e.signal}) before accepting connections:\n${logText}`);
      }
      if (await connectable(url)) return;
      if (Date.now() > deadline) throw new Error(`pg-cluster: postgres did not accept connections within 60 s:\n${logText}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  /** SIGINT: PostgreSQL's fast shutdown (sessions ended, a shutdown checkpoint written); SIGKILL after 20 s. */
  const fastShutdown = async (): Promise<void> => {
    const proc = child as ChildProcess | null;
    if (proc === null || exited !== null) return;
    const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGINT');
    const timer = setTimeout(killGroup, 20_000);
    await gone;
    clearTimeout(timer);
  };

  const adminUrl = (): string => `postgres://postgres@127.0.0.1:${port}/postgres`;

  // A free port can be taken between the probe and the bind: try a few.
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    spawnServer();
    try {
      await waitReady(adminUrl());
      break;
    } catch (err) {
      killGroup();
      const addressInUse = /could not bind|address already in use/i.test(logText);
      if (!addressInUse || attempt >= 4) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
      logText = '';
    }
  }

  const cleanup = (): void => {
    killGroup();
    rmSync(dir, { recursive: true, force: true });
  };
  installExitHook();
  live.add(cleanup);

  const created = new Set<string>();
  const database = async (name: string): Promise<string> => {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`pg-cluster: database name must be a plain identifier: ${name}`);
    if (!created.has(name)) {
      const admin = new pg.Client({ connectionString: adminUrl() });
      admin.on('error', () => {});
      await admin.connect();
      try {
        const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      created.add(name);
    }
    return `postgres://postgres@127.0.0.1:${port}/${name}`;
  };

  const url = await database('audit');

  return {
    url,
    port,
    dir,
    database,
    log: () => logText,
    kill: killGroup,
    async restart() {
      const proc = child as ChildProcess | null;
      if (proc !== null && exited === null) {
        // kill() signals the whole group; wait until the postmaster is reaped before starting on the same dir.
        const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('pg-cluster: restart() needs a killed server (call kill() first)')), 10_000);
        });
        try {
          await Promise.race([gone, late]);
        } finally {
          clearTimeout(timer);
        }
      }
      spawnServer();
      await waitReady(adminUrl());
    },
    shutdown: fastShutdown,
    async stop() {
      await fastShutdown();
      live.delete(cleanup);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
