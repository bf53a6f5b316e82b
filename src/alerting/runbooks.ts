/**
 * The runbook page an alert's runbook_url points to by default (GET /runbooks on the auditor's API port): the
 * shipped Prometheus rules' summary and runbook per alert, read from the rules file once at start.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export interface Runbook {
  alertname: string;
  severity: string;
  summary: string;
  runbook: string;
}

/** The rules of a Prometheus rules file that carry a runbook annotation. */
export function loadRunbooks(file: string): Runbook[] {
  const doc = parse(readFileSync(file, 'utf8')) as { groups?: { rules?: { alert?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[] }[] };
  const out: Runbook[] = [];
  for (const g of doc.groups ?? []) {
    for (const r of g.rules ?? []) {
      if (!r.alert || !r.annotations?.runbook) continue;
      out.push({ alertname: r.alert, severity: r.labels?.severity ?? '', summary: r.annotations.summary ?? '', runbook: r.annotations.runbook });
    }
  }
  return out;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** Prometheus template placeholders read as words here: {{ $labels.contract }} -> the alert's contract label. */
const untemplate = (s: string) => s.replace(/\{\{\s*\$labels\.(\w+)\s*\}\}/g, "the alert's $1 label").replace(/\{\{[^}]*\}\}/g, '');

/** One HTML page, a section per alert with its name as the id (the runbook_url fragment). No script, no external resource. */
export function runbooksHtml(runbooks: readonly Runbook[]): string {
  const sections = runbooks
    .map((r) => `<section id="${escape(r.alertname)}"><h2>${escape(r.alertname)} <small>(${escape(r.severity)})</small></h2><p><strong>${escape(untemplate(r.summary))}</strong></p><p>${escape(untemplate(r.runbook))}</p></section>`)
    .join('\n');
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>topology-audit runbooks</title></head><body><h1>topology-audit runbooks</h1>\n<p>The run an alert names is linked by its run_url annotation; these are the steps per alert.</p>\n${sections}\n</body></html>\n`;
}
