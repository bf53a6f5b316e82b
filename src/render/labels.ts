/**
 * Words and styles for an overlay edge: every state is said in text (never by colour alone), and the same
 * words are used by the web view, Mermaid, DOT and SVG.
 */
import { formatDuration, humanDuration } from '../core/edge.js';
import type { OverlayEdge } from './overlay.js';

/** The one look an edge is drawn with, by priority: what needs acting on first. */
export type EdgeLook = 'forbidden' | 'over_max' | 'late' | 'waiting' | 'absent' | 'observed' | 'expected' | 'allowed';

export function edgeLook(e: OverlayEdge): EdgeLook {
  const has = (s: OverlayEdge['states'][number]) => e.states.includes(s);
  if (has('forbidden')) return 'forbidden';
  if (has('over_max')) return 'over_max';
  if (has('late')) return 'late';
  if (has('waiting')) return 'waiting';
  if (has('absent')) return 'absent';
  if (has('observed')) return 'observed';
  if (has('expected')) return 'expected';
  return 'allowed';
}

export interface LookStyle {
  /** Stroke colour. */
  color: string;
  width: number;
  /** SVG stroke-dasharray, '' for solid. */
  dash: string;
  /** Legend text. */
  legend: string;
}

export const LOOKS: Record<EdgeLook, LookStyle> = {
  forbidden: { color: '#c81e1e', width: 2.75, dash: '', legend: 'forbidden: not allowed by the contract' },
  over_max: { color: '#b45309', width: 2.75, dash: '10 3 2 3', legend: 'seen more often than allowed (×count of max)' },
  late: { color: '#9f1239', width: 2, dash: '2 3', legend: 'late: absent at its deadline, or came after it' },
  waiting: { color: '#a16207', width: 2, dash: '7 4', legend: 'waiting on a named dependency, deadline ahead' },
  absent: { color: '#475569', width: 1.75, dash: '7 4', legend: 'expected but absent' },
  observed: { color: '#15803d', width: 2.25, dash: '', legend: 'allowed and observed' },
  expected: { color: '#1d4ed8', width: 1.75, dash: '', legend: 'expected by the plan' },
  allowed: { color: '#94a3b8', width: 1.25, dash: '2 4', legend: 'allowed, not observed' },
};

/** "9m58s left" / "passed 3m ago". */
export function deadlineWords(deadline: number, now: number): string {
  return now < deadline ? `${humanDuration(deadline - now)} left` : `deadline passed ${humanDuration(now - deadline)} ago`;
}

const times = (n: number) => `×${n}`;

/**
 * The label of an edge as lines: the first says its state ("forbidden", "absent", "×2 of max 1"), the second its
 * kind and details (dependency, deadline countdown). `now` is needed for the countdown.
 */
export function edgeLabelLines(e: OverlayEdge, now?: number): [string, string] {
  const look = edgeLook(e);
  const has = (s: OverlayEdge['states'][number]) => e.states.includes(s);
  const head: string[] = [];
  const detail: string[] = [e.kind];
  const countOfMax = () => {
    const n = e.rule ? e.ruleCount ?? e.count : e.count;
    return `${times(n)} of max ${e.max}${e.rule ? ` (shared by ${e.rule.replace(/ : \w+$/, '')})` : ''}`;
  };
  switch (look) {
    case 'forbidden':
      head.push('forbidden', e.count ? times(e.count) : '');
      break;
    case 'over_max':
      head.push(countOfMax());
      break;
    case 'late':
      head.push(has('absent') ? 'absent, late' : `observed late${e.count > 1 ? ` ${times(e.count)}` : ''}`);
      break;
    case 'waiting':
      head.push('absent, waiting');
      break;
    case 'absent':
      head.push(has('observed') ? 'absent (seen only after the end)' : 'absent');
      break;
    case 'observed':
      head.push(e.max !== undefined && e.count > 1 ? `observed ${countOfMax()}` : e.count > 1 ? `observed ${times(e.count)}` : 'observed');
      break;
    case 'expected':
      head.push('expected');
      break;
    case 'allowed':
      head.push(e.max !== undefined && e.max > 1 ? `allowed, max ${e.max}` : 'allowed');
      break;
  }
  const pending = has('waiting') || has('absent') || has('late');
  if (e.dependency && (pending || look === 'expected')) detail.push(`on ${e.dependency}`);
  if (e.deadline !== undefined && now !== undefined && pending) detail.push(deadlineWords(e.deadline, now));
  else if (e.withinMs !== undefined && look === 'expected') detail.push(`within ${formatDuration(e.withinMs)}`);
  return [head.filter(Boolean).join(' '), detail.join(' · ')];
}

/** One-line label for Mermaid and DOT: "forbidden ×1 · delegate". */
export function edgeLabel(e: OverlayEdge, now?: number): string {
  const [head, detail] = edgeLabelLines(e, now);
  return `${head} · ${detail}`;
}

/** A sentence for screen readers. */
export function edgeSentence(e: OverlayEdge, now?: number): string {
  const [head, detail] = edgeLabelLines(e, now);
  const parts = [`${e.from} to ${e.to}, ${detail}: ${head}`];
  if (e.count && !head.includes('×')) parts.push(`observed ${e.count === 1 ? 'once' : `${e.count} times`}`);
  if (e.findings.length) parts.push(`findings: ${e.findings.join(', ')}`);
  return parts.join('; ');
}
