/**
 * Three `serve` instances named NAME-a, NAME-b, NAME-c on a fresh database of a throwaway PostgreSQL, settled on their
 * shares of the partitions (every instance counts three live and holds some; together they hold all), and a client
 * of that database: the start-up of the cluster fault tests (test/cluster-faults.test.ts,
 * test/cluster-network-faults.test.ts).
 */
import pg from 'pg';
import type { PgCluster } from './pg-cluster.js';
import { getJson, startServerProcess, type ServerProcess } from './server.js';
import { until } from './wait.js';

export interface ThreeInstances {
  url: string;
  srv: ServerProcess[];
  client: pg.Client;
  /** The arguments instance `n` ('a', 'b', 'c') was started with (to start it again). */
  args: (n: string) => string[];
}

export const clusterOf = async (srv: ServerProcess) => (await getJson(`${srv.api}/api/v1/cluster`)).body;

export async function startThree(
  h: { db: PgCluster; running: Set<ServerProcess> },
  name: string,
  opts: { partitions: number; extra?: readonly string[]; storeOf?: (n: string, url: string) => string },
): Promise<ThreeInstances> {
  const url = await h.db.database(name);
  const storeOf = opts.storeOf ?? ((_n: string, u: string) => u);
  const args = (n: string) => ['--store', storeOf(n, url), '--instance', `${name}-${n}`, '--partitions', String(opts.partitions), '--contract', 'research-publish', ...(opts.extra ?? [])];
  const srv = await Promise.all(
    ['a', 'b', 'c'].map(async (n) => {
      const s = await startServerProcess({ args: args(n) });
      h.running.add(s);
      return s;
    }),
  );
  await until(`${name}: three instances share the partitions`, async () => {
    const st = await Promise.all(srv.map(clusterOf));
    return st.every((s) => s.liveInstances === 3 && s.owned > 0) && st.reduce((n, s) => n + s.owned, 0) === opts.partitions;
  }, 30_000);
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  return { url, srv, client, args };
}
