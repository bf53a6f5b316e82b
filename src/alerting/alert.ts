/**
 * One Alertmanager alert per alerting run: a pure function of the run's verdict, its alert window and its stall
 * (no clock, no I/O). The alert names and severities are those of the shipped Prometheus rules
 * (collector/prometheus/topology-audit.rules.yml), so per-run alerts route like the rules' alerts.
 */
import { millisOf } from '../core/time.js';
import type { Finding, RunVerdict, Verdict } from '../core/types.js';

export type Severity = 'critical' | 'warning' | 'info';

export interface AlertRule {
  alertname: string;
  severity: Severity;
  /** The rule's `category` label in the shipped rules file, so per-run alerts route like the rule alerts. */
  category: string;
}

/** The shipped rule of each alerting verdict (test/alerting.test.ts checks them against the rules file). */
export const VERDICT_RULES: Readonly<Partial<Record<Verdict, AlertRule>>> = {
  stale_contract: { alertname: 'TopologyStaleContract', severity: 'critical', category: 'unsafe_topology' },
  unknown_agent: { alertname: 'TopologyUnknownAgent', severity: 'critical', category: 'unsafe_topology' },
  forbidden_edge: { alertname: 'TopologyForbiddenEdge', severity: 'critical', category: 'unsafe_topology' },
  ambiguous_route: { alertname: 'TopologyAmbiguousRoute', severity: 'critical', category: 'unsafe_topology' },
  false_complete: { alertname: 'TopologyFalseComplete', severity: 'critical', category: 'false_completion' },
  incomplete: { alertname: 'TopologyIncompleteRuns', severity: 'warning', category: 'incomplete' },
  uncertain: { alertname: 'TopologyUncertainRuns', severity: 'info', category: 'evidence' },
};

/** The shipped rule of a stalled run (unsettled, no receipt for serve --stall-after). */
export const STALLED_RULE: AlertRule = { alertname: 'TopologyRunsStalled', severity: 'warning', category: 'stall' };

/** An alert as Alertmanager's API v2 takes it (POST /api/v2/alerts). */
export interface Alert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  endsAt: string;
  generatorURL: string;
}

/** What the live engine knows of a run that is in an alerting verdict within its window, or stalled. */
export interface AlertingRun {
  verdict: RunVerdict;
  /** When the run entered its current verdict (ms). */
  enteredAt: number;
  /** Entered an alerting verdict within the alert window and not acknowledged. */
  inWindow: boolean;
  /** When the run became stalled (its latest receipt plus --stall-after), null when it is not stalled. */
  stalledAt: number | null;
  /** The run's latest receipt (ms). */
  lastAt: number;
}

/** Where an alert's links point. */
export interface AlertLinks {
  /** The auditor's URL as users reach it (serve --external-url), without a trailing slash. */
  externalUrl: string;
  /** The runbook page; the alert name is appended as the fragment. */
  runbookUrl: string;
}

/** The label value of a run that has no pin (as the metrics say it). */
export const UNPINNED = 'none';

/** The finding that decided the verdict: the first one of the run's verdict. */
export const decidingFinding = (v: RunVerdict): Finding | undefined => v.findings.find((f) => f.verdict === v.verdict);

/** A run's alert labels under a rule: the rule's name and severity, pin, verdict, run, and the deciding finding's edge. */
export function alertLabels(v: RunVerdict, rule: AlertRule | null): Record<string, string> {
  const labels: Record<string, string> = {};
  if (rule) {
    labels.alertname = rule.alertname;
    labels.severity = rule.severity;
    labels.category = rule.category;
  }
  labels.contract = v.pin?.contract || UNPINNED;
  labels.version = v.pin?.version || UNPINNED;
  labels.verdict = v.verdict;
  labels.run = v.run;
  const edge = decidingFinding(v)?.edge;
  if (edge) labels.edge = edge;
  return labels;
}

/** The labels an alert of this run would carry now (for silence matching): its verdict's rule, else none. */
export function runLabels(v: RunVerdict): Record<string, string> {
  return alertLabels(v, VERDICT_RULES[v.verdict] ?? null);
}

const iso = (ms: number) => new Date(ms).toISOString();

export const runUrl = (links: AlertLinks, run: string) => `${links.externalUrl}/runs/${encodeURIComponent(run)}`;

/**
 * The run's alert, or null when it should not fire: a settled alerting verdict entered within the alert window and
 * not acknowledged fires under its verdict's rule; otherwise a stalled run fires TopologyRunsStalled. Firing alerts
 * end `validMs` after `now` unless sent again (Prometheus sends 4 resend intervals ahead).
 */
export function runAlert(r: AlertingRun, links: AlertLinks, now: number, validMs: number): Alert | null {
  const v = r.verdict;
  const verdictRule = VERDICT_RULES[v.verdict];
  let rule: AlertRule;
  let summary: string;
  let startsAt: number;
  if (r.inWindow && v.settled && verdictRule) {
    const f = decidingFinding(v);
    rule = verdictRule;
    summary = f?.message ?? `run ${v.run} is ${v.verdict}`;
    const since = f?.since ? millisOf(f.since) : NaN;
    startsAt = Number.isFinite(since) ? since : r.enteredAt;
  } else if (r.stalledAt !== null) {
    rule = STALLED_RULE;
    summary = `run ${v.run} is still ${v.verdict} and has sent no receipt since ${iso(r.lastAt)}`;
    startsAt = r.stalledAt;
  } else {
    return null;
  }
  const link = runUrl(links, v.run);
  return {
    labels: alertLabels(v, rule),
    annotations: {
      summary,
      runbook_url: `${links.runbookUrl}#${rule.alertname}`,
      run_url: link,
      findings: [...new Set(v.findings.map((f) => f.code))].join(',') || 'none',
    },
    startsAt: iso(startsAt),
    endsAt: iso(now + validMs),
    generatorURL: link,
  };
}

/** The same alert, resolved at `now` (Alertmanager resolves it once endsAt has passed). */
export const resolvedAlert = (a: Alert, now: number): Alert => ({ ...a, endsAt: iso(Math.max(now, millisOf(a.startsAt))) });

const keys = new WeakMap<Record<string, string>, string>();

/** Alertmanager's identity of an alert: its label set (computed once per label object). */
export function alertKey(a: Alert): string {
  let k = keys.get(a.labels);
  if (k === undefined) {
    k = Object.keys(a.labels)
      .sort()
      .map((n) => `${n}=${a.labels[n]}`)
      .join('\u0000');
    keys.set(a.labels, k);
  }
  return k;
}

/** Same labels, start and annotations (a re-send is due only after the resend interval). */
export function sameAlert(a: Alert, b: Alert): boolean {
  if (a === b || (a.labels === b.labels && a.annotations === b.annotations && a.startsAt === b.startsAt)) return true;
  if (alertKey(a) !== alertKey(b) || a.startsAt !== b.startsAt) return false;
  const ka = Object.keys(a.annotations);
  return ka.length === Object.keys(b.annotations).length && ka.every((k) => a.annotations[k] === b.annotations[k]);
}
