/**
 * exactIso (src/otlp/wire.ts) formats the date and time once per second and appends the milliseconds and the
 * nanoseconds below them. Property: the same text as the previous formatting (toISOString of the whole
 * milliseconds, then the trimmed sub-millisecond digits) for times in and around the cached second, before 1970
 * and after 9999 (not cached), in any order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exactIso } from '../src/otlp/wire.js';

function reference(ms: number, subNs?: number): string {
  if (subNs === undefined) return new Date(ms).toISOString();
  const whole = Math.round(ms - subNs / 1e6);
  const base = new Date(whole).toISOString();
  if (subNs === 0) return base;
  return `${base.slice(0, -1)}${String(subNs).padStart(6, '0').replace(/0+$/, '')}Z`;
}

const second = fc.integer({ min: 1_700_000_000, max: 1_700_000_003 }).map((s) => s * 1000); // a few seconds: cache hits and misses
const anyWhole = fc.oneof(
  fc.integer({ min: 0, max: 4_102_444_800_000 }),
  fc.integer({ min: -62_000_000_000_000, max: -1 }),
  fc.integer({ min: 253_402_300_000_000, max: 8_000_000_000_000_000 }),
  fc.tuple(second, fc.integer({ min: 0, max: 999 })).map(([s, m]) => s + m),
);
const sub = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 999_999 }), fc.constantFrom(1, 10, 100_000, 999_999, 500_000, 120));

describe('exactIso', () => {
  it('gives the text of the previous formatting, to the nanosecond', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(anyWhole, sub, fc.boolean()), { minLength: 1, maxLength: 30 }), (times) => {
        for (const [whole, subNs, withSub] of times) {
          const ms = whole + subNs / 1e6; // the double a decoder gives
          expect(exactIso(ms, withSub ? subNs : undefined)).toBe(reference(ms, withSub ? subNs : undefined));
        }
      }),
      { numRuns: 3000 },
    );
    expect(exactIso(1_700_000_000_007 + 0.00025, 250)).toBe('2023-11-14T22:13:20.00700025Z');
    expect(exactIso(1_700_000_000_999, 0)).toBe('2023-11-14T22:13:20.999Z');
    expect(exactIso(1_700_000_001_000, 0)).toBe('2023-11-14T22:13:21.000Z');
  });
});
