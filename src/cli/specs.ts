/** Help specs of the built-in commands (one entry each; new commands call registerSpec the same way). */
import { allSpecs, renderHelp, type CommandSpec, type FlagSpec, EXIT_CODES, registerSpec } from './spec.js';
import { SERVE_OPTIONS, type ServeOption } from '../server/serve-options.js';

/** The help and parser flags of an option table (src/server/serve-options.ts). */
function flagsOf(table: Record<string, ServeOption>): FlagSpec[] {
  return Object.entries(table).map(([name, o]) => ({
    name,
    type: o.type ?? 'string',
    ...(o.multiple ? { multiple: true } : {}),
    ...(o.value !== undefined ? { value: o.value } : {}),
    ...(o.default !== undefined ? { default: o.default } : {}),
    ...(o.shown !== undefined ? { shown: o.shown } : {}),
    help: o.help,
  }));
}

const DEFAULT_SERVER = 'http://127.0.0.1:9464';
export const serverFlag = (): FlagSpec => ({
  name: 'server',
  short: 's',
  type: 'string',
  value: 'URL',
  default: DEFAULT_SERVER,
  env: 'TOPOLOGY_AUDIT_SERVER',
  help: "the auditor's API address (the --port of serve, not an OTLP port)",
});
export const tokenFlag = (): FlagSpec => ({
  name: 'token',
  type: 'string',
  value: 'TOKEN',
  env: 'TOPOLOGY_AUDIT_TOKEN',
  help: 'API bearer token when serve runs with --api-tokens',
});
const jsonFlag: FlagSpec = { name: 'json', type: 'boolean', default: false, help: 'print JSON instead of text' };
/** --format of the commands CI runs (src/cli/ci-format.ts). */
export const formatFlag = (): FlagSpec => ({
  name: 'format',
  short: 'f',
  type: 'string',
  value: 'FMT',
  default: 'text',
  help: 'text, json, junit (JUnit XML), github (workflow commands: annotations) or markdown (summary with graphs); docs/ci.md',
});
/** --json on the commands with --format: an alias of --format json. */
const jsonAlias: FlagSpec = { ...jsonFlag, help: 'the same as --format json' };
const exit = (...codes: number[]) => EXIT_CODES.filter(([c]) => codes.includes(c));

export const GATE_SPEC = registerSpec({
  name: 'gate',
  summary: "wait for one run's verdict and turn it into an exit code (for CI)",
  usage: ['gate RUN [--server URL] [--timeout DUR] [--token TOKEN] [--quiet] [--format text|json|junit|github|markdown]'],
  flags: [
    serverFlag(),
    { name: 'timeout', short: 't', type: 'string', value: 'DUR', default: '5m', help: 'how long to wait for a settled or healthy verdict (ms, s, m, h or d)' },
    tokenFlag(),
    { name: 'quiet', short: 'q', type: 'boolean', default: false, help: 'no progress lines on stderr while waiting' },
    formatFlag(),
    jsonAlias,
    { name: 'contracts', type: 'string', value: 'DIR', help: "contract files: github annotations point at their lines, markdown draws the graph from them (else from the server's contract API)" },
  ],
  notes: ['While waiting, a progress line goes to stderr every 10 seconds (TOPOLOGY_AUDIT_PROGRESS_MS sets the interval);\nthe verdict (in any --format) goes to stdout. The exit code is the same in every format.'],
  examples: ['topology-audit gate "$RUN_ID" --server http://127.0.0.1:9464 --timeout 10m', 'topology-audit gate run-42 -t 30s --json', 'topology-audit gate "$RUN_ID" --format markdown >> "$GITHUB_STEP_SUMMARY"'],
  exits: [
    [0, 'healthy'],
    [1, 'settled and not healthy (unsafe, false complete, incomplete)'],
    [2, 'usage error; server unreachable, not an auditor API (e.g. an OTLP port), or token refused'],
    [66, 'the run was never seen by the timeout'],
    [75, 'the run was seen but is still working, waiting or uncertain at the timeout'],
  ],
});

