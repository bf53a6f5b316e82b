#!/usr/bin/env node
// The longest busy stretches of a V8 CPU profile: runs of consecutive samples that are not idle (the event loop held
// that long), each with the frames most present in it. For a loop stall that a soak shows (nodejs_eventloop_lag_max)
// but no periodic job's slice explains: run the soak with --node-args='--cpu-prof --cpu-prof-dir=DIR', then
//   node bench/profile-stalls.mjs DIR/CPU.*.cpuprofile [N]
// (N stretches, default 5). Sampling resolution is V8's (~1 ms); a stretch includes the garbage collector's samples.
import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const name = (n) => `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`;
const idle = (id) => ['(idle)', '(program)'].includes(byId.get(id).callFrame.functionName) && !parent.has(id) ? true : byId.get(id).callFrame.functionName === '(idle)';
let t = p.startTime;
const stretches = [];
let cur = null;
p.samples.forEach((s, i) => {
  t += p.timeDeltas[i];
  if (idle(s)) {
    if (cur) (stretches.push(cur), (cur = null));
    return;
  }
  if (!cur) cur = { start: t, end: t, samples: [] };
  cur.end = t;
  cur.samples.push(s);
});
if (cur) stretches.push(cur);
stretches.sort((a, b) => b.end - b.start - (a.end - a.start));
for (const st of stretches.slice(0, Number(process.argv[3] ?? 5))) {
  const incl = new Map();
  for (const s of st.samples) {
    const seen = new Set();
    for (let id = s; id !== undefined; id = parent.get(id)) {
      const k = name(byId.get(id));
      if (!seen.has(k)) (seen.add(k), incl.set(k, (incl.get(k) ?? 0) + 1));
    }
  }
  console.log(`--- ${((st.end - st.start) / 1000).toFixed(0)} ms at +${((st.start - p.startTime) / 1e6).toFixed(1)} s, ${st.samples.length} samples`);
  console.log([...incl].sort((a, b) => b[1] - a[1]).slice(1, 22).map(([k, v]) => `  ${String(v).padStart(5)} ${k}`).join('\n'));
}
