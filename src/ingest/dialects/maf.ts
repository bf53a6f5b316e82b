/**
 * Microsoft Agent Framework workflows (agent_framework observability, `_workflows` tracing): an executor
 * handles a message in an INTERNAL `executor.process {executor.id}` span (older releases: `executor.process`)
 * with `executor.id` and `executor.type`, a child of `workflow.run` and LINKED, not parented, to the PRODUCER
 * `message.send` span(s) that sent the message; `message.send` is a child of the sender's
 * `executor.process`. Routing runs in `edge_group.process {type}` spans with `edge_group.type`,
 * `edge_group.id`, `message.source_id`, `message.target_id` (when the sender named one),
 * `edge_group.delivered` and `edge_group.delivery_status`.
 */
import { isId, str, agentSpanOf, targetGap, unnamedAgent, type Dialect } from './common.js';

/** Sender -> executor, one handoff per link (a fan-in has several); an unlinked executor is the workflow's start. */
export const mafExecutor: Dialect = (span) => {
  if (!span.name.startsWith('executor.process')) return null;
  const executor = str(span.attrs['executor.id']);
  if (executor === undefined) return null;
  if (!isId(executor)) return unnamedAgent('maf', span, 'agent_id_invalid');
  return { dialect: 'maf', receipts: [], agentSpan: agentSpanOf(span, executor, span.links.length ? { links: span.links } : {}) };
};

/**
 * Delivered, buffered and dropped (type or target mismatch, condition false) messages yield nothing here:
 * a delivery shows as the target's `executor.process`, a drop is routing, not an interaction. An
 * `exception` means a message was being routed when it failed and its fate is unknown: a gap.
 */
export const mafEdgeGroup: Dialect = (span) => {
  if (!span.name.startsWith('edge_group.process')) return null;
  const status = str(span.attrs['edge_group.delivery_status']);
  if (status !== 'exception') return { dialect: 'maf', receipts: [] };
  return { dialect: 'maf', receipts: [targetGap(span, 'edge_delivery_failed', { from: str(span.attrs['message.source_id']), to: str(span.attrs['message.target_id']) })] };
};

/** `message.send`: the target of executor links, indexed so that the sender can be found. */
export const mafMessageSend: Dialect = (span) => (span.name === 'message.send' ? { dialect: 'maf', receipts: [], relay: true } : null);
