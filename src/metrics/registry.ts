/**
 * A small, dependency-free metrics registry that renders two exposition formats:
 * - the Prometheus text format 0.0.4 (`text/plain; version=0.0.4`), and
 * - OpenMetrics 1.0 text (`application/openmetrics-text; version=1.0.0`), with exemplars and `# EOF`.
 * The scrape's Accept header picks one (see contentTypeFor).
 *
 * Rules it enforces, because metrics are part of the content-free boundary:
 * - no label may identify a run, an agent, a trace or a span (FORBIDDEN_LABEL_NAMES); a run id may only travel
 *   as an OpenMetrics exemplar, which Prometheus keeps out of its series index;
 * - counters only go up;
 * - each metric holds at most `maxSeries` series; further label combinations are refused and counted.
 *
 * Rendering is cheap: label strings are escaped once, when a series is created, and rendering is a walk
 * over the series maps that joins pre-escaped pieces.
 */

export type ExpositionFormat = 'prometheus' | 'openmetrics';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

/** Label names that would carry a per-run, per-agent, per-trace or per-span identity. */
export const FORBIDDEN_LABEL_NAMES: ReadonlySet<string> = new Set([
  'run',
  'run_id',
  'agent',
  'agent_id',
  'trace',
  'trace_id',
  'span',
  'span_id',
  'event',
  'event_id',
]);

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** OpenMetrics: the combined length of an exemplar's label names and values MUST NOT exceed 128 characters. */
const MAX_EXEMPLAR_LABEL_CHARS = 128;
const DEFAULT_MAX_SERIES = 10_000;

// ---------------------------------------------------------------------------------------------------------------
// Content negotiation

interface MediaRange {
  type: string;
  params: Map<string, string>;
  q: number;
}

function parseAccept(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const part of accept.split(',')) {
    const [head, ...rest] = part.split(';');
    const type = (head ?? '').trim().toLowerCase();
    if (type === '') continue;
    const params = new Map<string, string>();
    let q = 1;
    for (const p of rest) {
      const eq = p.indexOf('=');
      if (eq < 0) continue;
      const key = p.slice(0, eq).trim().toLowerCase();
      const value = p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
      if (key === 'q') {
        const parsed = Number(value);
        q = Number.isFinite(parsed) ? Math.min(Math.max(parsed, 0), 1) : 0;
      } else {
        params.set(key, value);
      }
    }
    ranges.push({ type, params, q });
  }
  return ranges;
}

/** OpenMetrics versions whose text we can serve (0.0.1 is the pre-1.0 name of the same format). */
const OPENMETRICS_VERSIONS = new Set(['1.0.0', '0.0.1']);

/**
 * Picks the exposition format for a scrape from its Accept header: OpenMetrics 1.0 when the client asks for
 * `application/openmetrics-text` (version 1.0.0, 0.0.1 or unspecified) with a quality at least that of any
 * text/plain it accepts; the Prometheus text format 0.0.4 otherwise (including no header, `*\/*`, and garbage).
 */
export function contentTypeFor(accept: string | undefined): { format: ExpositionFormat; contentType: string } {
  let qOpenMetrics = 0;
  let qText = 0;
  for (const range of parseAccept(accept ?? '')) {
    const version = range.params.get('version');
    if (range.type === 'application/openmetrics-text') {
      if (version === undefined || OPENMETRICS_VERSIONS.has(version)) qOpenMetrics = Math.max(qOpenMetrics, range.q);
    } else if (range.type === 'text/plain' || range.type === 'text/*' || range.type === '*/*') {
      if (version === undefined || version === '0.0.4') qText = Math.max(qText, range.q);
    }
  }
  if (qOpenMetrics > 0 && qOpenMetrics >= qText) {
    return { format: 'openmetrics', contentType: OPENMETRICS_CONTENT_TYPE };
  }
  return { format: 'prometheus', contentType: PROMETHEUS_CONTENT_TYPE };
}

// ---------------------------------------------------------------------------------------------------------------
// Escaping and number formatting

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Label value escaping, identical in both formats: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value
    .replace(LONE_SURROGATE, '\uFFFD')
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/\n/g, '\\n');
}

