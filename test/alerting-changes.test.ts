/**
 * The per-run alert look in proportion to what changed (issue 44): between resends, RunAlerts.tick looks only at the
 * runs whose alert inputs changed (the engine's alertChanges), and sends what RunAlerts.update over every alerting
 * run would send. Property: random interleavings of runs entering, changing and leaving the alerting runs and of
 * clock steps, the two side by side: the same alerts in each POST (as sets: within a POST, order is not kept). Work:
 * 20,000 alerting runs and 3 changes look at 3 runs, and walk none of the others, until the resend is due.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify, groupByRun, parseReceiptFile, type RunVerdict } from '../src/core/index.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';
import type { Alert, AlertingRun } from '../src/alerting/alert.js';
import { RunAlerts } from '../src/alerting/run-alerts.js';
import { ROOT } from './helpers/server.js';

const registry = loadContractDir(join(ROOT, 'contracts'));
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
const RUNS = [...groupByRun(drift).keys()];
const NOW = Math.max(...drift.map((r) => Date.parse(r.at))) + 60_000;
const VERDICTS = new Map<string, RunVerdict>(RUNS.map((run) => [run, classify(drift.filter((r) => r.run === run), NOW, registry)]));
const links = { externalUrl: 'https://audit.example', runbookUrl: 'https://audit.example/runbooks' };
const RESEND = 60_000;

type Op =
  | { k: 'set'; run: number; fresh: boolean; inWindow: boolean; stalled: boolean }
  | { k: 'leave'; run: number }
  | { k: 'tick'; dt: number }
  | { k: 'look' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ k: fc.constant('set' as const), run: fc.nat(RUNS.length - 1), fresh: fc.boolean(), inWindow: fc.boolean(), stalled: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('leave' as const), run: fc.nat(RUNS.length - 1) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 40_000 }) }) },
  { weight: 3, arbitrary: fc.constant({ k: 'look' as const }) },
);

const asSet = (batches: Alert[][]) => batches.map((b) => b.map((a) => JSON.stringify(a)).sort());

describe('RunAlerts.tick against RunAlerts.update over every alerting run', () => {
  it('Alertmanager receives the same alerts in the same POSTs for random changes and clock steps', () => {
    let posts = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 20, maxLength: 120 }), fc.func(fc.boolean()), (ops, holdsFn) => {
        const full: Alert[][] = [];
        const incr: Alert[][] = [];
        const a = new RunAlerts(links, RESEND, (x) => full.push(x));
        const b = new RunAlerts(links, RESEND, (x) => incr.push(x));
        const members = new Map<string, AlertingRun>();
        let changed: Set<string> | null = null; // unknown before the first look, as the engine's
        let now = NOW;
        const holds = (run: string) => holdsFn(run) as boolean;
        for (const o of ops) {
          if (o.k === 'set') {
            const run = RUNS[o.run]!;
            const prev = members.get(run);
            const verdict = o.fresh || !prev ? { ...VERDICTS.get(run)! } : prev.verdict; // a new verdict object: evaluated again
            members.set(run, { verdict, enteredAt: NOW - 5000, inWindow: o.inWindow, stalledAt: o.stalled ? NOW - 1 : null, lastAt: NOW - 6000 });
            changed?.add(run);
          } else if (o.k === 'leave') {
            const run = RUNS[o.run]!;
            if (members.delete(run)) changed?.add(run);
          } else if (o.k === 'tick') now += o.dt;
          else {
            a.update(now, members.values(), holds);
            b.tick(now, changed, () => members.values(), (run) => members.get(run), holds);
            changed = new Set();
            expect(asSet(incr)).toEqual(asSet(full));
          }
        }
        posts += full.length;
      }),
      { numRuns: 300 },
    );
    expect(posts).toBeGreaterThan(300);
  });

  it('between resends, 3 changes among 20,000 alerting runs look at 3 runs, then the resend looks at all', () => {
    const sent: Alert[][] = [];
    const ra = new RunAlerts(links, RESEND, (x) => sent.push(x));
    const members = new Map<string, AlertingRun>();
    const v = VERDICTS.get('drift-direct-route')!;
    for (let i = 0; i < 20_000; i++) {
      const run = `r${i}`;
      members.set(run, { verdict: { ...v, run }, enteredAt: NOW - 5000, inWindow: true, stalledAt: null, lastAt: NOW - 6000 });
    }
    let walked = 0;
    const all = function* () {
      for (const r of members.values()) {
        walked++;
        yield r;
      }
    };
    let asked = 0;
    const current = (run: string) => (asked++, members.get(run));
    ra.tick(NOW, null, all, current);
    expect(sent.flat()).toHaveLength(20_000);
    walked = 0;
    members.set('r7', { ...members.get('r7')!, verdict: { ...v, run: 'r7' } }); // evaluated again: the same alert
    members.set('r8', { ...members.get('r8')!, inWindow: false }); // out of its alert window: resolved
    members.delete('r9'); // left: resolved
    ra.tick(NOW + 1_000, new Set(['r7', 'r8', 'r9']), all, current);
    expect(walked).toBe(0);
    expect(asked).toBe(3);
    expect(sent).toHaveLength(2);
    expect(sent[1]!.map((a) => a.labels.run).sort()).toEqual(['r8', 'r9']);
    ra.tick(NOW + 2_000, new Set(), all, current);
    expect(walked).toBe(0);
    expect(sent).toHaveLength(2);
    ra.tick(NOW + RESEND, new Set(), all, current); // the resend: every firing alert again
    expect(walked).toBe(19_999);
    expect(sent[2]).toHaveLength(19_998); // r8 fires no more
  });
});
