import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VERDICTS } from '../src/core/types.js';
import {
  INGEST_REJECT_REASONS,
  METRIC_NAMES,
  createAuditMetrics,
  type AuditMetrics,
} from '../src/metrics/audit-metrics.js';
import {
  FORBIDDEN_LABEL_NAMES,
  MetricsRegistry,
  OPENMETRICS_CONTENT_TYPE,
  PROMETHEUS_CONTENT_TYPE,
  contentTypeFor,
  escapeLabelValue,
} from '../src/metrics/registry.js';
import { parseExposition, type ParsedSample } from './helpers/metrics-exposition.js';
import { runPromtoolWithInput } from './helpers/prometheus.js';

const T0 = 1_700_000_000_123;

function exercised(): AuditMetrics {
  const m = createAuditMetrics({ version: '0.1.0', now: () => T0 });
  m.setRunsGauge([
    { contract: 'research-publish', version: '3', verdict: 'forbidden_edge', runs: 2 },
    { contract: 'research-publish', version: '3', verdict: 'healthy', runs: 5 },
  ]);
  m.verdictEntered('research-publish', 'forbidden_edge', 'run-7');
  m.receipt('edge', 'accepted', 3);
  m.receipt('run.start', 'duplicate');
  m.otlpSpans('grpc', 'receipt', 4);
  m.otlpSpans('http', 'dropped', 10);
  m.ingestRequest('http', 200);
  m.ingestRequest('grpc', 'RESOURCE_EXHAUSTED');
  m.ingestRejected('grpc', 'saturated');
  m.storeCommit(0.004, 12);
  m.setLiveRuns(7);
  m.setPendingParentSpans(3);
  m.pendingParentEvicted();
  m.callerUnresolved(2);
  m.setIngestQueueDepth(40);
  m.setIngestSaturated(true);
  m.setStoreHealthy(false);
  return m;
}

/** Lone surrogates become U+FFFD (written independently of the registry's regex). */
function wellFormed(v: string): string {
  return Array.from(v, (ch) => (ch.length === 1 && ch >= '\uD800' && ch <= '\uDFFF' ? '\uFFFD' : ch)).join('');
}

function find(samples: ParsedSample[], name: string, labels: Record<string, string> = {}): ParsedSample | undefined {
  return samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}

describe('Prometheus text format 0.0.4', () => {
  const text = exercised().render('prometheus');
  const parsed = parseExposition(text, 'prometheus');

  it('parses line by line: HELP, then TYPE, then samples of that metric, values as written', () => {
    expect(parsed.families.length).toBeGreaterThan(10);
    for (const f of parsed.families) {
      expect(f.help, f.name).toBeTruthy();
      expect(f.type, f.name).toBeTruthy();
      expect(f.samples.length, f.name).toBeGreaterThan(0);
    }
    expect(find(parsed.samples, 'topology_runs', { verdict: 'forbidden_edge' })?.value).toBe(2);
    expect(find(parsed.samples, 'topology_receipts_total', { type: 'edge', result: 'accepted' })?.value).toBe(3);
    expect(find(parsed.samples, 'topology_ingest_requests_total', { code: 'RESOURCE_EXHAUSTED' })?.value).toBe(1);
    expect(find(parsed.samples, 'topology_store_healthy')?.value).toBe(0);
    expect(find(parsed.samples, 'topology_ingest_saturated')?.value).toBe(1);
    expect(find(parsed.samples, 'topology_build_info', { version: '0.1.0' })?.value).toBe(1);
  });

  it('names counters with _total in TYPE lines and writes no exemplar and no # EOF', () => {
    expect(text).toContain('# TYPE topology_verdicts_total counter\n');
    expect(text).not.toContain(' # {');
    expect(text).not.toContain('# EOF');
    expect(text).not.toContain('# UNIT');
    expect(text).toContain('# TYPE topology_build_info gauge\n');
  });

  it('passes promtool check metrics (the reference parser and linter)', () => {
    const r = runPromtoolWithInput(['check', 'metrics'], text);
    expect(r.output).toBe('');
    expect(r.code).toBe(0);
  });

  it('writes cumulative histogram buckets with le, +Inf, _sum and _count', () => {
    const m = createAuditMetrics();
    for (const v of [0.0005, 0.0006, 0.01, 3]) m.storeCommit(v, 1);
    const s = parseExposition(m.render('prometheus'), 'prometheus').samples;
    const bucket = (le: string) => find(s, 'topology_store_commit_duration_seconds_bucket', { le })?.value;
    expect(bucket('0.0005')).toBe(1); // the bound itself is inside its bucket (le = less or equal)
    expect(bucket('0.001')).toBe(2);
    expect(bucket('0.01')).toBe(3);
    expect(bucket('2.5')).toBe(3);
    expect(bucket('+Inf')).toBe(4);
    expect(find(s, 'topology_store_commit_duration_seconds_count')?.value).toBe(4);
    expect(find(s, 'topology_store_commit_duration_seconds_sum')?.value).toBeCloseTo(3.0111, 10);
  });
});