export const SERVE_SPEC = registerSpec({
  name: 'serve',
  summary: 'run the live auditor: OTLP receivers, API, web view and /metrics',
  usage: ['serve [--contracts DIR] [--contract ID] [--data DIR] [--port N] [--otlp-http-port N] [--otlp-grpc-port N] [--host ADDR] [options]'],
  flags: flagsOf(SERVE_OPTIONS),
  positionals: false,
  examples: ['topology-audit serve', 'topology-audit serve --contracts ./contracts --data /var/lib/topology-audit --log-level warn'],
  exits: exit(0, 2),
});

registerSpec({
  name: 'replay',
  summary: 'audit NDJSON receipts offline and print one verdict per run',
  usage: ['replay FILE... [--contracts DIR] [--contract ID] [--now RFC3339] [--expect FILE] [--fail-on VERDICTS] [--format text|json|junit|github|markdown]'],
  flags: [
    { name: 'contracts', short: 'c', type: 'string', value: 'DIR', shown: "the package's contracts/ examples", help: 'directory of contract YAML files' },
    { name: 'contract', type: 'string', value: 'ID', help: 'contract for runs whose run.start names none' },
    { name: 'now', type: 'string', value: 'RFC3339', shown: "the file's latest receipt", help: 'audit as of this time' },
    { name: 'expect', type: 'string', value: 'FILE', help: 'JSON {run: verdict} expectations; exit 1 when one fails (verdicts then fail only as asked below)' },
    { name: 'fail-on', type: 'string', value: 'VERDICTS', shown: 'any settled non-healthy verdict', help: 'exit 1 when a run has one of these verdicts (comma-separated, settled or not), or none' },
    { name: 'shadow', type: 'string', value: 'CONTRACT@VERSION', multiple: true, help: 'also evaluate runs against this candidate version (repeatable; never pinned; docs/contracts.md)' },
    formatFlag(),
    jsonAlias,
  ],
  notes: ['CI formats: junit has one test case per run (per expectation with --expect); github prints one workflow command\nper finding; markdown is a summary table with each non-healthy run\'s graph. The exit code is the same in every format.'],
  examples: [
    'topology-audit replay receipts/drift.ndjson --contracts contracts',
    'topology-audit replay receipts/drift.ndjson --fail-on forbidden_edge,unknown_agent --json',
    'topology-audit replay receipts/drift.ndjson --expect receipts/drift.expected.json --format junit > topology-audit.xml',
  ],
  exits: exit(0, 1, 2),
});

registerSpec({
  name: 'validate',
  summary: 'check contract files (or every contract in a directory) and their versions together',
  usage: ['validate FILE|DIR... [--format text|json|junit|github|markdown]'],
  flags: [formatFlag(), jsonAlias],
  notes: ['CI formats: junit has one test suite per contract file; github prints one ::error per issue (::warning per\nwarning) with the file, line and column.'],
  examples: ['topology-audit validate contracts/', 'topology-audit validate contracts/research-publish.yaml', 'topology-audit validate contracts/ --format github'],
  exits: exit(0, 1, 2),
});

registerSpec({
  name: 'ack',
  summary: 'acknowledge a run: it leaves topology_alerting_runs so its alert resolves',
  usage: ['ack RUN [--server URL] [--token TOKEN] [--by NAME] [--reason TEXT] [--silence DUR]'],
  flags: [
    serverFlag(),
    tokenFlag(),
    { name: 'by', type: 'string', value: 'NAME', help: 'who acknowledged (an identity, not free text; at most 64 of [A-Za-z0-9._@-])' },
    { name: 'reason', type: 'string', value: 'TEXT', help: 'why, one line of at most 280 characters (stored, shown on the run and logged; never in metrics)' },
    { name: 'silence', type: 'string', value: 'DUR', help: "also silence the run's alerts in the server's Alertmanager for DUR (needs --by and serve --alertmanager-url)" },
    jsonFlag,
  ],
  notes: ['The acknowledgement (verdict, who, when, why) is stored and outlives a restart: GET /api/v1/runs/{run} shows it as `ack`, the run page beside the verdict.'],
  examples: ['topology-audit ack run-42 --server http://127.0.0.1:9464 --by oncall --reason "known flaky search tool, ticket OPS-12"', 'topology-audit ack run-42 --by oncall --silence 4h'],
  exits: [
    [0, 'acknowledged (or already acknowledged)'],
    [2, 'usage error; unknown run, server unreachable or not an auditor API'],
  ],
});

