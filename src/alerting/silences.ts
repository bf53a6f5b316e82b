/**
 * Alertmanager silences seen on runs: the active silences, read through API v2 in the background at most once per
 * cache period (from the first Alertmanager that answers: an HA pair shares its silences) and bounded in number,
 * matched against the labels of a run's alert as Alertmanager matches them (=, !=, =~, !~, regular expressions
 * anchored). A run read never waits for Alertmanager: it sees what the last read brought. Regular expressions run on
 * a linear-time matcher (./linear-regex.ts); a silence that is malformed, or whose pattern that matcher does not take,
 * or past the total state budget, is skipped and counted.
 */
import { millisOf } from '../core/time.js';
import type { Matcher, Silence } from './client.js';
import { linearRegex, RegexUnsupported, type LinearRegex } from './linear-regex.js';

/** A silence as the API and the run page show it. */
export interface SilenceView {
  id: string;
  createdBy: string;
  comment: string;
  startsAt: string;
  endsAt: string;
  matchers: string[];
}

/** What the cache needs of an Alertmanager (AlertmanagerClient). */
export interface SilenceSource {
  readonly name: string;
  silences(): Promise<Silence[]>;
}

const MAX_COMMENT = 500;
/** NFA states of every regular expression held, together: a run read costs at most this many steps per character. */
export const MAX_SILENCE_STATES = 100_000;

/** Why a silence read from Alertmanager is not used. */
export type SilenceSkip = 'malformed' | 'matcher_unsupported' | 'budget';
export const SILENCE_SKIPS: readonly SilenceSkip[] = ['malformed', 'matcher_unsupported', 'budget'];

/** A silence ready to match: its matchers compiled, its times read. */
interface HeldSilence {
  silence: Silence;
  startsAt: number;
  endsAt: number;
  tests: ((labels: Readonly<Record<string, string>>) => boolean)[];
}

const isMatcher = (m: unknown): m is Matcher => {
  const x = m as Matcher;
  return typeof x === 'object' && x !== null && typeof x.name === 'string' && typeof x.value === 'string' && typeof x.isRegex === 'boolean' && (x.isEqual === undefined || typeof x.isEqual === 'boolean');
};

/** A silence as API v2 must give it, or null (a missing comment, createdBy, time or matcher field). */
export function wellFormedSilence(s: unknown): Silence | null {
  const x = s as Silence;
  if (typeof x !== 'object' || x === null || typeof x.id !== 'string' || typeof x.createdBy !== 'string' || typeof x.comment !== 'string') return null;
  if (typeof x.startsAt !== 'string' || typeof x.endsAt !== 'string' || !Number.isFinite(millisOf(x.startsAt)) || !Number.isFinite(millisOf(x.endsAt))) return null;
  if (!Array.isArray(x.matchers) || x.matchers.length === 0 || !x.matchers.every(isMatcher)) return null;
  return x;
}

/** One matcher as a test on a label set (an absent label is the empty string, as in Alertmanager). */
function matcherTest(m: Matcher, compiled: (pattern: string) => LinearRegex): (labels: Readonly<Record<string, string>>) => boolean {
  const equal = m.isEqual ?? true;
  if (!m.isRegex) return (labels) => ((labels[m.name] ?? '') === m.value) === equal;
  const re = compiled(m.value);
  return (labels) => re.test(labels[m.name] ?? '') === equal;
}

/** One matcher against a label set (compiles its pattern each time: for tests and one-off checks). */
export function matcherMatches(m: Matcher, labels: Readonly<Record<string, string>>): boolean {
  try {
    return matcherTest(m, linearRegex)(labels);
  } catch (e) {
    if (e instanceof RegexUnsupported) return false; // a pattern the matcher does not take matches nothing here
    throw e;
  }
}

export const silenceMatches = (s: Pick<Silence, 'matchers'>, labels: Readonly<Record<string, string>>): boolean => s.matchers.length > 0 && s.matchers.every((m) => matcherMatches(m, labels));

const matcherText = (m: Matcher) => `${m.name}${(m.isEqual ?? true) ? (m.isRegex ? '=~' : '=') : m.isRegex ? '!~' : '!='}${JSON.stringify(m.value)}`;

export function silenceView(s: Silence): SilenceView {
  return {
    id: s.id,
    createdBy: s.createdBy,
    comment: s.comment.length > MAX_COMMENT ? `${s.comment.slice(0, MAX_COMMENT)}…` : s.comment,
    startsAt: s.startsAt,
    endsAt: s.endsAt,
    matchers: s.matchers.map(matcherText),
  };
}

/** Yield to the event loop between slices of compiling. */
const yieldNow = () => new Promise<void>((r) => setImmediate(r));

export class SilenceCache {
  private held: HeldSilence[] = [];
  private readAt = -Infinity;
  private reading: Promise<void> | null = null;
  /** Compiled patterns of the last read, reused by the next. */
  private patterns = new Map<string, LinearRegex | RegexUnsupported>();

