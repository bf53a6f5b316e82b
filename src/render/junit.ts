/**
 * JUnit XML of a report, in the form Jenkins, GitLab, GitHub test reporters, Buildkite and CircleCI read:
 * `testsuites` > `testsuite` (name, tests, failures, errors, skipped, time, timestamp) > `testcase` (name, classname,
 * time) with a `failure`, `error` or `skipped` child carrying the findings. test/fixtures/junit/junit.xsd is the
 * schema it is checked against.
 */
import { countStatus, type Report, type ReportCase, type ReportFinding, type ReportSuite } from './report.js';

/** Characters XML 1.0 cannot carry at all (C0 controls but tab, CR, LF; lone surrogates; U+FFFE/U+FFFF) become U+FFFD. */
// eslint-disable-next-line no-control-regex
const NOT_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export const xmlText = (s: string) => s.replace(NOT_XML, '\uFFFD').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** An attribute value: as text, plus quotes and the whitespace attribute normalisation would fold into spaces. */
export const xmlAttr = (s: string) => xmlText(s).replace(/"/g, '&quot;').replace(/\n/g, '&#10;').replace(/\r/g, '&#13;').replace(/\t/g, '&#9;');

const seconds = (t: number | undefined) => (t === undefined || !Number.isFinite(t) || t < 0 ? '0' : t.toFixed(3));

export function findingLine(f: ReportFinding): string {
  const where = f.file ? ` (${f.file}${f.line ? `:${f.line}` : ''})` : '';
  return `${f.severity}: ${f.title}: ${f.message}${where}`;
}

function caseXml(c: ReportCase, classname: string): string {
  const open = `    <testcase name="${xmlAttr(c.name)}" classname="${xmlAttr(classname)}" time="${seconds(c.timeSec)}"`;
  if (c.status === 'passed') return `${open}/>`;
  const body = c.findings.map(findingLine).join('\n');
  const element = c.status === 'failed' ? 'failure' : c.status;
  const type = c.type ? ` type="${xmlAttr(c.type)}"` : '';
  return `${open}>\n      <${element} message="${xmlAttr(c.summary)}"${type}>${xmlText(body)}</${element}>\n    </testcase>`;
}

function suiteXml(s: ReportSuite, timestamp: string | undefined): string {
  const attrs = [
    `name="${xmlAttr(s.name)}"`,
    `tests="${s.cases.length}"`,
    `failures="${countStatus(s.cases, 'failed')}"`,
    `errors="${countStatus(s.cases, 'error')}"`,
    `skipped="${countStatus(s.cases, 'skipped')}"`,
    `time="${seconds(s.timeSec)}"`,
    ...(timestamp ? [`timestamp="${xmlAttr(timestamp)}"`] : []),
  ];
  if (!s.cases.length) return `  <testsuite ${attrs.join(' ')}/>`;
  return [`  <testsuite ${attrs.join(' ')}>`, ...s.cases.map((c) => caseXml(c, s.name)), '  </testsuite>'].join('\n');
}

export function toJunit(r: Report): string {
  const cases = r.suites.flatMap((s) => s.cases);
  const time = r.suites.reduce((t, s) => t + (s.timeSec ?? 0), 0);
  const head = `<testsuites name="${xmlAttr(r.name)}" tests="${cases.length}" failures="${countStatus(cases, 'failed')}" errors="${countStatus(cases, 'error')}" time="${seconds(time)}">`;
  return ['<?xml version="1.0" encoding="UTF-8"?>', head, ...r.suites.map((s) => suiteXml(s, r.timestamp)), '</testsuites>'].join('\n') + '\n';
}