describe('OpenMetrics 1.0 text', () => {
  const text = exercised().render('openmetrics');
  const parsed = parseExposition(text, 'openmetrics');

  it('ends with # EOF and names counter families without _total', () => {
    expect(text.endsWith('# EOF\n')).toBe(true);
    expect(parsed.eof).toBe(true);
    expect(text).toContain('# TYPE topology_verdicts counter\n');
    expect(text).toContain('# TYPE topology_build info\n');
    expect(text).toContain('# UNIT topology_store_commit_duration_seconds seconds\n');
    expect(find(parsed.samples, 'topology_verdicts_total', { verdict: 'forbidden_edge' })?.value).toBe(1);
  });

  it('carries the run id as an exemplar on topology_verdicts_total, and nowhere else', () => {
    const withExemplar = parsed.samples.filter((s) => s.exemplar !== undefined);
    expect(withExemplar.map((s) => s.name)).toEqual(['topology_verdicts_total']);
    expect(withExemplar[0]!.exemplar).toEqual({ labels: { run_id: 'run-7' }, value: 1, timestamp: T0 / 1000 });
    for (const s of parsed.samples) {
      for (const name of Object.keys(s.labels)) expect(FORBIDDEN_LABEL_NAMES.has(name), `${s.name} ${name}`).toBe(false);
    }
    expect(text.match(/run-7/g)).toHaveLength(1);
  });

  it('keeps the newest exemplar per series and omits one longer than 128 characters', () => {
    let now = T0;
    const m = createAuditMetrics({ now: () => now });
    m.verdictEntered('c', 'incomplete', 'first');
    now += 1000;
    m.verdictEntered('c', 'incomplete', 'second');
    let s = parseExposition(m.render('openmetrics'), 'openmetrics').samples;
    expect(find(s, 'topology_verdicts_total')).toMatchObject({ value: 2, exemplar: { labels: { run_id: 'second' } } });

    const m2 = createAuditMetrics();
    m2.verdictEntered('c', 'incomplete', 'x'.repeat(122)); // run_id (6) + 122 = 128: allowed
    s = parseExposition(m2.render('openmetrics'), 'openmetrics').samples;
    expect(find(s, 'topology_verdicts_total')?.exemplar?.labels.run_id).toHaveLength(122);
    const m3 = createAuditMetrics();
    m3.verdictEntered('c', 'incomplete', 'x'.repeat(123));
    s = parseExposition(m3.render('openmetrics'), 'openmetrics').samples;
    expect(find(s, 'topology_verdicts_total')).toMatchObject({ value: 1 });
    expect(find(s, 'topology_verdicts_total')?.exemplar).toBeUndefined();
  });

  it('writes histogram bounds as floats', () => {
    expect(text).toContain('topology_store_commit_batch_size_bucket{le="10.0"} 0\n');
    expect(text).toContain('topology_store_commit_batch_size_bucket{le="20.0"} 1\n');
  });
});

