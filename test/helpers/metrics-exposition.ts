/**
 * An independent reader of the Prometheus text format 0.0.4 and OpenMetrics 1.0 text, written from the format
 * descriptions (not from src/metrics), so tests can check that what the registry writes parses back to what
 * was put in. Throws on any line that does not follow the grammar.
 */

export interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  exemplar?: { labels: Record<string, string>; value: number; timestamp?: number };
}

export interface ParsedFamily {
  name: string;
  type?: string;
  help?: string;
  unit?: string;
  samples: ParsedSample[];
}

export interface ParsedExposition {
  families: ParsedFamily[];
  samples: ParsedSample[];
  eof: boolean;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const NUMBER = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)/;

function parseNumber(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  return Number(text);
}

/** Reads `{a="x",b="y"}` starting at s[i] === '{'; returns the labels and the index after '}'. */
function parseLabels(s: string, start: number, line: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  if (s[i] === '}') return { labels, end: i + 1 };
  for (;;) {
    const m = LABEL_NAME.exec(s.slice(i));
    if (!m) throw new Error(`bad label name at ${i}: ${line}`);
    const name = m[0];
    i += name.length;
    if (s[i] !== '=' || s[i + 1] !== '"') throw new Error(`expected =" after label ${name}: ${line}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = s[i];
      if (c === undefined) throw new Error(`unterminated label value: ${line}`);
      if (c === '\n') throw new Error(`raw line feed in label value: ${line}`);
      if (c === '"') {
        i++;
        break;
      }
      if (c === '\\') {
        const e = s[i + 1];
        if (e === '\\') value += '\\';
        else if (e === '"') value += '"';
        else if (e === 'n') value += '\n';
        else throw new Error(`bad escape \\${e}: ${line}`);
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    if (name in labels) throw new Error(`duplicate label ${name}: ${line}`);
    labels[name] = value;
    if (s[i] === ',') {
      i++;
      if (s[i] === '}') return { labels, end: i + 1 };
      continue;
    }
    if (s[i] === '}') return { labels, end: i + 1 };
    throw new Error(`expected , or } at ${i}: ${line}`);
  }
}

function parseSampleLine(line: string, openMetrics: boolean): ParsedSample {
  const m = NAME.exec(line);
  if (!m) throw new Error(`bad metric name: ${line}`);
  const name = m[0];
  let i = name.length;
  let labels: Record<string, string> = {};
  if (line[i] === '{') {
    const parsed = parseLabels(line, i, line);
    labels = parsed.labels;
    i = parsed.end;
  }
  if (line[i] !== ' ') throw new Error(`expected one space before value: ${line}`);
  i++;
  const v = NUMBER.exec(line.slice(i));
  if (!v) throw new Error(`bad value: ${line}`);
  const value = parseNumber(v[0]);
  i += v[0].length;
  const sample: ParsedSample = { name, labels, value };
  if (i === line.length) return sample;
  const rest = line.slice(i);
  if (openMetrics && rest.startsWith(' # {')) {
    const parsed = parseLabels(rest, 3, line);
    let j = parsed.end;
    if (rest[j] !== ' ') throw new Error(`expected exemplar value: ${line}`);
    j++;
    const ev = NUMBER.exec(rest.slice(j));
    if (!ev) throw new Error(`bad exemplar value: ${line}`);
    j += ev[0].length;
    let timestamp: number | undefined;
    if (j < rest.length) {
      if (rest[j] !== ' ') throw new Error(`bad exemplar timestamp: ${line}`);
      const ts = NUMBER.exec(rest.slice(j + 1));
      if (!ts || j + 1 + ts[0].length !== rest.length) throw new Error(`bad exemplar timestamp: ${line}`);
      timestamp = parseNumber(ts[0]);
    }
    sample.exemplar = { labels: parsed.labels, value: parseNumber(ev[0]), timestamp };
    return sample;
  }
  // A timestamp (integer ms in 0.0.4, seconds in OpenMetrics) is allowed; the registry never writes one.
  throw new Error(`unexpected text after value: ${line}`);
}

function unescapeHelp(text: string, openMetrics: boolean): string {
  return text.replace(/\\(.)/g, (_, c: string) => {
    if (c === 'n') return '\n';
    if (c === '\\') return '\\';
    if (c === '"' && openMetrics) return '"';
    throw new Error(`bad HELP escape \\${c}`);
  });
}

/** Sample-name suffixes a family of each type may use. */
const SUFFIXES: Record<string, string[]> = {
  counter: ['_total', '_created'],
  gauge: [''],
  histogram: ['_bucket', '_sum', '_count', '_created'],
  info: ['_info'],
  untyped: [''],
  unknown: [''],
};

export function parseExposition(text: string, format: 'prometheus' | 'openmetrics'): ParsedExposition {
  const openMetrics = format === 'openmetrics';
  if (!text.endsWith('\n')) throw new Error('exposition must end with a line feed');
  const lines = text.slice(0, -1).split('\n');
  const families: ParsedFamily[] = [];
  const byName = new Map<string, ParsedFamily>();
  const samples: ParsedSample[] = [];
  let eof = false;
  let current: ParsedFamily | undefined;

  const familyOf = (name: string): ParsedFamily => {
    let f = byName.get(name);
    if (f === undefined) {
      f = { name, samples: [] };
      byName.set(name, f);
      families.push(f);
    } else if (f !== current) {
      throw new Error(`metadata or samples of ${name} are not contiguous`);
    }
    current = f;
    return f;
  };

  for (const line of lines) {
    if (eof) throw new Error(`text after # EOF: ${line}`);
    if (line === '') {
      if (openMetrics) throw new Error('empty line in OpenMetrics');
      continue;
    }
    if (openMetrics && line === '# EOF') {
      eof = true;
      continue;
    }
    if (line.startsWith('#')) {
      const meta = /^# (HELP|TYPE|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: (.*))?$/.exec(line);
      if (!meta) {
        if (openMetrics) throw new Error(`bad metadata line: ${line}`);
        continue; // a plain comment in the text format
      }
      const [, kind, name, rest = ''] = meta;
      const f = familyOf(name!);
      if (f.samples.length > 0) throw new Error(`metadata after samples of ${name}`);
      if (kind === 'HELP') {
        if (f.help !== undefined) throw new Error(`second HELP for ${name}`);
        f.help = unescapeHelp(rest, openMetrics);
      } else if (kind === 'TYPE') {
        if (f.type !== undefined) throw new Error(`second TYPE for ${name}`);
        const allowed = openMetrics
          ? ['counter', 'gauge', 'histogram', 'gaugehistogram', 'summary', 'info', 'stateset', 'unknown']
          : ['counter', 'gauge', 'histogram', 'summary', 'untyped'];
        if (!allowed.includes(rest)) throw new Error(`bad TYPE ${rest}`);
        f.type = rest;
      } else {
        if (!openMetrics) throw new Error('UNIT is OpenMetrics only');
        if (!name!.endsWith(`_${rest}`)) throw new Error(`family ${name} does not end with its unit ${rest}`);
        f.unit = rest;
      }
      continue;
    }
    const sample = parseSampleLine(line, openMetrics);
    if (current === undefined || current.type === undefined) throw new Error(`sample before TYPE: ${line}`);
    // In the text format 0.0.4 the TYPE names the sample (counter `x_total`); in OpenMetrics it names the family.
    const base = current.name;
    const suffixes = openMetrics ? (SUFFIXES[current.type] ?? ['']) : current.type === 'histogram' ? SUFFIXES.histogram! : [''];
    if (!suffixes.some((s) => sample.name === base + s)) {
      throw new Error(`sample ${sample.name} does not belong to family ${base} (${current.type})`);
    }
    if (sample.exemplar && !(current.type === 'counter' || sample.name.endsWith('_bucket'))) {
      throw new Error(`exemplar on a ${current.type}: ${line}`);
    }
    current.samples.push(sample);
    samples.push(sample);
  }
  if (openMetrics && !eof) throw new Error('OpenMetrics exposition without # EOF');
  return { families, samples, eof };
}
