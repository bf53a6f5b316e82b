/** `--format text|json|junit|github|markdown` (with --json as an alias): small, so `gate` loads it at start-up for nothing. */
import { UsageError } from './io.js';

export const OUTPUT_FORMATS = ['text', 'json', 'junit', 'github', 'markdown'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The output format from --format, with --json kept as an alias of --format json. */
export function outputFormat(values: { format?: unknown; json?: unknown }, command: string): OutputFormat {
  const format = (values.format as string | undefined) ?? 'text';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) throw new UsageError(`${command}: --format must be one of ${OUTPUT_FORMATS.join(', ')} (got ${JSON.stringify(format)})`);
  if (values.json === true) {
    if (format !== 'text' && format !== 'json') throw new UsageError(`${command}: --json is --format json; it cannot go with --format ${format}`);
    return 'json';
  }
  return format as OutputFormat;
}

