// The embedded store's hot path (ReceiptStore.append -> group commit) of this build beside another build's, in one
// process, alternating cells: CPU time (user + system, this process) and wall time per receipt, 8 appenders of 4-receipt
// appends, synchronous=NORMAL on /dev/shm (no fsync: the store's own work, not the disk's). CPU per receipt is less
// at the mercy of a shared machine than bench/store.mjs's receipts/s. Reported: each build's median, and new / base.
//
//   npm run build && node bench/store-cpu.mjs --baseline DIR [--rounds 20] [--per-appender 3000]
// DIR: another checkout with a built dist/ (e.g. `git worktree add /tmp/base main && (cd /tmp/base && npm run build)`).
import { mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { storeDeliveries } from './payloads.mjs';

const { values: args } = parseArgs({ options: { baseline: { type: 'string' }, rounds: { type: 'string', default: '20' }, 'per-appender': { type: 'string', default: '3000' } } });
if (!args.baseline) throw new Error('--baseline DIR is required (another build, e.g. main built in DIR)');
const ROUNDS = Number(args.rounds);
const PER_APPENDER = Number(args['per-appender']);
const APPENDERS = 8;
const BATCH = 4;
const storeOf = async (root) => (await import(pathToFileURL(join(resolve(root), 'dist', 'store', 'index.js')).href)).ReceiptStore;
const builds = { base: await storeOf(args.baseline), new: await storeOf(join(import.meta.dirname, '..')) };

async function cell(Store) {
  const dir = mkdtempSync('/dev/shm/store-cpu-');
  const store = Store.open(dir, { synchronous: 'NORMAL' });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: APPENDERS }, async (_, id) => {
    for (let seq = 0; seq < PER_APPENDER; seq++) await store.append(storeDeliveries(id, seq, BATCH, 50, { version: '2' }));
  }));
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - t0;
  const { commits } = store.commitStats();
  store.close();
  rmSync(dir, { recursive: true, force: true });
  const receipts = APPENDERS * PER_APPENDER * BATCH;
  return { cpuUs: (cpu.user + cpu.system) / receipts, wallUs: (wall * 1000) / receipts, receiptsPerCommit: receipts / commits };
}

await cell(builds.base); // warm-up, both builds
await cell(builds.new);
const cells = { base: [], new: [] };
for (let r = 0; r < ROUNDS; r++) for (const k of r % 2 ? ['new', 'base'] : ['base', 'new']) cells[k].push(await cell(builds[k]));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x, d = 3) => Math.round(x * 10 ** d) / 10 ** d;
const summary = {};
for (const k of ['base', 'new']) {
  summary[k] = { cpuUsPerReceipt: round(median(cells[k].map((c) => c.cpuUs))), wallUsPerReceipt: round(median(cells[k].map((c) => c.wallUs))), receiptsPerCommit: round(median(cells[k].map((c) => c.receiptsPerCommit)), 1) };
}
const perRound = cells.new.map((c, i) => c.cpuUs / cells.base[i].cpuUs);
console.log(`build      cpu µs/receipt  wall µs/receipt  receipts/commit`);
for (const k of ['base', 'new']) console.log(`${k.padEnd(10)} ${String(summary[k].cpuUsPerReceipt).padStart(14)}  ${String(summary[k].wallUsPerReceipt).padStart(15)}  ${String(summary[k].receiptsPerCommit).padStart(15)}`);
const ratio = { cpu: round(summary.new.cpuUsPerReceipt / summary.base.cpuUsPerReceipt), wall: round(summary.new.wallUsPerReceipt / summary.base.wallUsPerReceipt), cpuPerRoundMedian: round(median(perRound)) };
console.log(`new / base: cpu ${ratio.cpu}, wall ${ratio.wall}, cpu per round (median) ${ratio.cpuPerRoundMedian}`);
console.log(JSON.stringify({ bench: 'store-cpu', node: process.version, rounds: ROUNDS, receiptsPerCell: APPENDERS * PER_APPENDER * BATCH, ...summary, ratio }));
