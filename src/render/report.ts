/**
 * A CI report: what `replay`, `gate`, `validate` and `contract diff` found, in one shape that the CI formats render
 * (JUnit XML in junit.ts, GitHub workflow commands in workflow-commands.ts, Markdown in markdown.ts).
 *
 * Suites are the inputs (a receipts file, a run, a contract file, a pair of contract versions); cases are what was
 * checked in them (a run, an expectation, a contract); findings are what a reader acts on, each with a severity and,
 * where it comes from a contract, the file and line to point at.
 */

/** error: settled and not healthy (or invalid); warning: not settled yet (waiting, uncertain); notice: information. */
export type Severity = 'error' | 'warning' | 'notice';

export interface ReportFinding {
  severity: Severity;
  /** Short title, e.g. "drift-direct-route: forbidden_edge". */
  title: string;
  message: string;
  /** The contract file (as given on the command line) and the line the finding points at. */
  file?: string;
  line?: number;
  col?: number;
}

/** passed, failed (a check said no), skipped (not decided yet), error (could not be checked, e.g. never seen). */
export type CaseStatus = 'passed' | 'failed' | 'skipped' | 'error';

export interface ReportCase {
  name: string;
  status: CaseStatus;
  /** One line saying why the case did not pass (the failure's message); empty when passed. */
  summary: string;
  /** A short type for the failure (a verdict, "expectation", "invalid"). */
  type?: string;
  findings: ReportFinding[];
  /** Seconds spent on the case. */
  timeSec?: number;
}

export interface ReportSuite {
  name: string;
  cases: ReportCase[];
  /** Seconds spent on the suite. */
  timeSec?: number;
}

export interface Report {
  name: string;
  suites: ReportSuite[];
  /** RFC 3339 without zone (as JUnit consumers read it), when the report was made. */
  timestamp?: string;
}

export const countStatus = (cases: readonly ReportCase[], s: CaseStatus) => cases.filter((c) => c.status === s).length;

/** Every finding of a report, in suite and case order. */
export const allFindings = (r: Report) => r.suites.flatMap((s) => s.cases.flatMap((c) => c.findings));
