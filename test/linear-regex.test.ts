/**
 * The linear-time matcher of Alertmanager's silence patterns (src/alerting/linear-regex.ts): it agrees with a
 * backtracking engine on the patterns both read, walks patterns a backtracking engine takes exponential time on in one
 * pass, and refuses what is not RE2 (backreferences, lookarounds) with a reason. And the silence cache that uses it:
 * malformed silences and unsupported patterns are skipped and counted, never a failure of the run's read.
 */
import fc from 'fast-check';
import { createServer, type Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { linearRegex, MAX_REGEX_STATES, RegexUnsupported } from '../src/alerting/linear-regex.js';
import { SilenceCache, type SilenceSkip } from '../src/alerting/silences.js';

const PATTERNS = [
  'a',
  'a*',
  'a+b',
  '(a|b)*c',
  'a?b?c?',
  '[a-c]+',
  '[^a]*',
  '(?:ab|a)(?:bc|c)?',
  'a{2}',
  'a{1,3}b',
  'a{2,}',
  '(?i)AbC',
  '(?i:a)b',
  '.*',
  '\\d+-\\w*',
  '[[:alpha:]]+',
  'research.*|publish.*',
  '(a|ab)(c|bcd)(d*)',
  '\\.',
  'a\\|b',
  '',
  '(a*)*',
  '(a|)+b',
  '\\bab\\b.*',
  '[\\d.]+',
  'x{0}a',
  'run-[0-9]+(:[a-z]+)?',
];
const toJs = (p: string) => p.replace('[[:alpha:]]', '[A-Za-z]').replace('(?i)AbC', 'AbC').replace('(?i:a)b', '[aA]b');
const flagsOf = (p: string) => (p === '(?i)AbC' ? 'iu' : 'u');

describe('linear-time silence patterns', () => {
  it('agrees with a backtracking engine on the patterns both read (anchored at both ends)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...PATTERNS), fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd', 'A', 'B', '-', '1', ':', '.', ' ', 'x', '|'), maxLength: 12 }), (p, s) => {
        const js = new RegExp(`^(?:${toJs(p)})$`, flagsOf(p));
        expect(linearRegex(p).test(s), `${p} on ${JSON.stringify(s)}`).toBe(js.test(s));
      }),
      { numRuns: 3000 },
    );
  });

  it('walks (.+)+X over a long value in one pass (a backtracking engine needs 2^n steps)', () => {
    const value = 'researcher -> publisher : delegate'.repeat(30); // 1,020 characters
    // One pass: each character advances a bounded set of states; the count is what bounds the time, so it is asserted.
    const re = linearRegex('(.+)+X');
    expect(re.states).toBeLessThan(20);
    expect(re.test(value)).toBe(false);
    expect(re.test(`${value}X`)).toBe(true);
    expect(linearRegex('(a*)*b').test('a'.repeat(5000))).toBe(false);
    expect(linearRegex('(x+x+)+y').test('x'.repeat(5000))).toBe(false);
  });

  it('refuses what is not RE2, and patterns past the state bound, with a reason', () => {
    for (const p of ['(a)\\1', '(?=a)a', '(?!a)', 'a{1001}', '(', 'a)', '[a', '*a', '\\k']) expect(() => linearRegex(p), p).toThrow(RegexUnsupported);
    expect(() => linearRegex('(((a{1000}){1000}){1000})')).toThrow(new RegexUnsupported(`more than ${MAX_REGEX_STATES} states`));
  });
});

describe('the silence cache', () => {
  const silence = (id: string, extra: object) => ({ id, status: { state: 'active' }, startsAt: new Date(Date.now() - 60_000).toISOString(), endsAt: new Date(Date.now() + 3_600_000).toISOString(), createdBy: 'sre', comment: 'c', ...extra });

  it('skips malformed silences and patterns it does not take, counts them, and still answers the run', async () => {
    const list = [
      silence('a', { matchers: [{ name: 'edge', value: '(.+)+X', isRegex: true, isEqual: true }] }),
      silence('b', { matchers: [{ name: 'run', value: 'r-1', isRegex: false, isEqual: true }], comment: undefined }),
      silence('c', { matchers: [{ name: 'run', value: 'r-1', isRegex: false, isEqual: true }], createdBy: undefined }),
      silence('d', { matchers: [{ name: 'run', value: '(r)-\\1', isRegex: true, isEqual: true }] }),
      silence('e', { matchers: [{ name: 'run', value: 'r-.*', isRegex: true, isEqual: true }] }),
    ];
    let counts: Record<SilenceSkip, number> | null = null;
    const cache = new SilenceCache([{ name: 'am', silences: async () => list as never }], { cacheMs: 60_000, maxSilences: 100, clock: Date.now, log: () => {}, skipped: (c) => (counts = c) });
    const labels = { run: 'r-1', edge: 'researcher -> publisher : delegate' };
    expect(await cache.matching(labels)).toBeNull(); // nothing read yet: the read never waits for Alertmanager
    await cache.settled();
    expect(counts).toEqual({ malformed: 2, matcher_unsupported: 1, budget: 0 });
    expect((await cache.matching(labels))?.id).toBe('e');
    expect(await cache.matching({ ...labels, edge: 'X' })).toMatchObject({ id: 'e' }); // a: `(.+)+X` needs one character before X
    expect((await cache.matching({ ...labels, edge: 'aX' }))?.id).toMatch(/^[ae]$/);
  });

  it('an Alertmanager that never answers does not hold a run read', async () => {
    let server: Server | null = null;
    const port = await new Promise<number>((resolve) => {
      server = createServer(() => {}).listen(0, '127.0.0.1', () => resolve((server!.address() as { port: number }).port));
    });
    try {
      const { AlertmanagerClient } = await import('../src/alerting/client.js');
      const client = new AlertmanagerClient(new URL(`http://127.0.0.1:${port}`), { timeoutMs: 600_000, tls: { insecureSkipVerify: false } });
      const cache = new SilenceCache([client], { cacheMs: 1000, maxSilences: 10, clock: Date.now, log: () => {} });
      // The read is under way and never ends; the answer comes anyway.
      expect(await cache.matching({ run: 'r' })).toBeNull();
      expect(await cache.matching({ run: 'r' })).toBeNull();
    } finally {
      server!.closeAllConnections();
      server!.close();
    }
  });
});
