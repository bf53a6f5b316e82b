/**
 * GitHub Actions workflow commands of a report: one `::error`, `::warning` or `::notice` line per finding, with
 * `file=`/`line=`/`col=` when the finding comes from a contract, so it shows as an annotation on that line.
 * Escaping follows the runner's rules: in the message %, CR and LF; in property values also `:` and `,`.
 */
import { allFindings, type Report, type ReportFinding } from './report.js';

export const escapeData = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
export const escapeProperty = (s: string) => escapeData(s).replace(/:/g, '%3A').replace(/,/g, '%2C');

export function workflowCommand(f: ReportFinding): string {
  const props: string[] = [];
  if (f.file) props.push(`file=${escapeProperty(f.file)}`);
  if (f.file && f.line) props.push(`line=${f.line}`);
  if (f.file && f.line && f.col) props.push(`col=${f.col}`);
  props.push(`title=${escapeProperty(f.title)}`);
  return `::${f.severity} ${props.join(',')}::${escapeData(f.message)}`;
}

export function toWorkflowCommands(r: Report): string {
  return allFindings(r).map((f) => workflowCommand(f) + '\n').join('');
}
