/**
 * Polls `probe` every 100 ms until it returns a value (not undefined, null or false). A probe that throws (a
 * connection refused or reset while a busy machine starts a server) counts as "not yet". The limit is a safety net
 * for a condition that never comes, never a timing claim: it is at least two minutes whatever `ms` says, so a busy
 * machine only makes a test slower (timing claims live in bench/). Fails naming `what` and the last error.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined | null | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + Math.max(ms, 120_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
