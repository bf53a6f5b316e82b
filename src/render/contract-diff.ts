/**
 * What changed between two versions of a contract: owner, agents, allow entries, plan steps per phase.
 * (`retired` belongs to each version itself, so it is shown per version rather than as a change.)
 */
import type { Contract, Phase, PlanStep } from '../core/contract.js';
import { compactKey, formatDuration } from '../core/edge.js';
import { mermaidText } from './mermaid.js';

export interface Change {
  /** Edge or phase as written. */
  item: string;
  /** Human description of each difference, e.g. "max 1 → 2". */
  what: string[];
}

export interface PhaseChanges {
  phase: string;
  status: 'added' | 'removed' | 'changed' | 'unchanged';
  outcome?: { from: string; to: string };
  steps: { added: string[]; removed: string[]; changed: Change[] };
}

export interface ContractChanges {
  contract: string;
  from: string;
  to: string;
  owner?: { from: string; to: string };
  agents: { added: string[]; removed: string[] };
  allow: { added: string[]; removed: string[]; changed: Change[] };
  phases: PhaseChanges[];
  /** True when nothing differs but the version. */
  same: boolean;
}

function byKey<T extends { key: string }>(items: T[]): Map<string, T> {
  return new Map(items.map((x) => [compactKey(x.key), x]));
}

const stepOptions = (phase: Phase, s: PlanStep) => ({
  after: s.after.map((i) => phase.plan[i].key).join(', ') || '(start)',
  dependency: s.dependency ?? 'none',
  within: s.withinMs !== undefined ? formatDuration(s.withinMs) : 'none',
});

function diffPhase(name: string, a: Phase | undefined, b: Phase | undefined): PhaseChanges {
  if (!a || !b) {
    const p = (a ?? b)!;
    return {
      phase: name,
      status: a ? 'removed' : 'added',
      steps: { added: b ? p.plan.map((s) => s.key) : [], removed: a ? p.plan.map((s) => s.key) : [], changed: [] },
    };
  }
  const ka = byKey(a.plan);
  const kb = byKey(b.plan);
  const added = b.plan.filter((s) => !ka.has(compactKey(s.key))).map((s) => s.key);
  const removed = a.plan.filter((s) => !kb.has(compactKey(s.key))).map((s) => s.key);
  const changed: Change[] = [];
  for (const sb of b.plan) {
    const sa = ka.get(compactKey(sb.key));
    if (!sa) continue;
    const oa = stepOptions(a, sa);
    const ob = stepOptions(b, sb);
    const what = (Object.keys(oa) as (keyof typeof oa)[]).filter((k) => oa[k] !== ob[k]).map((k) => `${k} ${oa[k]} → ${ob[k]}`);
    if (what.length) changed.push({ item: sb.key, what });
  }
  const outcome = a.outcome !== b.outcome ? { from: a.outcome, to: b.outcome } : undefined;
  const status = outcome || added.length || removed.length || changed.length ? 'changed' : 'unchanged';
  return { phase: name, status, ...(outcome ? { outcome } : {}), steps: { added, removed, changed } };
}

/** Changes from version `a` to version `b` of one contract. */
export function diffContracts(a: Contract, b: Contract): ContractChanges {
  const agentsA = new Set(a.agents);
  const agentsB = new Set(b.agents);
  const ra = byKey(a.allow);
  const rb = byKey(b.allow);
  const allowChanged: Change[] = [];
  for (const r of b.allow) {
    const old = ra.get(compactKey(r.key));
    if (old && old.max !== r.max) allowChanged.push({ item: r.key, what: [`max ${old.max} → ${r.max}`] });
  }
  const names = [...new Set([...a.phases.map((p) => p.name), ...b.phases.map((p) => p.name)])];
  const phases = names.map((name) => diffPhase(name, a.phases.find((p) => p.name === name), b.phases.find((p) => p.name === name)));
  const out: ContractChanges = {
    contract: b.contract,
    from: a.version,
    to: b.version,
    ...(a.owner !== b.owner ? { owner: { from: a.owner, to: b.owner } } : {}),
    agents: { added: b.agents.filter((x) => !agentsA.has(x)), removed: a.agents.filter((x) => !agentsB.has(x)) },
    allow: {
      added: b.allow.filter((r) => !ra.has(compactKey(r.key))).map((r) => r.key),
      removed: a.allow.filter((r) => !rb.has(compactKey(r.key))).map((r) => r.key),
      changed: allowChanged,
    },
    phases,
    same: false,
  };
  out.same =
    !out.owner && !out.agents.added.length && !out.agents.removed.length && !out.allow.added.length && !out.allow.removed.length && !allowChanged.length && phases.every((p) => p.status === 'unchanged');
  return out;
}

