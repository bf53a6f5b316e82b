import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KEPT_ATTRIBUTE_KEYS } from '../src/otlp/types.js';

const DIR = 'collector/otelcol';

/**
 * Component types of the OpenTelemetry Collector contrib distribution (otelcol-contrib) that these configs may use,
 * taken from the distribution's manifest, open-telemetry/opentelemetry-collector-releases
 * distributions/otelcol-contrib/manifest.yaml (v0.136.0: gomod entries such as
 * go.opentelemetry.io/collector/processor/memorylimiterprocessor -> `memory_limiter`,
 * .../exporter/loadbalancingexporter -> `loadbalancing`, .../extension/healthcheckextension -> `health_check`),
 * plus the renames announced in the Collector release notes with the old names kept as deprecated aliases:
 * v0.144.0 `otlp` exporter -> `otlp_grpc`, `otlphttp` -> `otlp_http`; loadbalancing exporter -> `load_balancing`
 * (pkg.go.dev README of loadbalancingexporter v0.154.0). Checked with the search tool, not against a binary:
 * no Collector binary is available here.
 */
const CONTRIB_COMPONENTS = {
  receivers: new Set(['otlp', 'nop', 'prometheus', 'hostmetrics', 'filelog', 'jaeger', 'zipkin', 'kafka']),
  processors: new Set([
    'batch', 'memory_limiter', 'attributes', 'filter', 'groupbyattrs', 'groupbytrace', 'k8sattributes',
    'probabilistic_sampler', 'redaction', 'resource', 'resourcedetection', 'span', 'tail_sampling', 'transform',
  ]),
  exporters: new Set([
    'debug', 'nop', 'otlp', 'otlp_grpc', 'otlphttp', 'otlp_http', 'loadbalancing', 'load_balancing', 'file', 'kafka',
    'prometheus', 'prometheusremotewrite',
  ]),
  extensions: new Set(['health_check', 'pprof', 'zpages', 'file_storage', 'basicauth', 'bearertokenauth', 'headers_setter', 'oauth2client']),
  connectors: new Set(['forward', 'count', 'routing', 'servicegraph', 'spanmetrics', 'failover', 'roundrobin']),
} as const;
type Kind = keyof typeof CONTRIB_COMPONENTS;
const KINDS = Object.keys(CONTRIB_COMPONENTS) as Kind[];

/** Attribute keys that carry content and must never leave the agent pipeline towards topology-audit. */
const CONTENT_KEYS = [
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'gen_ai.system_instructions',
  'gen_ai.prompt',
  'gen_ai.completion',
  'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result',
  'gen_ai.agent.description',
  'llm.input_messages',
  'input.value',
  'output.value',
  'exception.message',
  'exception.stacktrace',
  'process.command_line',
  'process.executable.path',
  'xtopology.run.id',
  'service.namespace',
];

interface Pipeline {
  receivers: string[];
  processors?: string[];
  exporters: string[];
}
interface CollectorConfig {
  receivers: Record<string, any>;
  processors?: Record<string, any>;
  exporters: Record<string, any>;
  extensions?: Record<string, any>;
  connectors?: Record<string, any>;
  service: { extensions?: string[]; pipelines: Record<string, Pipeline> };
}

async function configs(): Promise<Array<{ file: string; config: CollectorConfig }>> {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'));
  return Promise.all(
    files.map(async (f) => ({ file: f, config: parse(await readFile(join(DIR, f), 'utf8')) as CollectorConfig })),
  );
}

async function config(name: string): Promise<CollectorConfig> {
  return parse(await readFile(join(DIR, name), 'utf8')) as CollectorConfig;
}

const typeOf = (id: string) => id.split('/')[0]!;

