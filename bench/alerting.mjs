// Cost of one look of the per-run alerts (RunAlerts.update, once a second in serve) with N firing runs: the first look,
// an unchanged look, and a resend. Usage: npm run build && node bench/alerting.mjs
import { RunAlerts } from '../dist/alerting/run-alerts.js';
const links = { externalUrl: 'https://a', runbookUrl: 'https://a/runbooks' };
for (const n of [1000, 10000, 100000]) {
  const runs = Array.from({ length: n }, (_, i) => ({
    verdict: { run: `run-${i}`, pin: { contract: 'research-publish', version: '3', phase: 'research' }, verdict: 'forbidden_edge', naive: 'green', settled: true, nextChangeAt: null,
      findings: [{ verdict: 'forbidden_edge', code: 'forbidden_edge', edge: 'researcher -> publisher : delegate', agents: ['researcher', 'publisher'], events: ['e2'], message: 'forbidden edge researcher -> publisher : delegate', settled: true }] },
    enteredAt: 1e12, inWindow: true, stalledAt: null, lastAt: 1e12 }));
  let sent = 0;
  const ra = new RunAlerts(links, 60_000, (a) => (sent += a.length));
  let t = 1e12;
  let s = performance.now(); ra.update(t, runs); const first = performance.now() - s;
  const times = [];
  for (let i = 0; i < 20; i++) { t += 1000; s = performance.now(); ra.update(t, runs); times.push(performance.now() - s); }
  times.sort((a, b) => a - b);
  t += 60_000; s = performance.now(); ra.update(t, runs); const resend = performance.now() - s;
  console.log(`${n} firing runs: first update ${first.toFixed(1)} ms, unchanged update median ${times[10].toFixed(2)} ms, resend ${resend.toFixed(1)} ms, alerts queued ${sent}`);
}
