// Issue 44, end to end: 60 s of OTLP/HTTP where every span starts a new trace (each is logged for its skeleton, so the
// span log fills with one row per trace), then `/healthz` answers within 1 s and SIGTERM ends the server within 10 s.
// Before, the span-log prune that followed such traffic held the event loop for minutes: /healthz went unanswered
// and SIGTERM was ignored. The 1 s and 10 s are the bounds, asserted as bounds (the work takes far less).
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { startServerProcess } from './helpers/server.js';

const TRAFFIC_MS = 60_000;
const CLIENTS = 4;
const SPANS = 512;

/** An OTLP/JSON export of `SPANS` spans, each in a trace of its own: chat spans with content, and agent spans whose parent is still to come. */
function freshTraces(): string {
  const start = BigInt(Date.now()) * 1_000_000n;
  const content = JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'summarise the quarterly report '.repeat(40) }] }]);
  const spans = Array.from({ length: SPANS }, (_, i) => {
    const agent = i % 8 === 0;
    return {
      traceId: randomBytes(16).toString('hex'),
      spanId: randomBytes(8).toString('hex'),
      ...(agent ? { parentSpanId: randomBytes(8).toString('hex') } : {}),
      name: agent ? 'invoke_agent researcher' : 'chat gpt-4o',
      kind: agent ? 1 : 3,
      startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + 2_000_000n),
      attributes: agent
        ? [
            { key: 'gen_ai.operation.name', value: { stringValue: 'invoke_agent' } },
            { key: 'gen_ai.agent.name', value: { stringValue: 'researcher' } },
          ]
        : [
            { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
            { key: 'gen_ai.input.messages', value: { stringValue: content } },
          ],
    };
  });
  return JSON.stringify({ resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'fresh-traces' } }] }, scopeSpans: [{ scope: { name: 'e2e' }, spans }] }] });
}

/** The value of an unlabelled sample in a Prometheus exposition. */
const sample = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

describe('fresh-trace traffic, then health and shutdown (issue 44)', () => {
  it('answers /healthz within 1 s after 60 s of fresh-trace traffic, and SIGTERM ends it within 10 s', { timeout: 300_000 }, async () => {
    const server = await startServerProcess();
    try {
      let acknowledged = 0;
      const deadline = Date.now() + TRAFFIC_MS;
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (Date.now() < deadline) {
            const r = await fetch(`${server.otlpHttp}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: freshTraces() });
            await r.arrayBuffer();
            if (r.status === 200) acknowledged++;
          }
        }),
      );
      expect(acknowledged).toBeGreaterThan(0);

      const t0 = performance.now();
      const health = await fetch(`${server.api}/healthz`, { signal: AbortSignal.timeout(30_000) });
      const healthMs = performance.now() - t0;
      expect(health.status).toBe(200);
      expect(healthMs).toBeLessThan(1_000);

      // The span log was filled and is pruned by the sliced job, which reports its slices and the event loop's delay.
      const metrics = await (await fetch(`${server.api}/metrics`)).text();
      expect(sample(metrics, 'nodejs_eventloop_lag_max_seconds')).toBeGreaterThan(0);
      expect(sample(metrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      expect(sample(metrics, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
      // a minute of traffic allocates: young-generation collections were timed
      expect(Number(/^nodejs_gc_duration_seconds_count\{kind="minor"\} (\S+)$/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
      expect(Number(/^topology_periodic_slice_seconds_count\{task="span_log_prune"\} (\S+)$/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
      expect(Number(/^topology_periodic_task_failures_total\{task="span_log_prune"\} (\S+)$/m.exec(metrics)?.[1] ?? NaN)).toBe(0);

      const t1 = performance.now();
      const code = await server.stop('SIGTERM');
      const stopMs = performance.now() - t1;
      expect(code).toBe(0);
      expect(stopMs).toBeLessThan(10_000);
      expect(server.stdout() + server.stderr()).toContain('"stopped"');
      console.log(JSON.stringify({ acknowledged, spans: acknowledged * SPANS, healthMs: Math.round(healthMs), stopMs: Math.round(stopMs) }));
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  });
});