registerSpec({
  name: 'runs',
  summary: "list a server's runs, newest first, a page at a time (cursor paging)",
  usage: ['runs [--server URL] [--token TOKEN] [--verdict V] [--contract ID] [--order newest|oldest] [--limit N] [--after CURSOR] [--all] [--json]'],
  flags: [
    serverFlag(),
    tokenFlag(),
    { name: 'verdict', type: 'string', value: 'V', help: 'only runs in this verdict' },
    { name: 'contract', type: 'string', value: 'ID', help: 'only runs pinned to this contract' },
    { name: 'order', type: 'string', value: 'ORDER', default: 'newest', help: 'newest or oldest first (by first receipt)' },
    { name: 'limit', type: 'string', value: 'N', default: '100', help: 'runs per page (1-10000)' },
    { name: 'after', type: 'string', value: 'CURSOR', help: 'the page after this cursor (the `next` a page answered)' },
    { name: 'all', type: 'boolean', default: false, help: 'follow `next` to the last page' },
    jsonFlag,
  ],
  notes: ['One line per run: run id, verdict, first receipt time. Without --all, the cursor of the next page is printed on\nstderr; with --json, each page is one line {runs, next} (next: null on the last page).'],
  examples: ['topology-audit runs --server http://127.0.0.1:9464 --verdict forbidden_edge --all'],
  exits: [
    [0, 'listed'],
    [2, 'usage error; server unreachable or not an auditor API'],
  ],
});

registerSpec({
  name: 'diff',
  summary: "draw the pinned contract's graph with one run laid over it",
  usage: ['diff RUN|FILE [--contracts DIR] [--format mermaid|dot|svg] [--run ID] [--now RFC3339] [--server URL]'],
  flags: [
    { name: 'contracts', type: 'string', value: 'DIR', help: 'directory of contract YAML files (offline, or instead of the server contract API)' },
    { name: 'contract', type: 'string', value: 'ID', help: 'contract for runs whose run.start names none' },
    { name: 'format', type: 'string', value: 'FMT', default: 'mermaid', help: 'mermaid, dot or svg' },
    { ...serverFlag(), help: "read the run from this auditor's API (a RUN that is not a file is always read from it)" },
    tokenFlag(),
    { name: 'now', type: 'string', value: 'RFC3339', help: 'audit as of this time (file input)' },
    { name: 'run', type: 'string', value: 'ID', help: 'the run to draw when the file holds several' },
  ],
  examples: ['topology-audit diff receipts/drift.ndjson --contracts contracts --run drift-direct-route --format svg > run.svg'],
  exits: exit(0, 2),
});

registerSpec({
  name: 'schema',
  summary: 'print a JSON Schema',
  usage: ['schema [contract|receipt|handoff|experiment]'],
  flags: [],
  examples: ['topology-audit schema receipt > receipt.schema.json'],
  exits: exit(0, 2),
});

export const EXPERIMENT_SPEC = registerSpec({
  name: 'experiment',
  summary: 'compare a baseline and a candidate configuration (diff) or their paired case records (compare)',
  usage: ['experiment diff MANIFEST [--json]', 'experiment compare MANIFEST [--json | --markdown] [--fail-on DISPOSITION[,DISPOSITION]]'],
  flags: [jsonFlag, { name: 'markdown', type: 'boolean', default: false, help: 'compare: print Markdown' }, { name: 'fail-on', type: 'string', value: 'LIST', help: 'compare: exit 1 when the disposition is one of these' }],
  examples: ['topology-audit experiment compare experiments/fieldops/experiment.yaml --markdown'],
  exits: [
    [0, 'diff: only the declared slice changed; compare: a disposition was reached'],
    [1, 'diff: more changed or authority widened; compare: the disposition is in --fail-on'],
    [2, 'bad input, unpaired or mismatched cases'],
  ],
});

