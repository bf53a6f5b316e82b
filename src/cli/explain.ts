/** `topology-audit explain FILE [--json] [--run-key K] [--parent-wait DUR]`: what each span of an OTLP dump became. */
import { readFileSync } from 'node:fs';
import { explainSpans, explanationText, decodeDump } from '../ingest/explain.js';
import { parseRunKey } from '../ingest/runkey.js';
import { type Io, UsageError } from './io.js';
import { durationFlag, parseCommandArgs, specFor } from './spec.js';
import './specs.js';

export async function explainCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(specFor('explain')!, argv);
  if (positionals.length !== 1) throw new UsageError('give exactly one FILE (an OTLP JSON or protobuf dump); see topology-audit explain --help');
  let runKey;
  try {
    runKey = parseRunKey(values['run-key'] as string);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const waitMs = durationFlag('parent-wait', values['parent-wait'] as string);
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(positionals[0]);
  } catch (err) {
    io.stderr(`explain: cannot read ${positionals[0]}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}\n`);
    return 2;
  }
  let spans;
  try {
    spans = decodeDump(bytes);
  } catch (e) {
    io.stderr(`explain: not an OTLP trace dump: ${(e as Error).message}\n`);
    return 2;
  }
  if (spans.length === 0) {
    // Any JSON or bytes without spans (not an export, or an empty one): there is nothing to explain, said as such.
    io.stderr(`explain: ${positionals[0]} holds no spans: expected an OTLP trace export ({"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}, JSON or protobuf)\n`);
    return 2;
  }
  const e = explainSpans(spans, { runKey, waitMs });
  if (values.json) io.stdout(JSON.stringify(e) + '\n');
  else io.stdout(explanationText(e));
  return 0;
}
