// CPU per batch of one server at two request rates (issue 35, item 3): the same HTTP protobuf batches as
// bench/cluster.mjs (512 spans, 2.3 MB), first closed loop from 4 clients, then paced (1 client, a batch every
// --pace-ms), 10 s measured each after 3 s; then both again. The server's CPU per batch (main thread and the other
// threads, from /proc) at each rate: what an instance pays per span when it is given a smaller share of the load, as
// each of n instances (or n independent servers) is. SQLite by default; --pg: one cluster instance on a throwaway
// PostgreSQL (its CPU not counted).
//
//   npm run build && node bench/pace.mjs [--pg] [--pace-ms 250]
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { buildTemplates, patched } from './ingest.mjs';
import { httpClient, round, sleep, startServer } from './otlp-load.mjs';
import { loadPgCluster } from './pg-cluster.mjs';

const { values: args } = parseArgs({ options: { pg: { type: 'boolean', default: false }, 'pace-ms': { type: 'string', default: '250' } } });
const PACE = Number(args['pace-ms']);
const threads = (pid) =>
  readdirSync(`/proc/${pid}/task`).map((t) => {
    const f = readFileSync(`/proc/${pid}/task/${t}/stat`, 'latin1');
    const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return [Number(t), (Number(x[11]) + Number(x[12])) / 100];
  });
const pb = buildTemplates().protobuf;
let db = null;
let extra = [];
if (args.pg) {
  const { startPgCluster } = await loadPgCluster();
  db = await startPgCluster();
  extra = ['--store', await db.database('pace'), '--instance', 'auditor-1', '--partitions', '64'];
}
const server = await startServer(extra, []);
const client = httpClient(server.ports.otlpHttp, 'application/x-protobuf', 4);
const cpu = () => {
  const t = threads(server.pid);
  return { main: t.find(([id]) => id === server.pid)[1], all: t.reduce((a, [, v]) => a + v, 0) };
};
let seq = 1;
const results = [];
async function phase(name, clients, paceMs) {
  let stop = false;
  let batches = 0;
  const loop = async () => {
    while (!stop) {
      const n = seq++;
      const t0 = performance.now();
      await client.send(patched(pb[n % pb.length], n));
      batches++;
      if (paceMs) await sleep(Math.max(0, paceMs - (performance.now() - t0)));
    }
  };
  const all = Promise.all(Array.from({ length: clients }, loop));
  await sleep(3000);
  const a = cpu();
  const b0 = batches;
  await sleep(10_000);
  const b = cpu();
  const n = batches - b0;
  stop = true;
  await all;
  const r = { phase: name, batchesPerSec: round(n / 10, 1), mainMsPerBatch: round((1000 * (b.main - a.main)) / n, 1), otherThreadsMsPerBatch: round((1000 * (b.all - b.main - a.all + a.main)) / n, 1), msPerBatch: round((1000 * (b.all - a.all)) / n, 1), cores: round((b.all - a.all) / 10, 2) };
  results.push(r);
  console.log(`${name}: ${r.batchesPerSec} batches/s, server CPU ms per batch ${r.msPerBatch} (main thread ${r.mainMsPerBatch}, other threads ${r.otherThreadsMsPerBatch}), ${r.cores} cores`);
}
try {
  for (let i = 1; i <= 2; i++) {
    await phase(`closed loop x4 (${i})`, 4, 0);
    await phase(`paced, 1 every ${PACE} ms (${i})`, 1, PACE);
  }
} finally {
  client.close();
  await server.stop();
  if (db) await db.stop();
}
console.log(`load ${round(os.loadavg()[0], 2)}; ${args.pg ? 'one cluster instance on PostgreSQL' : 'SQLite'}`);
console.log(JSON.stringify({ bench: 'pace', store: args.pg ? 'postgres' : 'sqlite', paceMs: PACE, results, loadavg1m: round(os.loadavg()[0], 2) }));
