/**
 * The run list's page is a seek, not a scan (issue 50; the soak's per-minute paging of every acknowledged run): with its
 * keyset cursor bound as parameters, SQLite's plan for listRuns searches runs_by_first from the cursor in both orders and
 * with a verdict filter. The `first_at > ? OR (first_at = ? AND run > ?)` form it replaced is planned as a SCAN of the
 * index from its start on every page (180 ms a page at 150,000 runs against 9 ms, bench-measured).
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DATABASE_FILE, ReceiptStore } from '../src/store/index.js';
import { listRunsQuery } from '../src/store/sqlite/run-reads.js';
import { tempDir } from './helpers/server.js';

describe('listRuns query plan', () => {
  it('seeks runs_by_first to the cursor, in both orders, with and without a verdict filter', async () => {
    const dir = tempDir('ta-listplan-');
    const store = ReceiptStore.open(dir);
    // A few runs so the planner has a table to look at; the plan does not depend on the count.
    await store.append(Array.from({ length: 50 }, (_, i) => ({ receipt: { run: `plan-run-${i}`, event: 'e', type: 'edge' as const, at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' as const }, source: 's', receivedAt: 1_000 + i })));
    await store.sync();
    const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
    for (const oldest of [true, false]) {
      for (const verdict of [undefined, 'healthy']) {
        const { sql, args } = listRunsQuery({ oldest, verdict, after: { firstAt: 1_010, run: 'plan-run-10' }, limit: 1000 });
        const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args).map((r) => (r as { detail: string }).detail);
        expect(plan.join(' | ')).toMatch(/SEARCH r USING (COVERING )?INDEX runs_by_first \(\(first_at,run\)[<>]\(\?,\?\)\)/);
        expect(plan.join(' | ')).not.toMatch(/SCAN r\b/);
        // And the page is the right one: the rows after the cursor, in order.
        const rows = store.listRuns({ oldest, verdict, after: { firstAt: 1_010, run: 'plan-run-10' }, limit: 5 });
        if (verdict) expect(rows).toEqual([]);
        else expect(rows.map((r) => r.firstAt)).toEqual(oldest ? [1_011, 1_012, 1_013, 1_014, 1_015] : [1_009, 1_008, 1_007, 1_006, 1_005]);
      }
    }
    db.close();
    store.close();
  });
});
