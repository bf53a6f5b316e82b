/**
 * The metrics as subscribers of the engine's events (src/audit/events.ts publishes them; this layer does not import
 * the audit layer, so the events it reads are named here by their shape): verdict transitions, shadow verdicts,
 * stored receipts and idle evictions.
 */
import type { ShadowVerdict } from '../core/shadow.js';
import type { Verdict } from '../core/types.js';
import type { AuditMetrics, ReceiptResult } from './audit-metrics.js';

/** The engine's events the metrics count, as much of each as they read. */
export interface MetricEvents {
  verdictEntered: { run: string; contract: string; verdict: Verdict; previous: { verdict: Verdict } | null };
  shadowEntered: { shadow: ShadowVerdict; disagreed: boolean };
  receiptsStored: { type: string; result: ReceiptResult; n: number };
  idleEvicted: { runs: number };
}

/** A source of events by name; subscribe returns the unsubscribe. */
export interface EventSubscriptions<M> {
  subscribe<K extends keyof M>(name: K, fn: (event: M[K]) => void): () => void;
}

/**
 * Cluster mode: a verdict transition is counted once the run's state is in the shared table, so that each is counted
 * by one instance (the cluster's ClusterCoordinator.countWhenWritten).
 */
export interface TransitionGate {
  countWhenWritten(run: string, count: () => void): void;
}

/** Subscribes `metrics` to the engine's events; returns the unsubscribe of them all. */
export function subscribeMetrics(events: EventSubscriptions<MetricEvents>, metrics: AuditMetrics, gate: TransitionGate | null = null): () => void {
  const off = [
    events.subscribe('verdictEntered', (e) => {
      const count = () => metrics.verdictEntered(e.contract, e.verdict, e.run);
      if (gate && e.previous?.verdict !== e.verdict) gate.countWhenWritten(e.run, count);
      else count();
    }),
    events.subscribe('shadowEntered', (e) => metrics.shadowVerdictEntered(e.shadow.contract, e.shadow.version, e.shadow.verdict, e.disagreed)),
    events.subscribe('receiptsStored', (e) => metrics.receipt(e.type, e.result, e.n)),
    events.subscribe('idleEvicted', (e) => metrics.liveRunsIdleEvicted(e.runs)),
  ];
  return () => off.forEach((f) => f());
}
