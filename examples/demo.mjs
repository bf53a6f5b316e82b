#!/usr/bin/env node
/**
 * A deterministic multi-agent run (no model calls) that reports its coordination through the receipt emitter
 * to a running auditor, as real OTLP: an orchestrator delegates research to a researcher, the researcher hands
 * its evidence to a verifier, the verifier returns to the orchestrator, which reports a verified outcome and
 * ends the run. `--drift <case>` makes the agents drift in one of the nine ways of the drift fixture, live.
 * Then it prints the run id, the verdict from the auditor's API, and the result of `topology-audit gate`.
 *
 *   node examples/demo.mjs --drift late [--endpoint http://127.0.0.1:4318] [--server http://127.0.0.1:9464]
 *
 * Uses the built package (dist/): run `npm run build` first. Exits with the gate's exit code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ReceiptEmitter, agentId, contractId, contractVersion, edgeRef, newRunId, phaseId } from '@topology-audit/emitter';

const BIN = fileURLToPath(new URL('../bin/topology-audit.js', import.meta.url));
const CONTRACT = contractId('research-publish');
const PHASE = phaseId('research');
const CURRENT = contractVersion('3');
const YESTERDAY = contractVersion('2');
const orchestrator = agentId('orchestrator');
const researcher = agentId('researcher');
const verifier = agentId('verifier');
const publisher = agentId('publisher');
const shadow = agentId('shadow-agent');

/** The nine drift cases: what the agents do differently, and whether the verdict settles on its own. */
const CASES = {
  healthy: { settles: true, about: 'the whole plan plus a verified outcome' },
  current: { settles: false, about: 'the researcher is still at work: only the first planned edge so far' },
  wait: { settles: false, about: 'the verifier is still checking: its return is missing, before its deadline' },
  late: { settles: true, about: "the orchestrator waits on the verifier's return with a 1s deadline; the researcher never hands off" },
  'old-version': { settles: true, about: "the researcher still runs yesterday's routing policy (version 2)" },
  forbidden: { settles: true, about: 'the researcher delegates straight to the publisher (direct route)' },
  shadow: { settles: true, about: 'the researcher hands off to an unregistered agent' },
  twice: { settles: true, about: 'the orchestrator delegates the same owned route twice (a retry)' },
  premature: { settles: true, about: "the orchestrator ends the run completed before the verifier's return" },
};
const ALIASES = { complete: 'healthy', 'direct-route': 'forbidden', direct: 'forbidden', 'old': 'old-version' };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Deterministic stand-in for agent work: a fixed amount of hashing, no model, no network. */
function work(label, rounds = 2_000) {
  let h = 2166136261;
  for (let i = 0; i < rounds; i++) for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h;
}

/** The agents. Each reports its interactions as receipts; none of them reports anything but ids. */
class Team {
  constructor(emitter, run, drift, say) {
    Object.assign(this, { emitter, run, drift, say });
    this.count = 0;
  }

  emit(line, fn) {
    fn();
    this.count++;
    this.say(`  ${line}`);
  }

  async orchestrator() {
    this.emit(`run.start  orchestrator pins ${CONTRACT} v${CURRENT}, phase ${PHASE}`, () => this.emitter.runStart(this.run, { contract: CONTRACT, phase: PHASE, from: orchestrator }));
    await sleep(20);
    this.emit('edge       orchestrator -> researcher : delegate', () => this.emitter.edge(this.run, orchestrator, researcher, 'delegate'));
    if (this.drift === 'twice') {
      await sleep(20);
      this.emit('edge       orchestrator -> researcher : delegate   (a retry of the same owned route)', () => this.emitter.edge(this.run, orchestrator, researcher, 'delegate'));
    }
    if (this.drift === 'late') {
      const deadline = new Date(Date.now() + 1_000);
      this.emit(`wait       orchestrator waits on verifier for "verifier -> orchestrator : return" until ${deadline.toISOString()}`, () =>
        this.emitter.wait(this.run, { from: orchestrator, on: verifier, edge: edgeRef(verifier, orchestrator, 'return'), deadline }),
      );
      this.lateDeadline = deadline;
    }
    const verified = await this.researcher();
    if (this.drift === 'premature') {
      this.emit('run.end    orchestrator: completed   (without the verifier\'s return)', () => this.emitter.runEnd(this.run, { result: 'completed', from: orchestrator }));
      return;
    }
    if (verified === undefined) return; // still in progress when the demo stops looking
    this.emit('outcome    orchestrator: verified', () => this.emitter.outcome(this.run, { verified, from: orchestrator }));
    await sleep(10);
    this.emit('run.end    orchestrator: completed', () => this.emitter.runEnd(this.run, { result: 'completed', from: orchestrator }));
  }

