import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReceiptFile } from '../src/core/index.js';
import { main } from '../src/cli/main.js';
import { EXIT_CODES, allSpecs, colorEnabled, specFor } from '../src/cli/spec.js';
import { displayMessage } from '../src/core/meaning.js';
import type { Finding } from '../src/core/types.js';
import '../src/cli/specs.js';
import { levelOf, readServeArgs } from '../src/cli/serve.js';
import { SERVE_OPTIONS, type ServeOption } from '../src/server/serve-options.js';
import { DEFAULTS } from '../src/server/serve.js';
import { BIN, ROOT, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';
import { waitFor } from './helpers/prometheus.js';

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}

/** Spawn the real binary with an environment (colour variables only as given) and a working directory. */
function spawnCli(args: string[], opts: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}) {
  const env = { ...process.env, ...opts.env };
  for (const k of ['NO_COLOR', 'FORCE_COLOR']) if (!(opts.env && k in opts.env)) delete env[k];
  return runCli(args, { ...opts, env });
}

/** Distinct contract ids of the packaged example contracts (contracts/*.yaml). */
const packagedContractIds = () =>
  new Set(readdirSync(join(ROOT, 'contracts')).filter((f) => f.endsWith('.yaml')).map((f) => /^contract: (\S+)/m.exec(readFileSync(join(ROOT, 'contracts', f), 'utf8'))?.[1]));
const drift = parseReceiptFile(readFileSync(join(ROOT, 'receipts', 'drift.ndjson'), 'utf8'), 'drift.ndjson');
function shiftedNdjson(): string {
  const latest = Math.max(...drift.map((r) => Date.parse(r.at)));
  const delta = Date.now() - 5000 - latest;
  return drift.map((r) => JSON.stringify({ ...r, at: new Date(Date.parse(r.at) + delta).toISOString() })).join('\n') + '\n';
}