function escapeHelp(help: string, format: ExpositionFormat): string {
  const escaped = help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
  return format === 'openmetrics' ? escaped.replace(/"/g, '\\"') : escaped;
}

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function formatLe(bound: number, format: ExpositionFormat): string {
  if (bound === Infinity) return '+Inf';
  // OpenMetrics canonical form for bucket bounds is a float ("1.0"), the text format uses Go's shortest form ("1").
  if (format === 'openmetrics' && Number.isInteger(bound)) return `${bound}.0`;
  return String(bound);
}

function renderLabelPairs(names: readonly string[], values: readonly string[]): string {
  let out = '';
  for (let i = 0; i < names.length; i++) {
    if (i > 0) out += ',';
    out += `${names[i]}="${escapeLabelValue(values[i] ?? '')}"`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

function assertMetricName(name: string): void {
  if (!METRIC_NAME.test(name)) throw new TypeError(`invalid metric name ${JSON.stringify(name)}`);
}

function assertLabelName(name: string, metric: string, reserved: readonly string[] = []): void {
  if (!LABEL_NAME.test(name) || name.startsWith('__')) {
    throw new TypeError(`metric ${metric}: invalid label name ${JSON.stringify(name)}`);
  }
  if (FORBIDDEN_LABEL_NAMES.has(name.toLowerCase())) {
    throw new TypeError(
      `metric ${metric}: label ${JSON.stringify(name)} is refused: run, agent, trace and span identities are never labels`,
    );
  }
  if (reserved.includes(name)) throw new TypeError(`metric ${metric}: label ${JSON.stringify(name)} is reserved`);
}

function assertLabelNames(names: readonly string[], metric: string, reserved: readonly string[] = []): void {
  const seen = new Set<string>();
  for (const n of names) {
    assertLabelName(n, metric, reserved);
    if (seen.has(n)) throw new TypeError(`metric ${metric}: duplicate label name ${JSON.stringify(n)}`);
    seen.add(n);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Metric families

export interface Exemplar {
  labels: Readonly<Record<string, string>>;
  value: number;
  /** Milliseconds since the epoch. */
  timestampMs?: number;
}

export interface FamilyOptions {
  name: string;
  help: string;
  labelNames?: readonly string[];
  /** OpenMetrics unit (e.g. "seconds"); the family name must end with `_<unit>`. */
  unit?: string;
  /** Most series this family may hold; defaults to the registry's. */
  maxSeries?: number;
}

export interface HistogramOptions extends FamilyOptions {
  /** Upper bounds, strictly increasing and finite; +Inf is implicit. */
  buckets: readonly number[];
}

type Kind = 'counter' | 'gauge' | 'histogram' | 'info';

interface SeriesBase {
  values: readonly string[];
  /** Escaped `a="x",b="y"` (no braces), empty for a family without labels. */
  labels: string;
}

interface ScalarSeries extends SeriesBase {
  value: number;
  exemplar?: string;
}

interface HistogramSeries extends SeriesBase {
  /** Non-cumulative counts per bucket, the last one for +Inf. */
  counts: number[];
  sum: number;
  count: number;
  /** Rendered `_bucket` label strings, per format, built on first render. */
  bucketLabels?: Partial<Record<ExpositionFormat, string[]>>;
}

type OnRefused = (metric: string) => void;

abstract class Family<S extends SeriesBase> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly unit: string | undefined;
  abstract readonly kind: Kind;
  protected readonly series = new Map<string, S>();
  private readonly maxSeries: number;
  private readonly onRefused: OnRefused;

  constructor(opts: FamilyOptions, defaultMaxSeries: number, onRefused: OnRefused, reserved: readonly string[] = []) {
    assertMetricName(opts.name);
    this.labelNames = Object.freeze([...(opts.labelNames ?? [])]);
    assertLabelNames(this.labelNames, opts.name, reserved);
    if (opts.unit !== undefined) {
      if (!/^[a-zA-Z0-9_]+$/.test(opts.unit)) throw new TypeError(`metric ${opts.name}: invalid unit ${opts.unit}`);
    }
    this.name = opts.name;
    this.help = opts.help;
    this.unit = opts.unit;
    this.maxSeries = opts.maxSeries ?? defaultMaxSeries;
    this.onRefused = onRefused;
  }

  /** The OpenMetrics MetricFamily name (without a type suffix such as `_total` or `_info`). */
  abstract familyName(): string;
  protected abstract create(values: readonly string[], labels: string): S;
  abstract renderSamples(out: string[], format: ExpositionFormat): void;

  /** Finds or creates the series for these label values; undefined when the series cap refuses it. */
  protected seriesFor(values: readonly string[]): S | undefined {
    if (values.length !== this.labelNames.length) {
      throw new TypeError(`metric ${this.name}: expected ${this.labelNames.length} label values, got ${values.length}`);
    }
    const key = values.join('\u0000');
    let s = this.series.get(key);
    if (s === undefined) {
      if (this.series.size >= this.maxSeries) {
        this.onRefused(this.name);
        return undefined;
      }
      for (const v of values) {
        if (typeof v !== 'string') throw new TypeError(`metric ${this.name}: label values must be strings`);
      }
      s = this.create(Object.freeze([...values]), renderLabelPairs(this.labelNames, values));
      this.series.set(key, s);
    }
    return s;
  }

  seriesCount(): number {
    return this.series.size;
  }

  render(out: string[], format: ExpositionFormat): void {
    if (this.series.size === 0) return;
    const metaName = format === 'openmetrics' ? this.familyName() : this.name;
    const metaType = format === 'prometheus' && this.kind === 'info' ? 'gauge' : this.kind;
    out.push(`# HELP ${metaName} ${escapeHelp(this.help, format)}\n`);
    out.push(`# TYPE ${metaName} ${metaType}\n`);
    if (format === 'openmetrics' && this.unit !== undefined) out.push(`# UNIT ${metaName} ${this.unit}\n`);
    this.renderSamples(out, format);
  }
}

function braces(labels: string): string {
  return labels === '' ? '' : `{${labels}}`;
}

function renderExemplar(exemplar: Exemplar): string | undefined {
  const names = Object.keys(exemplar.labels);
  let chars = 0;
  for (const n of names) {
    if (!LABEL_NAME.test(n)) throw new TypeError(`invalid exemplar label name ${JSON.stringify(n)}`);
    chars += [...n].length + [...(exemplar.labels[n] ?? '')].length;
  }
  // Too long for OpenMetrics: keep no exemplar rather than a truncated (wrong) identity.
  if (chars > MAX_EXEMPLAR_LABEL_CHARS) return undefined;
  const labels = renderLabelPairs(names, names.map((n) => exemplar.labels[n] ?? ''));
  const ts = exemplar.timestampMs === undefined ? '' : ` ${(exemplar.timestampMs / 1000).toFixed(3)}`;
  return ` # {${labels}} ${formatValue(exemplar.value)}${ts}`;
}

export class Counter extends Family<ScalarSeries> {
  readonly kind = 'counter' as const;

  constructor(opts: FamilyOptions, defaultMaxSeries: number, onRefused: OnRefused) {
    super(opts, defaultMaxSeries, onRefused);
    if (!opts.name.endsWith('_total')) throw new TypeError(`counter ${opts.name} must end with _total`);
    if (opts.unit !== undefined && !opts.name.endsWith(`_${opts.unit}_total`)) {
      throw new TypeError(`counter ${opts.name} must end with _${opts.unit}_total`);
    }
  }

  familyName(): string {
    return this.name.slice(0, -'_total'.length);
  }

  protected create(values: readonly string[], labels: string): ScalarSeries {
    return { values, labels, value: 0 };
  }

  /** Adds n (finite, >= 0) to the series; an exemplar, if given, replaces the series' previous one. */
  inc(values: readonly string[], n = 1, exemplar?: Exemplar): void {
    if (!Number.isFinite(n) || n < 0) throw new RangeError(`counter ${this.name}: increment must be finite and >= 0, got ${n}`);
    const s = this.seriesFor(values);
    if (s === undefined) return;
    s.value += n;
    if (exemplar !== undefined) {
      const rendered = renderExemplar(exemplar);
      if (rendered !== undefined) s.exemplar = rendered;
    }
  }

  /** Makes the series exist (at 0) so that rates over it start from a known zero. */
  touch(values: readonly string[]): void {
    this.seriesFor(values);
  }

  value(values: readonly string[]): number | undefined {
    return this.series.get(values.join('\u0000'))?.value;
  }

  /** Every series' label values and value, in the order the series were created (the exposition's order). */
  *samples(): IterableIterator<{ values: readonly string[]; value: number }> {
    for (const s of this.series.values()) yield { values: s.values, value: s.value };
  }

  /** The sum over series of each value of the label at `index`, in first-seen order. */
  sumBy(index: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.series.values()) out.set(s.values[index], (out.get(s.values[index]) ?? 0) + s.value);
    return out;
  }

  /** The sum over every series. */
  total(): number {
    let n = 0;
    for (const s of this.series.values()) n += s.value;
    return n;
  }

  renderSamples(out: string[], format: ExpositionFormat): void {
    const withExemplars = format === 'openmetrics';
    for (const s of this.series.values()) {
      const line = `${this.name}${braces(s.labels)} ${formatValue(s.value)}`;
      out.push(withExemplars && s.exemplar !== undefined ? `${line}${s.exemplar}\n` : `${line}\n`);
    }
  }
}

export class Gauge extends Family<ScalarSeries> {
  readonly kind = 'gauge' as const;

  constructor(opts: FamilyOptions, defaultMaxSeries: number, onRefused: OnRefused) {
    super(opts, defaultMaxSeries, onRefused);
    if (opts.unit !== undefined && !opts.name.endsWith(`_${opts.unit}`)) {
      throw new TypeError(`gauge ${opts.name} must end with _${opts.unit}`);
    }
  }

  familyName(): string {
    return this.name;
  }

  protected create(values: readonly string[], labels: string): ScalarSeries {
    return { values, labels, value: 0 };
  }

  set(values: readonly string[], v: number): void {
    if (typeof v !== 'number') throw new TypeError(`gauge ${this.name}: value must be a number`);
    const s = this.seriesFor(values);
    if (s !== undefined) s.value = v;
  }

  /** Replaces every series with exactly these; series not listed disappear from the exposition. */
  replaceAll(entries: Iterable<readonly [readonly string[], number]>): void {
    const previous = new Map(this.series);
    this.series.clear();
    for (const [values, v] of entries) {
      const key = values.join('\u0000');
      const kept = previous.get(key);
      if (kept !== undefined && !this.series.has(key)) {
        kept.value = v; // reuse the already escaped label string
        this.series.set(key, kept);
      } else {
        this.set(values, v);
      }
    }
  }

  value(values: readonly string[]): number | undefined {
    return this.series.get(values.join('\u0000'))?.value;
  }

  renderSamples(out: string[]): void {
    for (const s of this.series.values()) out.push(`${this.name}${braces(s.labels)} ${formatValue(s.value)}\n`);
  }
}

/** An OpenMetrics info metric (a gauge of 1 in the Prometheus text format). Its name must end with `_info`. */
export class Info extends Family<ScalarSeries> {
  readonly kind = 'info' as const;

  constructor(opts: FamilyOptions, defaultMaxSeries: number, onRefused: OnRefused) {
    super(opts, defaultMaxSeries, onRefused);
    if (!opts.name.endsWith('_info')) throw new TypeError(`info metric ${opts.name} must end with _info`);
  }

  familyName(): string {
    return this.name.slice(0, -'_info'.length);
  }

  protected create(values: readonly string[], labels: string): ScalarSeries {
    return { values, labels, value: 1 };
  }

  set(values: readonly string[]): void {
    this.series.clear();
    this.seriesFor(values);
  }

  renderSamples(out: string[]): void {
    for (const s of this.series.values()) out.push(`${this.name}${braces(s.labels)} 1\n`);
  }
}

export class Histogram extends Family<HistogramSeries> {
  readonly kind = 'histogram' as const;
  readonly buckets: readonly number[];

  constructor(opts: HistogramOptions, defaultMaxSeries: number, onRefused: OnRefused) {
    super(opts, defaultMaxSeries, onRefused, ['le']);
    if (opts.unit !== undefined && !opts.name.endsWith(`_${opts.unit}`)) {
      throw new TypeError(`histogram ${opts.name} must end with _${opts.unit}`);
    }
    if (opts.buckets.length === 0) throw new TypeError(`histogram ${opts.name}: at least one bucket is required`);
    for (let i = 0; i < opts.buckets.length; i++) {
      const b = opts.buckets[i]!;
      if (!Number.isFinite(b)) throw new TypeError(`histogram ${opts.name}: bucket bounds must be finite`);
      if (i > 0 && b <= opts.buckets[i - 1]!) throw new TypeError(`histogram ${opts.name}: buckets must increase`);
    }
    this.buckets = Object.freeze([...opts.buckets]);
  }

  familyName(): string {
    return this.name;
  }

  protected create(values: readonly string[], labels: string): HistogramSeries {
    return { values, labels, counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  /** Makes the series exist (all buckets at 0). */
  touch(values: readonly string[]): void {
    this.seriesFor(values);
  }

  observe(values: readonly string[], v: number): void {
    if (Number.isNaN(v)) throw new RangeError(`histogram ${this.name}: cannot observe NaN`);
    const s = this.seriesFor(values);
    if (s === undefined) return;
    let i = 0;
    while (i < this.buckets.length && v > this.buckets[i]!) i++;
    s.counts[i]! += 1;
    s.sum += v;
    s.count += 1;
  }

  private bucketLabelsOf(s: HistogramSeries, format: ExpositionFormat): string[] {
    const cached = s.bucketLabels?.[format];
    if (cached !== undefined) return cached;
    const prefix = s.labels === '' ? '' : `${s.labels},`;
    const rendered = [...this.buckets, Infinity].map((b) => `{${prefix}le="${formatLe(b, format)}"}`);
    s.bucketLabels = { ...s.bucketLabels, [format]: rendered };
    return rendered;
  }

  renderSamples(out: string[], format: ExpositionFormat): void {
    for (const s of this.series.values()) {
      const labels = this.bucketLabelsOf(s, format);
      let cumulative = 0;
      for (let i = 0; i < labels.length; i++) {
        cumulative += s.counts[i]!;
        out.push(`${this.name}_bucket${labels[i]} ${cumulative}\n`);
      }
      out.push(`${this.name}_sum${braces(s.labels)} ${formatValue(s.sum)}\n`);
      out.push(`${this.name}_count${braces(s.labels)} ${s.count}\n`);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Registry

export interface RegistryOptions {
  /** Default cap on series per metric. */
  maxSeries?: number;
  /**
   * Name of a counter `{metric}` counting label combinations refused by the series cap
   * (e.g. `topology_metric_series_refused_total`); none when omitted.
   */
  refusedSeriesCounter?: string;
}

export class MetricsRegistry {
  private readonly families: Array<Family<SeriesBase>> = [];
  private readonly defaultMaxSeries: number;
  private readonly refused: Counter | undefined;

  constructor(opts: RegistryOptions = {}) {
    this.defaultMaxSeries = opts.maxSeries ?? DEFAULT_MAX_SERIES;
    this.refused =
      opts.refusedSeriesCounter === undefined
        ? undefined
        : this.counter({
            name: opts.refusedSeriesCounter,
            help: 'Label combinations refused because a metric reached its series cap.',
            labelNames: ['metric'],
          });
  }

  private readonly onRefused: OnRefused = (metric) => {
    if (this.refused !== undefined && metric !== this.refused.name) this.refused.inc([metric]);
  };

  private add<F extends Family<SeriesBase>>(family: F): F {
    const names = this.sampleNamesOf(family);
    for (const existing of this.families) {
      for (const n of this.sampleNamesOf(existing)) {
        if (names.includes(n) || existing.familyName() === family.familyName()) {
          throw new TypeError(`metric ${family.name} collides with ${existing.name}`);
        }
      }
    }
    this.families.push(family);
    return family;
  }

  private sampleNamesOf(f: Family<SeriesBase>): string[] {
    return f.kind === 'histogram' ? [`${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`] : [f.name];
  }

  counter(opts: FamilyOptions): Counter {
    return this.add(new Counter(opts, this.defaultMaxSeries, this.onRefused));
  }

  gauge(opts: FamilyOptions): Gauge {
    return this.add(new Gauge(opts, this.defaultMaxSeries, this.onRefused));
  }

  histogram(opts: HistogramOptions): Histogram {
    return this.add(new Histogram(opts, this.defaultMaxSeries, this.onRefused));
  }

  info(opts: FamilyOptions): Info {
    return this.add(new Info(opts, this.defaultMaxSeries, this.onRefused));
  }

  /** Names of the registered metrics (as written in the Prometheus text format's TYPE lines). */
  metricNames(): string[] {
    return this.families.map((f) => f.name);
  }

  private readonly collectors: (() => void)[] = [];

  /** Runs `collect` at the start of every render: gauges read at scrape time (e.g. the event loop's delay). */
  onCollect(collect: () => void): void {
    this.collectors.push(collect);
  }

  /** The exposition, in the given format (OpenMetrics ends with `# EOF`). */
  render(format: ExpositionFormat = 'prometheus'): string {
    for (const collect of this.collectors) collect();
    const out: string[] = [];
    for (const f of this.families) f.render(out, format);
    if (format === 'openmetrics') out.push('# EOF\n');
    return out.join('');
  }
}
