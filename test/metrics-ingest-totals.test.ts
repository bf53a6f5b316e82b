// The ingest summary reads typed totals from the counter objects (src/metrics/ingest-totals.ts); they must equal
// what the exposition says, and the summary counts only what grew.
import { describe, expect, it } from 'vitest';
import { createAuditMetrics, ingestSummary } from '../src/metrics/index.js';

const sumOf = (text: string, re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);

describe('ingest totals', () => {
  it('equal the exposition and give the per-interval summary', () => {
    const m = createAuditMetrics();
    const base = m.ingestTotals();
    m.receipt('edge', 'accepted', 3);
    m.receipt('run.start', 'accepted');
    m.receipt('edge', 'duplicate', 2);
    m.receipt('edge', 'conflict');
    m.receipt('invalid', 'rejected', 4);
    m.ingestRefused('receipt_invalid', 4);
    m.ingestRefused('run_scope');
    m.otlpSpans('http', 'dropped', 5);
    m.otlpSpans('grpc', 'dropped', 1);
    m.otlpSpans('grpc', 'rejected', 2);
    m.ingestRejected('http', 'saturated');
    m.ingestRejected('grpc', 'saturated', 2);
    m.ingestRejected('ndjson', 'live_limit');
    m.pendingParentEvicted(3, 'trace');
    m.callerUnresolved(2);
    const cur = m.ingestTotals();
    const text = m.render('prometheus');
    expect(cur.receipts.accepted).toBe(sumOf(text, /^topology_receipts_total\{type="[^"]*",result="accepted"\} (\S+)$/gm));
    expect(cur.receipts).toEqual({ accepted: 4, duplicates: 2, conflicts: 1, rejected: 4 });
    expect(cur.spans).toEqual({ dropped: 6, rejected: 2, evicted: 3, callerUnresolved: 2 });
    expect(cur.rejectedRequests.get('saturated')).toBe(sumOf(text, /^topology_ingest_rejected_requests_total\{transport="[^"]*",reason="saturated"\} (\S+)$/gm));
    expect(ingestSummary(cur, base)).toEqual({
      accepted: 4,
      duplicates: 2,
      conflicts: 1,
      rejected: { total: 4, byReason: { receipt_invalid: 4, run_scope: 1 } },
      rejectedRequests: { saturated: 3, live_limit: 1 },
      droppedSpans: { no_receipt: 6, rejected: 2, evicted: 3, caller_unresolved: 2 },
    });
    expect(ingestSummary(cur, cur)).toEqual({ accepted: 0, duplicates: 0, conflicts: 0, rejected: { total: 0, byReason: {} }, rejectedRequests: {}, droppedSpans: {} });
  });
});
