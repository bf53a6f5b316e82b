import { describe, expect, it } from 'vitest';
import { getJson, startServerProcess } from './helpers/server.js';

const line = (o: object) => JSON.stringify(o) + '\n';

describe('retention', () => {
  it('prunes settled runs idle past --retention from memory and store; live runs stay', async () => {
    const srv = await startServerProcess({ args: ['--retention', '2s'] });
    try {
      const at = new Date().toISOString();
      const body = [
        line({ run: 'settled-run', event: 's', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research' }),
        line({ run: 'settled-run', event: 'e', type: 'edge', at, version: '3', from: 'researcher', to: 'publisher', kind: 'delegate' }),
        line({ run: 'live-run', event: 's', type: 'run.start', at, contract: 'research-publish', version: '3', phase: 'research' }),
      ].join('');
      const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
      expect((await r.json()).accepted).toBe(3);
      expect((await getJson(`${srv.api}/api/v1/runs/settled-run`)).body.verdict).toBe('forbidden_edge');
      const deadline = Date.now() + 15_000;
      let status = 200;
      while (status === 200 && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 250));
        status = (await getJson(`${srv.api}/api/v1/runs/settled-run`)).status;
      }
      expect(status).toBe(404);
      expect((await getJson(`${srv.api}/api/v1/runs/live-run`)).body.verdict).toBe('working');
      const m = await (await fetch(`${srv.api}/metrics`)).text();
      expect(m).toMatch(/^topology_live_runs 1$/m);
    } finally {
      await srv.stop();
    }
    // Pruned from the store too: a restart does not bring it back.
    const again = await startServerProcess({ dataDir: srv.dataDir, args: ['--retention', '2s'] });
    try {
      expect((await getJson(`${again.api}/api/v1/runs/settled-run`)).status).toBe(404);
      expect((await getJson(`${again.api}/api/v1/runs/live-run`)).status).toBe(200);
    } finally {
      await again.stop();
    }
  });
});