  async researcher() {
    work('researcher gathers sources');
    await sleep(20);
    if (this.drift === 'current' || this.drift === 'late') return undefined; // still researching
    const version = this.drift === 'old-version' ? YESTERDAY : CURRENT;
    if (this.drift === 'forbidden') {
      this.emit('edge       researcher -> publisher : delegate   (direct route)', () => this.emitter.edge(this.run, researcher, publisher, 'delegate'));
      work('publisher publishes unverified');
      return undefined;
    }
    if (this.drift === 'shadow') {
      this.emit('edge       researcher -> shadow-agent : handoff   (unregistered agent)', () => this.emitter.edge(this.run, researcher, shadow, 'handoff'));
      return undefined;
    }
    this.emit(`edge       researcher -> verifier : handoff${version === YESTERDAY ? '   (version 2)' : ''}`, () => this.emitter.edge(this.run, researcher, verifier, 'handoff', { version }));
    return this.verifier();
  }

  async verifier() {
    work('verifier checks citations');
    await sleep(20);
    if (this.drift === 'wait' || this.drift === 'premature') return undefined; // still verifying
    this.emit('edge       verifier -> orchestrator : return', () => this.emitter.edge(this.run, verifier, orchestrator, 'return'));
    return true;
  }
}

async function getJson(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** Waits until the auditor holds all `count` receipts of the run. */
async function receiptsIn(server, run, count) {
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await getJson(`${server}/api/v1/runs/${encodeURIComponent(run)}`);
    if (r.status === 200 && r.body.receipts.length >= count) return;
    if (Date.now() > end) throw new Error(`the auditor holds ${r.status === 200 ? r.body.receipts.length : 0} of ${count} receipts after 15s`);
    await sleep(100);
  }
}

function gate(server, run, timeout) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'gate', run, '--server', server, '--timeout', timeout], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out: out.trim() }));
  });
}

export async function main(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      drift: { type: 'string', default: 'healthy' },
      endpoint: { type: 'string', default: 'http://127.0.0.1:4318' },
      server: { type: 'string', default: 'http://127.0.0.1:9464' },
      'gate-timeout': { type: 'string', default: '2s' },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help || values.list) {
    process.stdout.write(`usage: node examples/demo.mjs [--drift CASE] [--endpoint OTLP_URL] [--server API_URL] [--gate-timeout DUR]\n\ncases:\n`);
    for (const [name, c] of Object.entries(CASES)) process.stdout.write(`  ${name.padEnd(12)} ${c.about}\n`);
    process.stdout.write(`aliases: ${Object.entries(ALIASES).map(([a, b]) => `${a}=${b}`).join(', ')}\n`);
    return 0;
  }
  const drift = ALIASES[values.drift] ?? values.drift;
  const spec = CASES[drift];
  if (!spec) {
    process.stderr.write(`demo: unknown drift case "${values.drift}" (${Object.keys(CASES).join(', ')})\n`);
    return 2;
  }
  const server = values.server.replace(/\/+$/, '');
  const say = (line) => process.stdout.write(line + '\n');
  const run = newRunId(`demo-${drift}`);
  say(`topology-audit demo: ${drift} (${spec.about})`);
  say(`receipts to ${values.endpoint} (OTLP/HTTP), verdicts from ${server}`);
  say(`run ${run}`);

  const emitter = new ReceiptEmitter({ endpoint: values.endpoint, version: CURRENT, serviceName: 'topology-audit-demo' });
  const team = new Team(emitter, run, drift, say);
  await team.orchestrator();
  try {
    await emitter.shutdown();
  } catch (e) {
    process.stderr.write(`demo: ${e.message} (is the auditor running? npm start)\n`);
    return 2;
  }
  try {
    await receiptsIn(server, run, team.count);
    if (team.lateDeadline) {
      const left = team.lateDeadline.getTime() - Date.now();
      say(`  ...        the researcher never hands off; the demo waits ${Math.max(0, Math.ceil(left / 100) / 10)}s for the deadline to pass`);
      await sleep(Math.max(0, left) + 300);
    }
    const v = await getJson(`${server}/api/v1/runs/${encodeURIComponent(run)}/verdict?wait=${spec.settles ? 5 : 0}`);
    if (v.status !== 200) throw new Error(`the auditor answered ${v.status} for the run`);
    const first = v.body.findings.find((f) => f.verdict === v.body.verdict) ?? v.body.findings[0];
    say(`verdict: ${v.body.verdict} (naive: ${v.body.naive})${first ? ` - ${first.message}` : ''}`);
  } catch (e) {
    process.stderr.write(`demo: ${e.message}\n`);
    return 2;
  }
  const g = await gate(server, run, values['gate-timeout']);
  say(`gate: exit ${g.code} - ${g.out.split('\n').join(' / ')}`);
  return g.code ?? 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e) => {
      process.stderr.write(`demo: ${e?.message ?? e}\n`);
      process.exitCode = 2;
    },
  );
}
