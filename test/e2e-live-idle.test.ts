/**
 * Issue 30.5: the live-run cap is not a lockout. Runs that never settle (bare edges) fill --max-live-runs; once they
 * have received nothing for --idle-evict-after, the longest idle leave live memory to make room (counted in
 * topology_live_runs_idle_evicted_total), stay in the store and readable, and are loaded again, with every
 * acknowledged receipt, on their next receipt. The same after a restart on the same data directory.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { until } from './helpers/wait.js';

const line = (o: object) => JSON.stringify(o) + '\n';
const edge = (run: string, event = 'e1') => line({ run, event, type: 'edge', at: new Date().toISOString(), from: 'orchestrator', to: 'researcher', kind: 'delegate' });
const post = async (srv: ServerProcess, body: string) => {
  const r = await fetch(`${srv.api}/v1/receipts`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson' } });
  return { status: r.status, body: await r.json() };
};
/** Stored whole: 200 and no line refused (a run refused by the live cap is refused by line, the request answers 200). */
const admitted = (r: { status: number; body: { rejectedCount?: number } }) => r.status === 200 && r.body.rejectedCount === 0;
const evicted = async (srv: ServerProcess) => Number(/^topology_live_runs_idle_evicted_total (\d+)/m.exec(await (await fetch(`${srv.api}/metrics`)).text())?.[1] ?? NaN);

describe('the live-run cap with idle runs leaving live memory', () => {
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop();
  });
  const args = ['--max-live-runs', '40', '--idle-evict-after', '2s'];

  it('a full cap of unsettled runs: refused at first, accepted once they are idle; the idle runs keep their receipts', async () => {
    const srv = await startServerProcess({ args });
    servers.push(srv);
    let flood = '';
    for (let i = 0; i < 40; i++) flood += edge(`flood-${i}`);
    expect(admitted(await post(srv, flood))).toBe(true);
    const refused = await post(srv, edge('honest-1'));
    expect(refused.status).toBe(200);
    expect(refused.body.rejectedCount).toBe(1);
    expect(refused.body.rejected[0].error).toMatch(/--max-live-runs/);
    expect(await evicted(srv)).toBe(0);
    // condition, not a sleep: the honest run is accepted once the flood has been idle for 2 s
    await until('an honest new run accepted', async () => admitted(await post(srv, edge('honest-1'))));
    expect(await evicted(srv)).toBeGreaterThanOrEqual(1);
    // an idle run is still readable, and its next receipt brings it back with everything acknowledged before
    const before = await getJson(`${srv.api}/api/v1/runs/flood-0`);
    expect(before.status).toBe(200);
    expect(before.body.receipts.map((r: { event: string }) => r.event)).toEqual(['e1']);
    await until('flood-0 takes a receipt again', async () => admitted(await post(srv, edge('flood-0', 'e2'))));
    const after = await getJson(`${srv.api}/api/v1/runs/flood-0`);
    expect(after.body.receipts.map((r: { event: string }) => r.event).sort()).toEqual(['e1', 'e2']);
    expect(after.body.verdict).toBe(before.body.verdict);
    await srv.stop();

    // after a restart on the same data directory (everything stored is restored, over the cap): room again
    const again = await startServerProcess({ dataDir: srv.dataDir, args });
    servers.push(again);
    await until('an honest new run accepted after the restart', async () => admitted(await post(again, edge('honest-2'))));
    expect((await getJson(`${again.api}/api/v1/runs/honest-2`)).status).toBe(200);
    // no acknowledged receipt lost: every flood run, the re-loaded one and the honest ones, as acknowledged
    for (let i = 0; i < 40; i++) {
      const v = await getJson(`${again.api}/api/v1/runs/flood-${i}`);
      expect(v.body.receipts.map((r: { event: string }) => r.event).sort(), `flood-${i}`).toEqual(i === 0 ? ['e1', 'e2'] : ['e1']);
    }
    expect((await getJson(`${again.api}/api/v1/runs/honest-1`)).body.receipts.map((r: { event: string }) => r.event)).toEqual(['e1']);
  });
});