describe('Collector configs', () => {
  it('are both present and parse', async () => {
    const all = await configs();
    expect(all.map((c) => c.file).sort()).toEqual(['agent-pipeline.yaml', 'scale-out.yaml', 'shared-store.yaml']);
  });

  it('name only component types of the contrib distribution', async () => {
    for (const { file, config: c } of await configs()) {
      for (const kind of KINDS) {
        for (const id of Object.keys(c[kind] ?? {})) {
          expect(CONTRIB_COMPONENTS[kind].has(typeOf(id)), `${file}: ${kind} ${id}`).toBe(true);
        }
      }
    }
  });

  it('define every component a pipeline uses, and use every component they define', async () => {
    for (const { file, config: c } of await configs()) {
      const used: Record<string, Set<string>> = { receivers: new Set(), processors: new Set(), exporters: new Set() };
      for (const [name, p] of Object.entries(c.service.pipelines)) {
        expect(['traces', 'metrics', 'logs']).toContain(typeOf(name));
        for (const kind of ['receivers', 'processors', 'exporters'] as const) {
          for (const id of p[kind] ?? []) {
            expect(c[kind]?.[id], `${file}: pipeline ${name} uses undefined ${kind} ${id}`).toBeDefined();
            used[kind]!.add(id);
          }
        }
        // memory_limiter first, as the Collector's documentation asks, so it can refuse data before any work.
        expect(p.processors?.[0], `${file}: ${name}`).toBe('memory_limiter');
      }
      for (const kind of ['receivers', 'processors', 'exporters'] as const) {
        for (const id of Object.keys(c[kind] ?? {})) expect(used[kind]!.has(id), `${file}: ${kind} ${id} unused`).toBe(true);
      }
      for (const id of c.service.extensions ?? []) expect(c.extensions?.[id], `${file}: extension ${id}`).toBeDefined();
    }
  });
});

/**
 * The finite set of strings a key pattern matches. The grammar is the yaml's, nothing more: literal characters
 * `[a-zA-Z0-9_]`, `[.]` for a dot, and groups `( a | b )` nested at will; anything else (a quantifier, a class, an
 * escape) throws, so a pattern that keeps an open-ended family of keys cannot pass as a finite list.
 */
function expandKeyPattern(pattern: string): Set<string> {
  let i = 0;
  const alternatives = (): string[] => {
    const out: string[] = [];
    for (;;) {
      out.push(...sequence());
      if (pattern[i] !== '|') return out;
      i++;
    }
  };
  const sequence = (): string[] => {
    let acc = [''];
    while (i < pattern.length && pattern[i] !== '|' && pattern[i] !== ')') {
      let parts: string[];
      if (pattern.startsWith('[.]', i)) {
        parts = ['.'];
        i += 3;
      } else if (pattern[i] === '(') {
        i++;
        parts = alternatives();
        if (pattern[i] !== ')') throw new Error(`unclosed group at ${i} in ${pattern}`);
        i++;
      } else if (/[a-zA-Z0-9_]/.test(pattern[i]!)) {
        parts = [pattern[i]!];
        i++;
      } else {
        throw new Error(`not a finite key list: ${JSON.stringify(pattern[i])} at ${i} in ${pattern}`);
      }
      acc = acc.flatMap((a) => parts.map((p) => a + p));
    }
    return acc;
  };
  const keys = alternatives();
  if (i !== pattern.length) throw new Error(`unexpected ${JSON.stringify(pattern[i])} at ${i} in ${pattern}`);
  return new Set(keys);
}