export const HANDOFF_SPEC = registerSpec({
  name: 'handoff',
  summary: 'admit, return, aggregate and audit delegated handoffs',
  usage: [
    'handoff admit HANDOFF.json --parent ENVELOPE.json --state STATE.json [--json]',
    'handoff return RESULT.json --handoff HANDOFF.json --state STATE.json [--json]',
    'handoff aggregate RESULT.json... [--json]',
    'handoff audit RECEIPTS.ndjson... [--now RFC3339] [--json]',
    'handoff schema [handoff|parent|state|result|handoff-receipt]',
    'handoff board RUN [--server URL] [--token TOKEN] [--json]',
  ],
  flags: [
    { name: 'parent', type: 'string', value: 'FILE', help: 'admit: the parent envelope' },
    { name: 'state', type: 'string', value: 'FILE', help: 'admit/return: the handoff state document' },
    { name: 'handoff', type: 'string', value: 'FILE', help: 'return: the admitted handoff' },
    { name: 'now', type: 'string', value: 'RFC3339', help: 'audit: as of this time' },
    { ...serverFlag(), help: "board: the auditor's API address" },
    { ...tokenFlag(), help: 'board: API bearer token when serve runs with --api-tokens' },
    jsonFlag,
  ],
  examples: ['topology-audit handoff audit receipts/handoffs/ho-budget-copied.ndjson --json', 'topology-audit handoff board run-42 --server http://127.0.0.1:9464'],
  exits: [
    [0, 'admitted / aggregated / no handoff finding'],
    [1, 'denied / conflict escalated / findings'],
    [2, 'bad input or usage; board: unknown run, server unreachable or token refused'],
  ],
});

registerSpec({
  name: 'propose',
  summary: 'draft a candidate contract (YAML, candidate: true) from observed receipts, for review',
  usage: ['propose FILE... [--contracts DIR] [--contract ID] [--contract-id ID] [--min-share 0.05]', 'propose --server URL [--since DUR] [--contract-id ID] [--contracts DIR] [--min-share 0.05]'],
  flags: [
    { name: 'server', short: 's', type: 'string', value: 'URL', help: "read the runs stored by this auditor's API instead of files" },
    { name: 'contracts', short: 'c', type: 'string', value: 'DIR', shown: "the package's contracts/ examples", help: 'contracts in force for files (edges they forbid are marked, not drafted); with --server, more versions to count the next one from' },
    { name: 'contract', type: 'string', value: 'ID', shown: '--contract-id when DIR publishes it, else the only contract DIR publishes', help: 'files: the contract runs whose run.start names none are judged under (as serve --contract)' },
    { name: 'since', type: 'string', value: 'DUR', help: 'with --server: only runs updated within this long (ms, s, m, h or d)' },
    { name: 'contract-id', type: 'string', value: 'ID', help: 'contract id of the draft (default: the contract the runs pinned, else "proposed")' },
    { name: 'version', type: 'string', value: 'V', help: 'version of the draft (default: one above the newest known version of that contract, "1" for a new one)' },
    { name: 'phase', type: 'string', value: 'NAME', help: 'phase name of the draft' },
    { name: 'min-share', type: 'string', value: 'SHARE', default: '0.05', help: 'edges seen in fewer runs than this share are commented out with their counts' },
    tokenFlag(),
  ],
  notes: [
    'Every entry carries its evidence (# seen in 48 of 50 runs). An edge that made runs forbidden_edge under the\nversion in force is commented out and marked (# forbidden under research-publish@3 in 2 runs: review); it is\nnever in the plan. An entry some runs were judged ambiguous_route on keeps the max of the other runs and is\nmarked (# REVIEW: ambiguous_route under ...). Files are judged as serve judges them: runs with no run.start\n(OTLP) under --contract. Review every edge against the intended design, then shadow-evaluate the draft\n(serve --shadow) before publishing it. docs/contracts.md',
  ],
  examples: ['topology-audit propose receipts/drift.ndjson --contracts contracts --contract-id research-publish > draft.yaml', 'topology-audit propose --server http://127.0.0.1:9464 --since 24h'],
  exits: exit(0, 2),
});

