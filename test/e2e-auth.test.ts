import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRACE_SERVICE } from '../src/server/otlp-grpc.js';
import { credentials, Metadata, makeGenericClientConstructor, status } from '@grpc/grpc-js';
import { getJson, runCli, startServerProcess, tempDir, type ServerProcess } from './helpers/server.js';

const ORCH = 'orch-token-0123456789abcdef';
const VERIFIER = 'verifier-token-0123456789abcdef';
const RESEARCHER = 'researcher-token-0123456789abcdef';
const API = 'api-token-0123456789abcdef';

const t0 = Date.now() - 60_000;
const at = (s: number) => new Date(t0 + s * 1000).toISOString();
const line = (o: object) => JSON.stringify(o) + '\n';

describe('authenticated sources', () => {
  let srv: ServerProcess;
  beforeAll(async () => {
    const dir = tempDir('ta-tokens-');
    writeFileSync(join(dir, 'ingest'), `# token agents\n${ORCH} orchestrator\n${VERIFIER} verifier\n${RESEARCHER} researcher\n`);
    writeFileSync(join(dir, 'api'), `${API}\n`);
    srv = await startServerProcess({ args: ['--ingest-tokens', join(dir, 'ingest'), '--api-tokens', join(dir, 'api')] });
  });
  afterAll(async () => {
    await srv.stop();
  });

  const post = (token: string | null, body: string) =>
    fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson', ...(token ? { authorization: `Bearer ${token}` } : {}) } });
  const api = (path: string, token: string | null = API) => fetch(`${srv.api}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

  it('refuses unauthenticated and wrong-token requests with 401 / UNAUTHENTICATED and stores nothing', async () => {
    const body = line({ run: 'unauth-run', event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', from: 'orchestrator' });
    expect((await post(null, body)).status).toBe(401);
    expect((await post('wrong-token-0123456789abcdef', body)).status).toBe(401);
    const otlp = await fetch(`${srv.otlpHttp}/v1/traces`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json', authorization: 'Bearer nope-nope-nope-nope' } });
    expect(otlp.status).toBe(401);
    // gRPC with a wrong token
    const Client = makeGenericClientConstructor(TRACE_SERVICE, 'TraceService');
    const client = new Client(`127.0.0.1:${srv.ports.otlpGrpc}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('authorization', 'Bearer nope-nope-nope-nope');
    const code = await new Promise<number>((res) => (client as any).Export(Buffer.alloc(0), md, (err: { code: number } | null) => res(err ? err.code : 0)));
    client.close();
    expect(code).toBe(status.UNAUTHENTICATED);
    // The API needs its own token; an ingest token is not an API token.
    expect((await api('/api/v1/runs', null)).status).toBe(401);
    expect((await api('/api/v1/runs', ORCH)).status).toBe(401);
    const runs = await api('/api/v1/runs/unauth-run');
    expect(runs.status).toBe(404);
  });

  it('rejects a forged return from a token bound to another agent; the run stays waiting and then incomplete', async () => {
    const run = 'forged-run';
    const deadlineSoon = [
      line({ run, event: 's', type: 'run.start', at: at(0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }),
      line({ run, event: 'e1', type: 'edge', at: at(1), version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' }),
      line({ run, event: 'w', type: 'wait', at: at(2), from: 'orchestrator', on: 'verifier', edge: 'verifier -> orchestrator : return', deadline: new Date(Date.now() + 4000).toISOString() }),
    ].join('');
    const r1 = await (await post(ORCH, deadlineSoon)).json();
    expect(r1).toMatchObject({ accepted: 3, rejected: [] });
    const r2 = await (await post(RESEARCHER, line({ run, event: 'e2', type: 'edge', at: at(3), version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' }))).json();
    expect(r2.accepted).toBe(1);
    // The researcher's token forges the verifier's return (and a verified outcome and completion for good measure).
    const forged = [
      line({ run, event: 'e3', type: 'edge', at: at(4), version: '3', from: 'verifier', to: 'orchestrator', kind: 'return' }),
      line({ run, event: 'o', type: 'outcome', at: at(5), version: '3', from: 'orchestrator', verified: true }),
    ].join('');
    const r3 = await (await post(RESEARCHER, forged)).json();
    expect(r3.accepted).toBe(0);
    expect(r3.rejected).toHaveLength(2);
    expect(r3.rejected[0].error).toMatch(/may not speak for agent "verifier"/);
    // A bound token must name its agent: an anonymous verified outcome is refused too.
    const anonymous = await (await post(RESEARCHER, line({ run, event: 'o2', type: 'outcome', at: at(5), version: '3', verified: true }))).json();
    expect(anonymous.accepted).toBe(0);
    expect(anonymous.rejected[0].error).toMatch(/must name the reporting agent/);
    const v = await (await api(`/api/v1/runs/${run}`)).json();
    expect(v.verdict).toBe('waiting');
    expect(v.receipts.map((x: { event: string }) => x.event).sort()).toEqual(['e1', 'e2', 's', 'w']);
    const gate = await runCli(['gate', run, '--server', srv.api, '--timeout', '15s', '--token', API]);
    // The declared wait ran out: a settled incomplete finding, even while the plan's own deadline still shows waiting.
    expect(gate.stdout).toContain('settled by incomplete');
    expect(gate.code).toBe(1);
    const m = await (await api('/metrics')).text();
    expect(m).toMatch(/topology_receipts_total\{type="edge",result="rejected"\} 1/);
    expect(m).toMatch(/topology_receipts_total\{type="outcome",result="rejected"\} 2/);
  });

  it('refuses to bind a non-loopback address without tokens unless --insecure', async () => {
    const r = await runCli(['serve', '--host', '0.0.0.0', '--port', '0', '--otlp-http-port', '0', '--otlp-grpc-port', '0', '--data', tempDir()]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/refusing to bind 0\.0\.0\.0/);
  });
});