type EdgeMark = 'added' | 'removed' | 'changed' | 'same';
const MARK_STYLE: Record<EdgeMark, { arrow: string; style: string }> = {
  added: { arrow: '==>', style: 'stroke:#15803d,stroke-width:3px' },
  removed: { arrow: '-.->', style: 'stroke:#c81e1e,stroke-width:2px,stroke-dasharray:6 3' },
  changed: { arrow: '==>', style: 'stroke:#b45309,stroke-width:3px' },
  same: { arrow: '-->', style: 'stroke:#94a3b8,stroke-width:1.5px' },
};

const AGENT_STYLE = { added: 'fill:#f0fdf4,stroke:#15803d,stroke-width:2px', removed: 'fill:#fef2f2,stroke:#c81e1e,stroke-width:2px,stroke-dasharray:5 3' };

/**
 * One version's allowed edges as a Mermaid `flowchart LR`, marked against the other version: in the older version
 * (`side` from) the edges the newer one removes, in the newer one (`side` to) the edges it adds; in both, the entries
 * whose max changed. Agents only one version declares are marked the same way. Every mark is also said in words.
 */
export function contractVersionMermaid(c: Contract, other: Contract, side: 'from' | 'to'): string {
  const otherAllow = byKey(other.allow);
  const otherAgents = new Set(other.agents);
  const gone: EdgeMark = side === 'from' ? 'removed' : 'added';
  const ids = new Map(c.agents.map((a, i) => [a, `n${i}`]));
  // The version is any text: on one line (a line break would end the comment, or the Markdown fence around it).
  const lines = ['flowchart LR', `  %% ${mermaidText(`${c.contract}@${c.version}`).replace(/[\r\n\u2028\u2029`]+/g, ' ')}${side === 'from' ? ' (from)' : ' (to)'}`];
  for (const a of c.agents) {
    const mark = otherAgents.has(a) ? '' : `<br/>${gone} agent`;
    lines.push(`  ${ids.get(a)}["${mermaidText(`${a}${a === c.owner ? ' (owner)' : ''}`)}${mark}"]${mark ? `:::${gone}` : ''}`);
  }
  const styles: string[] = [];
  for (const rule of c.allow) {
    const old = otherAllow.get(compactKey(rule.key));
    const mark: EdgeMark = !old ? gone : old.max !== rule.max ? 'changed' : 'same';
    const words = mark === 'same' ? '' : mark === 'changed' ? ` · max ${side === 'from' ? `${rule.max} → ${old!.max}` : `${old!.max} → ${rule.max}`}` : ` · ${mark}`;
    for (const to of rule.spec.to) {
      const label = `${rule.spec.kind}${rule.max > 1 ? ` (max ${rule.max})` : ''}${words}`;
      styles.push(`  linkStyle ${styles.length} ${MARK_STYLE[mark].style}`);
      lines.push(`  ${ids.get(rule.spec.from)} ${MARK_STYLE[mark].arrow}|"${mermaidText(label)}"| ${ids.get(to)}`);
    }
  }
  lines.push(...styles);
  if (c.agents.some((a) => !otherAgents.has(a))) lines.push(`  classDef ${gone} ${AGENT_STYLE[gone]}`);
  return lines.join('\n') + '\n';
}