describe('label safety', () => {
  it('refuses run, agent, trace and span identities as label names, in any case', () => {
    for (const name of ['run', 'run_id', 'agent', 'agent_id', 'trace_id', 'span_id', 'Run_Id', 'TRACE_ID']) {
      const r = new MetricsRegistry();
      expect(() => r.counter({ name: 'x_total', help: 'h', labelNames: [name] }), name).toThrow(/refused/);
      expect(() => r.gauge({ name: 'g', help: 'h', labelNames: ['contract', name] }), name).toThrow(/refused/);
    }
    const r = new MetricsRegistry();
    expect(() => r.counter({ name: 'x_total', help: 'h', labelNames: ['__name__'] })).toThrow(/invalid label name/);
    expect(() => r.counter({ name: 'x_total', help: 'h', labelNames: ['bad-name'] })).toThrow(/invalid label name/);
    expect(() => r.histogram({ name: 'h_seconds', help: 'h', labelNames: ['le'], buckets: [1] })).toThrow(/reserved/);
    expect(() => r.counter({ name: 'x', help: 'h' })).toThrow(/_total/);
    expect(() => r.counter({ name: '1x_total', help: 'h' })).toThrow(/invalid metric name/);
    r.gauge({ name: 'dup', help: 'h' });
    expect(() => r.counter({ name: 'dup_total', help: 'h' })).toThrow(/collides/);
  });

  it('escapes backslash, double quote and line feed in label values and HELP', () => {
    const r = new MetricsRegistry();
    const g = r.gauge({ name: 'g', help: 'a \\ b\nc "q"', labelNames: ['contract'] });
    g.set(['a\\b"c\nd'], 1);
    const text = r.render('prometheus');
    expect(text).toContain('g{contract="a\\\\b\\"c\\nd"} 1\n');
    expect(text).toContain('# HELP g a \\\\ b\\nc "q"\n');
    expect(r.render('openmetrics')).toContain('# HELP g a \\\\ b\\nc \\"q\\"\n');
    expect(parseExposition(text, 'prometheus').samples[0]!.labels.contract).toBe('a\\b"c\nd');
  });

  it('round-trips any label value through both formats (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ maxLength: 10 }), (contract, version) => {
        const m = createAuditMetrics();
        m.setRunsGauge([{ contract, version, verdict: 'waiting', runs: 1 }]);
        const expected = (v: string) => (v === '' ? 'none' : wellFormed(v));
        for (const format of ['prometheus', 'openmetrics'] as const) {
          const s = find(parseExposition(m.render(format), format).samples, 'topology_runs', { verdict: 'waiting' });
          expect(s?.labels).toEqual({ contract: expected(contract), version: expected(version), verdict: 'waiting' });
        }
      }),
      { numRuns: 300 },
    );
  });

  it('replaces lone surrogates so the output is valid UTF-8', () => {
    expect(escapeLabelValue('a\uD800b\uDC00c\uD83D\uDE00')).toBe('a\uFFFDb\uFFFDc\uD83D\uDE00');
  });

  it('maps receipt types from untrusted input to "invalid" and refuses values outside the closed sets', () => {
    const m = createAuditMetrics();
    m.receipt('<script>alert(1)</script>', 'rejected');
    m.receipt('handoff', 'accepted');
    const s = parseExposition(m.render(), 'prometheus').samples;
    expect(find(s, 'topology_receipts_total', { type: 'invalid', result: 'rejected' })?.value).toBe(1);
    expect(find(s, 'topology_receipts_total', { type: 'handoff' })?.value).toBe(1);
    expect(m.render()).not.toContain('script');
    expect(() => m.receipt('edge', 'lost' as never)).toThrow(/receipt result/);
    expect(() => m.otlpSpans('udp' as never, 'receipt')).toThrow(/transport/);
    expect(() => m.ingestRejected('http', 'because' as never)).toThrow(/reject reason/);
    expect(() => m.verdictEntered('c', 'green' as never, 'r')).toThrow(/verdict/);
    m.ingestRequest('http', 'a"b{c}');
    expect(find(parseExposition(m.render(), 'prometheus').samples, 'topology_ingest_requests_total')?.labels.code).toBe('other');
    for (const reason of INGEST_REJECT_REASONS) m.ingestRejected('ndjson', reason);
    expect(parseExposition(m.render(), 'prometheus').samples.filter((x) => x.labels.transport === 'ndjson')).toHaveLength(INGEST_REJECT_REASONS.length);
  });

  it('caps the series of a metric and counts the refused label combinations', () => {
    const m = createAuditMetrics({ maxSeries: 20 });
    m.setRunsGauge([{ contract: 'c1', version: '1', verdict: 'healthy', runs: 1 }]); // 10 series
    m.setRunsGauge([
      { contract: 'c1', version: '1', verdict: 'healthy', runs: 1 },
      { contract: 'c2', version: '1', verdict: 'healthy', runs: 1 },
      { contract: 'c3', version: '1', verdict: 'forbidden_edge', runs: 1 },
    ]);
    const s = parseExposition(m.render(), 'prometheus').samples;
    expect(s.filter((x) => x.name === 'topology_runs')).toHaveLength(20);
    expect(find(s, 'topology_runs', { contract: 'c3' })).toBeUndefined();
    expect(find(s, METRIC_NAMES.seriesRefused, { metric: 'topology_runs' })?.value).toBe(10);
  });
});