describe('help, version, errors', () => {
  const commands = ['serve', 'replay', 'gate', 'validate', 'diff', 'schema', 'experiment', 'handoff', 'ack', 'explain'];

  it.each(commands)('%s --help and -h show usage, every flag with its default, an example and exit codes', async (name) => {
    for (const flag of ['--help', '-h']) {
      const r = await cli(name, flag);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`usage:\n  topology-audit ${name}`);
      expect(r.stdout).toMatch(/examples:\n {2}topology-audit /);
      expect(r.stdout).toMatch(/exit codes:\n\s+0 /);
      for (const f of specFor(name)!.flags) {
        const line = r.stdout.split('\n').find((l) => l.includes(`--${f.name}`) && (l.trimStart().startsWith('-') || l.trimStart().startsWith(`--${f.name}`)));
        expect(line, `${name} --${f.name}`).toBeDefined();
        if (f.shown || f.env || (f.default !== undefined && f.type === 'string')) expect(line).toContain(`(default: ${f.shown ?? (f.env ? `$${f.env}` : f.default)}`);
      }
    }
  });

  it('gate --help shows the timeout default, the short flags and all five exit codes', async () => {
    const r = await cli('gate', '--help');
    expect(r.stdout).toMatch(/-t, --timeout DUR .*\(default: 5m\)/);
    expect(r.stdout).toMatch(/-s, --server URL/);
    for (const c of [0, 1, 2, 66, 75]) expect(r.stdout).toMatch(new RegExp(`^\\s+${c}  `, 'm'));
  });

  it('explain --help has usage, every flag it parses, an example and its exit codes; bad flags are usage errors', async () => {
    const r = await cli('explain', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/explain FILE/);
    for (const f of ['--json', '--run-key ORDER', '--parent-wait DUR']) expect(r.stdout).toContain(f);
    expect(r.stdout).toMatch(/topology-audit explain \S+/);
    for (const c of [0, 2]) expect(r.stdout).toMatch(new RegExp(`^\\s+${c}  `, 'm'));
    const source = readFileSync(join(ROOT, 'src', 'cli', 'explain.ts'), 'utf8');
    for (const m of source.matchAll(/values\['([a-z-]+)'\]|values\.([a-z]+)/g)) expect(specFor('explain')!.flags.map((f) => f.name)).toContain(m[1] ?? m[2]);
    expect((await cli('explain', 'x.json', '--run-key', 'explicit,nonsense')).code).toBe(2);
    expect((await cli('explain', 'x.json', '--parent-wait', 'soon')).code).toBe(2);
    expect((await cli('explain')).code).toBe(2);
    expect((await cli('explain', 'x.json', '--bogus')).code).toBe(2);
  });

  it('serve parses, helps and defaults from its one option table', async () => {
    const names = Object.keys(SERVE_OPTIONS);
    expect(names.length).toBeGreaterThan(15);
    // --help and the parser are the table: same flags, same order, same defaults.
    expect(specFor('serve')!.flags.map((f) => f.name)).toEqual(names);
    const help = (await cli('serve', '--help')).stdout;
    for (const n of names) expect(help, n).toContain(`--${n}`);
    // DEFAULTS holds each option's default, parsed as a given value is; nothing given reads as DEFAULTS.
    const table = Object.entries(SERVE_OPTIONS) as [string, ServeOption][];
    const keyed = table.filter(([, o]) => o.key !== undefined && o.parse !== undefined);
    const none = readServeArgs([]).config as Record<string, unknown>;
    for (const [n, o] of keyed) {
      const expected = typeof o.default === 'string' ? o.parse!(o.default, n) : undefined;
      expect((DEFAULTS as Record<string, unknown>)[o.key!], n).toEqual(expected);
      expect(none[o.key!], n).toEqual(expected);
    }
    // Each option given reaches its own config field (or the command's flags), parsed.
    const sample: Record<string, string> = { DUR: '42s', N: '7', SIZE: '3MiB', PORT: '7', ADDR: '127.0.0.2', ID: 'c', NAME: 'i-1', DIR: 'd', LEVEL: 'warn', MODE: 'any', IMPL: 'grpc-js', ORDER: 'trace', 'CONTRACT@VERSION': 'a@1' };
    sample.URL = 'postgres://u@127.0.0.1:5432/db';
    for (const [n, o] of table) {
      if (o.type === 'boolean') {
        expect((readServeArgs([`--${n}`]).flags as Record<string, unknown>)[n], n).toBe(true);
        continue;
      }
      const v = sample[o.value!];
      if (v === undefined) continue; // FILE: read as a file (token files: test/e2e-auth.test.ts; TLS: test/tls.test.ts)
      const { config, flags } = readServeArgs([`--${n}`, v]);
      const want = o.parse ? o.parse(v, n) : o.multiple ? [v] : v;
      if (o.key) expect((config as Record<string, unknown>)[o.key], n).toEqual(want);
      else expect((flags as Record<string, unknown>)[n], n).toEqual(want);
    }
    // A bad value is a usage error naming the flag (the parser's own message), exit 2.
    const bad = await cli('serve', '--max-live-runs', 'many');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('topology-audit serve: --max-live-runs: expected a positive integer: many\n');
    const gc = await cli('serve', '--gc-percent', '5000');
    expect(gc.code).toBe(2);
    expect(gc.stderr).toBe('topology-audit serve: --gc-percent: expected an integer from 0 to 1000: 5000\n');
    expect((await cli('serve', 'stray')).stderr).toMatch(/^topology-audit serve: Unexpected argument 'stray'/);
  });

  it('every command parses from its spec: none calls parseArgs itself, and handoff board --help names its --server and --token', async () => {
    const cliDir = join(ROOT, 'src', 'cli');
    for (const f of readdirSync(cliDir).filter((n) => n.endsWith('.ts') && n !== 'spec.ts')) expect(readFileSync(join(cliDir, f), 'utf8'), f).not.toMatch(/\bparseArgs\(/);
    const help = (await cli('handoff', '--help')).stdout;
    expect(help).toMatch(/--server URL +board: .*\(default: \$TOPOLOGY_AUDIT_SERVER or http:\/\/127\.0\.0\.1:9464\)/);
    expect(help).toMatch(/--token TOKEN +board: .*\(default: \$TOPOLOGY_AUDIT_TOKEN\)/);
  });

  it('top-level help lists every command and the exit-code table; --version prints the package version', async () => {
    const r = await cli('--help');
    expect(r.code).toBe(0);
    for (const c of commands) expect(r.stdout).toMatch(new RegExp(`^  ${c} +\\S`, 'm'));
    for (const [c] of EXIT_CODES) expect(r.stdout).toMatch(new RegExp(`^\\s+${c}  `, 'm'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect((await cli('--version')).stdout).toBe(`topology-audit ${pkg.version}\n`);
    const spawned = await spawnCli(['--version']);
    expect(spawned.code).toBe(0);
    expect(spawned.stdout.trim()).toBe(`topology-audit ${pkg.version}`);
  });

  it('docs/cli.md carries the same exit-code table', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');
    for (const [c, m] of EXIT_CODES) expect(doc).toContain(`| ${c} | ${m} |`);
  });

  it('errors carry one prefix, and a bad duration names the units', async () => {
    const r = await spawnCli(['gate', 'run-1', '--timeout', '30']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('topology-audit gate: --timeout: "30" is not a duration; use a whole number with ms, s, m, h or d (e.g. 30s, 5m, 2h)\n');
    const noRun = await cli('gate');
    expect(noRun.stderr).toBe('topology-audit gate: give exactly one run id; see topology-audit gate --help\n');
    const unknown = await cli('gate', 'x', '--frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^topology-audit gate: Unknown option '--frobnicate'; see topology-audit gate --help\n$/);
    const replay = await cli('replay');
    expect(replay.stderr).not.toMatch(/replay: replay:/);
    expect(replay.stderr).toMatch(/^topology-audit replay: give at least one/);
    const serve = await cli('serve', '--retention', '7');
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain('use a whole number with ms, s, m, h or d');
    expect(serve.stderr.match(/topology-audit serve:/g)).toHaveLength(1);
  });

  it('colour only on a terminal, never with NO_COLOR', () => {
    expect(colorEnabled({ isTTY: true }, {})).toBe(true);
    expect(colorEnabled({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(colorEnabled({ isTTY: false }, {})).toBe(false);
    expect(colorEnabled({ isTTY: false }, { FORCE_COLOR: '1' })).toBe(true);
    expect(colorEnabled({ isTTY: true }, { FORCE_COLOR: '1', NO_COLOR: '1' })).toBe(false);
    expect(colorEnabled({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
  });

  it('renders countdowns at display time from the deadline (one renderer: displayMessage, as replay and gate use it)', () => {
    const now = Date.parse('2026-01-01T00:10:00Z');
    const f = (code: string, message: string, deadline?: string): Finding => ({ verdict: 'waiting', code, agents: [], events: [], message, settled: false, ...(deadline ? { deadline } : {}) });
    const waiting = f('waiting', 'waiting on verifier until 2026-01-01T00:12:30Z: notify', '2026-01-01T00:12:30Z');
    expect(displayMessage(waiting, { findings: [waiting] }, now)).toBe('waiting on verifier until 2026-01-01T00:12:30Z (2m30s left): notify');
    const missed = f('missed_deadline', 'x still absent at its deadline 2026-01-01T00:05:00Z: investigate', '2026-01-01T00:05:00Z');
    expect(displayMessage(missed, { findings: [missed] }, now)).toBe('x still absent at its deadline 2026-01-01T00:05:00Z (5m ago): investigate');
    const plain = f('pending', 'plain');
    expect(displayMessage(plain, { findings: [plain] }, now)).toBe('plain');
  });

  it('validate DIR checks every contract in the directory; an empty directory is an error, not EISDIR', async () => {
    const r = await cli('validate', join(ROOT, 'contracts'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.match(/: ok \(/g)!.length).toBeGreaterThanOrEqual(3);
    const empty = tempDir('ta-empty-');
    const e = await cli('validate', empty);
    expect(e.code).toBe(1);
    expect(e.stderr).toContain('no contract files');
    expect(e.stderr).not.toContain('EISDIR');
  });

  it('classifies log levels', () => {
    expect(levelOf('warning')).toBe('warn');
    expect(levelOf('gap_commit_failed')).toBe('error');
    expect(levelOf('verdict_changed')).toBe('info');
  });

  it('every registered spec has a summary, a usage line and an example', () => {
    for (const s of allSpecs()) {
      expect(s.summary, s.name).toBeTruthy();
      expect(s.usage.length, s.name).toBeGreaterThan(0);
      expect(s.examples.length, s.name).toBeGreaterThan(0);
    }
  });
});

describe('serve from anywhere, logs and wrong-port hints', () => {
  it('serve from another directory uses the packaged example contracts and says so; logs are content-free JSON lines', async () => {
    const cwd = tempDir('ta-cwd-');
    const data = join(cwd, 'data');
    const child = spawn(process.execPath, [BIN, 'serve', '--data', data, '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--log-interval', '1s'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    try {
      const listening = await waitFor(async () => out.split('\n').find((l) => l.startsWith('{"listening"')), { timeoutMs: 20_000, what: 'listening' });
      const api = `http://127.0.0.1:${JSON.parse(listening).listening.api}`;
      expect(out).toContain('no --contracts given; using the packaged example contracts');
      const contracts = await (await fetch(`${api}/api/v1/contracts`)).json();
      expect(contracts.contracts.map((c: { contract: string }) => c.contract)).toContain('research-publish');
      const res = await fetch(`${api}/v1/receipts`, { method: 'POST', body: shiftedNdjson(), headers: { 'content-type': 'application/x-ndjson' } });
      expect(res.status).toBe(200);
      const logs = await waitFor(
        async () => {
          const lines = err.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
          return lines.some((l) => l.event === 'ingest_summary' && l.accepted > 0) ? lines : undefined;
        },
        { timeoutMs: 20_000, what: 'ingest summary' },
      );
      for (const l of logs) {
        expect(typeof l.time).toBe('string');
        expect(['debug', 'info', 'warn', 'error']).toContain(l.level);
      }
      expect(logs.find((l) => l.event === 'starting')).toMatchObject({ contractsDir: 'packaged examples', contracts: packagedContractIds().size, gcPercent: 100 });
      expect(logs.find((l) => l.event === 'listening')).toMatchObject({ host: '127.0.0.1' });
      const summary = logs.find((l) => l.event === 'ingest_summary' && l.accepted > 0);
      expect(summary).toMatchObject({ accepted: drift.length, duplicates: 0, rejected: { total: 0, byReason: {} }, rejectedRequests: {}, droppedSpans: {} });
      const forbidden = logs.find((l) => l.event === 'verdict_changed' && l.run === 'drift-direct-route' && l.verdict === 'forbidden_edge');
      expect(forbidden).toMatchObject({ contract: 'research-publish', version: '3', code: expect.any(String) });
      // Content-free: no file path (not even the data or contracts directory), no receipt content beyond ids and codes.
      expect(err).not.toContain(cwd);
      expect(err).not.toContain(ROOT);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }, 60_000);

  it('--log-level warn keeps info lines out', async () => {
    const srv = await startServerProcess({ args: ['--log-level', 'warn', '--contracts', tempDir('ta-noc-')] });
    try {
      // The empty registry is warned about; info lines (starting, listening) are not printed.
      const lines = srv.stderr().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
      expect(lines.some((l) => l.event === 'warning' && /registry is empty/.test(l.message))).toBe(true);
      expect(lines.every((l) => l.level === 'warn' || l.level === 'error')).toBe(true);
    } finally {
      await srv.stop();
    }
    expect((await cli('serve', '--log-level', 'loud')).stderr).toContain('--log-level: "loud" is not one of debug, info, warn, error');
  }, 30_000);
});

describe('gate and ack against a running auditor', () => {
  let srv: ServerProcess;
  let foreign: ReturnType<typeof createServer>;
  let foreignUrl: string;
  beforeAll(async () => {
    srv = await startServerProcess();
    const res = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body: shiftedNdjson(), headers: { 'content-type': 'application/x-ndjson' } });
    expect((await res.json()).accepted).toBe(drift.length);
    foreign = createServer((_req, r) => r.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'));
    await new Promise<void>((r) => foreign.listen(0, '127.0.0.1', r));
    foreignUrl = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await srv?.stop();
    foreign?.close();
  });

  it('exits 0 for a healthy run and 1 for a settled unsafe one', async () => {
    const ok = await spawnCli(['gate', 'drift-complete', '--server', srv.api, '-t', '10s']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^drift-complete: healthy/);
    const bad = await spawnCli(['gate', 'drift-direct-route', '-s', srv.api, '--timeout', '10s']);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain('drift-direct-route: forbidden_edge');
  }, 60_000);

  it('exits 75 for a run seen but still open at the timeout, with progress lines on stderr', async () => {
    const r = await spawnCli(['gate', 'drift-current', '--server', srv.api, '--timeout', '3s'], { env: { TOPOLOGY_AUDIT_PROGRESS_MS: '1000' } });
    expect(r.code).toBe(75);
    expect(r.stdout).toMatch(/^drift-current: (working|waiting)/);
    expect(r.stderr).toMatch(/topology-audit gate: drift-current: (working|waiting) after \d+s, \d+s left\n/);
    expect(r.stderr).toContain('still working at the timeout (3s)');
    const quiet = await spawnCli(['gate', 'drift-current', '--server', srv.api, '--timeout', '2s', '-q'], { env: { TOPOLOGY_AUDIT_PROGRESS_MS: '500' } });
    expect(quiet.code).toBe(75);
    expect(quiet.stderr).not.toContain(' left\n');
  }, 60_000);

  it('exits 66 for a run never seen by the timeout', async () => {
    const r = await spawnCli(['gate', 'no-such-run', '--server', srv.api, '--timeout', '2s'], { env: { TOPOLOGY_AUDIT_PROGRESS_MS: '500' } });
    expect(r.code).toBe(66);
    expect(r.stdout).toContain('no-such-run: never seen');
    expect(r.stderr).toContain('not seen yet after');
    expect(r.stderr).toContain('was never seen by the timeout');
  }, 30_000);

  it('exits 2 at once when --server is the OTLP port, another HTTP service or nothing', async () => {
    const started = Date.now();
    const otlp = await spawnCli(['gate', 'drift-complete', '--server', srv.otlpHttp, '--timeout', '5m']);
    expect(otlp.code).toBe(2);
    expect(otlp.stderr).toBe(`topology-audit gate: ${srv.otlpHttp} is the auditor's OTLP/HTTP receiver, not its API; point --server at serve's --port (default 9464)\n`);
    const other = await spawnCli(['gate', 'drift-complete', '--server', foreignUrl, '--timeout', '5m']);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('is not a topology-audit API');
    const nothing = await spawnCli(['gate', 'drift-complete', '--server', 'http://127.0.0.1:1', '--timeout', '5m']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/^topology-audit gate: server http:\/\/127.0.0.1:1 unreachable/);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it('colours the verdict with FORCE_COLOR, never with NO_COLOR', async () => {
    const forced = await spawnCli(['gate', 'drift-complete', '--server', srv.api], { env: { FORCE_COLOR: '1' } });
    expect(forced.stdout).toContain('\x1b[32mhealthy\x1b[0m');
    const no = await spawnCli(['gate', 'drift-complete', '--server', srv.api], { env: { FORCE_COLOR: '1', NO_COLOR: '1' } });
    expect(no.stdout).not.toContain('\x1b[');
    expect(no.stdout).toContain('healthy');
  }, 30_000);

  it('wrong ports answer 404 with a hint naming the right port', async () => {
    const receipt = await fetch(`${srv.otlpHttp}/v1/receipts`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(receipt.status).toBe(404);
    expect(await receipt.text()).toContain(`API port ${srv.ports.api}`);
    const spans = await fetch(`${srv.api}/v1/traces`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(spans.status).toBe(404);
    expect((await spans.json()).error).toContain(`OTLP/HTTP port ${srv.ports.otlpHttp}`);
    const health = await fetch(`${srv.api}/healthz`);
    expect(health.headers.get('x-topology-audit')).toBe('api');
    expect(await health.json()).toMatchObject({ status: 'ok', service: 'topology-audit' });
  });

  it('ack: POST /api/v1/runs/{run}/ack and `topology-audit ack` remove the run from topology_alerting_runs', async () => {
    const series = async () => {
      const m = await (await fetch(`${srv.api}/metrics`)).text();
      return Number(/^topology_alerting_runs\{contract="research-publish",verdict="unknown_agent"\} (\d+)/m.exec(m)?.[1]);
    };
    await waitFor(async () => (await series()) === 1, { what: 'unknown_agent alerting' });
    expect((await fetch(`${srv.api}/api/v1/runs/drift-shadow/ack`)).status).toBe(405);
    expect((await fetch(`${srv.api}/api/v1/runs/no-such/ack`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${srv.api}/api/v1/runs/drift-shadow/ack?by=${encodeURIComponent('a b')}`, { method: 'POST' })).status).toBe(400);
    const r = await spawnCli(['ack', 'drift-shadow', '--server', srv.api, '--by', 'oncall']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^drift-shadow \(unknown_agent\): acknowledged by oncall at \d{4}-/);
    await waitFor(async () => (await series()) === 0, { what: 'unknown_agent acked' });
    const again = await spawnCli(['ack', 'drift-shadow', '--server', srv.api]);
    expect(again.stdout).toContain('acknowledged already by oncall, at ');
    const unknown = await spawnCli(['ack', 'no-such', '--server', srv.api]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(`topology-audit ack: unknown run no-such on ${srv.api}\n`);
    // The run keeps its verdict; only the alerting series dropped it.
    const m = await (await fetch(`${srv.api}/metrics`)).text();
    expect(m).toMatch(/^topology_runs\{contract="research-publish",version="3",verdict="unknown_agent"\} 1/m);
  }, 30_000);
});

