import { describe, expect, it } from 'vitest';
import { ReceiptStore } from '../src/store/index.js';
import { tempDir } from './helpers/server.js';

describe('span log', () => {
  it('commits with its append, survives reopening, and is pruned only for traces without pending work', async () => {
    const dir = tempDir('ta-spanlog-');
    const store = ReceiptStore.open(dir);
    // A span log entry alone still commits (an export whose only spans wait for their parent).
    await store.append([], [{ traceId: 't1', loggedAt: 1000, body: '[{"spanId":"a"}]' }]);
    await store.append(
      [{ receipt: { run: 'r', event: 'e', type: 'edge', at: '2026-01-01T00:00:00Z', from: 'a', to: 'b', kind: 'delegate' }, source: 's', receivedAt: 1 }],
      [{ traceId: 't2', loggedAt: 2000, body: '[{"spanId":"b"}]' }],
    );
    store.close();
    const again = ReceiptStore.open(dir);
    expect(again.spanLog().map((e) => e.traceId)).toEqual(['t1', 't2']);
    // Older than 5000, but t1 still pending: only t2 goes.
    expect(await again.pruneSpanLog(5000, (t) => t === 't1')).toBe(1);
    expect(again.spanLog().map((e) => e.traceId)).toEqual(['t1']);
    // Entries newer than the cut stay whatever their trace.
    expect(await again.pruneSpanLog(500, () => false)).toBe(0);
    const [last] = again.spanLog();
    again.deleteSpanLogUpTo(last.seq);
    expect(again.spanLog()).toEqual([]);
    again.close();
  });
});