describe('counters are monotonic', () => {
  it('refuses negative, NaN and infinite increments and keeps the value', () => {
    const r = new MetricsRegistry();
    const c = r.counter({ name: 'c_total', help: 'h', labelNames: ['result'] });
    c.inc(['ok'], 2);
    expect(() => c.inc(['ok'], -1)).toThrow(RangeError);
    expect(() => c.inc(['ok'], Number.NaN)).toThrow(RangeError);
    expect(() => c.inc(['ok'], Infinity)).toThrow(RangeError);
    expect(c.value(['ok'])).toBe(2);
    const m = createAuditMetrics();
    expect(() => m.receipt('edge', 'accepted', -3)).toThrow(RangeError);
    expect(() => m.callerUnresolved(-1)).toThrow(RangeError);
  });

  it('never decreases across any sequence of increments (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.nat(1000), fc.integer({ min: -5, max: -1 })), { maxLength: 50 }), (ns) => {
        const m = createAuditMetrics();
        let previous = 0;
        for (const n of ns) {
          try {
            m.otlpSpans('http', 'dropped', n);
          } catch {
            /* refused */
          }
          const v = find(parseExposition(m.render(), 'prometheus').samples, 'topology_otlp_spans_total')?.value ?? 0;
          expect(v).toBeGreaterThanOrEqual(previous);
          previous = v;
        }
        expect(previous).toBe(ns.filter((n) => n >= 0).reduce((a, b) => a + b, 0));
      }),
      { numRuns: 100 },
    );
  });
});

describe('setRunsGauge', () => {
  it('fills every verdict for each pinned (contract, version) and drops pairs no longer listed', () => {
    const m = createAuditMetrics();
    m.setRunsGauge([
      { contract: 'a', version: '1', verdict: 'working', runs: 2 },
      { contract: 'a', version: '1', verdict: 'working', runs: 1 },
      { contract: '', version: '', verdict: 'uncertain', runs: 4 },
    ]);
    let s = parseExposition(m.render(), 'prometheus').samples.filter((x) => x.name === 'topology_runs');
    expect(s).toHaveLength(2 * VERDICTS.length);
    expect(find(s, 'topology_runs', { contract: 'a', verdict: 'working' })?.value).toBe(3);
    expect(find(s, 'topology_runs', { contract: 'a', verdict: 'forbidden_edge' })?.value).toBe(0);
    expect(find(s, 'topology_runs', { contract: 'none', version: 'none', verdict: 'uncertain' })?.value).toBe(4);
    m.setRunsGauge([{ contract: 'b', version: '2', verdict: 'healthy', runs: 1 }]);
    s = parseExposition(m.render(), 'prometheus').samples.filter((x) => x.name === 'topology_runs');
    expect(s).toHaveLength(VERDICTS.length);
    expect(new Set(s.map((x) => x.labels.contract))).toEqual(new Set(['b']));
  });
});

describe('contentTypeFor', () => {
  it("serves OpenMetrics to Prometheus's default Accept header", () => {
    const accept =
      'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
    expect(contentTypeFor(accept)).toEqual({ format: 'openmetrics', contentType: OPENMETRICS_CONTENT_TYPE });
    expect(contentTypeFor('application/openmetrics-text')).toMatchObject({ format: 'openmetrics' });
  });

  it('serves the text format otherwise', () => {
    for (const accept of [
      undefined,
      '',
      '*/*',
      'text/plain',
      'text/plain;version=0.0.4',
      'application/openmetrics-text;version=1.0.0;q=0.2,text/plain;q=0.5',
      'application/openmetrics-text;version=2.0.0',
      'application/openmetrics-text;q=0',
      'application/json',
      ',;;=,garbage',
    ]) {
      expect(contentTypeFor(accept), String(accept)).toEqual({ format: 'prometheus', contentType: PROMETHEUS_CONTENT_TYPE });
    }
  });
});
