/**
 * Renderers: plain text for a terminal, Markdown for a pull request, JSON for machines.
 * Order is fixed by the article: case-level deltas first, then aggregates with distributions,
 * then hard gates, then the disposition.
 */
import type { Comparison, CountAggregate, Delta } from './compare.js';
import type { ConfigChange, ConfigDiff } from './diff.js';
import { signed } from './disposition.js';
import { COUNT_MEASURES, MEASURE_LABELS, type CountMeasure } from './measures.js';
import type { Distribution } from './stats.js';

type Align = 'l' | 'r';

function textTable(headers: string[], rows: string[][], align: Align[]): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (cells: string[]) =>
    cells
      .map((c, i) => (align[i] === 'r' ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [fmt(headers), fmt(widths.map((w) => '-'.repeat(w))), ...rows.map(fmt)];
}

const mdEscape = (s: string) => s.replace(/\|/g, '\\|');
function mdTable(headers: string[], rows: string[][], align: Align[]): string[] {
  return [
    `| ${headers.map(mdEscape).join(' | ')} |`,
    `|${align.map((a) => (a === 'r' ? '---:' : ':---')).join('|')}|`,
    ...rows.map((r) => `| ${r.map(mdEscape).join(' | ')} |`),
  ];
}

const deltaCell = (d: Delta) => (d.delta === 0 ? `${d.baseline}→${d.candidate}` : `${d.baseline}→${d.candidate} (${signed(d.delta)})`);
const yesNo = (b: boolean) => (b ? 'yes' : 'no');
const flagCell = (a: boolean, b: boolean) => `${yesNo(a)}→${a && !b ? 'NO' : yesNo(b)}`;
const dist = (d: Distribution) => `${d.median} / ${d.p90} / ${d.max}`;
const deltaDist = (d: Distribution) => `${signed(d.median)} / ${signed(d.p90)} / ${signed(d.max)} (min ${signed(d.min)})`;
const SHORT: Record<CountMeasure, string> = {
  forbiddenEffects: 'forbidden fx',
  duplicateEffects: 'duplicate fx',
  parentActions: 'parent act',
  totalActions: 'total act',
  parentContextUnits: 'parent ctx',
  totalContextUnits: 'total ctx',
  handoffMessages: 'handoff msg',
  coordinationUnits: 'coord',
  elapsedSteps: 'steps',
};

function caseTable(c: Comparison): { headers: string[]; rows: string[][]; align: Align[] } {
  const headers = ['case', 'correct', ...COUNT_MEASURES.map((m) => SHORT[m]), 'trace', 'notes'];
  const rows = c.cases.map((r) => [
    r.key,
    flagCell(r.correct.baseline, r.correct.candidate),
    ...COUNT_MEASURES.map((m) => deltaCell(r.counts[m])),
    flagCell(r.traceComplete.baseline, r.traceComplete.candidate),
    r.notes.join('; ') || '-',
  ]);
  const align: Align[] = ['l', 'l', ...COUNT_MEASURES.map((): Align => 'r'), 'l', 'l'];
  return { headers, rows, align };
}

function aggregateTable(c: Comparison): { headers: string[]; rows: string[][]; align: Align[] } {
  const headers = ['measure', 'baseline total', 'candidate total', 'delta', 'per case set', 'baseline med / p90 / max', 'candidate med / p90 / max', 'delta med / p90 / max'];
  const rows = c.aggregates.counts.map((a: CountAggregate) => [
    MEASURE_LABELS[a.measure],
    String(a.baseline.total),
    String(a.candidate.total),
    signed(a.delta.total),
    signed(a.perCaseSet),
    dist(a.baseline),
    dist(a.candidate),
    deltaDist(a.delta),
  ]);
  return { headers, rows, align: ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'] };
}

function flagLines(c: Comparison): string[] {
  return c.aggregates.flags.map((f) => {
    const reg = f.regressions.length ? `; REGRESSIONS: ${f.regressions.join(', ')}` : '; regressions: none';
    const imp = f.improvements.length ? `; improvements: ${f.improvements.join(', ')}` : '';
    return `${MEASURE_LABELS[f.measure]}: baseline ${f.baseline}/${f.pairs}, candidate ${f.candidate}/${f.pairs}${reg}${imp}`;
  });
}

function failureLines(c: Comparison): string[] {
  if (c.failures.length === 0) return ['none declared'];
  return c.failures.map(
    (f) =>
      `${f.id} (${f.rule}): baseline fails ${f.baselineFailing.length}/${c.pairs}${f.baselineFailing.length ? ` [${f.baselineFailing.join(', ')}]` : ''}, ` +
      `candidate fails ${f.candidateFailing.length}/${c.pairs}${f.candidateFailing.length ? ` [${f.candidateFailing.join(', ')}]` : ''}, ` +
      `repaired ${f.repaired.length} (needs ${f.minRepaired}), introduced ${f.introduced.length}${f.introduced.length ? ` [${f.introduced.join(', ')}]` : ''}`,
  );
}

function tradeTable(c: Comparison): { headers: string[]; rows: string[][]; align: Align[] } {
  const headers = ['measure', 'better', 'per case set', 'direction', 'material', 'limit', 'within limit'];
  const rows = c.trades.map((t) => [
    MEASURE_LABELS[t.measure],
    t.better,
    signed(t.perCaseSet),
    t.direction,
    `${t.materialChange ? 'yes' : 'no'} (≥${t.material})`,
    t.maxRegression === undefined ? '-' : `+${t.maxRegression} adverse`,
    t.withinLimit ? 'yes' : 'NO',
  ]);
  return { headers, rows, align: ['l', 'l', 'r', 'l', 'l', 'r', 'l'] };
}

function header(c: Comparison): string[] {
  return [
    `experiment ${c.experiment}${c.title ? `: ${c.title}` : ''}`,
    `baseline ${c.baseline} vs candidate ${c.candidate}; ${c.caseCount} paired cases x ${c.repeats.min === c.repeats.max ? c.repeats.min : `${c.repeats.min}-${c.repeats.max}`} repeat${c.repeats.max === 1 ? '' : 's'} (${c.pairs} pairs); declared ${c.declaredAt} by ${c.owner}`,
    `declared slice (${c.slice.consequence}): ${c.slice.description}`,
  ];
}

export function renderComparisonText(c: Comparison): string {
  const out: string[] = [...header(c), ''];
  const ct = caseTable(c);
  out.push('case-level deltas (baseline→candidate)', ...textTable(ct.headers, ct.rows, ct.align), '');
  const at = aggregateTable(c);
  out.push(`aggregates over ${c.pairs} pairs`, ...textTable(at.headers, at.rows, at.align), ...flagLines(c), '');
  out.push('hard gates', ...c.gates.map((g) => `  ${g.passed ? 'pass' : 'FAIL'}  ${g.gate}: ${g.detail}`), '');
  out.push('evidence', ...c.evidence.map((e) => `  ${e.passed ? 'pass' : 'FAIL'}  ${e.check}: ${e.detail}`), '');
  out.push('declared baseline failures', ...failureLines(c).map((l) => `  ${l}`), '');
  if (c.trades.length) {
    const tt = tradeTable(c);
    out.push('tradeable measures', ...textTable(tt.headers, tt.rows, tt.align), '');
  }
  const d = c.disposition;
  out.push(`disposition: ${d.decision.toUpperCase()} (${d.rule})`, `  reason: ${d.reason}`);
  if (d.details.length) out.push(...d.details.map((l) => `  - ${l}`));
  out.push('  reopen when:', ...d.reopen.map((r) => `  - ${r}`));
  return out.join('\n') + '\n';
}

export function renderComparisonMarkdown(c: Comparison): string {
  const d = c.disposition;
  const out: string[] = [
    `## Topology experiment \`${c.experiment}\`: **${d.decision}**`,
    '',
    ...(c.title ? [`${c.title}`, ''] : []),
    `Baseline \`${c.baseline}\` versus candidate \`${c.candidate}\`: ${c.caseCount} paired cases, ${c.pairs} pairs. Manifest declared ${c.declaredAt} by \`${c.owner}\`.`,
    `Declared slice (${c.slice.consequence}): ${c.slice.description}.`,
    '',
    `> **Disposition: ${d.decision}** (\`${d.rule}\`): ${d.reason}.`,
    '',
    '### Case-level deltas (baseline→candidate)',
    '',
  ];
  const ct = caseTable(c);
  out.push(...mdTable(ct.headers, ct.rows, ct.align), '');
  out.push('### Aggregates', '');
  const at = aggregateTable(c);
  out.push(...mdTable(at.headers, at.rows, at.align), '', ...flagLines(c).map((l) => `- ${l}`), '');
  out.push('### Hard gates', '', ...mdTable(['gate', 'result', 'detail'], c.gates.map((g) => [`\`${g.gate}\``, g.passed ? 'pass' : '**FAIL**', g.detail]), ['l', 'l', 'l']), '');
  out.push(
    '### Evidence',
    '',
    ...mdTable(['check', 'result', 'detail'], c.evidence.map((e) => [`\`${e.check}\``, e.passed ? 'pass' : '**FAIL**', e.detail]), ['l', 'l', 'l']),
    '',
  );
  out.push('### Declared baseline failures', '', ...failureLines(c).map((l) => `- ${l}`), '');
  if (c.trades.length) {
    const tt = tradeTable(c);
    out.push('### Tradeable measures', '', ...mdTable(tt.headers, tt.rows, tt.align), '');
  }
  out.push('### Disposition', '', `**${d.decision}**: ${d.reason}.`, '');
  if (d.details.length) out.push(...d.details.map((l) => `- ${l}`), '');
  out.push('Reopen when:', '', ...d.reopen.map((r) => `- ${r}`), '');
  return out.join('\n');
}

const compact = (v: unknown) => (v === undefined ? '' : JSON.stringify(v));

function changeLines(c: ConfigChange): string[] {
  const mark = c.change === 'added' ? '+' : c.change === 'removed' ? '-' : '~';
  const where = c.inSlice ? '(in slice)' : 'OUTSIDE THE DECLARED SLICE';
  const value = c.change === 'added' ? c.candidate : c.baseline;
  if (c.change !== 'changed' && typeof value === 'object' && value !== null && !Array.isArray(value))
    return [`  ${mark} ${c.path}  ${where}`, ...Object.entries(value).map(([k, v]) => `      ${k}: ${compact(v)}`)];
  const shownValue = c.change === 'changed' ? `${compact(c.baseline)} → ${compact(c.candidate)}` : compact(value);
  return [`  ${mark} ${c.path}  ${where}  ${shownValue}`];
}

const list = (xs: readonly string[]) => (xs.length ? xs.join(', ') : '-');

export function renderDiffText(d: ConfigDiff): string {
  const out: string[] = [
    `experiment ${d.experiment}: baseline ${d.baseline} vs candidate ${d.candidate}`,
    `declared slice (${d.slice.consequence}): ${d.slice.description}`,
    `  paths: ${d.slice.paths.join(', ')}`,
    '',
    `changes (${d.changes.length})`,
    ...(d.changes.length ? d.changes.flatMap(changeLines) : ['  none']),
    '',
    'authority',
  ];
  for (const i of d.authority.identities) {
    const parts: string[] = [];
    if (i.status === 'added') parts.push(`added, delegated by ${list(i.delegatedBy ?? [])}`);
    else parts.push(i.status);
    if (i.status !== 'unchanged') {
      for (const k of ['tenants', 'resources', 'capabilities'] as const) {
        const s = i[k];
        if (s.added.length || s.removed.length) parts.push(`${k} ${[...s.added.map((x) => `+${x}`), ...s.removed.map((x) => `-${x}`)].join(' ')}`);
      }
      if (i.expiresAfter.baseline !== i.expiresAfter.candidate) parts.push(`expires after ${i.expiresAfter.baseline ?? '-'} → ${i.expiresAfter.candidate ?? '-'}`);
      for (const k of ['actions', 'contextUnits', 'effects'] as const) {
        const b = i.budgets[k];
        if (b.baseline !== b.candidate) parts.push(`${k} budget ${b.baseline ?? '-'} → ${b.candidate ?? '-'}`);
      }
    }
    out.push(`  ${i.identity}: ${parts.join('; ')}`);
  }
  out.push('', 'widening', ...(d.authority.widening.length ? d.authority.widening.map((w) => `  ${w.code} at ${w.path}: ${w.message}`) : ['  none']), '');
  if (d.ok) out.push('result: only the declared slice changed, and no authority widened');
  else {
    if (!d.isolated) out.push(`result: FAIL: changed outside the declared slice: ${d.outsideSlice.map((c) => c.path).join(', ')}`);
    if (!d.authorityPreserved) out.push(`result: FAIL: authority widened: ${d.authority.widening.map((w) => w.path).join(', ')}`);
  }
  return out.join('\n') + '\n';
}