export const CONTRACT_SPEC = registerSpec({
  name: 'contract',
  summary: 'compare two contract versions (agents, allowed edges, multiplicities, plan, deadlines)',
  usage: ['contract diff A@V1 B@V2 [--contracts DIR] [--format text|json|junit|github|markdown]'],
  flags: [
    { name: 'contracts', short: 'c', type: 'string', value: 'DIR', shown: "the package's contracts/ examples", help: 'directory of contract YAML files' },
    formatFlag(),
    jsonAlias,
  ],
  examples: ['topology-audit contract diff research-publish@2 research-publish@3', 'topology-audit contract diff research-publish@2 research-publish@3 --format markdown > comment.md'],
  exits: [
    [0, 'the versions are the same'],
    [1, 'the versions differ'],
    [2, 'usage error or unknown version'],
  ],
});

/** Top-level usage: one line per registered command. */
export function topUsage(specs: CommandSpec[]): string {
  const width = Math.max(...specs.map((s) => s.name.length));
  const lines = ['usage: topology-audit <command> [options]', '       topology-audit <command> --help', '       topology-audit --version', '', 'commands:'];
  for (const s of specs) lines.push(`  ${s.name.padEnd(width)}  ${s.summary}`);
  lines.push('', 'exit codes:');
  for (const [c, m] of EXIT_CODES) lines.push(`  ${String(c).padStart(3)}  ${m}`);
  lines.push('', 'Environment: TOPOLOGY_AUDIT_SERVER, TOPOLOGY_AUDIT_TOKEN, NO_COLOR. Docs: docs/cli.md');
  return lines.join('\n') + '\n';
}

registerSpec({
  name: 'explain',
  summary: 'say, for every span of an OTLP trace dump, which dialect read it and what it became (or why nothing)',
  usage: ['explain FILE [--json] [--run-key ORDER] [--parent-wait DUR]'],
  flags: [
    jsonFlag,
    { name: 'run-key', type: 'string', value: 'ORDER', default: 'explicit,invocation,trace', help: "where a span's run id comes from, as serve --run-key: explicit, invocation, trace, conversation" },
    { name: 'parent-wait', type: 'string', value: 'DUR', default: '10s', help: 'as serve --parent-wait: how long a span waits for its caller or graph root' },
  ],
  notes: [
    'FILE is an OTLP trace export request: protobuf, or JSON (one request, or one per line). Nothing is sent\nanywhere and nothing is stored; span names appear in the output (it is your own file).',
  ],
  examples: ['topology-audit explain receipts/otlp-sample.json', 'topology-audit explain receipts/otlp-sample.json --json --run-key explicit,conversation,trace'],
  exits: [
    [0, 'explained (also when no span became a receipt)'],
    [2, 'usage error, unreadable file, or not an OTLP trace dump'],
  ],
});

/**
 * The "Commands" section of docs/cli.md: every registered command's --help, rendered from the same table as --help
 * (scripts/gen-cli-docs.mjs writes it; test/cli-docs.test.ts fails when the file and the table disagree).
 */
export function commandsReference(): string {
  const out = ['## Commands', '', "(The `--help` output of each command, generated from `src/cli/specs.ts`, and serve's from `src/server/serve-options.ts`, by `node scripts/gen-cli-docs.mjs`.)"];
  for (const spec of allSpecs()) out.push('', `### ${spec.name}`, '', '```text', renderHelp(spec).trimEnd(), '```');
  return out.join('\n') + '\n';
}
