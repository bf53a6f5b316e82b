// Summarise a V8 CPU profile (.cpuprofile from `node --cpu-prof`, e.g. `node bench/ingest.mjs --profile DIR`):
// self time by function (top N), and inclusive time of named groups of functions (a function's samples count
// once per group even when it recurses), as shares of all samples except idle.
//
//   node bench/profile-summary.mjs FILE.cpuprofile [--top 30] [--group NAME=regex ...] [--line NAME=file-suffix:line ...]
//                                  [--window WINDOW.json]
// --window counts only the samples taken between fromUs and toUs of the JSON file (microseconds of the monotonic
// clock, as process.hrtime and the profile's own timestamps; `node bench/cluster.mjs --cpu-prof DIR` writes one per
// phase), e.g. the measured load without the server's start-up. With it, --line counts every sample of the profile.
// --line counts the samples V8 attributed to one source line (positionTicks), e.g. a native call inside a function.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: args, positionals } = parseArgs({ allowPositionals: true, options: { window: { type: 'string' }, top: { type: 'string', default: '30' }, group: { type: 'string', multiple: true, default: [] }, line: { type: 'string', multiple: true, default: [] } } });
const profile = JSON.parse(readFileSync(positionals[0], 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const counts = new Map();
// Each sample's time: the profile's start plus the deltas so far (timeDeltas[i] precedes samples[i]).
const window = args.window ? JSON.parse(readFileSync(args.window, 'utf8')) : null;
let at = profile.startTime;
let seconds = 0;
for (let i = 0; i < profile.samples.length; i++) {
  at += profile.timeDeltas[i];
  if (window && (at < window.fromUs || at > window.toUs)) continue;
  counts.set(profile.samples[i], (counts.get(profile.samples[i]) ?? 0) + 1);
}
if (window) seconds = (Math.min(window.toUs, profile.endTime) - Math.max(window.fromUs, profile.startTime)) / 1e6;
const label = (n) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(dist|node_modules)\//, '$1/').replace(/^node:/, '')}:${n.callFrame.lineNumber + 1}`;
let total = 0;
const self = new Map();
const groups = args.group.map((g) => {
  const i = g.indexOf('=');
  return { name: g.slice(0, i), re: new RegExp(g.slice(i + 1)), n: 0 };
});
for (const [id, c] of counts) {
  const node = byId.get(id);
  if (node.callFrame.functionName === '(idle)') continue;
  total += c;
  self.set(label(node), (self.get(label(node)) ?? 0) + c);
  const stack = [];
  for (let x = id; x !== undefined; x = parent.get(x)) stack.push(label(byId.get(x)));
  for (const g of groups) if (stack.some((l) => g.re.test(l))) g.n += c;
}
const pct = (n) => `${((100 * n) / total).toFixed(1)}%`.padStart(6);
console.log(`${total} samples (idle excluded)${window ? ` in the window of ${seconds.toFixed(1)} s` : ''}`);
for (const [l, c] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(args.top))) console.log(pct(c), l);
for (const g of groups) console.log(`group ${g.name}: ${pct(g.n)}`);
for (const spec of args.line) {
  const [name, where] = spec.split('=');
  const [file, line] = [where.slice(0, where.lastIndexOf(':')), Number(where.slice(where.lastIndexOf(':') + 1))];
  let n = 0;
  for (const node of profile.nodes) {
    if (!node.callFrame.url.endsWith(file)) continue;
    for (const t of node.positionTicks ?? []) if (t.line === line) n += t.ticks;
  }
  console.log(`line ${name}: ${pct(n)}`);
}
