/**
 * The receipt span processor: every ended receipt span goes to the exporter, in order, one export request in
 * flight at a time (so an exporter's concurrency limit is never hit), with no queue limit (receipts are few and
 * small; the SDK's batch processor drops spans when its queue is full, and a dropped receipt is a lie by
 * omission). Failed exports are counted and reported by `forceFlush`'s caller through `takeFailures`.
 */
import type { Context } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

const MAX_BATCH = 512;

export interface ExportFailures {
  receipts: number;
  lastError: string | null;
}

export class ReceiptSpanProcessor implements SpanProcessor {
  private readonly queue: ReadableSpan[] = [];
  private inflight: Promise<void> | null = null;
  private failed = 0;
  private lastError: string | null = null;
  private closed = false;

  constructor(private readonly exporter: SpanExporter) {}

  onStart(_span: Span, _parentContext: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (this.closed) {
      this.failed++;
      this.lastError = 'the emitter was shut down';
      return;
    }
    this.queue.push(span);
    if (!this.inflight) this.inflight = this.pump();
  }

  private async pump(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      const result = await new Promise<{ code: ExportResultCode; error?: Error }>((resolve) => {
        try {
          this.exporter.export(batch, resolve);
        } catch (e) {
          resolve({ code: ExportResultCode.FAILED, error: e as Error });
        }
      });
      if (result.code !== ExportResultCode.SUCCESS) {
        this.failed += batch.length;
        this.lastError = result.error?.message ?? 'export failed';
      }
    }
    this.inflight = null;
  }

  /** Resolves when every receipt ended so far has been exported (or has failed). */
  async forceFlush(): Promise<void> {
    while (this.inflight) await this.inflight;
    await this.exporter.forceFlush?.();
  }

  /** Failures since the last call. */
  takeFailures(): ExportFailures {
    const f = { receipts: this.failed, lastError: this.lastError };
    this.failed = 0;
    this.lastError = null;
    return f;
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    this.closed = true;
    await this.exporter.shutdown();
  }
}
