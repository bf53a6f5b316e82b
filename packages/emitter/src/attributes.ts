/** A receipt as the span attributes the auditor reads back (interfaces.md "Span attributes"; src/ingest/extract.ts). */
import type { Attributes } from '@opentelemetry/api';
import type { Receipt, ReceiptField } from '@topology-audit/receipt';

const KEYS: [ReceiptField, string][] = [
  ['version', 'topology.contract.version'],
  ['contract', 'topology.contract.id'],
  ['phase', 'topology.phase'],
  ['from', 'topology.edge.from'],
  ['to', 'topology.edge.to'],
  ['kind', 'topology.edge.kind'],
  ['on', 'topology.wait.on'],
  ['edge', 'topology.wait.edge'],
  ['deadline', 'topology.wait.deadline'],
  ['verified', 'topology.outcome.verified'],
  ['result', 'topology.run.result'],
  ['reason', 'topology.gap.reason'],
];

export function receiptSpanAttributes(r: Receipt): Attributes {
  const a: Attributes = { 'topology.run.id': r.run, 'topology.event.type': r.type };
  const fields: Readonly<Record<string, unknown>> = r; // a field of any receipt type (Receipt is a union by `type`)
  for (const [field, key] of KEYS) {
    const v = fields[field];
    if (typeof v === 'string' || typeof v === 'boolean') a[key] = v;
  }
  return a;
}
