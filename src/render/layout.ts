/**
 * Server-side layout of an overlay with elkjs (layered, left to right, orthogonal edges, labels placed by ELK).
 * The result is plain coordinates, ready for SVG; the same layout serves the web view and `diff --format svg`.
 */
import type { ELK, ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import { edgeLabelLines } from './labels.js';
import type { Overlay } from './overlay.js';

export interface Point {
  x: number;
  y: number;
}

export interface PlacedNode {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedEdge {
  id: string;
  points: Point[];
  label: { x: number; y: number; width: number; height: number } | null;
}

export interface GraphLayout {
  width: number;
  height: number;
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

export const FONT_SIZE = { node: 13, label: 11.5 } as const;
export const LINE_HEIGHT = 15;
const LABEL_PAD = { x: 7, y: 4 };
const NODE_PAD = { x: 18, height: 38, unknownExtra: 16 };

/** Approximate advance width of text in a sans-serif font (wide enough for DejaVu Sans, the narrowest common fallback's opposite). */
export function textWidth(text: string, fontSize: number): number {
  let em = 0;
  for (const ch of text) {
    if ('il.,:;|!\'ij'.includes(ch)) em += 0.3;
    else if ('ftr() -[]'.includes(ch)) em += 0.4;
    else if ('mwMW@'.includes(ch)) em += 0.9;
    else if (ch === '×' || ch === '·') em += 0.62;
    else if (/[A-Z]/.test(ch)) em += 0.7;
    else if (/[0-9]/.test(ch)) em += 0.62;
    else em += 0.6;
  }
  return Math.ceil(em * fontSize);
}

export function nodeSize(id: string, known: boolean): { width: number; height: number } {
  const w = Math.max(textWidth(id, FONT_SIZE.node), known ? 0 : textWidth('unknown agent', 10.5)) + NODE_PAD.x * 2;
  return { width: Math.max(96, w), height: NODE_PAD.height + (known ? 0 : NODE_PAD.unknownExtra) };
}

/** Label box size; a label with a deadline reserves room for the countdown's widest form. */
export function labelSize(lines: [string, string], hasDeadline: boolean): { width: number; height: number } {
  // A countdown changes width as it ticks: reserve room for its widest two-unit form ("23h59m").
  const detail = hasDeadline ? lines[1].replace(/\d+(ms|[dhms])(\d+[hms])?( left| ago)$/, '23h59m$3') : lines[1];
  const w = Math.max(textWidth(lines[0], FONT_SIZE.label) * 1.06, textWidth(detail, FONT_SIZE.label));
  return { width: Math.ceil(w + LABEL_PAD.x * 2), height: LINE_HEIGHT * 2 + LABEL_PAD.y * 2 };
}

const LAYOUT_OPTIONS: Record<string, string> = {
  'elk.algorithm': 'layered',
  'elk.direction': 'RIGHT',
  'elk.edgeRouting': 'ORTHOGONAL',
  'elk.layered.cycleBreaking.strategy': 'MODEL_ORDER',
  'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
  'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
  'elk.edgeLabels.placement': 'CENTER',
  'elk.spacing.nodeNode': '36',
  'elk.layered.spacing.nodeNodeBetweenLayers': '40',
  'elk.spacing.edgeNode': '18',
  'elk.spacing.edgeEdge': '14',
  'elk.layered.spacing.edgeEdgeBetweenLayers': '12',
  'elk.layered.spacing.edgeNodeBetweenLayers': '16',
  'elk.spacing.edgeLabel': '4',
  'elk.padding': '[top=16,left=16,bottom=16,right=16]',
};

let elkInstance: Promise<ELK> | null = null;
/** elkjs, loaded once on first use (an import a bundler follows, so the CI bundle carries it). */
function elk(): Promise<ELK> {
  elkInstance ??= import('elkjs/lib/elk.bundled.js').then((m) => {
    const Elk = ((m as { default?: unknown }).default ?? m) as { new (): ELK };
    return new Elk();
  });
  return elkInstance;
}

/** The ELK input graph for an overlay (exported for inspection and tests). */
export function elkGraph(o: Overlay, now?: number): ElkNode {
  const nodeIds = new Map(o.nodes.map((n, i) => [n.id, `n${i}`]));
  return {
    id: 'root',
    layoutOptions: LAYOUT_OPTIONS,
    children: o.nodes.map((n) => ({ id: nodeIds.get(n.id)!, ...nodeSize(n.id, n.known) })),
    edges: o.edges.map((e, i): ElkExtendedEdge => {
      const size = labelSize(edgeLabelLines(e, now ?? o.now), e.deadline !== undefined);
      return { id: `e${i}`, sources: [nodeIds.get(e.from)!], targets: [nodeIds.get(e.to)!], labels: [{ id: `l${i}`, text: e.id, ...size, layoutOptions: { 'elk.edgeLabels.inline': 'true' } }] };
    }),
  };
}

const cache = new Map<string, GraphLayout>();
const CACHE_MAX = 500;

/** Lay out an overlay. Layouts are cached by graph shape (node ids and sizes, edges and label sizes). */
export async function layoutOverlay(o: Overlay, now?: number): Promise<GraphLayout> {
  const graph = elkGraph(o, now);
  const key = JSON.stringify([graph.children!.map((c) => [o.nodes[Number(c.id.slice(1))].id, c.width, c.height]), graph.edges!.map((e) => [o.edges[Number(e.id.slice(1))].id, e.labels![0].width])]);
  const hit = cache.get(key);
  if (hit) return hit;
  const out = await (await elk()).layout(graph);
  const nodes: PlacedNode[] = (out.children ?? []).map((c) => ({ id: o.nodes[Number(c.id.slice(1))].id, x: c.x ?? 0, y: c.y ?? 0, width: c.width ?? 0, height: c.height ?? 0 }));
  const edges: PlacedEdge[] = (out.edges ?? []).map((e) => {
    const ext = e as ElkExtendedEdge;
    const points: Point[] = [];
    for (const s of ext.sections ?? []) {
      if (!points.length) points.push(s.startPoint);
      points.push(...(s.bendPoints ?? []), s.endPoint);
    }
    const l = ext.labels?.[0];
    return {
      id: o.edges[Number(ext.id.slice(1))].id,
      points,
      label: l ? { x: l.x ?? 0, y: l.y ?? 0, width: l.width ?? 0, height: l.height ?? 0 } : null,
    };
  });
  const layout = { width: Math.ceil(out.width ?? 0), height: Math.ceil(out.height ?? 0), nodes, edges };
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(key, layout);
  return layout;
}
