/**
 * The ingest counters as typed totals, read from the registry's counter objects (never from the exposition text),
 * and the content-free summary of what changed between two readings (the `ingest_summary` log line).
 */

/** Totals since start, summed over transports and receipt types; maps keep the counters' series order. */
export interface IngestTotals {
  receipts: { accepted: number; duplicates: number; conflicts: number; rejected: number };
  /** topology_ingest_refused_total by reason (the trust boundary's refusals). */
  refused: ReadonlyMap<string, number>;
  /** topology_ingest_rejected_requests_total by reason. */
  rejectedRequests: ReadonlyMap<string, number>;
  /** Spans that gave no receipt: dropped and rejected (topology_otlp_spans_total), evicted, caller unresolved. */
  spans: { dropped: number; rejected: number; evicted: number; callerUnresolved: number };
}

export interface IngestSummary {
  accepted: number;
  duplicates: number;
  conflicts: number;
  rejected: { total: number; byReason: Record<string, number> };
  rejectedRequests: Record<string, number>;
  droppedSpans: Record<string, number>;
}

/** What changed from `base` to `cur`: counts, and per reason only the reasons that grew. */
export function ingestSummary(cur: IngestTotals, base: IngestTotals): IngestSummary {
  const grown = (c: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>) => {
    const out: Record<string, number> = {};
    for (const [k, n] of c) if (n - (b.get(k) ?? 0) > 0) out[k] = n - (b.get(k) ?? 0);
    return out;
  };
  const droppedSpans: Record<string, number> = {};
  for (const [k, name] of [['dropped', 'no_receipt'], ['rejected', 'rejected'], ['evicted', 'evicted'], ['callerUnresolved', 'caller_unresolved']] as const) {
    if (cur.spans[k] - base.spans[k] > 0) droppedSpans[name] = cur.spans[k] - base.spans[k];
  }
  const r = (k: keyof IngestTotals['receipts']) => cur.receipts[k] - base.receipts[k];
  return {
    accepted: r('accepted'),
    duplicates: r('duplicates'),
    conflicts: r('conflicts'),
    rejected: { total: r('rejected'), byReason: grown(cur.refused, base.refused) },
    rejectedRequests: grown(cur.rejectedRequests, base.rejectedRequests),
    droppedSpans,
  };
}
