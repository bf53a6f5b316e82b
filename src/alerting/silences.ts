/**
 * Alertmanager silences seen on runs: the active silences, read through API v2 at most once per cache period
 * (from the first Alertmanager that answers: an HA pair shares its silences) and bounded in number, matched against
 * the labels of a run's alert as Alertmanager matches them (=, !=, =~, !~, regular expressions anchored).
 */
import { millisOf } from '../core/time.js';
import type { Matcher, Silence } from './client.js';

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

const regexCache = new Map<string, RegExp | null>();
function anchored(pattern: string): RegExp | null {
  let re = regexCache.get(pattern);
  if (re === undefined) {
    try {
      re = new RegExp(`^(?:${pattern})$`, 'su');
    } catch {
      re = null; // a pattern JavaScript cannot read matches nothing here
    }
    if (regexCache.size >= 1000) regexCache.clear();
    regexCache.set(pattern, re);
  }
  return re;
}

/** One matcher against a label set (an absent label is the empty string, as in Alertmanager). */
export function matcherMatches(m: Matcher, labels: Readonly<Record<string, string>>): boolean {
  const v = labels[m.name] ?? '';
  const hit = m.isRegex ? (anchored(m.value)?.test(v) ?? false) : v === m.value;
  return (m.isEqual ?? true) ? hit : !hit;
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

export class SilenceCache {
  private active: Silence[] = [];
  private readAt = -Infinity;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly sources: readonly SilenceSource[],
    private readonly opts: { cacheMs: number; maxSilences: number; clock: () => number; log: (event: string, fields: Record<string, unknown>) => void },
  ) {}

  /** The active silence that matches these labels and ends last, or null. */
  async matching(labels: Readonly<Record<string, string>>): Promise<SilenceView | null> {
    await this.fresh();
    const now = this.opts.clock();
    let best: Silence | null = null;
    for (const s of this.active) {
      if (millisOf(s.endsAt) <= now || millisOf(s.startsAt) > now) continue;
      if (silenceMatches(s, labels) && (!best || s.endsAt > best.endsAt)) best = s;
    }
    return best ? silenceView(best) : null;
  }

  /** Forget what was read (a silence was just created). */
  invalidate(): void {
    this.readAt = -Infinity;
  }

  private fresh(): Promise<void> {
    if (this.opts.clock() - this.readAt < this.opts.cacheMs) return Promise.resolve();
    this.reading ??= this.read().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  private async read(): Promise<void> {
    for (const src of this.sources) {
      try {
        const all = await src.silences();
        const active = all.filter((s) => s?.status?.state === 'active' && Array.isArray(s.matchers));
        if (active.length > this.opts.maxSilences) this.opts.log('alertmanager_silences_truncated', { alertmanager: src.name, active: active.length, kept: this.opts.maxSilences });
        this.active = active.slice(0, this.opts.maxSilences);
        this.readAt = this.opts.clock();
        return;
      } catch (e) {
        this.opts.log('alertmanager_silences_failed', { alertmanager: src.name, reason: (e as { reason?: string }).reason ?? 'request failed' });
      }
    }
    // None answered: keep what was read before, and try again after a cache period.
    this.readAt = this.opts.clock();
  }
}
