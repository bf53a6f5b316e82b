/** `topology-audit explain FILE [--json] [--run-key K] [--parent-wait DUR]`: what each span of an OTLP dump became. */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { explainSpans, explanationText, decodeDump } from '../ingest/explain.js';
import { parseRunKey } from '../ingest/runkey.js';
import { type Io, UsageError } from './io.js';

export async function explainCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, 'run-key': { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
  });
  if (values.help) {
    io.stdout('usage: topology-audit explain FILE [--json] [--run-key explicit,invocation,trace[,conversation]]\n  FILE: an OTLP trace dump, JSON (one request, or one per line) or protobuf\n');
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError('explain: give exactly one FILE (an OTLP JSON or protobuf dump)');
  let runKey;
  try {
    runKey = values['run-key'] === undefined ? undefined : parseRunKey(values['run-key']);
  } catch (e) {
    throw new UsageError(`explain: ${(e as Error).message}`);
  }
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(positionals[0]);
  } catch {
    io.stderr(`explain: cannot read ${positionals[0]}\n`);
    return 2;
  }
  let spans;
  try {
    spans = decodeDump(bytes);
  } catch (e) {
    io.stderr(`explain: not an OTLP trace dump: ${(e as Error).message}\n`);
    return 2;
  }
  const e = explainSpans(spans, { runKey });
  if (values.json) io.stdout(JSON.stringify(e) + '\n');
  else io.stdout(explanationText(e));
  return 0;
}