describe('agent-pipeline.yaml', () => {
  it('sends the same traces to the user backend and to topology-audit on 4317 or 4318', async () => {
    const c = await config('agent-pipeline.yaml');
    const pipelines = Object.entries(c.service.pipelines);
    expect(pipelines).toHaveLength(2);
    for (const [, p] of pipelines) expect(p.receivers).toEqual(['otlp']);
    const audit = c.service.pipelines['traces/topology-audit']!;
    const backend = c.service.pipelines['traces/backend']!;
    expect(backend.exporters.map(typeOf)).toEqual(['otlphttp']);
    expect(audit.exporters).toHaveLength(1);
    const exporter = c.exporters[audit.exporters[0]!];
    const port = typeOf(audit.exporters[0]!) === 'otlp' ? '4317' : '4318';
    expect(String(exporter.endpoint)).toMatch(new RegExp(`:${port}$`));
    expect(backend.processors).toEqual(['memory_limiter', 'batch']);
  });

  it('never samples or drops whole spans on the topology-audit pipeline', async () => {
    const c = await config('agent-pipeline.yaml');
    const audit = c.service.pipelines['traces/topology-audit']!;
    for (const id of audit.processors ?? []) {
      expect(['probabilistic_sampler', 'tail_sampling'], id).not.toContain(typeOf(id));
      if (typeOf(id) === 'filter') {
        // span events may be dropped, spans must not: the auditor walks every span to find callers
        expect(c.processors![id].traces?.span, id).toBeUndefined();
        expect(c.processors![id].traces?.spanevent?.length, id).toBeGreaterThan(0);
      }
    }
  });

  it("keeps exactly the attributes topology-audit's decoder keeps, in resource, span and span event", async () => {
    const c = await config('agent-pipeline.yaml');
    const transformId = c.service.pipelines['traces/topology-audit']!.processors!.find((p) => typeOf(p) === 'transform')!;
    const groups: Array<{ context: string; statements: string[] }> = c.processors![transformId].trace_statements;
    expect(groups.map((g) => g.context).sort()).toEqual(['resource', 'span', 'spanevent']);
    const patterns = groups.map((g) => {
      const keep = g.statements.find((s) => s.startsWith('keep_matching_keys(attributes, '));
      expect(keep, g.context).toBeDefined();
      return /^keep_matching_keys\(attributes, "(.*)"\)$/.exec(keep!)![1]!;
    });
    expect(new Set(patterns).size).toBe(1);
    const pattern = patterns[0]!;
    expect(pattern.startsWith('^') && pattern.endsWith('$'), 'anchored (OTTL matches unanchored)').toBe(true);
    expect(pattern, 'no backslashes: escaping differs between YAML, OTTL and RE2').not.toContain('\\');
    const keep = new RegExp(pattern);
    for (const key of KEPT_ATTRIBUTE_KEYS) expect(keep.test(key), key).toBe(true);
    // Both ways: the pattern's finite set of keys is the decoder's, so a key added to either side fails here.
    const yamlKeys = expandKeyPattern(pattern.slice(1, -1));
    expect([...yamlKeys].filter((k) => !KEPT_ATTRIBUTE_KEYS.has(k)), 'kept by the yaml, not by the decoder').toEqual([]);
    expect([...KEPT_ATTRIBUTE_KEYS].filter((k) => !yamlKeys.has(k)), 'kept by the decoder, not by the yaml').toEqual([]);
    for (const key of CONTENT_KEYS) expect(keep.test(key), key).toBe(false);
    for (const key of ['topology.note', 'metadata', 'service.name']) expect(keep.test(key), key).toBe(false);
  });
});

describe('scale-out.yaml', () => {
  it('routes by topology.run.id with the loadbalancing exporter to auditor instances on 4317', async () => {
    const c = await config('scale-out.yaml');
    const [name, pipeline] = Object.entries(c.service.pipelines)[0]!;
    expect(typeOf(name)).toBe('traces');
    const lbId = pipeline.exporters.find((e) => ['loadbalancing', 'load_balancing'].includes(typeOf(e)))!;
    const lb = c.exporters[lbId];
    expect(lb.routing_key).toBe('attributes');
    expect(lb.routing_attributes).toEqual(['topology.run.id']);
    expect(lb.protocol.otlp.endpoint, 'the resolver sets the endpoint').toBeUndefined();
    const hosts: string[] = lb.resolver.static.hostnames;
    expect(hosts.length).toBeGreaterThanOrEqual(2);
    for (const h of hosts) expect(h).toMatch(/:4317$/);
  });

  it('documents the caveat that the attribute must be on the resource or on every span', async () => {
    const text = await readFile(join(DIR, 'scale-out.yaml'), 'utf8');
    expect(text).toMatch(/must be on the RESOURCE or on EVERY span/);
    expect(text).toContain('routing_key: traceID');
  });
});

describe('shared-store.yaml', () => {
  it('routes by trace id (not by run) to the instances of a cluster on one shared store', async () => {
    const c = await config('shared-store.yaml');
    const [, pipeline] = Object.entries(c.service.pipelines)[0]!;
    const lbId = pipeline.exporters.find((e) => ['loadbalancing', 'load_balancing'].includes(typeOf(e)))!;
    const lb = c.exporters[lbId];
    expect(lb.routing_key).toBe('traceID');
    expect(lb.routing_attributes).toBeUndefined();
    expect(lb.protocol.otlp.endpoint, 'the resolver sets the endpoint').toBeUndefined();
    for (const h of lb.resolver.static.hostnames as string[]) expect(h).toMatch(/:4317$/);
    expect(await readFile(join(DIR, 'shared-store.yaml'), 'utf8')).toMatch(/store --store postgres|--store postgres/);
  });
});
