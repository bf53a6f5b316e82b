/**
 * The engine's one observer mechanism: a small typed event bus (the OpenTelemetry JS API's and Tempo's processors'
 * shape: publish a typed event, subscribers registered by name). The engine publishes verdicts, receipts and run
 * changes; the metrics (src/metrics/events.ts), the gauges (gauges.ts), the logs, the API's waits and the UI's event
 * stream subscribe. A subscriber is called synchronously, in the order subscribed, with the events in the order they
 * were published; one that throws is counted (and reported to `onError`) and the others are still called: no
 * subscriber can break the engine's step that published.
 */
import type { ShadowVerdict } from '../core/shadow.js';
import type { RunVerdict, Verdict } from '../core/types.js';
import type { LiveRun } from './live-run.js';

/** A verdict as counted: the run's pin ('' without one) and its verdict. */
export interface VerdictKey {
  contract: string;
  version: string;
  verdict: Verdict;
}

/** The engine's events, by name. Content-free: run ids, pins, verdicts, counts, receipt types. */
export interface AuditEvents {
  /** A run was (re-)evaluated: its verdict now (every evaluation, changed or not). */
  runEvaluated: { run: string; verdict: RunVerdict };
  /** A run entered a verdict (also on first evaluation, and a restored run whose stored verdict moved). */
  verdictEntered: VerdictKey & { run: string; previous: VerdictKey | null; result: RunVerdict };
  /** A run's shadow verdict under a candidate changed (also on first evaluation); `disagreed`: it started to disagree. */
  shadowEntered: { run: string; shadow: ShadowVerdict; disagreed: boolean };
  /** Receipts of one type had one result in an ingest (counted once per batch and type). */
  receiptsStored: { type: string; result: 'accepted' | 'duplicate' | 'conflict'; n: number };
  /** Runs left live memory idle (see Admission.evictIdle). */
  idleEvicted: { runs: number };
  /** A live run's verdict, entry time or receipts changed (also a run new to live memory). */
  runChanged: { live: LiveRun };
  /** An acknowledgement changed a live run's alert state. */
  runAcked: { live: LiveRun };
  /** A run left live memory (pruned, evicted, dropped); `retired`: settled, it stays counted in topology_runs. */
  runForgotten: { live: LiveRun; retired: boolean };
  /** Cluster mode: a re-evaluation needed the run's receipts back from the shared store and could not read them. */
  readBackFailed: { run: string; error: unknown };
}

export type Subscriber<E> = (event: E) => void;

/** What subscribers see of a bus: subscribe, and the returned function unsubscribes (idempotent). */
export interface EventSource<M> {
  subscribe<K extends keyof M>(name: K, fn: Subscriber<M[K]>): () => void;
}

export interface EventBusOptions<M> {
  /** A subscriber threw (it was counted; the other subscribers were called). */
  onError?: (name: keyof M, error: unknown) => void;
}

export class EventBus<M> implements EventSource<M> {
  /** Subscribers by event name: copied on change, so a publish walks the list as it was when it began. */
  private readonly subscribers = new Map<keyof M, readonly { fn: Subscriber<never> }[]>();
  private readonly errors = new Map<keyof M, number>();

  constructor(private readonly opts: EventBusOptions<M> = {}) {}

  subscribe<K extends keyof M>(name: K, fn: Subscriber<M[K]>): () => void {
    // One entry per subscription: the same function subscribed twice is called twice and unsubscribed once each.
    const entry = { fn: fn as Subscriber<never> };
    this.subscribers.set(name, [...(this.subscribers.get(name) ?? []), entry]);
    let subscribed = true;
    return () => {
      if (!subscribed) return;
      subscribed = false;
      const left = (this.subscribers.get(name) ?? []).filter((s) => s !== entry);
      if (left.length) this.subscribers.set(name, left);
      else this.subscribers.delete(name);
    };
  }

  /** Calls every subscriber of `name` with `event`, in the order they subscribed; a throwing one is counted. */
  publish<K extends keyof M>(name: K, event: M[K]): void {
    const list = this.subscribers.get(name) as readonly { fn: Subscriber<M[K]> }[] | undefined;
    if (!list) return;
    for (const { fn } of list) {
      try {
        fn(event);
      } catch (e) {
        this.errors.set(name, (this.errors.get(name) ?? 0) + 1);
        try {
          this.opts.onError?.(name, e);
        } catch {
          // the error report itself failed: counted above all the same
        }
      }
    }
  }

  /** Whether anything listens for `name` (an event costly to build is then not built). */
  has(name: keyof M): boolean {
    return this.subscribers.has(name);
  }

  /** Subscribers of `name` that threw, since the bus was made (all events: no name). */
  failures(name?: keyof M): number {
    if (name !== undefined) return this.errors.get(name) ?? 0;
    let n = 0;
    for (const v of this.errors.values()) n += v;
    return n;
  }
}
