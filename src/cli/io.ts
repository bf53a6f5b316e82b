import { fstatSync, readFileSync, writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import { parseReceiptFile, runIdError } from '../core/receipt.js';
import { instantTextError, parseInstant, type Instant } from '../core/time.js';
import type { Receipt } from '../core/types.js';

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

/**
 * Writes to the process's stdout and stderr that failed (a full disk under a log file: ENOSPC; a closed pipe: EPIPE;
 * EIO ...), counted and dropped: logging never kills the process (issue 49). Served as topology_log_write_errors_total.
 */
export const outputWriteErrors = { stdout: 0, stderr: 0 };

/**
 * A sink for fd 1 or 2 that never throws and never emits an unhandled 'error'. A file or device (a log file, /dev/full)
 * is written with writeSync on the fd, each line on its own: Node's stream for it emits one 'error' and then drops every
 * later write, so once the disk has room again the lines would stay lost. A TTY or pipe goes through the process's
 * stream, whose asynchronous errors are counted by a listener (after one, the stream is closed and later lines are
 * counted as dropped).
 */
function outputSink(name: 'stdout' | 'stderr', fd: 1 | 2): (s: string) => void {
  let write: ((s: string) => void) | null = null;
  const failed = () => {
    outputWriteErrors[name]++;
  };
  const init = (): ((s: string) => void) => {
    let direct = false;
    try {
      const st = fstatSync(fd);
      direct = !isatty(fd) && (st.isFile() || st.isCharacterDevice());
    } catch {
      // a closed fd: the stream answers (and its errors are counted)
    }
    if (direct) {
      return (s) => {
        const buf = Buffer.from(s);
        // A short write (at most a few: the disk filled mid-line) continues; an error drops the rest of the line.
        for (let off = 0, tries = 0; off < buf.length && tries < 8; tries++) off += writeSync(fd, buf, off);
      };
    }
    const stream = name === 'stdout' ? process.stdout : process.stderr;
    stream.on('error', failed);
    return (s) => {
      if (stream.destroyed || stream.errored) {
        failed();
        return;
      }
      stream.write(s);
    };
  };
  return (s) => {
    try {
      (write ??= init())(s);
    } catch {
      failed();
    }
  };
}

export const processIo: Io = {
  stdout: outputSink('stdout', 1),
  stderr: outputSink('stderr', 2),
};

export class UsageError extends Error {}

/** Parse an RFC 3339 time given on the command line. */
export function parseTimeArg(name: string, value: string): number {
  return parseInstantArg(name, value).ms;
}

/**
 * Parse an RFC 3339 time given on the command line, exact to the nanosecond (up to nine fraction digits; more is
 * refused, as in receipts).
 */
export function parseInstantArg(name: string, value: string): Instant {
  const error = instantTextError(value);
  if (error !== null) throw new UsageError(`${name}: not an RFC 3339 time (${error}): ${value}`);
  return parseInstant(value);
}

/**
 * A run id given on the command line (gate, ack, diff, handoff board): refused with the reason when it fails the id
 * rule of semantics 2a (`..`, `../x`, `a//b`, spaces ...), before any server is asked. No run can have such an id,
 * so waiting for it (gate) or asking a server about it could only ever answer "unknown run".
 */
export function runIdArg(name: string, value: string): string {
  const error = runIdError(value);
  if (error !== null) throw new UsageError(`${name}: not a run id: ${error}`);
  return value;
}

/** The receipts of NDJSON files, in file order; a file that cannot be read is a usage error naming it. */
export function readReceiptFiles(files: readonly string[]): Receipt[] {
  const receipts: Receipt[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new UsageError(`${file}: ${(e as Error).message}`);
    }
    // Not push(...list): spreading a million receipts as call arguments overflows the stack.
    for (const r of parseReceiptFile(text, file)) receipts.push(r);
  }
  return receipts;
}

/** Render rows as an aligned text table. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}
