/**
 * Delivery to Alertmanager, like Prometheus' notifier: a bounded queue (the oldest alert is dropped, and counted,
 * past it), batches of at most maxBatch alerts sent to every Alertmanager at once (a batch is delivered when one of
 * them took it), and while none takes it, retries with exponential backoff: nothing leaves the queue until it is
 * delivered or dropped. The queue holds one entry per alert (its label set): a newer state of the same alert
 * (a re-send, its resolution) replaces the queued one, so an outage queues each alert once, not once per resend.
 */
import { alertKey, type Alert } from './alert.js';
import type { AlertmanagerError } from './client.js';

/** What the notifier needs of an Alertmanager (AlertmanagerClient). */
export interface AlertSink {
  readonly name: string;
  postAlerts(alerts: readonly Alert[]): Promise<void>;
}

export interface NotifierHooks {
  /** n alerts delivered to one Alertmanager (`success`) or refused by it / not reaching it (`failure`). */
  sent(result: 'success' | 'failure', n: number): void;
  /** n alerts dropped from the full queue. */
  dropped(n: number): void;
  queueLength(n: number): void;
  /** A batch failed at one Alertmanager: the reason only (a status or an error code), never the alerts. */
  failed(alertmanager: string, reason: string, alerts: number, retryInMs: number | null): void;
}

export interface NotifierOptions {
  queueCapacity: number;
  maxBatch: number;
  maxBackoffMs: number;
  /** First pause after a failure (doubled per failure up to maxBackoffMs). */
  minBackoffMs?: number;
}

/**
 * Deletes the `n` oldest entries of a Map with one walk of its keys: O(n). (A fresh `keys().next()` per entry walks
 * past the holes every earlier delete left at the front: quadratic in what overflows.) Returns how many went.
 */
export function dropOldest<K, V>(map: Map<K, V>, n: number): number {
  if (n <= 0) return 0;
  const oldest: K[] = [];
  for (const k of map.keys()) {
    if (oldest.length >= n) break;
    oldest.push(k);
  }
  for (const k of oldest) map.delete(k);
  return oldest.length;
}

export class Notifier {
  private readonly queue = new Map<string, Alert>();
  private running = false;
  private closed = false;
  private backoffMs = 0;
  private wake: (() => void) | null = null;

  constructor(
    private readonly sinks: readonly AlertSink[],
    private readonly opts: NotifierOptions,
    private readonly hooks: NotifierHooks,
  ) {}

  get length(): number {
    return this.queue.size;
  }

  /** Queues alerts (a queued state of the same alert is replaced) and starts sending. */
  enqueue(alerts: readonly Alert[]): void {
    if (this.closed) return;
    for (const a of alerts) {
      const k = alertKey(a);
      this.queue.delete(k);
      this.queue.set(k, a);
    }
    const dropped = dropOldest(this.queue, this.queue.size - this.opts.queueCapacity);
    if (dropped) this.hooks.dropped(dropped);
    this.hooks.queueLength(this.queue.size);
    void this.loop();
  }

  /** Stops sending; alerts still queued are not sent (Alertmanager ends them at their endsAt). */
  close(): void {
    this.closed = true;
    this.wake?.();
  }

  /** Resolves once the queue is empty (for tests and shutdown), or when closed. */
  async drained(): Promise<void> {
    while (!this.closed && (this.queue.size > 0 || this.running)) await new Promise((r) => setTimeout(r, 20));
  }

  private async loop(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (!this.closed && this.queue.size > 0) {
        const batch: [string, Alert][] = [];
        for (const e of this.queue) {
          batch.push(e);
          if (batch.length >= this.opts.maxBatch) break;
        }
        const retryIn = this.nextBackoff();
        if (await this.deliver(batch.map(([, a]) => a), retryIn)) {
          // Delivered: out of the queue, unless a newer state of the same alert was queued meanwhile.
          for (const [k, a] of batch) if (this.queue.get(k) === a) this.queue.delete(k);
          this.backoffMs = 0;
          this.hooks.queueLength(this.queue.size);
        } else {
          this.backoffMs = retryIn;
          await this.pause(retryIn);
        }
      }
    } finally {
      this.running = false;
    }
  }

  private nextBackoff(): number {
    const min = this.opts.minBackoffMs ?? 100;
    return Math.min(this.opts.maxBackoffMs, this.backoffMs === 0 ? min : this.backoffMs * 2);
  }

  /** Sends the batch to every Alertmanager; true when at least one took it. */
  private async deliver(batch: Alert[], retryInMs: number): Promise<boolean> {
    const results = await Promise.allSettled(this.sinks.map((s) => s.postAlerts(batch)));
    const ok = results.some((r) => r.status === 'fulfilled');
    results.forEach((r, i) => {
      this.hooks.sent(r.status === 'fulfilled' ? 'success' : 'failure', batch.length);
      if (r.status === 'rejected') {
        // Retried only when no Alertmanager took the batch (the others get it again at the next resend).
        this.hooks.failed(this.sinks[i].name, (r.reason as AlertmanagerError).reason ?? 'request failed', batch.length, ok ? null : retryInMs);
      }
    });
    return ok;
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      t.unref();
      this.wake = done;
      function done() {
        clearTimeout(t);
        resolve();
      }
    }).then(() => {
      this.wake = null;
    });
  }
}
