/**
 * An exclusive lock on a data directory, so that two servers never open the same store.
 *
 * The lock is a file created atomically (written under a private name, then hard-linked to `serve.lock`: link()
 * fails when the name exists, and the file is complete when it appears). It holds the holder's pid, host and
 * process start time (Linux: /proc/<pid>/stat), so a lock left by a process that died (kill -9, power loss) is
 * recognised as stale and taken over; a pid reused by an unrelated process is not mistaken for the holder.
 * Taking over renames the stale file away first, so two servers racing for a stale lock cannot both win.
 */
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = 'serve.lock';

interface Holder {
  pid: number;
  host: string;
  /** Process start time in clock ticks since boot (Linux), or null where unknown. */
  start: string | null;
}

export class DataDirLockedError extends Error {
  constructor(readonly dir: string, readonly holder: Holder) {
    super(`data directory ${dir} is in use by another topology-audit server (pid ${holder.pid}${holder.host !== hostname() ? ` on host ${holder.host}` : ''}); stop it or choose another --data directory`);
  }
}

function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime); the command name (field 2) may contain spaces, so count from its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function alive(h: Holder): boolean {
  if (h.host !== hostname()) return true; // cannot check another host's processes: assume it holds the lock
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false; // ESRCH: no such process
  }
  if (h.start === null) return true;
  const now = startTime(h.pid);
  return now === null || now === h.start;
}

function readHolder(path: string): Holder | null {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    if (typeof h.pid !== 'number' || typeof h.host !== 'string') return null;
    return { pid: h.pid, host: h.host, start: typeof h.start === 'string' ? h.start : null };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return { pid: -1, host: '', start: null }; // unreadable: treated as stale below
  }
}

/** Locks held by this process, released at exit (one handler for all). */
const held = new Set<() => void>();
let exitHook = false;

export interface DataDirLock {
  readonly path: string;
  release(): void;
}

/** Take the data directory's lock or throw DataDirLockedError naming the holder's pid. */
export function lockDataDir(dir: string): DataDirLock {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, LOCK_FILE);
  const me: Holder = { pid: process.pid, host: hostname(), start: startTime(process.pid) };
  const mine = JSON.stringify(me);
  const tmp = join(dir, `.${LOCK_FILE}.${process.pid}.${Math.random().toString(36).slice(2)}`);
  writeFileSync(tmp, mine + '\n', { mode: 0o600 }); // only the auditor's user reads it (its pid and host)
  let taken = false;
  try {
    for (let attempt = 0; attempt < 5 && !taken; attempt++) {
      try {
        linkSync(tmp, path);
        taken = true;
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const holder = readHolder(path);
      if (holder === null) continue; // vanished between link and read: try again
      if (holder.pid > 0 && alive(holder)) throw new DataDirLockedError(dir, holder);
      // Stale: move it aside under a private name; only the server whose rename succeeded removes it.
      const aside = `${tmp}.stale`;
      try {
        renameSync(path, aside);
      } catch {
        continue;
      }
      const moved = readHolder(aside);
      if (moved && moved.pid > 0 && alive(moved)) {
        // Someone else's fresh lock was moved: put it back (link fails if yet another took the name meanwhile).
        try {
          linkSync(aside, path);
        } catch {
          /* the name is held again; the loop sees it */
        }
      }
      unlinkSync(aside);
    }
    if (!taken) throw new Error(`data directory ${dir}: could not take the lock ${LOCK_FILE} (it keeps changing)`);
  } finally {
    unlinkSync(tmp);
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    held.delete(release);
    try {
      if (readFileSync(path, 'utf8').trim() === mine) unlinkSync(path);
    } catch {
      /* already gone */
    }
  };
  held.add(release);
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      for (const r of [...held]) r();
    });
  }
  return { path, release };
}
