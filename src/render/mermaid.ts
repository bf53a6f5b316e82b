/** Mermaid `flowchart LR` of an overlay: edge labels carry the state words, link styles the look. */
import { LOOKS, edgeLabel, edgeLook, type EdgeLook } from './labels.js';
import type { Overlay } from './overlay.js';

const ARROW: Record<EdgeLook, string> = {
  forbidden: '==>',
  over_max: '==>',
  late: '-.->',
  waiting: '-.->',
  absent: '-.->',
  observed: '-->',
  expected: '-->',
  allowed: '-.->',
};

/** Mermaid label text inside double quotes: quotes and angle brackets as entities. */
export const mermaidText = (s: string) => s.replace(/"/g, '#quot;').replace(/</g, '#lt;').replace(/>/g, '#gt;');

export function toMermaid(o: Overlay, opts: { now?: number; heading?: string } = {}): string {
  const now = opts.now ?? o.now;
  const ids = new Map(o.nodes.map((node, i) => [node.id, `n${i}`]));
  const lines: string[] = ['flowchart LR'];
  if (opts.heading) lines.push(`  %% ${mermaidText(opts.heading).replace(/[\r\n\u2028\u2029`]+/g, ' ')}`);
  for (const node of o.nodes) {
    const text = `${node.id}${node.owner ? ' (owner)' : ''}${node.known ? '' : '<br/>unknown agent'}`;
    lines.push(`  ${ids.get(node.id)}["${mermaidText(text).replace('#lt;br/#gt;', '<br/>')}"]${node.known ? '' : ':::unknown'}`);
  }
  const styles: string[] = [];
  o.edges.forEach((e, i) => {
    const look = edgeLook(e);
    lines.push(`  ${ids.get(e.from)} ${ARROW[look]}|"${mermaidText(edgeLabel(e, now))}"| ${ids.get(e.to)}`);
    const s = LOOKS[look];
    styles.push(`  linkStyle ${i} stroke:${s.color},stroke-width:${s.width}px${s.dash ? `,stroke-dasharray:${s.dash.replace(/ /g, ' ')}` : ''}`);
  });
  lines.push(...styles);
  if (o.nodes.some((x) => !x.known)) lines.push('  classDef unknown fill:#fef2f2,stroke:#c81e1e,stroke-width:2px,stroke-dasharray:5 3');
  return lines.join('\n') + '\n';
}