  constructor(
    private readonly sources: readonly SilenceSource[],
    private readonly opts: {
      cacheMs: number;
      maxSilences: number;
      clock: () => number;
      log: (event: string, fields: Record<string, unknown>) => void;
      /** Silences of the last read not used, per reason. */
      skipped?: (counts: Record<SilenceSkip, number>) => void;
    },
  ) {}

  /**
   * The active silence that matches these labels and ends last, or null: from what was read last, never waiting for
   * Alertmanager (a read is started in the background when the cache is older than its period).
   */
  async matching(labels: Readonly<Record<string, string>>): Promise<SilenceView | null> {
    this.refresh();
    const now = this.opts.clock();
    let best: HeldSilence | null = null;
    for (const h of this.held) {
      if (h.endsAt <= now || h.startsAt > now) continue;
      if (h.tests.every((t) => t(labels)) && (!best || h.endsAt > best.endsAt)) best = h;
    }
    return best ? silenceView(best.silence) : null;
  }

  /** Starts a read in the background when the cache is older than its period (and none is under way). */
  refresh(): void {
    if (this.reading || this.opts.clock() - this.readAt < this.opts.cacheMs) return;
    this.reading = this.read().finally(() => {
      this.reading = null;
    });
  }

  /** A read under way, if any (tests wait for it). */
  settled(): Promise<void> {
    return this.reading ?? Promise.resolve();
  }

  /** A silence just created here: held at once, and the cache read again in the background. */
  created(s: Silence): void {
    const h = this.hold(s, (p) => linearRegex(p));
    if (h) this.held = [...this.held, h];
    this.readAt = -Infinity;
    this.refresh();
  }

  private hold(s: Silence, compiled: (pattern: string) => LinearRegex): HeldSilence | null {
    try {
      return { silence: s, startsAt: millisOf(s.startsAt), endsAt: millisOf(s.endsAt), tests: s.matchers.map((m) => matcherTest(m, compiled)) };
    } catch (e) {
      if (e instanceof RegexUnsupported) return null;
      throw e;
    }
  }

  private async read(): Promise<void> {
    for (const src of this.sources) {
      let all: unknown[];
      try {
        all = await src.silences();
      } catch (e) {
        this.opts.log('alertmanager_silences_failed', { alertmanager: src.name, reason: (e as { reason?: string }).reason ?? 'request failed' });
        continue;
      }
      this.held = await this.compile(all, src.name);
      this.readAt = this.opts.clock();
      return;
    }
    // None answered: keep what was read before, and try again after a cache period.
    this.readAt = this.opts.clock();
  }

  /** The active, well-formed silences of one read, compiled in slices that yield; the rest counted by reason. */
  private async compile(all: unknown[], alertmanager: string): Promise<HeldSilence[]> {
    const skipped: Record<SilenceSkip, number> = { malformed: 0, matcher_unsupported: 0, budget: 0 };
    const previous = this.patterns;
    const patterns = new Map<string, LinearRegex | RegexUnsupported>();
    let states = 0;
    const compiled = (p: string): LinearRegex => {
      let r = patterns.get(p) ?? previous.get(p);
      if (r === undefined) {
        try {
          r = linearRegex(p);
        } catch (e) {
          if (!(e instanceof RegexUnsupported)) throw e;
          r = e;
        }
      }
      if (!patterns.has(p)) {
        if (!(r instanceof RegexUnsupported)) {
          if (states + r.states > MAX_SILENCE_STATES) throw new BudgetSpent();
          states += r.states;
        }
        patterns.set(p, r);
      }
      if (r instanceof RegexUnsupported) throw r;
      return r;
    };
    const held: HeldSilence[] = [];
    let active = 0;
    let slice = performance.now();
    for (let i = 0; i < all.length; i++) {
      if ((i & 63) === 0 && performance.now() - slice > 8) {
        await yieldNow();
        slice = performance.now();
      }
      const raw = all[i] as { status?: { state?: unknown } } | null;
      if (raw?.status?.state !== 'active') continue;
      if (++active > this.opts.maxSilences) continue;
      const s = wellFormedSilence(raw);
      if (!s) {
        skipped.malformed++;
        continue;
      }
      try {
        const h = this.hold(s, compiled);
        if (h) held.push(h);
        else skipped.matcher_unsupported++;
      } catch (e) {
        if (!(e instanceof BudgetSpent)) throw e;
        skipped.budget++;
      }
    }
    this.patterns = patterns;
    if (active > this.opts.maxSilences) this.opts.log('alertmanager_silences_truncated', { alertmanager, active, kept: this.opts.maxSilences });
    if (skipped.malformed || skipped.matcher_unsupported || skipped.budget) this.opts.log('alertmanager_silences_skipped', { alertmanager, ...skipped });
    this.opts.skipped?.(skipped);
    return held;
  }
}

/** The state budget of one read is spent: this silence and the rest with new patterns are skipped. */
class BudgetSpent extends Error {}
