/** Graphviz DOT of an overlay: a digraph with the state words as edge labels and the look as edge style. */
import { LOOKS, edgeLabelLines, edgeLook, type EdgeLook } from './labels.js';
import type { Overlay } from './overlay.js';

/** A DOT double-quoted string. */
export const dotString = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

const DOT_STYLE: Record<EdgeLook, string> = {
  forbidden: 'bold',
  over_max: 'bold',
  late: 'dotted',
  waiting: 'dashed',
  absent: 'dashed',
  observed: 'solid',
  expected: 'solid',
  allowed: 'dotted',
};

export function toDot(o: Overlay, opts: { now?: number; heading?: string } = {}): string {
  const now = opts.now ?? o.now;
  const font = 'Helvetica';
  const lines: string[] = [
    `digraph ${dotString(`${o.contract}@${o.version} ${o.phase}${o.run ? ` ${o.run}` : ''}`)} {`,
    `  graph [rankdir=LR, fontname=${dotString(font)}, fontsize=12, labelloc=t${opts.heading ? `, label=${dotString(opts.heading)}` : ''}];`,
    `  node [shape=box, style="rounded,filled", fillcolor="#ffffff", color="#334155", fontname=${dotString(font)}, fontsize=12];`,
    `  edge [fontname=${dotString(font)}, fontsize=10];`,
  ];
  for (const node of o.nodes) {
    const attrs = [`label=${dotString(`${node.id}${node.known ? '' : '\nunknown agent'}`)}`];
    if (node.owner) attrs.push('penwidth=2');
    if (!node.known) attrs.push('style="rounded,filled,dashed"', 'fillcolor="#fef2f2"', 'color="#c81e1e"', 'fontcolor="#7f1d1d"');
    lines.push(`  ${dotString(node.id)} [${attrs.join(', ')}];`);
  }
  for (const e of o.edges) {
    const look = edgeLook(e);
    const s = LOOKS[look];
    const [head, detail] = edgeLabelLines(e, now);
    const attrs = [
      `label=${dotString(`${head}\n${detail}`)}`,
      `color=${dotString(s.color)}`,
      `fontcolor=${dotString(look === 'allowed' ? '#64748b' : s.color)}`,
      `style=${DOT_STYLE[look]}`,
      `penwidth=${s.width}`,
      `tooltip=${dotString(`${e.id}: ${e.states.join(', ')}`)}`,
    ];
    lines.push(`  ${dotString(e.from)} -> ${dotString(e.to)} [${attrs.join(', ')}];`);
  }
  lines.push('}');
  return lines.join('\n') + '\n';
}
